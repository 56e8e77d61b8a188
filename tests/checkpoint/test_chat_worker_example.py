"""examples/chat_worker.py end to end: with the servers (CI), and without them (a laptop)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chat_worker.py"
HANG_GUARD_SECONDS = 300  # only stops a hung run; nothing is timed
CONVERSATION = [
    "[worker 1] assistant: Rinse it, squash it and put it in the clear-PET bin.",
    "[worker 2] assistant: Your first question was: 'How do I throw away a PET bottle?' "
    "(4 questions so far).",
    "messages in the session: 8",
]


def run_example(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )


@pytest.mark.postgres
@pytest.mark.redis
def test_two_workers_carry_one_session_through_the_cache(pg_conninfo: str, redis_url: str) -> None:
    result = run_example(
        {"LAYERED_MEMORY_POSTGRES_URL": pg_conninfo, "LAYERED_MEMORY_REDIS_URL": redis_url}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "checkpointer: CachedCheckpointSaver (Redis L1) in front of AsyncPostgresSaver" in out
    for line in CONVERSATION:
        assert line in out
    assert "deleted entity:eco2_user_" in out
    assert "does not answer" not in out


def test_without_servers_it_says_so_and_runs_in_memory(tmp_path: Path) -> None:
    result = run_example(
        {
            "LAYERED_MEMORY_POSTGRES_URL": "postgresql://postgres@127.0.0.1:1/test",
            "LAYERED_MEMORY_REDIS_URL": "redis://127.0.0.1:1/0",
        }
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "PostgreSQL does not answer at postgresql://postgres@127.0.0.1:1/test" in out
    assert out.count("Redis does not answer at redis://127.0.0.1:1/0") == 1
    assert "checkpointer: InMemorySaver" in out
    for line in CONVERSATION:
        assert line in out
