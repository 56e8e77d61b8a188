"""Reading a graph file through its backend without parsing the same content twice.

Parsed snapshots are cached by content digest, shared by the process, so a cache hit is by
definition the content just read: it can never be stale. The cache is bounded by the total size
of the files it holds (`SNAPSHOT_CACHE_BYTES`), not by a count, so an agent per user, each
with its own graph file, keeps every current version parsed; a version a write replaced is the
first to go. What a read still costs depends on the backend:

- a file on local disk (`FilesystemBackend`, also behind a `CompositeBackend` route) is first
  `lstat`ed: while its signature (mtime, ctime, size, inode, device) matches the one its
  content was last read under, the file is not read again. As git does with "racily clean"
  entries, a signature taken within `RACY_WINDOW_NS` of a write is not trusted.
- any other backend downloads the file; only hashing it is repeated, never parsing.

Memory stays bounded: a file over `max_bytes` is refused before it is read (on local disk) or
right after (elsewhere), with an error naming the file, its size and the limit.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import FILE_NOT_FOUND, BackendProtocol

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import RACY_WINDOW_NS, disk_path, now_ns
from layered_memory.core.internals import final_route
from layered_memory.errors import KnowledgeGraphError
from layered_memory.graph._format import GraphSnapshot, digest_of, parse

logger = get_logger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Largest graph file read (64 MiB: a few hundred thousand entities)."""

SNAPSHOT_CACHE_BYTES = 64 * 1024 * 1024
"""Total size (as file bytes) of the parsed versions kept per process. A parsed, indexed
snapshot takes about 6 times its file size in memory. The version used last is always kept,
even alone over this bound, so a file up to `max_bytes` is never parsed twice in a row."""

EMPTY_DIGEST = digest_of(b"")

Signature = tuple[int, int, int, int, int]

_SIGNATURES_KEEP = 4096


class _Snapshots:
    """Parsed versions by digest, least recently used first, with their files' total size."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[GraphSnapshot, int]] = OrderedDict()
        self.total_bytes = 0


_lock = threading.Lock()
_snapshots = _Snapshots()
_signatures: OrderedDict[str, tuple[Signature, str]] = OrderedDict()
_warned: OrderedDict[tuple[str, int], None] = OrderedDict()
_WARNED_KEEP = 256


def cached(digest: str) -> GraphSnapshot | None:
    """The parsed snapshot of `digest`, if this process still has it."""
    with _lock:
        found = _snapshots.entries.get(digest)
        if found is None:
            return None
        _snapshots.entries.move_to_end(digest)
        return found[0]


def remember(snapshot: GraphSnapshot, size: int, *, replaces: str | None = None) -> None:
    """Keep `snapshot` (of a `size`-byte file) for later readers of the same content.

    Args:
        snapshot: The parsed version.
        size: Its file's size in bytes: what it counts against `SNAPSHOT_CACHE_BYTES`.
        replaces: The digest of the version a write just replaced: it goes first when room
            is needed (a reader still asking for it gets it parsed again, never wrongly).
    """
    with _lock:
        entries = _snapshots.entries
        previous = entries.pop(snapshot.digest, None)
        if previous is not None:
            _snapshots.total_bytes -= previous[1]
        entries[snapshot.digest] = (snapshot, size)
        _snapshots.total_bytes += size
        if replaces is not None and replaces != snapshot.digest and replaces in entries:
            entries.move_to_end(replaces, last=False)
        while _snapshots.total_bytes > SNAPSHOT_CACHE_BYTES and len(entries) > 1:
            _digest, (_snapshot, evicted) = entries.popitem(last=False)
            _snapshots.total_bytes -= evicted


def clear_caches() -> None:
    """Forget every parsed snapshot and stat signature (benchmarks of a cold process)."""
    with _lock:
        _snapshots.entries.clear()
        _snapshots.total_bytes = 0
        _signatures.clear()


def snapshot_of_text(text: str | None, path: str, *, max_bytes: int) -> GraphSnapshot:
    """The snapshot of a file's text (None: no file), parsed only if not cached.

    Raises:
        KnowledgeGraphError: The text is over `max_bytes` (as UTF-8).
    """
    if text is None or not text:
        return snapshot_of_bytes(b"", path, text="")
    data = text.encode("utf-8")
    check_size(path, len(data), max_bytes)
    return snapshot_of_bytes(data, path, text=text)


def snapshot_of_bytes(
    data: bytes, path: str, *, text: str | None = None, digest: str | None = None
) -> GraphSnapshot:
    """The snapshot of a file's bytes, parsed only if not cached; warns about unknown lines."""
    digest = digest or digest_of(data)
    found = cached(digest)
    if found is not None:
        return found
    if text is None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Readable anyway (as the server reads it); a write refuses to touch the file.
            logger.warning(
                "knowledge graph %s is not valid UTF-8 (%s); reading it with replacement "
                "characters, and writes will refuse to change it until it is fixed",
                path,
                exc.reason,
            )
            text = data.decode("utf-8", errors="replace")
    snapshot = parse(text, digest)
    if snapshot.unknown:
        _warn_unknown(path, snapshot)
    remember(snapshot, len(data))
    return snapshot


def _warn_unknown(path: str, snapshot: GraphSnapshot) -> None:
    # One warning per file and set of unknown lines, however often the file is rewritten.
    unknown = snapshot.unknown
    key = (path, hash(unknown))
    with _lock:
        if key in _warned:
            return
        _warned[key] = None
        while len(_warned) > _WARNED_KEEP:
            _warned.popitem(last=False)
    # Line numbers, never the lines: they may hold anything.
    where = ", ".join(map(str, snapshot.unknown_lines))
    if len(unknown) > len(snapshot.unknown_lines):
        where += ", ..."
    logger.warning(
        "knowledge graph %s has %d line(s) that are not entities or relations of the MCP "
        "memory format (another type, or malformed JSON), at line %s; they are kept unchanged "
        "after the relations on every write",
        path,
        len(unknown),
        where,
    )


@dataclass(frozen=True, slots=True)
class LocalFile:
    """Where a backend path lives on local disk."""

    real_path: str


def local_file(backend: BackendProtocol, path: str) -> LocalFile | None:
    """The local file behind `path` when it is on a `FilesystemBackend` (else None)."""
    target, key = final_route(backend, path)
    if not isinstance(target, FilesystemBackend):
        return None
    return LocalFile(disk_path(str(target.cwd), key, virtual=target.virtual_mode))


def check_size(path: str, size: int, max_bytes: int) -> None:
    """Refuse a file too large to parse within bounded memory."""
    if size > max_bytes:
        msg = (
            f"file is {size:,} bytes, over max_bytes={max_bytes:,}; split the graph or raise "
            "max_bytes"
        )
        raise KnowledgeGraphError(path, msg)


def local_size(local: LocalFile | None) -> int | None:
    """The size of a local file (None: not local, or not there)."""
    if local is None:
        return None
    try:
        return os.stat(local.real_path).st_size
    except OSError:
        return None


def _signature(real_path: str) -> Signature | None:
    try:
        info = os.lstat(real_path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None  # a symlink or device always goes through the backend and its checks
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


def unchanged_local(local: LocalFile | None) -> GraphSnapshot | None:
    """The cached snapshot of a local file whose stat signature has not changed."""
    if local is None:
        return None
    signature = _signature(local.real_path)
    with _lock:
        entry = _signatures.get(local.real_path)
    if signature is None or entry is None or entry[0] != signature:
        return None
    return cached(entry[1])


def changed_since(local: LocalFile | None, digest: str | None) -> bool:
    """Whether a local file's stat signature shows content other than `digest` (one `lstat`).

    False when it cannot tell: not local, not a regular file, or last read within the racy
    window (those are read again at the next run, or after a tool that may have changed them).
    """
    if local is None or digest is None:
        return False  # not local, or unreadable at the last load (retried at the next run)
    signature = _signature(local.real_path)
    if signature is None:
        # Gone (a missing file reads as empty), or a symlink or device: not judged by stat.
        missing = not os.path.lexists(local.real_path)
        return missing and digest != EMPTY_DIGEST
    with _lock:
        entry = _signatures.get(local.real_path)
    if entry is None:
        return False
    return entry[0] != signature or entry[1] != digest


def before_read(local: LocalFile | None) -> tuple[Signature | None, int]:
    """The signature to file a read under, taken before the read (a racing write shows)."""
    if local is None:
        return None, 0
    return _signature(local.real_path), now_ns()


def after_read(
    local: LocalFile | None, signature: Signature | None, started_ns: int, digest: str
) -> None:
    """Remember which content a local file's signature stands for, when it can be trusted."""
    if local is None:
        return
    with _lock:
        if signature is not None and started_ns - signature[0] > RACY_WINDOW_NS:
            _signatures[local.real_path] = (signature, digest)
            _signatures.move_to_end(local.real_path)
            while len(_signatures) > _SIGNATURES_KEEP:
                _signatures.popitem(last=False)
        else:
            _signatures.pop(local.real_path, None)


def download_response(path: str, responses: Sequence[Any], max_bytes: int) -> bytes | None:
    """The bytes of a one-file download (None: no such file); errors raise."""
    response = responses[0]
    if response.error == FILE_NOT_FOUND:
        return None
    if response.error is not None or response.content is None:
        raise KnowledgeGraphError(path, f"cannot read: {response.error}")
    data: bytes = response.content
    check_size(path, len(data), max_bytes)
    return data
