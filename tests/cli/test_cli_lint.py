"""`layered-memory lint`: findings one per line, a summary, and the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layered_memory.cli import main


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


@pytest.fixture
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        {
            "rules/python.md": "---\nname: python-style\npaths: ['**/*.py']\n---\nUse ruff.",
            "rules/sub/acme.mdc": "---\nglobs: *acme*\nalwaysApply: false\n---\nAcme.",
            "rules/owner.md": "---\nowner: me\n---\nBody.",
            "rules/notes.txt": "ignored",
        },
    )
    return tmp_path / "rules"


def test_clean_folder_with_a_warning_exits_0(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "rules"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "rules/owner.md: warning: unknown field 'owner' (ignored)\n"
        "3 rule files: 3 valid, 0 invalid; 0 errors, 1 warning\n"
    )


MALFORMED = {
    "yaml.md": ("---\npaths: [oops\n---\nx", "malformed YAML frontmatter"),
    "list.md": ("---\n- a\n---\nx", "frontmatter is not a mapping (got a YAML list)"),
    "paths.md": ("---\npaths: 3\n---\nx", "paths must be a string or a list of strings (got int)"),
    "glob.md": ("---\npaths: 'src/[ab'\n---\nx", "invalid glob 'src/[ab' in paths (dropped): "),
}


def test_every_malformed_case_is_one_line_naming_file_and_reason(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(rules, {name: text for name, (text, _) in MALFORMED.items()})
    assert main(["lint", str(rules)]) == 1
    lines = capsys.readouterr().out.splitlines()
    for name, (_, reason) in MALFORMED.items():
        assert any(
            line.startswith(f"rules/{name}: error: ") and reason in line for line in lines
        ), (name, lines)
    assert lines[-1] == "7 rule files: 3 valid, 4 invalid; 4 errors, 1 warning"


def test_same_named_files_of_one_folder_are_each_a_rule(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(rules, {"lang/python.md": "---\nname: python-style\n---\nAlso."})
    assert main(["lint", str(rules), "--explain", "x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "applied: python-style (rules/lang/python.md) [layered-memory]: always applies: " in (
        "\n".join(lines)
    )
    assert not any(line.startswith("replaced:") for line in lines)


def test_files_and_later_paths_take_precedence(
    rules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {"team/python.md": "---\nname: python-style\n---\nTeam.", "x.txt": "x"})
    status = main(
        ["lint", "rules/python.md", "team", "x.txt", "--explain", "src/app.py", "--root", "/"]
    )
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "x.txt: warning: not a rule file name (*.md, *.mdc): a rule folder would ignore it",
        "3 rule files: 3 valid, 0 invalid; 0 errors, 1 warning",
        "applied: python-style (team/python.md) [layered-memory]: always applies: no paths",
        "applied: x.txt (x.txt) [layered-memory]: always applies: no paths",
        f"replaced: python-style (rules/python.md) [layered-memory]: replaced by "
        f"{tmp_path.as_posix()}/team/python.md (same name 'python-style', later folder)",
    ]


def test_missing_path_is_a_usage_error(rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "rules", "nope"]) == 2
    assert capsys.readouterr().err == "nope: error: no such file or directory\n"


@pytest.mark.parametrize(
    "argv", [[], ["lint"], ["bogus"], ["lint", "--bogus", "x"], ["inspect"], ["sync"]]
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--help"]) == 0
    assert "PATH" in capsys.readouterr().out


def test_console_script_in_a_subprocess(rules: Path) -> None:
    write(rules, {"bad.md": "---\npaths: 3\n---\nx"})
    result = subprocess.run(
        [sys.executable, "-m", "layered_memory.cli", "lint", "rules"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0] == (
        "rules/bad.md: error: paths must be a string or a list of strings (got int)"
    )
    assert result.stderr == ""  # problems are printed once, not also logged


def test_a_directory_given_as_a_memory_file_is_a_usage_error(
    rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (rules.parent / "docs" / "AGENTS.md").mkdir(parents=True)
    assert main(["lint", "--memory", "docs"]) == 2
    assert capsys.readouterr().err == "docs: error: is a directory, not a memory file\n"
    # Named like a memory file, a folder is not a rule folder: saying "0 rule files" would
    # pass a commit whose AGENTS.md the agent can never read.
    assert main(["lint", "rules", "docs/AGENTS.md"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "docs/AGENTS.md: error: is a directory, not a memory file\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_being_opened(rules: Path) -> None:
    os.mkfifo(rules / "pipe.md")
    os.mkfifo(rules.parent / "notes")
    # In a child process: opening a FIFO would block until a writer comes, forever.
    result = subprocess.run(
        [sys.executable, "-m", "layered_memory.cli", "lint", "rules/pipe.md", "--memory", "notes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == (
        "rules/pipe.md: error: is a FIFO, not a regular file\n"
        "notes: error: is a FIFO, not a regular file\n"
    )


def test_explain_names_the_dialect_each_file_was_read_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        {
            # Written for Claude Code and Copilot at once: read as Claude Code reads it.
            ".claude/rules/py.md": "---\npaths: '**/*.py'\napplyTo: '**/*.py'\n---\nPy.",
            ".cursor/rules/go.mdc": "Go.",
            ".github/instructions/cs.instructions.md": "---\napplyTo: '*.cs'\n---\nCS.",
        },
    )
    folders = [".claude/rules", ".cursor/rules", ".github/instructions"]
    argv = ["lint", *folders, "--explain", "src/app.py", "--explain", "src/App.CS"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        ".claude/rules/py.md: warning: applyTo is a VS Code field, not read in Claude Code "
        "files: ignored (Claude Code scopes a rule with paths)"
    )
    assert lines[-3:] == [
        "applied: py (.claude/rules/py.md) [Claude Code]: key 'src/app.py' matched glob '**/*.py'",
        "skipped: go (.cursor/rules/go.mdc) [Cursor]: no frontmatter (Cursor: Manual): injected "
        "only when a match key names it ('go' or '@go')",
        "applied: cs (.github/instructions/cs.instructions.md) [VS Code Copilot]: key "
        "'src/App.CS' matched glob '*.cs' (as '**/*.cs'), ignoring case",
    ]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["dialect"]) for d in data["explain"]] == [
        ("py", "claude"),
        ("go", "cursor"),
        ("cs", "copilot"),
    ]


def test_explain_names_each_tools_dialect_and_windsurfs_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        {
            ".windsurf/rules/big.md": "---\ntrigger: always_on\n---\n" + "x" * 12_100,
            ".windsurfrules": "Use bun.\n",
            ".kiro/steering/api.md": "---\ninclusion: manual\n---\nREST.\n",
            ".clinerules/01-style.md": "Tabs.\n",
            ".cursor/rules/meta.md": "---\nauthor: me\n---\nBody.\n",
            ".github/instructions/README.md": "About these files.\n",
        },
    )
    folders = [".windsurf/rules", ".windsurfrules", ".kiro/steering", ".clinerules"]
    folders += [".cursor/rules", ".github/instructions"]
    assert main(["lint", *folders, "--explain", "x"]) == 0
    out = capsys.readouterr().out
    assert ".windsurf/rules/big.md: warning: 12,1" in out
    assert "at most 12,000" in out
    assert ".github/instructions/README.md: warning: not read: VS Code reads only" in out
    assert "applied: big (.windsurf/rules/big.md) [Windsurf]" in out
    assert "applied: windsurfrules (.windsurfrules) [Windsurf]" in out
    assert "skipped: api (.kiro/steering/api.md) [Kiro]" in out
    assert "applied: 01-style (.clinerules/01-style.md) [Cline]" in out
    assert "skipped: meta (.cursor/rules/meta.md) [Cursor]" in out
