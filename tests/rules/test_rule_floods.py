"""A flood of rule files costs bounded work and never all the rules (issue 35, class 5).

100,000 rule files took 21.8 s: deepagents' glob stopped after its 5 s budget, the folder was
listed in part and its rules lost. A rule folder on local disk is now listed with one
`os.scandir` walk, and at most `MAX_RULE_FILES_PER_FOLDER` rule files are read: the files
that were there first, with one warning naming the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory.rules import PARTIAL_LISTING, list_rule_files
from layered_memory.rules import _set as rule_set

ORG = "---\nalwaysApply: true\n---\nORG_RULE: review every migration.\n"
WAIT_SECONDS = 600  # only stops a hung child; nothing is timed


def _flood(folder: Path, count: int) -> None:
    for i in range(count):
        (folder / f"a{i:06d}.md").write_text(f"---\nalwaysApply: true\n---\nJUNK {i}\n")


def test_the_files_there_first_are_read_and_the_rest_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rule_set, "MAX_RULE_FILES_PER_FOLDER", 50)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "org.md").write_text(ORG)  # first, and last in name order
    os.utime(rules / "org.md", (1, 1))  # an old modification time changes nothing
    _flood(rules, 300)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    files, problems = list_rule_files(backend, ["/rules"])
    assert len(files) == 50
    assert (0, "/rules/org.md") in files
    (problem,) = problems
    assert problem.reason.startswith(PARTIAL_LISTING[1])  # the put-back removes nothing there
    assert "the 251 added last are left out" in problem.reason
    assert "/rules/a000049.md" in problem.reason or "/rules/a000050.md" in problem.reason


def test_a_local_listing_is_the_backends(tmp_path: Path) -> None:
    """The walk lists what the backend's glob lists: dot names skipped, links to folders not
    followed, links to files inside the root listed, loops and broken links not."""
    rules = tmp_path / "rules"
    (rules / "nested").mkdir(parents=True)
    (rules / ".hidden").mkdir()
    (rules / "plain.md").write_text(ORG)
    (rules / "nested" / "deep.mdc").write_text(ORG)
    (rules / ".hidden" / "x.md").write_text(ORG)
    (rules / ".dot.md").write_text(ORG)
    (rules / "notes.txt").write_text("x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.md").write_text(ORG)
    os.symlink(tmp_path / "outside", rules / "linked-folder")
    os.symlink("plain.md", rules / "alias.md")
    os.symlink("loop.md", rules / "loop.md")
    os.symlink(tmp_path / "nowhere.md", rules / "broken.md")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    ours: list[str] = []
    files, problems = list_rule_files(backend, ["/rules"], others=ours)
    theirs: list[str] = []
    expected = rule_set._collect([(0, "/rules", backend.glob("**/*", path="/rules"))], theirs)
    assert (files, problems) == expected
    assert sorted(ours) == sorted(theirs)


@pytest.mark.slow
def test_a_hundred_thousand_rule_files_never_cost_the_rules(tmp_path: Path) -> None:
    child = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from deepagents.backends import FilesystemBackend
        from layered_memory import Layer, MemoryMiddleware

        root = Path(sys.argv[1])
        rules = root / "rules"
        rules.mkdir()
        (rules / "org.md").write_text(sys.argv[2])
        for i in range(100_000):
            (rules / f"j{i:06d}.md").write_text("---\\nalwaysApply: true\\n---\\nJUNK\\n")
        (root / "AGENTS.md").write_text("PROJECT")
        memory = MemoryMiddleware(
            backend=FilesystemBackend(root_dir=root, virtual_mode=True),
            layers=[Layer("project", "/AGENTS.md")],
            rules=["/rules"],
        )
        snapshot = memory.assembler.load()
        print("org", "/rules/org.md" in snapshot.rule_files, len(snapshot.rule_files))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path), ORG],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["org", "True", str(rule_set.MAX_RULE_FILES_PER_FOLDER)]
