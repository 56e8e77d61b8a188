"""Unchanged files on local disk are not downloaded again; every change is still seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import FileDownloadResponse

from layered_memory._disk_cache import DiskReadCache
from layered_memory.loading import adownload_texts, download_texts

HOUR_AGO = 3_600


class CountingBackend(FilesystemBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.requested: list[list[str]] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.requested.append(list(paths))
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self.download_files(paths)


def age(path: Path, seconds: int = HOUR_AGO) -> None:
    """Backdate a file, as if written long before the read (outside the racy window)."""
    stamp = path.stat().st_mtime - seconds
    os.utime(path, (stamp, stamp))


async def load(backend: CountingBackend, cache: DiskReadCache, use_async: bool) -> dict[str, str]:
    paths = ["/AGENTS.md", "/MEMORY.md", "/missing.md"]
    if use_async:
        result = await adownload_texts(backend, paths, cache=cache)
    else:
        result = download_texts(backend, paths, cache=cache)
    assert result.missing == {"/missing.md"}
    return dict(result.texts)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name, text in (("AGENTS.md", "agents v1"), ("MEMORY.md", "memory v1")):
        (tmp_path / name).write_text(text)
        age(tmp_path / name)
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
