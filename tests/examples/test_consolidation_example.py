"""The consolidation example end to end: lessons added, updated in place, a poisoned one held."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_quickstart import EXAMPLES, load_example


def test_the_example_learns_updates_and_holds_the_poisoned_lesson(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("consolidation")

    outcome = example.main([], root=tmp_path)

    texts = [
        [line.split("] ", 1)[1].split("  (", 1)[0] for line in run]
        for run in outcome["learned_after"]
    ]
    assert texts[0] == [example.TUESDAYS, example.KILOMETRES, example.DANA]
    assert texts[1] == [example.THURSDAYS, example.KILOMETRES, example.DANA]  # updated in place
    assert texts[2] == [example.SDK, example.THURSDAYS, example.KILOMETRES, example.DANA]
    assert texts[3] == texts[2]
    (held,) = outcome["held"]
    assert held.text == example.POISON
    assert outcome["pending_after_review"] == []
    assert example.POISON not in outcome["memory"]
    assert example.THURSDAYS in outcome["last_prompt"]
    assert "learned id=" not in outcome["last_prompt"]
    assert outcome["memory"].startswith(example.MEMORY_MD)

    printed = capsys.readouterr().out
    assert (
        "log: consolidated into /MEMORY.md: 1 applied, 0 waiting for review, 1 rejected" in printed
    )
    assert "the last run's prompt holds the lessons, without provenance: yes" in printed


def test_the_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "consolidation.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "rejected by the reviewer" in done.stdout
