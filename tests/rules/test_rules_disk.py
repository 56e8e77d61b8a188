"""`rules.disk`, the reader of `layered-memory lint` (no deepagents import), sees what the agent's
loader sees on `FilesystemBackend(virtual_mode=False)`: the same rule files, texts and problems,
over a tree built to trip a reader up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import MemoryAssembler
from layered_memory.cli.lint import lint_paths
from layered_memory.core.loading import MAX_FILE_BYTES, download_texts
from layered_memory.rules import list_rule_files
from layered_memory.rules._set import LISTING_PATTERN
from layered_memory.rules.disk import list_local_rule_files, read_local_texts

pytestmark = pytest.mark.skipif(
    not hasattr(os, "mkfifo") or os.name != "posix", reason="FIFOs and symlinks: POSIX only"
)

VALID = "---\npaths: ['src/**/*.py']\n---\nUse ruff.\n"


def hostile_tree(root: Path) -> Path:
    """A rule folder holding every kind of file a reader may get wrong."""
    rules = root / "rules"
    outside = root / "outside"
    (rules / "nested" / "deep").mkdir(parents=True)
    (rules / ".hidden").mkdir()
    (rules / "nested" / ".obsidian").mkdir()
    (rules / "folder.md").mkdir()  # a folder named like a rule file
    (outside / "linked-folder").mkdir(parents=True)
    files = {
        "plain.md": VALID,
        "nested/deep/inner.md": "---\nalwaysApply: true\n---\nNested.\n",
        "nested/cursor.mdc": "---\nglobs: *.ts\nalwaysApply: false\n---\nTypes.\n",
        "folder.md/inside.md": VALID,
        "notes.txt": "not a rule file",
        ".hidden/secret.md": VALID,
        ".dotfile.md": VALID,
        "nested/.obsidian/workspace.md": VALID,
        "malformed.md": "---\npaths: [oops\n---\nx",
        "dead.md": "---\npaths: ['./src/**']\n---\nDead glob.\n",
    }
    for name, text in files.items():
        (rules / name).write_text(text, encoding="utf-8")
    (rules / "latin1.md").write_bytes("---\nname: latin\n---\ncaf\xe9".encode("latin-1"))
    (rules / "nul.md").write_bytes(b"Body with a NUL\x00 byte.")
    (rules / "bom.md").write_bytes("\ufeffBody after a BOM.".encode())
    with (rules / "big.md").open("wb") as big:  # sparse: one byte over the cap, no 8 MB write
        big.truncate(MAX_FILE_BYTES + 1)
    os.mkfifo(rules / "pipe.md")
    (outside / "out.md").write_text(VALID, encoding="utf-8")
    (outside / "linked-folder" / "far.md").write_text(VALID, encoding="utf-8")
    os.symlink(outside / "out.md", rules / "link-out.md")  # a file outside the folder
    os.symlink(outside / "linked-folder", rules / "linked")  # links to folders: not followed
    os.symlink("loop.md", rules / "loop.md")  # loops to itself
    os.symlink("loop-b.md", rules / "loop-a.md")
    os.symlink("loop-a.md", rules / "loop-b.md")
    os.symlink(root / "nowhere.md", rules / "broken.md")
    os.symlink(os.devnull, rules / "null.md")  # a character device
    os.symlink("../plain.md", rules / "nested" / "alias.md")  # a second name of one file
    return rules


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return hostile_tree(tmp_path)


def test_the_reader_implements_the_listing_pattern_of_the_loader() -> None:
    assert LISTING_PATTERN == "**/*"


def test_listing_and_reading_equal_the_backends(tree: Path) -> None:
    backend = FilesystemBackend(virtual_mode=False)
    for folders in ([str(tree)], [f"{tree}/", str(tree / "nested")], ["rules"], ["missing"]):
        assert list_local_rule_files(folders) == list_rule_files(backend, folders)
    files, _ = list_local_rule_files([str(tree)])
    paths = [path for _, path in files]
    assert read_local_texts(paths) == download_texts(backend, paths)
    # Files named one by one, as `lint FILE...` does: the FIFO, the device, a folder, a loop,
    # a missing file, a relative path, a path no file can have.
    named = [
        *paths,
        str(tree / "pipe.md"),
        str(tree / "null.md"),
        str(tree / "folder.md"),
        str(tree / "loop.md"),
        str(tree / "broken.md"),
        "rules/plain.md",
        "rules/../rules/bom.md",
        "bad\x00name.md",
    ]
    assert read_local_texts(named) == download_texts(backend, named)


def test_lint_sees_what_the_agents_loader_sees(tree: Path) -> None:
    assembler = MemoryAssembler(
        backend=FilesystemBackend(virtual_mode=False), layers=[], rules=[str(tree)]
    )
    snapshot = assembler.load()
    rule_set = assembler.rule_set(snapshot.rule_files)
    assert rule_set is not None
    agent_problems = {(p.path, p.reason) for p in (*snapshot.problems, *rule_set.problems)}

    files, listing_problems = list_local_rule_files([str(tree)])
    loaded = read_local_texts([path for _, path in files])
    result = lint_paths([str(tree)])
    assert not isinstance(result, list)

    assert files == list(snapshot.rule_listing)
    assert dict(loaded.texts) == dict(snapshot.rule_files)
    assert {(p.path, p.reason) for p in (*listing_problems, *loaded.problems)} <= agent_problems
    assert result.rule_files == [path for _, path in snapshot.rule_listing]
    dead = {(p.path, p.reason) for p in result.problems if "can never match" in p.reason}
    assert {(p.path, p.reason) for p in result.problems} - dead == agent_problems
    assert len(dead) == 1

    # What the tree holds, read as the loader reads it: the hidden, the non-Markdown, the
    # unlistable (FIFO, device, loops, a broken link) and what sits behind a linked folder are
    # never listed; a link to a file outside the folder is read; the rest are findings.
    listed = {Path(path).relative_to(tree).as_posix() for _, path in files}
    assert listed == {
        "bom.md",
        "big.md",
        "dead.md",
        "folder.md/inside.md",
        "latin1.md",
        "link-out.md",
        "malformed.md",
        "nested/alias.md",
        "nested/cursor.mdc",
        "nested/deep/inner.md",
        "nul.md",
        "plain.md",
    }
    problems = {Path(p.path).name: p.reason for p in result.problems}
    assert problems["big.md"].startswith("larger than 8 MB")
    assert problems["latin1.md"].startswith("not valid UTF-8")
    assert problems["nul.md"].startswith("binary file")
    assert problems["malformed.md"].startswith("malformed YAML")
    assert "link-out.md" not in problems
    assert "bom.md" not in problems
