"""`layered-memory lint` on memory files, with `--config`, and as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_config_helpers import write, write_project

from layered_memory.cli import main
from layered_memory.core.render import MEMORY_SYSTEM_PROMPT, minimum_budget


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    status = main(["lint", *args])
    return status, capsys.readouterr().out.splitlines()


def test_memory_files_are_checked_against_the_budget_and_line_cap(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        folder,
        {
            "AGENTS.md": "# Project\n- Run `make test`.\n",
            "big/AGENTS.md": "# Big\n" + "word " * 2000,
            "notes/MEMORY.md": "".join(f"- note {n}\n" for n in range(230)),
            "docs/CLAUDE.md": "<!-- nothing for the model yet -->\n",
            "latin/AGENTS.md": "caf\xe9".encode("latin-1"),
            "team-notes.md": "# Team\n",
        },
    )
    status, lines = lint(
        capsys,
        "AGENTS.md",
        "big/AGENTS.md",
        "notes/MEMORY.md",
        "docs/CLAUDE.md",
        "latin/AGENTS.md",
        "--memory",
        "team-notes.md",
        "--max-chars",
        "6000",
    )
    assert status == 1
    assert lines[0].startswith("big/AGENTS.md: error: over the memory budget: the model sees")
    assert "(10,006 chars, max_chars=6,000)" in lines[0]
    assert lines[1] == (
        "docs/CLAUDE.md: warning: holds only HTML comments or blank lines: nothing reaches the "
        "model"
    )
    assert lines[2].startswith("latin/AGENTS.md: error: ")
    assert "UTF-8" in lines[2]
    assert lines[3] == (
        "notes/MEMORY.md: warning: only the first lines are shown (230 lines; the line cap "
        "cuts the rest)"
    )
    assert lines[-1] == "6 memory files: 4 ok, 2 with errors; 2 errors, 2 warnings"


def test_the_default_budget_is_the_middlewares(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(folder, {"AGENTS.md": "word " * 9000 + "\n", "big/AGENTS.md": "word " * 10_000})
    assert lint(capsys, "AGENTS.md") == (
        0,
        ["1 memory file: 1 ok, 0 with errors; 0 errors, 0 warnings"],
    )
    status, lines = lint(capsys, "big/AGENTS.md")
    assert status == 1
    assert "over the memory budget" in lines[0]
    assert "max_chars=48,000" in lines[0]


def test_rules_and_memory_together_as_json(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        folder,
        {
            "AGENTS.md": "# Project\n",
            ".claude/rules/python.md": "---\npaths: ['./src/**']\n---\nRuff.",
            ".claude/rules/broken.md": "---\npaths: 3\n---\nx",
            ".claude/rules/AGENTS.md": "---\nowner: x\n---\nA rule file named like memory.",
        },
    )
    status = main(["lint", "AGENTS.md", ".claude/rules", "--json", "--explain", "src/app.py"])
    data = json.loads(capsys.readouterr().out)
    assert status == 1
    assert data["version"] == 1
    kinds = {Path(f["path"]).relative_to(folder.resolve()).as_posix(): f for f in data["files"]}
    assert {name: (f["kind"], f["valid"]) for name, f in kinds.items()} == {
        "AGENTS.md": ("memory", True),
        ".claude/rules/python.md": ("rule", False),  # its only glob can never match
        ".claude/rules/broken.md": ("rule", False),
        ".claude/rules/AGENTS.md": ("rule", True),  # inside a rule folder: a rule
    }
    reasons = {(Path(p["path"]).name, p["severity"], p["reason"]) for p in data["problems"]}
    assert (
        "python.md",
        "error",  # as `doctor` reports it (issue 26)
        "glob './src/**' can never match: match keys are normalized paths, which have no '.' "
        "segment; write 'src/**'; rule 'python' can never apply",
    ) in reasons
    assert data["counts"] == {"errors": 2, "warnings": 1}
    assert {d["name"]: d["status"] for d in data["explain"]}["python"] == "skipped"


def test_lint_config_checks_the_middlewares_own_folders(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = write_project(folder)
    write(folder, {".claude/rules/bad.md": "---\npaths: [oops\n---\nx"})
    status, lines = lint(capsys, "--config", f"{name}:agent")
    assert status == 1
    assert lines[0].startswith("/.claude/rules/bad.md: error: ")
    assert lines[-1] == (
        "3 rule files: 2 valid, 1 invalid; 2 memory files: 2 ok, 0 with errors; 1 error, 0 warnings"
    )
    assert main(["lint", "--config", f"{name}:agent", "AGENTS.md"]) == 2
    assert "give PATHs or --config, not both" in capsys.readouterr().err
    assert main(["lint"]) == 2
    assert "give rule files, folders or --config" in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["1000", "0", "-5"])
def test_a_budget_below_the_templates_minimum_is_a_usage_error(
    folder: Path, capsys: pytest.CaptureFixture[str], budget: str
) -> None:
    write(folder, {"AGENTS.md": "# Project\n"})
    assert main(["lint", "AGENTS.md", "--max-chars", budget, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    least = minimum_budget(MEMORY_SYSTEM_PROMPT)
    assert captured.err == (
        f"layered-memory lint: --max-chars {budget}: too small for the prompt template; "
        f"use at least {least}\n"
    )


@pytest.fixture
def repo(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose AGENTS.md imports files outside it; the working folder."""
    write(
        folder,
        {
            "outside.md": "# Host file\n",
            "repo/AGENTS.md": (
                f"# Project\n@../outside.md\n@{(folder / 'outside.md').as_posix()}\n@docs/ok.md\n"
            ),
            "repo/docs/ok.md": "# Inside\n",
        },
    )
    monkeypatch.chdir(folder / "repo")
    return folder / "repo"


def test_imports_are_read_as_the_agent_reads_them_from_the_lint_root(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = lint(capsys, "AGENTS.md")
    assert status == 1
    absolute = (repo.parent / "outside.md").as_posix()
    assert lines == [
        "AGENTS.md: error: imports @../outside.md, which names no file",
        f"AGENTS.md: error: imports @{absolute}, which names no file",
        "1 memory file: 0 ok, 1 with errors; 2 errors, 0 warnings",
    ]
    # The same verdicts as doctor's, which reads through the middleware's own backend.
    assert main(["doctor", "--json"]) == 1
    doctor = json.loads(capsys.readouterr().out)
    assert {f["message"] for f in doctor["findings"] if f["path"] == "/AGENTS.md"} == {
        line.split(": error: ", 1)[1] for line in lines[:2]
    }


def test_a_wider_root_lets_imports_reach_further(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = lint(capsys, "AGENTS.md", "--root", "..", "--json")
    data = json.loads("\n".join(lines))
    assert status == 1
    assert data["source"]["root"] == repo.parent.as_posix()
    assert [p["reason"] for p in data["problems"]] == [
        f"imports @{(repo.parent / 'outside.md').as_posix()}, which names no file"
    ]
    assert data["files"] == [
        {"path": (repo / "AGENTS.md").as_posix(), "kind": "memory", "valid": False}
    ]


def test_a_memory_file_outside_the_lint_root_is_a_usage_error(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "--memory", "../outside.md"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"../outside.md: error: outside the lint root {repo.as_posix()}, where the agent's "
        "backend would be rooted: give --root (the agent's root folder)\n"
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-chars", "6000"], "--max-chars"),
        (["--root", "."], "--root"),
        (["--root", ".", "--max-chars", "48000"], "--root, --max-chars"),
    ],
)
def test_lint_config_refuses_the_options_it_takes_from_the_middleware(
    folder: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    name = write_project(folder)
    assert main(["lint", "--config", f"{name}:agent", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"layered-memory lint: {named}: --config takes these from your middleware; drop them\n"
    )
