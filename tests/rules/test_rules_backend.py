"""Listing and loading rule folders through real deepagents backends, counting backend calls."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StoreBackend
from deepagents.backends.protocol import GlobResult
from langgraph.store.memory import InMemoryStore

from layered_memory.errors import RuleFileError
from layered_memory.rules import (
    RuleProblem,
    RuleSet,
    alist_rule_files,
    aload_rule_set,
    list_rule_files,
    load_rule_set,
)

RULE_FILES = {
    "/rules/org/python.md": "---\npaths: '**/*.py'\n---\nOrg python.",
    "/rules/org/base.md": "Org base.",
    "/rules/team/python.md": "---\npaths: 'src/**'\n---\nTeam python.",
    "/rules/team/lang/react.mdc": "---\nglobs: *.tsx\nalwaysApply: false\n---\nReact.",
    "/rules/team/ts.instructions.md": "---\napplyTo: '**/*.ts'\n---\nTS.",
    "/rules/team/broken.md": "---\npaths: [unclosed\n---\nBroken.",
    "/rules/team/notes.txt": "not a rule",
    "/rules/team/.git/HEAD.md": "dot folders are skipped",
    "/rules/team/.hidden.md": "dotfiles are skipped",
}


class CountingBackend:
    """Delegates to a real backend and counts the calls the rules engine makes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Any]] = []

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        self.calls.append(("glob", path))
        return self.inner.glob(pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        self.calls.append(("glob", path))
        return await self.inner.aglob(pattern, path)

    def download_files(self, paths: list[str]) -> Any:
        self.calls.append(("download", tuple(paths)))
        return self.inner.download_files(paths)

    async def adownload_files(self, paths: list[str]) -> Any:
        self.calls.append(("download", tuple(paths)))
        return await self.inner.adownload_files(paths)


def write_files(tmp_path: Path) -> None:
    for path, text in RULE_FILES.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def filesystem(tmp_path: Path) -> FilesystemBackend:
    write_files(tmp_path)
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


def store(_tmp_path: Path) -> StoreBackend:
    backend = StoreBackend(namespace=lambda _rt: ("fs",), store=InMemoryStore())
    backend.upload_files([(p, t.encode()) for p, t in RULE_FILES.items()])
    backend.upload_files([("/rulesx/org/python.md", b"a sibling folder sharing a prefix")])
    return backend


def composite(tmp_path: Path) -> CompositeBackend:
    # The rule folders live in the store route; the default backend is an empty folder.
    empty = tmp_path / "empty"
    empty.mkdir()
    routed = StoreBackend(namespace=lambda _rt: ("fs",), store=InMemoryStore())
    routed.upload_files([(p.removeprefix("/rules"), t.encode()) for p, t in RULE_FILES.items()])
    return CompositeBackend(
        default=FilesystemBackend(root_dir=empty, virtual_mode=True), routes={"/rules/": routed}
    )


async def list_files(
    backend: Any, folders: list[str], use_async: bool
) -> tuple[list[tuple[int, str]], list[RuleProblem]]:
    if use_async:
        return await alist_rule_files(backend, folders)
    return list_rule_files(backend, folders)


async def load(backend: Any, folders: list[str], use_async: bool, **kwargs: Any) -> RuleSet:
    if use_async:
        return await aload_rule_set(backend, folders, **kwargs)
    return load_rule_set(backend, folders, **kwargs)


EXPECTED_FILES = [
    (0, "/rules/org/base.md"),
    (0, "/rules/org/python.md"),
    (1, "/rules/team/broken.md"),
    (1, "/rules/team/lang/react.mdc"),
    (1, "/rules/team/python.md"),
    (1, "/rules/team/ts.instructions.md"),
]


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("make_backend", [filesystem, store, composite])
async def test_one_listing_per_folder_one_download(
    make_backend: Any, use_async: bool, tmp_path: Path
) -> None:
    backend = CountingBackend(make_backend(tmp_path))
    folders = ["/rules/org", "/rules/team/", "/rules/missing"]

    files, problems = await list_files(backend, folders, use_async)
    assert files == EXPECTED_FILES
    assert problems == []  # a missing folder is not a problem
    assert backend.calls == [
        ("glob", "/rules/org"),
        ("glob", "/rules/team"),
        ("glob", "/rules/missing"),
    ]

    backend.calls.clear()
    rule_set = await load(backend, folders, use_async, log=False)
    assert [kind for kind, _ in backend.calls] == ["glob", "glob", "glob", "download"]
    assert backend.calls[-1] == ("download", tuple(path for _, path in EXPECTED_FILES))
    assert [(r.name, r.folder_index, r.mode) for r in rule_set.rules] == [
        ("base", 0, "always"),
        ("python", 1, "paths"),
        ("react", 1, "paths"),
        ("ts", 1, "paths"),
    ]
    assert [r.body for r in rule_set.match(["/src/app.py"]).applied] == [
        "Org base.",
        "Team python.",
    ]
    assert [(p.path, p.severity) for p in rule_set.problems] == [("/rules/team/broken.md", "error")]


@pytest.mark.parametrize("use_async", [False, True])
async def test_nothing_to_download_makes_no_download_call(use_async: bool, tmp_path: Path) -> None:
    backend = CountingBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    rule_set = await load(backend, ["/nope"], use_async)
    assert backend.calls == [("glob", "/nope")]
    assert (rule_set.rules, rule_set.problems) == ((), ())


@pytest.mark.parametrize("use_async", [False, True])
async def test_dot_named_rule_folder_is_listed(use_async: bool, tmp_path: Path) -> None:
    (tmp_path / ".claude" / "rules").mkdir(parents=True)
    (tmp_path / ".claude" / "rules" / "a.md").write_text("A")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    files, _ = await list_files(backend, ["/.claude/rules"], use_async)
    assert files == [(0, "/.claude/rules/a.md")]


@pytest.mark.parametrize("use_async", [False, True])
async def test_real_paths_without_virtual_mode(use_async: bool, tmp_path: Path) -> None:
    write_files(tmp_path)
    real = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    rule_set = await load(real, [str(tmp_path / "rules" / "org")], use_async)
    assert [r.path for r in rule_set.rules] == [
        (tmp_path / "rules/org/base.md").as_posix(),
        (tmp_path / "rules/org/python.md").as_posix(),
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_file_under_two_listed_folders_belongs_to_the_higher(
    use_async: bool, tmp_path: Path
) -> None:
    backend = filesystem(tmp_path)
    files, _ = await list_files(backend, ["/rules", "/rules/org"], use_async)
    assert (1, "/rules/org/python.md") in files
    assert (0, "/rules/org/python.md") not in files


class BrokenBackend(CountingBackend):
    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        if path == "/raises":
            msg = "backend exploded"
            raise OSError(msg)
        if path == "/truncated":
            return GlobResult(matches=[], truncated=True, truncation_reason="budget")
        return GlobResult(error="permission denied", matches=None)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self.glob(pattern, path)


@pytest.mark.parametrize("use_async", [False, True])
async def test_listing_errors_are_warnings_naming_the_folder(
    use_async: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = BrokenBackend(None)
    folders = ["/denied", "/raises", "/truncated"]
    files, problems = await list_files(backend, folders, use_async)
    assert files == []
    assert problems == [
        RuleProblem("/denied", "cannot list rule folder: permission denied", "warning"),
        RuleProblem("/raises", "cannot list rule folder: OSError: backend exploded", "warning"),
        RuleProblem(
            "/truncated",
            "rule folder listing truncated (budget); some rule files may be missing",
            "warning",
        ),
    ]
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        rule_set = await load(backend, folders, use_async)
    assert rule_set.problems == tuple(problems)
    assert "Rule file /denied: cannot list rule folder: permission denied" in caplog.messages


@pytest.mark.parametrize("use_async", [False, True])
async def test_strict_raises_on_the_first_invalid_file(use_async: bool, tmp_path: Path) -> None:
    backend = filesystem(tmp_path)
    with pytest.raises(RuleFileError) as info:
        await load(backend, ["/rules/team"], use_async, strict=True, log=False)
    assert info.value.path == "/rules/team/broken.md"
    assert info.value.reason.startswith("malformed YAML frontmatter")
