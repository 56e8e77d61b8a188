"""A run interrupted right after a tool call and resumed in another process keeps what the
tool call noted: the notes live in the checkpointed graph state, not in a middleware object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from postgres_schema import Schema

WORKER = Path(__file__).parent / "resume_worker.py"
HANG_GUARD_SECONDS = 300  # only stops a hung child; nothing is timed


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "python.md").write_text("---\npaths: ['**/*.py']\n---\nPY_RULE\n")
    (tmp_path / "AGENTS.md").write_text("Project.\n")
    return tmp_path


def run(phase: str, kind: str, where: str, root: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(WORKER), phase, kind, where, str(root)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def postgres_database(postgres_schema: Schema) -> str:
    """A PostgreSQL schema of its own for the checkpoints (dropped afterwards)."""
    return postgres_schema.url


def test_touched_path_survives_an_interrupt_and_a_new_process_sqlite(
    project: Path, tmp_path: Path
) -> None:
    database = str(tmp_path / "checkpoints.sqlite")
    assert run("start", "sqlite", database, project)["interrupted"]
    assert run("resume", "sqlite", database, project) == {"answer": "RULE_SEEN"}


def test_touched_path_survives_an_interrupt_and_a_new_process_postgres(
    project: Path, postgres_database: str
) -> None:
    assert run("start", "postgres", postgres_database, project)["interrupted"]
    assert run("resume", "postgres", postgres_database, project) == {"answer": "RULE_SEEN"}
