"""Nested memory and `@imports` in `inspect`, `doctor` and `lint`: shown, measured, judged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_config_helpers import write

from layered_memory.cli import main

FILES = {
    "AGENTS.md": "# Project\nSee @docs/style.md, @docs/missing.md and @d/a.md.\n",
    "docs/style.md": "Style: short sentences.\n",
    # a -> b -> a is a cycle; b -> c -> d -> e -> f: e is 5 hops from AGENTS.md.
    "d/a.md": "A imports @b.md\n",
    "d/b.md": "B imports @a.md and @c.md\n",
    "d/c.md": "C imports @d.md\n",
    "d/d.md": "D imports @e.md\n",
    "d/e.md": "E imports @f.md\n",
    "d/f.md": "F, never read\n",
    "src/api/AGENTS.md": "# API\nUse FastAPI.\n",
    "src/api/handler.py": "x = 1\n",
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(tmp_path, dict(FILES))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def test_inspect_lists_nested_and_imported_files(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["inspect", "--root", ".", "--nested", "AGENTS.md", "--path", "src/api/handler.py"]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    extras = {(e["kind"], e["path"]): e for e in data["extras"]}
    assert set(extras) == {
        ("import", "/docs/style.md"),
        ("import", "/d/a.md"),
        ("import", "/d/b.md"),
        ("import", "/d/c.md"),
        ("import", "/d/d.md"),
        ("import", "/d/e.md"),
        ("nested", "/src/api/AGENTS.md"),
    }
    assert all(e["shown"] == "full" for e in extras.values())
    assert "Use FastAPI." in data["block"]
    assert "F, never read" not in data["block"]
    (project,) = data["layers"]
    assert project["files"][0]["status"] == "loaded"  # a missing import is not a missing file
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "  nested: /src/api/AGENTS.md" in out
    assert "project, imported by /AGENTS.md: shown in full" in out
    assert main(["inspect", "--root", ".", "--json"]) == 0  # no --path: nothing nested
    data = json.loads(capsys.readouterr().out)
    assert ("nested", "/src/api/AGENTS.md") not in {(e["kind"], e["path"]) for e in data["extras"]}


def test_doctor_reports_missing_imports_cycles_and_depth(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--json"]) == 1
    findings = {
        (f["check"], f["severity"], f["path"])
        for f in json.loads(capsys.readouterr().out)["findings"]
    }
    assert findings == {
        ("memory-problem", "error", "/AGENTS.md"),
        ("import-too-deep", "error", "/d/e.md"),
        ("import-cycle", "warning", "/d/a.md"),
    }
    main(["doctor"])
    out = capsys.readouterr().out
    assert (
        "/AGENTS.md: error: imports @docs/missing.md, which names no file [memory-problem]" in out
    )
    assert "(/d/a.md -> /d/b.md -> /d/a.md)" in out


def test_doctor_reports_a_nested_file_the_budget_leaves_out(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        folder,
        {"AGENTS.md": "# Project\n" + "- keep this line\n" * 120, "src/api/AGENTS.md": "x" * 3000},
    )
    assert (
        main(
            [
                "doctor",
                "--nested",
                "AGENTS.md",
                "--path",
                "src/api/handler.py",
                "--max-chars",
                "4000",
                "--json",
            ]
        )
        == 1
    )
    findings = json.loads(capsys.readouterr().out)["findings"]
    nested = next(f for f in findings if f["path"] == "/src/api/AGENTS.md")
    assert nested["check"] in ("budget-omits", "budget-truncates")
    assert "nested memory file" in nested["message"]


def test_lint_reports_them_for_a_memory_file(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "AGENTS.md"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "AGENTS.md: error: imports @docs/missing.md, which names no file"
    assert lines[1].startswith("d/a.md: warning: memory files import each other (")
    assert lines[2].startswith("d/e.md: error: its @imports are 5 hops from a configured")
    assert lines[-1] == "1 memory file: 0 ok, 1 with errors; 2 errors, 1 warning"
