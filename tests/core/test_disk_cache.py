"""Unchanged files on local disk are not downloaded again; every change is still seen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import FileDownloadResponse

from layered_memory import Layer, MemoryAssembler
from layered_memory.core.disk_cache import DiskReadCache
from layered_memory.core.loading import adownload_texts, download_texts


class CountingBackend(FilesystemBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.requested: list[list[str]] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.requested.append(list(paths))
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self.download_files(paths)


async def load(backend: CountingBackend, cache: DiskReadCache, use_async: bool) -> dict[str, str]:
    paths = ["/AGENTS.md", "/MEMORY.md", "/missing.md"]
    if use_async:
        result = await adownload_texts(backend, paths, cache=cache)
    else:
        result = download_texts(backend, paths, cache=cache)
    assert result.missing == {"/missing.md"}
    return dict(result.texts)


@pytest.fixture
def root(tmp_path: Path, settled_files: None) -> Path:
    for name, text in (("AGENTS.md", "agents v1"), ("MEMORY.md", "memory v1")):
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("use_async", [False, True])
async def test_unchanged_files_are_not_downloaded_again(root: Path, use_async: bool) -> None:
    backend = CountingBackend(root)
    cache = DiskReadCache(backend)
    first = await load(backend, cache, use_async)
    second = await load(backend, cache, use_async)
    assert first == second == {"/AGENTS.md": "agents v1", "/MEMORY.md": "memory v1"}
    assert backend.requested == [["/AGENTS.md", "/MEMORY.md", "/missing.md"]]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_changed_file_is_downloaded_alone(root: Path, use_async: bool) -> None:
    backend = CountingBackend(root)
    cache = DiskReadCache(backend)
    await load(backend, cache, use_async)
    (root / "MEMORY.md").write_text("memory v2 (longer)")
    texts = await load(backend, cache, use_async)
    assert texts["/MEMORY.md"] == "memory v2 (longer)"
    assert backend.requested[-1] == ["/MEMORY.md"]


def test_same_size_same_mtime_rewrite_is_still_seen(root: Path) -> None:
    """A coarse clock can keep the mtime; the inode change time still moves."""
    backend = CountingBackend(root)
    cache = DiskReadCache(backend)
    download_texts(backend, ["/AGENTS.md"], cache=cache)
    before = (root / "AGENTS.md").stat()
    (root / "AGENTS.md").write_text("agents v2")  # same length as "agents v1"
    os.utime(root / "AGENTS.md", ns=(before.st_atime_ns, before.st_mtime_ns))
    result = download_texts(backend, ["/AGENTS.md"], cache=cache)
    assert result.texts == {"/AGENTS.md": "agents v2"}


def test_recently_written_files_are_read_again(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("fresh")  # mtime: now, inside the racy window
    backend = CountingBackend(tmp_path)
    cache = DiskReadCache(backend)
    download_texts(backend, ["/AGENTS.md"], cache=cache)
    download_texts(backend, ["/AGENTS.md"], cache=cache)
    assert backend.requested == [["/AGENTS.md"], ["/AGENTS.md"]]


def test_created_file_and_symlinks_always_reach_the_backend(root: Path) -> None:
    (root / "link.md").symlink_to(root / "AGENTS.md")
    backend = CountingBackend(root)
    cache = DiskReadCache(backend)
    download_texts(backend, ["/new.md", "/link.md"], cache=cache)
    (root / "new.md").write_text("now it exists")
    result = download_texts(backend, ["/new.md", "/link.md"], cache=cache)
    assert result.texts == {"/new.md": "now it exists", "/link.md": "agents v1"}
    assert backend.requested[-1] == ["/new.md", "/link.md"]  # a symlink is never cached


class GlobCountingBackend(CountingBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.globs = 0

    def glob(self, pattern: str, path: str | None = None) -> Any:
        self.globs += 1
        return super().glob(pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> Any:
        return self.glob(pattern, path)


def age_tree(top: Path) -> None:
    """Backdate a folder tree, so that a later change is a different mtime even on a filesystem
    whose clock ticks coarsely (the change must be told apart from the state cached before)."""
    for path in [*sorted(top.rglob("*"), reverse=True), top]:
        stamp = path.stat().st_mtime - 3_600
        os.utime(path, (stamp, stamp))


@pytest.fixture
def rules_root(root: Path) -> Path:
    (root / "rules" / "nested").mkdir(parents=True)
    (root / "rules" / "a.md").write_text("RULE_A")
    (root / "rules" / "nested" / "b.md").write_text("RULE_B")
    age_tree(root / "rules")
    return root


async def rule_texts(assembler: MemoryAssembler, use_async: bool) -> dict[str, str]:
    snapshot = await assembler.aload() if use_async else assembler.load()
    return dict(snapshot.rule_files)


@pytest.mark.parametrize("use_async", [False, True])
async def test_unchanged_rule_folders_are_not_listed_again(
    rules_root: Path, use_async: bool
) -> None:
    backend = GlobCountingBackend(rules_root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    first = await rule_texts(assembler, use_async)
    second = await rule_texts(assembler, use_async)
    assert first == second == {"/rules/a.md": "RULE_A", "/rules/nested/b.md": "RULE_B"}
    assert backend.globs == 1
    assert len(backend.requested) == 1  # and nothing downloaded the second time


@pytest.mark.parametrize("use_async", [False, True])
async def test_added_and_removed_rule_files_are_seen(rules_root: Path, use_async: bool) -> None:
    backend = GlobCountingBackend(rules_root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    await rule_texts(assembler, use_async)
    (rules_root / "rules" / "nested" / "c.md").write_text("RULE_C")
    assert "/rules/nested/c.md" in await rule_texts(assembler, use_async)
    (rules_root / "rules" / "a.md").unlink()
    assert "/rules/a.md" not in await rule_texts(assembler, use_async)
    (rules_root / "rules" / "deeper" / "down").mkdir(parents=True)
    (rules_root / "rules" / "deeper" / "down" / "d.md").write_text("RULE_D")
    assert "/rules/deeper/down/d.md" in await rule_texts(assembler, use_async)


def test_a_symlinked_folder_is_always_listed(rules_root: Path) -> None:
    elsewhere = rules_root / "shared-rules"
    elsewhere.mkdir()
    (rules_root / "rules" / "linked").symlink_to(elsewhere)
    age_tree(rules_root / "rules")
    backend = GlobCountingBackend(rules_root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    assembler.load()
    assembler.load()
    assert backend.globs == 2


def test_a_folder_swapped_for_a_link_after_a_cached_listing_is_listed(rules_root: Path) -> None:
    backend = GlobCountingBackend(rules_root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    assert set(assembler.load().rule_files) == {"/rules/a.md", "/rules/nested/b.md"}
    assembler.load()
    assert backend.globs == 1  # the listing is cached: only its folders were stat'ed again
    elsewhere = rules_root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "c.md").write_text("RULE_C")
    (rules_root / "rules" / "nested" / "b.md").unlink()
    (rules_root / "rules" / "nested").rmdir()
    (rules_root / "rules" / "nested").symlink_to(elsewhere)
    age_tree(rules_root / "rules")
    fresh = MemoryAssembler(backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"])
    assert assembler.load().rule_files == fresh.load().rule_files  # as listed from scratch
    assert "/rules/nested/b.md" not in assembler.load().rule_files
    assert backend.globs == 4  # listed again each time: never cached while a link is in it


def test_a_folder_added_deep_in_a_cached_listing_is_listed(rules_root: Path) -> None:
    backend = GlobCountingBackend(rules_root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    assembler.load()
    (rules_root / "rules" / "nested" / "deeper").mkdir()
    (rules_root / "rules" / "nested" / "deeper" / "d.md").write_text("RULE_D")
    age_tree(rules_root / "rules")
    assert "/rules/nested/deeper/d.md" in assembler.load().rule_files


def test_a_rule_folder_created_after_a_cached_listing_is_listed(root: Path) -> None:
    backend = GlobCountingBackend(root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md")], rules=["/rules"]
    )
    assert not assembler.load().rule_files
    (root / "rules").mkdir()
    (root / "rules" / "a.md").write_text("RULE_A")
    age_tree(root / "rules")
    assert set(assembler.load().rule_files) == {"/rules/a.md"}


def test_unchanged_load_reuses_the_digest_and_a_change_gives_a_new_one(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import layered_memory.core.assembler as assembler_module

    hashed: list[int] = []
    real_digest = assembler_module.digest_texts

    def counting_digest(*parts: Any) -> str:
        hashed.append(1)
        return real_digest(*parts)

    monkeypatch.setattr(assembler_module, "digest_texts", counting_digest)
    backend = CountingBackend(root)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("p", "/AGENTS.md"), Layer("m", "/MEMORY.md")]
    )
    first = assembler.load()
    second = assembler.load()
    assert second.digest == first.digest
    assert len(hashed) == 1  # nothing re-read, nothing re-hashed
    (root / "MEMORY.md").write_text("memory v2")
    third = assembler.load()
    assert third.files["/MEMORY.md"] == "memory v2"
    assert third.digest != first.digest
    assert len(hashed) == 2
