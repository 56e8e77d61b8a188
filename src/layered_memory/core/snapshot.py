"""Read-only memory as it was when the run started: the run-start snapshot.

During a run, read-only memory is what the user had when the run started, taken once at the
start and never again from disk mid-run:

- the read-only files the run loads anyway (layers, rule files, nested files and imports of
  the folders already touched): their texts are in the run's state;
- the read-only paths it looked for and did not find, and those it could not read;
- the nested memory files of the folders not touched yet, and what they import: a digest of
  each, found by one bounded walk of the tree and read through the loader's own disk cache
  (`RunStart.digests`; their texts are not kept: state stays small);
- the other files of the read-only rule folders (the user's own, never removed), and on disk
  the identity of each rule folder and of the folders above it (a folder moved away and
  replaced by another or by a symlink is told from the one the run started with), and the
  permission bits of the read-only files and folders (`disk_modes`).

A mid-run load is pinned to it (`Pinned`): a read-only file's text comes from the snapshot,
and a nested or imported file loaded for the first time must match its digest, or it is left
out with a problem naming it. The guard compares the disk with the same snapshot after every
shell command and `task` call (`core.put_back`); what it could not put back is recorded for
later runs (`core.unrestored`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import disk_path
from layered_memory.core.internals import final_route
from layered_memory.core.loading import (
    Discovered,
    DownloadResult,
    SourceProblem,
)

# The guard's `disk_path(backend, path)` (a path as the backend's tools read it), beside the
# loader's `disk_path(root, key, virtual=)` (a path as the loader keys it).
from layered_memory.core.unrestored import fingerprint

logger = get_logger(__name__)

# -- the run-start snapshot -----------------------------------------------------------------------

MAX_WALK_ENTRIES = 20_000
"""Files and folders the walk for nested memory files looks at. A nested file beyond it has
no digest, so a mid-run load leaves it out (a bound must refuse, never answer "nothing
there"), and the guard removes no file it did not see at the start."""

SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})
"""Folders the walk does not enter (nor dot folders): no memory lives there, and a mid-run
load leaves a nested file found there out, as beyond the bound."""

CHANGED = "changed since the run started: left out (read-only memory is what it was then)"
UNKNOWN = (
    "not in the run-start snapshot (created during the run, or in a folder the snapshot does "
    f"not cover: dot folders, {', '.join(sorted(SKIPPED_FOLDERS))}, past "
    f"{MAX_WALK_ENTRIES:,} entries): left out"
)

Download = Callable[[list[str]], DownloadResult]
AsyncDownload = Callable[[list[str]], Awaitable[DownloadResult]]


def text_digest(text: str) -> str:
    """The digest a snapshot keeps of a text it does not keep (the record of unrestored
    memory keeps the same)."""
    return fingerprint(text)


@dataclass(frozen=True, slots=True)
class RunStart:
    """The run-start snapshot, as the state keeps it and the guard and pinned loads read it.

    Attributes:
        texts: Read-only files the run loaded: path -> text.
        absent: Read-only paths the run looked for and did not find.
        left_out: Read-only paths that existed but were not used (unreadable, or left out
            since an earlier run): path -> reason. Never restored, never removed.
        digests: Nested and imported read-only files not loaded: path -> `text_digest`.
        rules: The rule listing, `(folder index, path)`; None when rules are writable.
        rule_folders: The read-only rule folders.
        others: Other files of the read-only rule folders; None when not known.
        folders: On disk, each read-only rule folder and the folders above it inside the
            root: disk path -> `[device, inode, link text or ""]`.
        complete: The walk saw every nested file (the guard may remove ones it finds new).
        nested: The nested memory file names.
        unlisted: Read-only rule folders listed only in part at the start (an error, a
            listing cut short): the guard removes nothing there.
        layer_folders: Read-only folder layers: their files are those in `texts` and
            `left_out` (a mid-run load does not list them again); a file planted in one
            during the run is taken back, as a planted rule file is.
        modes: On disk, the permission bits of the read-only files and folders (layer files
            and folders, rule files and folders, and the folders above them inside the root):
            disk path -> mode. A `chmod 000` of one is put back like its text.
    """

    texts: Mapping[str, str] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()
    left_out: Mapping[str, str] = field(default_factory=dict)
    digests: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[tuple[int, str], ...] | None = None
    rule_folders: tuple[str, ...] = ()
    others: frozenset[str] | None = None
    folders: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    complete: bool = False
    nested: tuple[str, ...] = ()
    unlisted: frozenset[str] = frozenset()
    layer_folders: frozenset[str] = frozenset()
    modes: Mapping[str, int] = field(default_factory=dict)

    def knows(self, path: str) -> bool:
        """Whether the snapshot says anything about `path`."""
        return (
            path in self.texts
            or path in self.absent
            or path in self.left_out
            or path in self.digests
        )


@dataclass(frozen=True, slots=True)
class Pinned:
    """A mid-run load held to the run-start snapshot (see the module docstring)."""

    start: RunStart

    def download(self, download: Download) -> Download:
        """`download`, answering read-only paths from the snapshot without any I/O."""

        def pinned(paths: list[str]) -> DownloadResult:
            known, rest = self._split(paths)
            return self._merge(paths, known, download(rest) if rest else DownloadResult({}))

        return pinned

    def adownload(self, download: AsyncDownload) -> AsyncDownload:
        """Async twin of `download`."""

        async def pinned(paths: list[str]) -> DownloadResult:
            known, rest = self._split(paths)
            fetched = await download(rest) if rest else DownloadResult({})
            return self._merge(paths, known, fetched)

        return pinned

    def _split(self, paths: Sequence[str]) -> tuple[DownloadResult, list[str]]:
        start = self.start
        texts = {path: start.texts[path] for path in paths if path in start.texts}
        missing = frozenset(path for path in paths if path in start.absent)
        problems = tuple(
            SourceProblem(path, start.left_out[path], unreadable=True)
            for path in paths
            if path in start.left_out and path not in texts
        )
        known = DownloadResult(texts, missing, problems)
        done = texts.keys() | missing | {problem.path for problem in problems}
        return known, [path for path in paths if path not in done]

    @staticmethod
    def _merge(
        paths: Sequence[str], known: DownloadResult, fetched: DownloadResult
    ) -> DownloadResult:
        texts = {**known.texts, **fetched.texts}
        return DownloadResult(
            {path: texts[path] for path in paths if path in texts},
            known.missing | fetched.missing,
            (*known.problems, *fetched.problems),
        )

    def verified(self, found: Discovered) -> Discovered:
        """`found` without the read-only nested and imported files that are not as the run
        started (each becomes a problem naming it)."""
        start = self.start
        dropped: dict[str, str] = {}
        extras = found.extras
        for kind in (extras.nested, extras.imports):
            for path, text in kind.items():
                if extras.access.get(path) != "read-only" or path in start.texts:
                    continue
                digest = start.digests.get(path)
                if digest is None:
                    if start.nested:  # else no snapshot covers files loaded later (no nested)
                        dropped[path] = UNKNOWN
                elif text_digest(text) != digest:
                    dropped[path] = CHANGED
        if not dropped:
            return found
        return replace(
            found,
            extras=extras.without(dropped),
            problems=(
                *found.problems,
                *(SourceProblem(path, why, unreadable=True) for path, why in dropped.items()),
            ),
        )


# -- what the snapshot looks at on disk -------------------------------------------------------


def local_root(backend: Any) -> FilesystemBackend | None:
    """The `FilesystemBackend` holding the tree (`/` through composite routes), if any."""
    target, _key = final_route(backend, "/")
    return target if isinstance(target, FilesystemBackend) else None


def walk_nested(backend: Any, names: Sequence[str], root: str) -> tuple[list[str], bool]:
    """Every nested memory file of the tree (backend paths, each folder's first name that
    exists) and whether the walk saw all of it."""
    disk = local_root(backend)
    if disk is not None and backend is disk:
        return _walk_disk(disk, names)
    found: dict[str, list[str]] = {}
    complete = True
    for name in names:
        try:
            listing = backend.glob(f"**/{name}", path=root)
        except Exception:  # a listing failure: nothing is known, so nothing is trusted
            return [], False
        if getattr(listing, "error", None) or getattr(listing, "truncated", False):
            complete = False
        for info in getattr(listing, "matches", None) or []:
            path = str(info.get("path", ""))
            if not info.get("is_dir") and os.path.basename(path) == name:
                found.setdefault(os.path.dirname(path), []).append(path)
    order = {name: index for index, name in enumerate(names)}
    firsts = [min(paths, key=lambda p: order[os.path.basename(p)]) for paths in found.values()]
    return sorted(firsts), complete


def _walk_disk(backend: FilesystemBackend, names: Sequence[str]) -> tuple[list[str], bool]:
    wanted = set(names)
    order = {name: index for index, name in enumerate(names)}
    found: list[str] = []
    folders, complete = scan(
        str(backend.cwd),
        lambda entry: entry.name[0] != "." and entry.name not in SKIPPED_FOLDERS,
        limit=MAX_WALK_ENTRIES,
    )
    for folder, entries in folders:
        here = [entry.name for entry in entries if entry.name in wanted]
        if here:
            first = min(here, key=order.__getitem__)
            found.append(as_backend_path(backend, os.path.join(folder, first)))
    return sorted(found), complete


def scan(
    top: str, enter: Callable[[os.DirEntry[str]], bool], *, limit: int | None = None
) -> tuple[list[tuple[str, list[os.DirEntry[str]]]], bool]:
    """Each folder below `top` (itself included) with its entries, and whether the walk saw
    them all. Links to folders are never followed; `enter` chooses the subfolders to enter.

    Args:
        top: Where to start (a missing one, or a file, gives nothing).
        enter: Whether to walk into a subfolder.
        limit: Entries to look at, at most; past it the walk stops and says it is partial.
    """
    folders: list[tuple[str, list[os.DirEntry[str]]]] = []
    seen = 0
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue  # missing, not a folder, or unreadable: nothing is there to see
        seen += len(entries)
        if limit is not None and seen > limit:
            return folders, False
        folders.append((folder, entries))
        pending.extend(
            entry.path for entry in entries if entry.is_dir(follow_symlinks=False) and enter(entry)
        )
    return folders, True


def as_backend_path(backend: FilesystemBackend, disk: str) -> str:
    """The backend path of a file on a `FilesystemBackend`'s disk."""
    if not backend.virtual_mode:
        return disk
    return "/" + os.path.relpath(disk, str(backend.cwd)).replace(os.sep, "/")


def folder_chains(backend: Any, folders: Sequence[str]) -> list[str]:
    """Each folder on local disk and the folders above it inside the backend's root, top
    down (disk paths): the folders whose identity a run-start snapshot keeps."""
    disk = local_root(backend)
    if disk is None or not folders:
        return []
    root = os.path.normpath(str(disk.cwd))
    found: dict[str, None] = {}
    for folder in folders:
        target, key = final_route(backend, folder)
        if target is not disk:
            continue
        path = os.path.normpath(disk_path(root, key, virtual=disk.virtual_mode))
        while path.startswith(root + os.sep) and path not in found:
            found[path] = None
            path = os.path.dirname(path)
    return sorted(found, key=len)


def disk_modes(backend: Any, files: Iterable[str], folders: Sequence[str]) -> dict[str, int]:
    """The permission bits of `files` and `folders` on local disk and of the folders above
    the folders inside the backend's root (links are not followed, nor recorded): disk path
    -> mode. Backend paths not on local disk are left out."""
    disk = local_root(backend)
    if disk is None:
        return {}
    root = os.path.normpath(str(disk.cwd))
    places = list(folder_chains(backend, folders))
    for path in files:
        target, key = final_route(backend, path)
        if target is disk:
            places.append(os.path.normpath(disk_path(root, key, virtual=disk.virtual_mode)))
    return modes_at(places)


def modes_at(places: Iterable[str]) -> dict[str, int]:
    """The permission bits of the disk paths `places` that exist and are not links: disk path
    -> mode (`disk_modes` once the places are known)."""
    modes: dict[str, int] = {}
    for place in places:
        try:
            info = os.lstat(place)
        except (OSError, ValueError):
            continue  # absent: its presence is the snapshot's other business
        if not stat.S_ISLNK(info.st_mode):
            modes[place] = stat.S_IMODE(info.st_mode)
    return modes


def identity_of(path: str) -> list[Any] | None:
    """`[device, inode, link text or ""]` of what `path` names on disk now (links not
    followed), or None when nothing is there."""
    try:
        info = os.lstat(path)
        link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    except (OSError, ValueError):
        return None
    return [info.st_dev, info.st_ino, link]
