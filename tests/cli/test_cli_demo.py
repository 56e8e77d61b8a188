"""`layered-memory demo`: the quickstart inside the package, `--root`, `--json`, `--model`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layered_memory.cli import main


def test_json_in_a_folder_that_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "demo-memory"
    assert main(["demo", "--root", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1
    assert data["ok"] is True
    assert data["root"] == str(root.resolve())
    assert data["edit_calls"] == [{"name": "edit_file", "file_path": "/MEMORY.md"}]
    assert data["edit_seen_per_call"] == [False, True]
    assert data["second_prompt_has_new_agents_md"] is True
    assert data["memory_md"] == "# Memory\n- The user prefers short answers.\n"
    # The files stay for `layered-memory inspect --root demo-memory`.
    assert (root / "MEMORY.md").read_text() == data["memory_md"]
    assert "make check" in (root / "AGENTS.md").read_text()


def test_never_writes_over_a_users_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "AGENTS.md").write_text("mine")
    assert main(["demo", "--root", str(tmp_path)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "AGENTS.md").read_text() == "mine"


def test_a_model_that_cannot_be_created_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--model", "no-such-provider:some-model"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("layered-memory demo: --model no-such-provider:some-model: ")
