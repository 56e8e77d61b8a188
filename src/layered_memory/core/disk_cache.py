"""The read cache of local disk: memory files that have not changed are not read again.

Skip re-reading memory files on local disk that have not changed since the last read.

The middleware reloads memory at every invocation so that edits made on disk are seen. On a
`FilesystemBackend` most invocations find nothing changed, so instead of downloading every file
again, each file's stat signature (mtime, ctime, size, inode, device) is compared with the one
seen when it was last read; only changed or unknown files go to the backend.

A timestamp is only as fine as the filesystem's clock tick, so a file written twice within one
tick, with the same size, keeps its signature. As git does with its "racily clean" entries, a
file whose mtime is within `RACY_WINDOW_NS` of the moment we read it is not trusted: it is read
again next time. Only regular files are cached (a symlink always goes to the backend, which
applies its own root checks), and every read of a changed file still goes through the backend.

`non_regular_files` finds FIFOs, sockets and devices before anything opens them: opening a FIFO
for reading waits for a writer, forever if none comes, and a device may never end.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layered_memory._logs import get_logger
from layered_memory.core.internals import final_route, is_backend_class

if TYPE_CHECKING:
    from deepagents.backends.filesystem import FilesystemBackend


logger = get_logger(__name__)

RACY_WINDOW_NS = 2_000_000_000
"""Files modified this close to our read are re-read next time (coarse filesystem clocks)."""

_MISSING = "missing"

Signature = tuple[int, int, int, int, int]

_MAX_REMEMBERED_PATHS = 16_384

_FILE_TYPE_BITS = 0o170000
"""`stat.S_IFMT`'s mask, applied inline where a call per file shows in the benchmarks."""

_PERMISSION_BITS = 0o7777
"""What `stat.S_IMODE` keeps, applied inline likewise."""


@dataclass(frozen=True, slots=True)
class _Entry:
    signature: Signature | str | None
    text: str | None


class DiskReadCache:
    """Remembers texts read from one `FilesystemBackend`, keyed by backend path."""

    def __init__(self, backend: FilesystemBackend) -> None:
        self._root = str(backend.cwd)
        self._virtual = backend.virtual_mode
        self._entries: dict[str, _Entry] = {}
        # Backend path -> (its disk path, that path normalized as the run-start snapshot keys
        # permission bits): worked out once per path.
        self._disk_paths: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def reusable(
        self, plan: Mapping[str, str]
    ) -> tuple[
        dict[str, str], set[str], dict[str, Signature | str | None], dict[str, tuple[str, int]]
    ]:
        """What need not be downloaded again, and the signatures of what must be.

        Returns:
            `(texts, missing, to_read, modes)`: still-valid texts and still-missing paths (by
            requested path), for every other requested path its signature taken now,
            BEFORE the download, so a change racing with the download is seen next time, and
            the permission bits of each path found that is not a link (requested path ->
            `(normalized disk path, mode)`, as `core.snapshot.disk_modes` gives them): the
            run-start snapshot takes them from this one `lstat`, not a second one per file.
        """
        texts: dict[str, str] = {}
        missing: set[str] = set()
        to_read: dict[str, Signature | str | None] = {}
        modes: dict[str, tuple[str, int]] = {}
        # Read without the lock: `remember` replaces whole immutable entries, and one dict
        # lookup is atomic, so each entry read is one that was stored.
        entries = self._entries
        disk_paths = self._disk_paths
        for path, backend_path in plan.items():
            # This loop runs for every memory and rule file at every load: no call per file
            # but the one system call (the disk path is remembered, the stat inlined).
            try:
                entry: _Entry | None = entries[backend_path]
            except KeyError:
                entry = None
            if backend_path in disk_paths:
                real, place = disk_paths[backend_path]
            else:
                if len(disk_paths) >= _MAX_REMEMBERED_PATHS:  # nested lookups grow it
                    disk_paths.clear()
                real = self._real(backend_path)
                place = os.path.normpath(real)
                disk_paths[backend_path] = (real, place)
            try:
                info = os.lstat(real)
            except FileNotFoundError:
                signature: Signature | str | None = _MISSING
            except (OSError, ValueError):
                signature = None
            else:
                if info.st_mode & _FILE_TYPE_BITS != stat.S_IFLNK:
                    modes[path] = (place, info.st_mode & _PERMISSION_BITS)
                signature = (
                    (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)
                    if info.st_mode & _FILE_TYPE_BITS == stat.S_IFREG
                    else None
                )
            if entry is None or signature is None or entry.signature != signature:
                to_read[path] = signature
            elif entry.text is None:
                missing.add(path)
            else:
                texts[path] = entry.text
        return texts, missing, to_read, modes

    def remember(
        self,
        plan: Mapping[str, str],
        signatures: Mapping[str, Signature | str | None],
        texts: Mapping[str, str],
        missing: set[str] | frozenset[str],
        read_started_ns: int,
    ) -> None:
        """Record what a download returned, under the signatures taken before it."""
        updates: dict[str, _Entry | None] = {}
        for path, signature in signatures.items():
            backend_path = plan[path]
            known = path in texts or path in missing
            trusted = signature == _MISSING or (
                isinstance(signature, tuple) and read_started_ns - signature[0] > RACY_WINDOW_NS
            )
            updates[backend_path] = (
                _Entry(signature, texts.get(path)) if known and trusted else None
            )
        with self._lock:
            if len(self._entries) + len(updates) > _MAX_REMEMBERED_PATHS:
                self._entries.clear()  # bounded: a folder whose agents read ever new files
            for backend_path, entry in updates.items():
                if entry is None:
                    self._entries.pop(backend_path, None)
                else:
                    self._entries[backend_path] = entry

    def _real(self, backend_path: str) -> str:
        return disk_path(self._root, backend_path, virtual=self._virtual)


def disk_path(root: str, backend_path: str, *, virtual: bool) -> str:
    """Where a backend path lives on disk (plain strings: this runs for every file, every time)."""
    if virtual or not os.path.isabs(backend_path):
        return os.path.join(root, backend_path.lstrip("/"))
    return backend_path


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_file_kind(path: str) -> str | None:
    """What `path` on disk is when it is a FIFO, a socket or a device (symlinks followed).

    None for a regular file, a folder, a missing or unreachable path: the backend reports
    those itself, and none of them blocks a read.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _SPECIAL_KINDS:
        if test(mode):
            return kind
    return None


def non_regular_files(backend: Any, paths: Iterable[str]) -> dict[str, str]:
    """The backend paths that name a FIFO, socket or device on local disk, with what each is.

    Looks through a `FilesystemBackend`, directly or behind a `CompositeBackend` route; other
    backends hold no such files and cost nothing here.
    """
    found: dict[str, str] = {}
    for path, on_disk in _local_disk_paths(backend, paths):
        kind = special_file_kind(on_disk)
        if kind is not None:
            found[path] = kind
    return found


def oversized_files(backend: Any, paths: Iterable[str], limit: int) -> dict[str, int]:
    """The backend paths that name a local file of more than `limit` bytes, with its size.

    Checked before a download, so a 2 GB file in a rule folder costs one `stat`, not a read
    of 2 GB into memory at every load (same routes as `non_regular_files`).
    """
    found: dict[str, int] = {}
    for path, on_disk in _local_disk_paths(backend, paths):
        try:
            size = os.stat(on_disk).st_size
        except (OSError, ValueError):
            continue  # missing or unreachable: the backend says so itself
        if size > limit:
            found[path] = size
    return found


def _local_disk_paths(backend: Any, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(backend path, disk path) of the paths a `FilesystemBackend` serves, directly or behind a
    `CompositeBackend` route; other backends hold nothing on local disk."""
    if not (
        is_backend_class(backend, "FilesystemBackend")
        or is_backend_class(backend, "CompositeBackend")
    ):
        return
    for path in paths:
        target, key = final_route(backend, path)
        if is_backend_class(target, "FilesystemBackend"):
            yield path, disk_path(str(target.cwd), key, virtual=target.virtual_mode)


_clock: Callable[[], int] = time.time_ns
"""Where `now_ns` reads the time: tests move it ahead instead of backdating files."""


def now_ns() -> int:
    """Wall-clock time in the unit of `st_mtime_ns` (the read starts before the stat)."""
    return _clock()


def _signature(path: str) -> Signature | str | None:
    """A regular file's stat signature, `"missing"`, or None (anything else: not cacheable)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return _MISSING
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


DirSignatures = dict[str, Signature | str]


class ListingCache:
    """Remembers the rule-folder listing of one `FilesystemBackend` while no folder changed.

    Adding, removing or renaming a file changes the mtime of the directory holding it, so the
    listing stands as long as every directory under the rule folders keeps its signature.
    The signatures are taken before the listing, and a directory changed within the racy window
    is not trusted. A folder holding a symlink to a directory is never cached (its target's
    changes would not show in our signatures).
    """

    def __init__(self, backend: FilesystemBackend, folders: Sequence[str]) -> None:
        self._tops = tuple(
            disk_path(str(backend.cwd), folder, virtual=backend.virtual_mode) for folder in folders
        )
        self._lock = threading.Lock()
        self._entry: tuple[DirSignatures, Any] | None = None

    def signatures(self) -> DirSignatures | None:
        """Every directory under the rule folders, with its signature (None: uncacheable).

        While a listing is remembered, its directories are stat'ed again instead of walked: a
        directory created, removed or swapped for a link below one of them changes that
        one's signature, so equal signatures mean the same set of directories (one system
        call per directory instead of one per entry).
        """
        with self._lock:
            entry = self._entry
        if entry is not None:
            known = entry[0]
            again = {path: _dir_signature_or_missing(path, old) for path, old in known.items()}
            if again == known:
                return known
        return self._walk()

    def _walk(self) -> DirSignatures | None:
        found: DirSignatures = {}
        for top in self._tops:
            if not os.path.lexists(top):
                found[top] = _MISSING
                continue
            for dirpath, dirnames, _ in os.walk(top, followlinks=False):
                if any(os.path.islink(os.path.join(dirpath, name)) for name in dirnames):
                    return None
                signature = _dir_signature(dirpath)
                if signature is None:
                    return None
                found[dirpath] = signature
        return found

    def get(self, current: DirSignatures | None) -> Any | None:
        """The remembered listing, if `current` signatures match the ones it was taken under."""
        with self._lock:
            entry = self._entry
        if current is None or entry is None or entry[0] != current:
            return None
        return entry[1]

    def put(self, taken: DirSignatures | None, listing: Any, read_started_ns: int) -> None:
        """Remember `listing`, listed after `taken` was measured, if those can be trusted."""
        trusted = taken is not None and all(
            signature == _MISSING
            or (isinstance(signature, tuple) and read_started_ns - signature[0] > RACY_WINDOW_NS)
            for signature in taken.values()
        )
        with self._lock:
            self._entry = (taken, listing) if trusted and taken is not None else None


def _dir_signature_or_missing(path: str, before: Signature | str) -> Signature | str | None:
    if before == _MISSING:
        return _MISSING if not os.path.lexists(path) else None
    return _dir_signature(path)


def _dir_signature(path: str) -> Signature | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


MAX_SHARED_FOLDERS = 64
"""Disk folders whose caches the process keeps (a server with a folder per user would
otherwise keep every folder it ever served); the least recently asked for goes first. An
agent keeps the caches it was built with."""

_registry_lock = threading.Lock()
_read_caches: OrderedDict[tuple[str, bool], DiskReadCache] = OrderedDict()
_listing_caches: OrderedDict[tuple[str, bool, tuple[str, ...]], ListingCache] = OrderedDict()


def read_cache_for(backend: FilesystemBackend) -> DiskReadCache:
    """The process-wide read cache of one folder on disk (shared by every agent using it).

    Servers often build an agent per request; keyed by the disk folder, not the backend
    object, a new agent finds the files its predecessors already read.
    """
    key = (str(backend.cwd), backend.virtual_mode)
    with _registry_lock:
        cache = _read_caches.get(key)
        if cache is None:
            cache = _read_caches[key] = DiskReadCache(backend)
            if len(_read_caches) > MAX_SHARED_FOLDERS:
                _read_caches.popitem(last=False)
        else:
            _read_caches.move_to_end(key)
        return cache


def listing_cache_for(backend: FilesystemBackend, folders: Sequence[str]) -> ListingCache:
    """The process-wide listing cache of some rule folders on disk."""
    key = (str(backend.cwd), backend.virtual_mode, tuple(folders))
    with _registry_lock:
        cache = _listing_caches.get(key)
        if cache is None:
            cache = _listing_caches[key] = ListingCache(backend, folders)
            if len(_listing_caches) > MAX_SHARED_FOLDERS:
                _listing_caches.popitem(last=False)
        else:
            _listing_caches.move_to_end(key)
        return cache


def clear_shared_caches() -> None:
    """Forget every process-wide disk cache (benchmarks measuring a cold start use it)."""
    with _registry_lock:
        _read_caches.clear()
        _listing_caches.clear()
