"""`layered-memory lint` and the middleware reach the same verdict on every rule file."""

from __future__ import annotations

from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import MemoryAssembler
from layered_memory.cli import main

# Files a rule folder may hold that are not plain UTF-8 Markdown.
ODD_FILES: dict[str, bytes] = {
    "plain.md": b"---\npaths: ['**/*.py']\n---\nUse ruff.",
    "nul.md": b"---\nname: nul\n---\nBody with a NUL\x00 byte.",
    "latin1.md": "---\nname: latin1\n---\ncaf\xe9".encode("latin-1"),
    "bom.md": "\ufeff---\nname: bom\n---\nBody after a BOM.".encode(),
    "empty.md": b"",
    "crlf.md": b"---\r\nname: crlf\r\n---\r\nWindows line ends.",
}


def lint_valid_files(folder: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    main(["lint", str(folder)])
    lines = capsys.readouterr().out.splitlines()
    invalid = {Path(line.split(": error: ")[0]).name for line in lines if ": error: " in line}
    return {path.name for path in folder.iterdir()} - invalid


def middleware_valid_files(root: Path) -> set[str]:
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    assembler = MemoryAssembler(backend=backend, layers=[], rules=["/rules"])
    rule_set = assembler.rule_set(assembler.load().rule_files)
    assert rule_set is not None
    return {Path(rule.path).name for rule in rule_set.rules}


def test_lint_and_middleware_agree_on_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    for name, content in ODD_FILES.items():
        (folder / name).write_bytes(content)
    monkeypatch.chdir(tmp_path)

    from_lint = lint_valid_files(folder, capsys)
    from_middleware = middleware_valid_files(tmp_path)

    assert from_lint == from_middleware
    assert "nul.md" not in from_lint  # binary: skipped by both
    assert "latin1.md" not in from_lint
    assert {"plain.md", "bom.md"} <= from_lint
