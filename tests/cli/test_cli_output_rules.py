"""What every subcommand promises about its output: exit codes and `--json` in `--help`,
colour only on a terminal and never with `NO_COLOR`, control characters escaped."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from cli_config_helpers import write

from layered_memory.cli import build_parser, main

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUBCOMMANDS = ("demo", "doctor", "inspect", "lint", "sync", "graph", "tiers")


class Terminal(io.StringIO):
    """Standard output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def subcommand_help(name: str) -> str:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices[name].format_help()  # type: ignore[index]


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_documents_its_exit_status_and_json(name: str) -> None:
    text = " ".join(subcommand_help(name).split())
    assert "Exit status:" in text
    assert "--json" in text


def test_the_top_level_help_names_every_subcommand() -> None:
    text = build_parser().format_help()
    for name in SUBCOMMANDS:
        assert name in text
    assert "NO_COLOR" in text


@pytest.fixture
def broken_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    write(
        tmp_path,
        {
            "AGENTS.md": "# Project\n",
            ".claude/rules/bad.md": "---\npaths: 3\n---\nx",
            ".claude/rules/owner.md": "---\nowner: me\n---\nBody.",
        },
    )
    return tmp_path


COMMANDS = (
    ["lint", ".claude/rules"],
    ["doctor"],
    ["inspect", "--root", "."],
)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_colour_only_on_a_terminal_and_never_with_no_color(
    broken_rules: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    main(args)
    assert ANSI.search(terminal.getvalue())

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("NO_COLOR", "1")
    main(args)
    assert not ANSI.search(terminal.getvalue())

    monkeypatch.delenv("NO_COLOR")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    main([*args, "--json"])
    assert "\x1b" not in terminal.getvalue()
    json.loads(terminal.getvalue())

    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    main(args)
    assert "\x1b" not in piped.getvalue()


HOSTILE = "evil\x1b[2J\u202etxt.exe\nforged: error: line"


def test_control_characters_in_file_names_are_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        {
            "AGENTS.md": "# Project\n",
            f"rules/{HOSTILE}.md": "---\npaths: ['src/**']\n---\nRule.",
            f"rules/{HOSTILE}-broken.md": "---\npaths: 3\n---\nx",
        },
    )
    escaped = "evil\\x1b[2J\\u202etxt.exe\\nforged: error: line"
    for args in (["lint", "rules"], ["doctor"], ["inspect", "--root", "."]):
        main(args)
        out = capsys.readouterr().out
        assert "\x1b" not in out, args
        assert "\u202e" not in out, args
        assert escaped in out, args
        assert not any(line.startswith("forged") for line in out.splitlines()), args
    main(["doctor", "--json"])
    text = capsys.readouterr().out
    assert "\x1b" not in text
    assert "\u202e" not in text
    paths = {finding["path"] for finding in json.loads(text)["findings"]}
    assert f"/rules/{HOSTILE}-broken.md" in paths  # exact once decoded


def test_context_keys_and_values_are_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    write(
        tmp_path,
        {
            "AGENTS.md": "# Project\n",
            "cfg_escape.py": (
                "from deepagents.backends import FilesystemBackend\n"
                "from layered_memory import Layer, MemoryMiddleware\n"
                "memory = MemoryMiddleware(backend=FilesystemBackend(root_dir='.', "
                "virtual_mode=True), layers=[Layer('p', '/AGENTS.md')])\n"
            ),
        },
    )
    status = main(["inspect", "--config", "cfg_escape:memory", "--context", f"k\x1b[31m={HOSTILE}"])
    out = capsys.readouterr().out
    assert status == 0
    assert "\x1b" not in out
    assert "context: k\\x1b[31m=evil\\x1b[2J" in out
