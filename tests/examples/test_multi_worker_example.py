"""examples/multi_worker.py end to end: worker processes against the real PostgreSQL.

The example runs as a script (its workers are spawned processes), in a schema of its own
(`search_path` in the URL it reads from `LAYERED_MEMORY_POSTGRES_URL`), dropped afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from postgres_schema import Schema

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multi_worker.py"
HANG_GUARD_SECONDS = 600  # only stops a hung run; nothing is timed


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    return postgres_schema.url


def run_example(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        env={**os.environ, "LAYERED_MEMORY_POSTGRES_URL": url},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )


def test_two_workers_share_one_memory(conninfo: str) -> None:
    result = run_example(conninfo, "--workers", "2")

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "2 worker processes" in out
    assert out.count("org rule 'client-reports' in every system prompt: yes") == 2
    assert "**acme_corp: on track.**" in out
    assert "**globex: on track.**" in out
    memory = out.split("--- shared /project/MEMORY.md ---\n", 1)[1].split("\n---\n", 1)[0]
    assert memory.startswith("# Memory\n\nWhat the reporting workers have learned.\n")
    entries = re.findall(r"^- \d{4}-\d{2}-\d{2}: \[([^\]]+)\] (.*)$", memory, re.MULTILINE)
    assert sorted(entries) == [
        ("acme_corp", "acme_corp reviews on Fridays."),
        ("globex", "globex reviews on Fridays."),
    ]
    assert "insights in the shared MEMORY.md: 2 of 2; org rule applied in 2 of 2 runs" in out
    pids = re.findall(r"^\[worker \d, pid (\d+)\]", out, re.MULTILINE)
    assert len(set(pids)) == 2
    # Reruns start clean: the run's rows and threads are gone.
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT count(*) FROM store").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_no_database_says_how_to_start_one() -> None:
    result = run_example("postgresql://postgres@127.0.0.1:1/test")

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "No PostgreSQL answers at postgresql://postgres@127.0.0.1:1/test" in result.stderr
    assert "docker run --rm -e POSTGRES_HOST_AUTH_METHOD=trust" in result.stderr
    assert "LAYERED_MEMORY_POSTGRES_URL" in result.stderr
