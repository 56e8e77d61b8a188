"""Locked, atomic writes of memory files: the one way the package changes a memory file.

Every route that writes a memory file goes through this module: the protected backend's
`write` / `edit` / `upload_files` (what the agent's file tools and subagents call), write-back
(`MemoryWriter`), the knowledge graph (`KnowledgeGraph`), and later consolidation. It lives in
`core`, as a public module, because each of those lives in another subpackage and a private
`_module` is imported only inside its own subpackage; `core` is below all of them. (The file
session store and `layered-memory sync` take its atomic replace, `atomic_write`, alone: their
files are not shared with the agent's tools.)

## The rule

A write is a *transaction*: under the file's lock, read the files, hand their texts to a pure
`transform`, write the files it changed, each replaced atomically. So

- every writer re-reads under the lock: nothing another writer acknowledged is overwritten
  with an older copy (N writers and M editors in separate processes lose nothing);
- nobody reads a half-written file: a file is replaced by a rename, never truncated and
  rewritten in place (deepagents' own `edit` and `write` do that on a `FilesystemBackend`,
  which is why the protected view does not call them for memory files);
- a transform is pure, so a strategy could run it again (compare-and-swap) if one needed to.

Call `transact(backend, paths, transform)` (or `atransact`) for one transaction; a writer that
writes many times builds `strategy_for(backend, paths)` once. The first path names the lock:
put the memory file first, then what else the transaction writes (its archive).

## Whole-file writes and write-back

Write-back re-reads under the lock, so an insight added after an agent's `write_file` lands on
the agent's new text, and one added before an `edit_file` is kept by the edit. A whole-file
write replaces the file: the last writer wins, as the tool promises, except that it never
removes a dated insight entry (`- YYYY-MM-DD: ...`, see `INSIGHT_ENTRY`) or a learned entry
(a bullet ending in `<!-- learned id=... -->`, see `learned_entry`) silently. Such an entry may
have been written by write-back or consolidation after the agent last read the file, so the
write is refused with a message naming the entry; the agent reads the file again, or removes
entries on purpose with `edit_file`.

## Strategies, by where the first path lands (`strategy_for`)

- `FileLockStrategy` (a `FilesystemBackend`, also behind `CompositeBackend` routes): an
  exclusive lock (`filelock`: `flock` on POSIX, `msvcrt` on Windows) on a hidden lock file
  beside the memory file serializes writers across processes; each file is replaced by
  `atomic_write` (temporary file in the same folder, fsync, rename, fsync the folder), so a
  crash leaves the old or the new file, never a truncated one. Each file is a `DiskTarget`,
  pinned to its real folder when the strategy is built and checked again before each step: a
  symlink swapped in since (an agent with a shell) makes the write fail, never land elsewhere.
- `PostgresStoreLockStrategy` (a `StoreBackend` over langgraph's `PostgresStore` or
  `AsyncPostgresStore`): one SQL transaction on the store's own connection that first takes
  `pg_advisory_xact_lock` on a stable 64-bit hash of the row's namespace and key, then reads,
  transforms and upserts the rows. Chosen over a compare-and-swap because a write-back touches
  two rows and the first insight creates rows that do not exist yet (nothing to compare); both
  rows commit together, and a dead worker's lock goes with its connection. Writers in every
  process and host that share the database are serialized.
- `InProcessLockStrategy` (anything else): a lock per backend and path inside this process,
  then `download_files` / `upload_files`. Writers in other processes sharing the same storage
  (another store) are not serialized. A `StateBackend` needs no more: its files live in one
  thread's graph state, written at the end of a graph step through the `files` reducer; the
  view leaves the agent's own tools on it as deepagents wrote them (two tool calls of one turn
  writing one file are refused by deepagents, and by `graph/middleware.py` for the graph).

A protected view (`guard.protect`) given as the backend is read and written past its guard
(its own base backend), after the guard's `refusal` said each path is not read-only memory.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import os
import re
import sys
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol, TypeVar

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    BackendProtocol,
)
from deepagents.backends.store import StoreBackend
from filelock import FileLock, Timeout

from layered_memory.core.disk_cache import disk_path, special_file_kind
from layered_memory.core.internals import (
    STORE_UPSERT_SQL,
    async_store_connection,
    filesystem_path,
    final_route,
    namespace_of,
    store_default_ttl,
    store_of,
    store_prefix,
    store_select_sql,
    sync_store_connection,
)
from layered_memory.core.protection import is_protected, refusal
from layered_memory.errors import MemoryWriteError

if TYPE_CHECKING:
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

__all__ = [
    "INSIGHT_ENTRY",
    "LEARNED_MARK",
    "LOCK_POLL_SECONDS",
    "LOCK_TIMEOUT_SECONDS",
    "DiskTarget",
    "FileLockStrategy",
    "InProcessLockStrategy",
    "PostgresStoreLockStrategy",
    "Texts",
    "Transform",
    "WriteStrategy",
    "atomic_write",
    "atransact",
    "learned_entry",
    "strategy_for",
    "transact",
]

T = TypeVar("T")

Texts = Mapping[str, str | None]
"""Path -> current text (`None`: the file does not exist)."""

Transform = Callable[[Texts], tuple[Mapping[str, str], T]]
"""Pure: current texts -> (path -> new text for each file to write, in write order; result)."""

ReadOnlyCheck = Callable[[], str | None]
"""Why writing a path would change read-only memory (None: it would not)."""

LOCK_TIMEOUT_SECONDS: Final = 30.0
"""How long a writer waits for a file lock: far longer than any write, so a holder still
holding it is stuck or stopped, and the write fails with the lock file named, never hangs."""

LOCK_POLL_SECONDS: Final = 0.002
"""`filelock` polls a held lock; a write takes about a millisecond (its default, 50 ms, made
each contended write wait far longer than the write itself)."""

INSIGHT_ENTRY: Final = re.compile(
    r"^- (?P<date>\d{4}-\d{2}-\d{2}): (?:\[(?P<entity>[^\]\n]*)\] )?(?P<text>.*)$"
)
"""A dated insight line, as write-back writes it (`- 2025-06-01: [acme] text`)."""

LEARNED_MARK: Final = "<!-- learned "
"""How the provenance comment of a learned entry starts."""


def learned_entry(line: str) -> tuple[str, str] | None:
    """`(text, provenance)` of a learned entry line, as consolidation writes it: one bullet,
    its provenance in an HTML comment at its end, which the loader strips before the prompt
    (`- text <!-- learned id=k3f9 date=2025-06-01 -->`); None for any other line.

    Searched from the end rather than with a regex: a lazy pattern rescans the rest of a
    hostile line from every `<!-- learned ` it holds.
    """
    if line[:2] not in _BULLETS:
        return None
    stripped = line.rstrip(" \t\r\n")
    if not stripped.endswith("-->"):
        return None
    start = stripped.rfind(LEARNED_MARK)
    if start < 2:
        return None
    meta = stripped[start + len(LEARNED_MARK) : -3].strip()
    if "<" in meta or ">" in meta:
        return None
    return stripped[2:start].strip(), meta


_BULLETS: Final = frozenset(("- ", "* ", "+ "))


class WriteStrategy(Protocol):
    """Runs read-modify-write transactions on a fixed set of paths of one backend."""

    def transact(self, transform: Transform[T]) -> T:
        """Read, transform and write under the strategy's lock; return the transform's result."""
        ...

    async def atransact(self, transform: Transform[T]) -> T:
        """The async form of `transact`."""
        ...


def transact(backend: BackendProtocol, paths: Sequence[str], transform: Transform[T]) -> T:
    """One locked read-transform-write of `paths` on `backend` (the first path names the lock).

    Raises:
        MemoryWriteError: A file could not be locked, read (not UTF-8 text, a FIFO...) or
            written, or the path is read-only memory; nothing was written.
    """
    return strategy_for(backend, paths).transact(transform)


async def atransact(backend: BackendProtocol, paths: Sequence[str], transform: Transform[T]) -> T:
    """The async form of `transact`."""
    # Building a disk strategy pins its folder (a `realpath`): off the event loop.
    strategy = await asyncio.to_thread(strategy_for, backend, paths)
    return await strategy.atransact(transform)


def strategy_for(
    backend: BackendProtocol, paths: Sequence[str], *, checked: bool = False
) -> WriteStrategy:
    """The write strategy for `paths` on `backend` (see the module docstring).

    Args:
        backend: Where the files live; a protected view is written past its guard, after
            asking it about each path before every write.
        paths: Backend paths of the files a transaction touches; the first names the lock.
        checked: The caller asked the guard already (the view itself): do not ask again.

    Raises:
        MemoryWriteError: A path the `FilesystemBackend` behind it refuses (`..`, out of its
            root).
    """
    base, read_only = _unguarded(backend, paths, checked=checked)
    routed = [final_route(base, path) for path in paths]
    first_target, first_key = routed[0]
    keys = [key for _, key in routed]
    one_target = len({id(target) for target, _ in routed}) == 1
    if one_target and isinstance(first_target, FilesystemBackend):
        return FileLockStrategy(
            [
                DiskTarget.pin(first_target, key, path, read_only=read_only.get(path))
                for path, key in zip(paths, keys, strict=True)
            ]
        )
    if one_target and _is_postgres_store_backend(first_target):
        assert isinstance(first_target, StoreBackend)  # checked just above (for mypy)
        return PostgresStoreLockStrategy(
            first_target, keys, display_paths=list(paths), read_only=read_only
        )
    return InProcessLockStrategy(
        base, list(paths), lock_key=(first_target, first_key), read_only=read_only
    )


def _unguarded(
    backend: BackendProtocol, paths: Sequence[str], *, checked: bool
) -> tuple[BackendProtocol, dict[str, ReadOnlyCheck]]:
    """The backend to do the I/O on, and the guard's question for each path to ask first.

    A protected view's own `write` / `upload_files` would take this module's lock again (it
    routes memory files here): the transaction works on its base backend instead, asking the
    view's `refusal` what the view itself would have asked.
    """
    if not is_protected(backend):
        return backend, {}
    base: BackendProtocol = backend._layered_memory_base  # type: ignore[attr-defined]
    if checked:
        return base, {}
    protected = backend._layered_memory_protected  # type: ignore[attr-defined]

    def check(path: str) -> ReadOnlyCheck:
        return lambda: refusal(backend, protected, "write", path)

    return base, {path: check(path) for path in paths}


def _is_postgres_store_backend(backend: Any) -> bool:
    # A PostgresStore exists only once its module was imported: the extra stays optional.
    if not isinstance(backend, StoreBackend) or "langgraph.store.postgres" not in sys.modules:
        return False
    return is_postgres_store(store_of(backend))


def is_postgres_store(store: object) -> bool:
    """Whether `store` is langgraph's sync or async PostgreSQL store."""
    if "langgraph.store.postgres" not in sys.modules:
        return False
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    return isinstance(store, PostgresStore | AsyncPostgresStore)


def decode_for_rewrite(path: str, data: bytes) -> str:
    """A file's text before a rewrite; a file that is not UTF-8 is never rewritten (its bytes
    would be destroyed)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryWriteError(path, f"not UTF-8 text ({exc.reason})") from exc


def _encoded(path: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no file can hold it
        raise MemoryWriteError(path, f"not encodable as UTF-8 ({exc.reason})") from None


def _refuse_read_only(changes: Mapping[str, str], read_only: Mapping[str, ReadOnlyCheck]) -> None:
    for path in changes:
        check = read_only.get(path)
        reason = check() if check is not None else None
        if reason is not None:
            raise MemoryWriteError(path, f"{reason}, which a memory write never changes")


# --- The atomic replace -------------------------------------------------------------------
# There is no well-kept library for exactly this (a temporary file in the same folder, fsync,
# the file's mode kept, `os.replace`, fsync the folder), so it is written here once.


def _write_all(stream: IO[bytes], data: bytes) -> None:
    """Write `data` to the temporary file (a seam the crash tests replace)."""
    stream.write(data)


def atomic_write(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    durable: bool = True,
    temp_prefix: str | None = None,
) -> None:
    """Replace `path` with `data` so a reader (or a crash) sees the old bytes or the new.

    Args:
        path: The file (its folder is created if missing).
        data: The new content.
        mode: Permission bits for a new file (default: the old file's, else 0o644).
        durable: fsync the file and its folder (a crash keeps the new file, not only a whole
            one); off for caches that can be rebuilt.
        temp_prefix: Name prefix of the temporary file (default `.<name>.`), for callers that
            sweep their own leftovers.

    Raises:
        OSError: The temporary file could not be written or moved into place; the original
            file is untouched and the temporary file removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
    prefix = temp_prefix if temp_prefix is not None else f".{path.name}."
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            _write_all(stream, data)
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    if durable:
        _fsync_directory(path.parent)


def _fsync_directory(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where the filesystem cannot)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(dir_fd)


# --- In-process locks -----------------------------------------------------------------------


class KeyedLock:
    """A thread lock plus one asyncio lock per event loop, for one file.

    Coroutines first queue on their loop's asyncio lock, so at most one coroutine per loop waits
    for the thread lock in a worker thread: waiting never exhausts the default executor that the
    lock holder may itself need.
    """

    def __init__(self) -> None:
        self.thread_lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self.thread_lock:
            yield

    @contextlib.asynccontextmanager
    async def ahold(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        with self._guard:
            loop_lock = self._loop_locks.setdefault(loop, asyncio.Lock())
        async with loop_lock:
            await _acquire_in_thread(self.thread_lock)
            try:
                yield
            finally:
                self.thread_lock.release()


async def _acquire_in_thread(lock: threading.Lock) -> None:
    if lock.acquire(blocking=False):
        return
    waiter = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
    try:
        await asyncio.shield(waiter)
    except asyncio.CancelledError:
        # The worker thread still gets the lock eventually; hand it straight back.
        waiter.add_done_callback(lambda _: lock.release())
        raise


# Weak values: a lock stays registered while a writer (or a strategy that will write) holds a
# reference to it, so everyone in the process gets the same one, and goes once nobody does; a
# server writing many users' files does not keep a lock per file it ever wrote.
_registry_guard = threading.Lock()
_file_locks: weakref.WeakValueDictionary[str, KeyedLock] = weakref.WeakValueDictionary()
_backend_locks: weakref.WeakKeyDictionary[Any, weakref.WeakValueDictionary[str, KeyedLock]] = (
    weakref.WeakKeyDictionary()
)


def _lock_for_file(real_path: str) -> KeyedLock:
    """The process-wide lock of one file on disk."""
    with _registry_guard:
        lock = _file_locks.get(real_path)
        if lock is None:
            lock = _file_locks[real_path] = KeyedLock()
        return lock


def _lock_for_backend(backend: object, key: str) -> KeyedLock:
    """The process-wide lock of one key of one backend (or store) object."""
    with _registry_guard:
        per_backend = _backend_locks.get(backend)
        if per_backend is None:
            per_backend = _backend_locks[backend] = weakref.WeakValueDictionary()
        lock = per_backend.get(key)
        if lock is None:
            lock = per_backend[key] = KeyedLock()
        return lock


# --- Filesystem: a lock file + atomic replace ----------------------------------------------


@dataclass(frozen=True, slots=True)
class DiskTarget:
    """One file a transaction writes, pinned to the real folder it was in when the strategy
    was built, and checked again before the lock file is created, before the file is read and
    before it is replaced.

    A writer is built once (often at startup) and writes later; in between, an agent with a
    shell (`LocalShellBackend`) can put a symlink where the memory file or one of its folders
    was (`ln -sf AGENTS.md MEMORY.md`, `mv memories m.bak && ln -s rules memories`). Following
    it would write into read-only memory, which the next run loads as instructions. So
    `check` refuses (a `MemoryWriteError` naming the file and why; nothing is written) when the
    folder now resolves elsewhere, when the file itself is a symlink, or when the guard says
    the target is read-only. A folder that already was a symlink when the strategy was built
    is the user's own layout and stays allowed, as long as it keeps leading to the same place.

    Left open: a swap in the instant between the last check and the replace (a command the
    agent left running in the background). Closing that would need every step done relative
    to an open folder descriptor, which `atomic_write` does not do.

    Attributes:
        path: The backend path (what errors and logs name).
        disk: The file as the backend names it on disk, no symlink resolved.
        folder: The real path of its folder when the strategy was built.
        read_only: The guard's verdict for this path, when the backend is a protected view.
    """

    path: str
    disk: Path
    folder: Path
    read_only: ReadOnlyCheck | None = None

    @classmethod
    def pin(
        cls,
        backend: FilesystemBackend,
        key: str,
        path: str,
        *,
        read_only: ReadOnlyCheck | None = None,
    ) -> DiskTarget:
        """Pin `key` of `backend` (shown as `path`) to the real folder it is in now.

        Raises:
            MemoryWriteError: The backend refuses the key (`..`, out of its root, a loop).
        """
        try:
            filesystem_path(backend, key)  # the backend's own checks: root, `..`, loops
        except (ValueError, OSError) as exc:
            raise MemoryWriteError(key, f"cannot write here: {exc}") from None
        disk = Path(disk_path(str(backend.cwd), key, virtual=backend.virtual_mode))
        folder = Path(os.path.realpath(disk.parent))
        if backend.virtual_mode and not folder.is_relative_to(backend.cwd):
            # The backend checked where the file leads, not its folder: a symlinked file
            # pointing back into the root would otherwise pin a folder outside it.
            raise MemoryWriteError(key, f"cannot write here: its folder leads out of {backend.cwd}")
        return cls(path=path, disk=disk, folder=folder, read_only=read_only)

    @property
    def pinned(self) -> Path:
        """The file in its pinned folder: the only place this target is ever written."""
        return self.folder / self.disk.name

    @property
    def lock_path(self) -> Path:
        """The lock file guarding this file: a hidden file beside it, never deleted.

        Deleting a lock file would let two writers lock two different inodes, so it stays.
        """
        return self.folder / f".{self.disk.name}.lock"

    def check(self) -> Path:
        """The pinned file, once checked to still be the file the strategy was built for.

        Raises:
            MemoryWriteError: It is not; nothing may be written.
        """
        reason = self._problem()
        if reason is not None:
            raise MemoryWriteError(self.path, f"{reason}; nothing was written")
        return self.pinned

    def check_lock_file(self) -> Path:
        """The lock file, once checked not to be a symlink (an older `filelock` opens it with
        `O_TRUNC`, which would empty the file a planted link points to)."""
        self.check()
        if os.path.islink(self.lock_path):
            raise MemoryWriteError(
                self.path, f"its lock file {self.lock_path} is a symlink; nothing was written"
            )
        return self.lock_path

    def _problem(self) -> str | None:
        now = Path(os.path.realpath(self.disk.parent))
        if now != self.folder:
            return (
                f"its folder now leads to {now}, not to {self.folder} as when the writer was "
                "built (a symlink swapped in); a memory write never follows it"
            )
        if os.path.islink(self.pinned):
            return "it is a symlink; a memory write never writes through one"
        if self.read_only is not None:
            refused = self.read_only()
            if refused is not None:
                return f"{refused}, which a memory write never changes"
        return None


class FileLockStrategy:
    """Cross-process transactions on local files: a lock file + atomic replace."""

    def __init__(self, targets: Sequence[DiskTarget]) -> None:
        self._targets = {target.path: target for target in targets}
        self._display = [target.path for target in targets]
        self._first = targets[0]
        self._local_lock = _lock_for_file(str(self._first.pinned))

    def transact(self, transform: Transform[T]) -> T:
        with self._local_lock.hold():
            return self._locked_transact(transform)

    async def atransact(self, transform: Transform[T]) -> T:
        async with self._local_lock.ahold():
            # Locking the file and its I/O block; the loop stays free meanwhile.
            return await asyncio.to_thread(self._locked_transact, transform)

    def transact_raw(self, transform: Transform[T]) -> T:
        """`transact` for a transform that reads and writes bytes itself (it gets no texts)."""
        with self._local_lock.hold():
            return self._locked_transact(transform, read=False)

    def _locked_transact(self, transform: Transform[T], *, read: bool = True) -> T:
        display = self._display[0]
        # Checked before anything is created: the lock file must not land where a swapped-in
        # symlink leads either.
        lock_path = self._first.check_lock_file()
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path), mode=0o644)
            lock.acquire(timeout=LOCK_TIMEOUT_SECONDS, poll_interval=LOCK_POLL_SECONDS)
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            reason = (
                f"its lock file {lock_path} is still held after {LOCK_TIMEOUT_SECONDS:g} s by "
                "another process (stuck or stopped?)"
            )
            raise MemoryWriteError(display, reason) from None
        except OSError as exc:
            raise MemoryWriteError(display, f"cannot lock: {exc.strerror or exc}") from exc
        try:
            texts = {path: self._read(path) for path in self._display} if read else {}
            changes, result = transform(texts)
            for path, text in changes.items():
                self._write(path, text)
            return result
        finally:
            lock.release()

    def _read(self, path: str) -> str | None:
        real = self._targets[path].check()
        # Opening a FIFO waits for a writer, forever if none comes: never open one.
        kind = special_file_kind(str(real))
        if kind is not None:
            raise MemoryWriteError(path, f"not a regular file ({kind}): never opened")
        try:
            data = real.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MemoryWriteError(path, f"cannot read: {exc.strerror}") from exc
        return decode_for_rewrite(path, data)

    def _write(self, path: str, text: str) -> None:
        real = self._targets[path].check()  # again: the transform ran since the read
        data = _encoded(path, text)
        try:
            atomic_write(real, data)
        except OSError as exc:
            raise MemoryWriteError(path, f"cannot write: {exc.strerror or exc}") from exc


def replace_unless_changed(
    shown: str, path: Path, expected: bytes | None, data: bytes | None
) -> bool:
    """Replace `path` with `data` (None: delete it) only if it still holds `expected` (None:
    absent), under the lock every memory writer of that file takes.

    For copies made from an earlier look at the file (`layered-memory sync pull`): an agent's
    edit or a write-back that landed since that look is never overwritten. False when the
    file changed; nothing is written then. The cross-process lock is taken always, created
    on first use as every memory writer of this package creates it.

    Raises:
        MemoryWriteError: The file cannot be locked, read or written (a symlink swapped in,
            a FIFO, a lock held past the timeout); nothing is written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    target = DiskTarget(path=shown, disk=path, folder=Path(os.path.realpath(path.parent)))
    strategy = FileLockStrategy([target])

    def swap(texts: Mapping[str, str | None]) -> tuple[dict[str, str], bool]:
        del texts  # compared as bytes below: a pulled file need not be text
        real = target.check()
        kind = special_file_kind(str(real))
        if kind is not None:  # opening a FIFO waits forever for a writer
            raise MemoryWriteError(shown, f"not a regular file ({kind}): never opened")
        try:
            now: bytes | None = real.read_bytes()
        except FileNotFoundError:
            now = None
        except OSError as exc:
            raise MemoryWriteError(shown, f"cannot read: {exc.strerror}") from exc
        if now != expected:
            return {}, False
        if data is None:
            real.unlink(missing_ok=True)
        else:
            atomic_write(real, data)
        return {}, True

    # Always the lock every memory writer of this file takes, created here when no writer has
    # yet: a pull into a fresh checkout (no lock file) racing the first write-back would
    # otherwise compare, then replace over the write-back that created the lock meanwhile.
    return strategy.transact_raw(swap)


# --- PostgreSQL store: an advisory lock in one SQL transaction ------------------------------

_LOCK_DOMAIN = b"layered-memory/write-back\x00"
"""Hashed into every advisory lock id; unchanged since write-back introduced it, so writers of
two package versions sharing one database still take the same lock."""

_ADVISORY_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"


def advisory_lock_id(prefix: str, key: str) -> int:
    """A stable signed 64-bit lock id for one store row (same in every process and host)."""
    digest = hashlib.blake2b(
        _LOCK_DOMAIN + prefix.encode() + b"\x00" + key.encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresStoreLockStrategy:
    """Read-modify-write of `StoreBackend` files in one PostgreSQL transaction, under an
    advisory lock on the first file.

    The transaction runs on the store's own connection (one borrowed from its pool, or its
    single connection under the lock its own `batch` takes), so it never interleaves with the
    store's other statements. Rows are read and written in `StoreBackend`'s format
    (`{"content", "encoding", "created_at", "modified_at"}`, keyed by path in the backend's
    namespace, resolved from the run's runtime at each transaction) with the store's default
    TTL. A store built with `index=` (semantic search) does not get the rows re-embedded.
    psycopg is imported only here, when langgraph's PostgreSQL store is in use.

    Args:
        backend: The `StoreBackend` (its store a `PostgresStore` or `AsyncPostgresStore`).
        keys: The backend's own paths of the files (after any `CompositeBackend` route).
        display_paths: The same files as the caller names them (transform keys, errors).
        read_only: The guard's question per display path, asked before a write.
    """

    def __init__(
        self,
        backend: StoreBackend,
        keys: Sequence[str],
        *,
        display_paths: Sequence[str],
        read_only: Mapping[str, ReadOnlyCheck] | None = None,
    ) -> None:
        store = store_of(backend)
        if not is_postgres_store(store):
            msg = "PostgresStoreLockStrategy needs a StoreBackend over a PostgresStore"
            raise TypeError(msg)
        self._backend = backend
        self._store: PostgresStore | AsyncPostgresStore = store
        self._keys = dict(zip(display_paths, keys, strict=True))
        self._display = list(display_paths)
        self._read_only = dict(read_only or {})

    def transact(self, transform: Transform[T]) -> T:
        from langgraph.store.postgres import AsyncPostgresStore

        prefix = self._prefix()
        store = self._store
        if isinstance(store, AsyncPostgresStore):
            if _running_loop() is store.loop:
                msg = "a sync write on the AsyncPostgresStore's own event loop would deadlock"
                raise MemoryWriteError(
                    self._display[0], f"{msg}; use the async form (aadd_insight...)"
                )
            # The async store's connection belongs to its event loop (as in its own `batch`).
            future = asyncio.run_coroutine_threadsafe(
                self._async_transaction(store, prefix, transform), store.loop
            )
            return future.result()
        with self._local_lock(prefix).hold():
            return self._sync_transaction(store, prefix, transform)

    async def atransact(self, transform: Transform[T]) -> T:
        from langgraph.store.postgres import AsyncPostgresStore

        prefix = self._prefix()
        store = self._store
        if isinstance(store, AsyncPostgresStore):
            transaction = self._async_transaction(store, prefix, transform)
            if asyncio.get_running_loop() is store.loop:
                return await transaction
            # Another loop: the store's connection still has to be used on its own loop.
            return await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(transaction, store.loop)
            )
        # A sync store blocks, so it runs in a worker thread. Writers of this process queue
        # here first (one waiting thread per loop at most), so waiting for the row's lock
        # neither pins the default executor nor holds pool connections.
        async with self._local_lock(prefix).ahold():
            return await asyncio.to_thread(self._sync_transaction, store, prefix, transform)

    # --- the two shells: only the connection handling differs ----------------------------

    def _sync_transaction(self, store: PostgresStore, prefix: str, transform: Transform[T]) -> T:
        import psycopg
        from psycopg.rows import dict_row

        try:
            with sync_store_connection(store) as conn, conn.transaction():
                with conn.cursor(row_factory=dict_row) as cur:
                    cur.execute(_ADVISORY_LOCK_SQL, (self._lock_id(prefix),))
                    cur.execute(store_select_sql(store), (prefix, list(self._keys.values())))
                    rows = {row["key"]: row["value"] for row in cur.fetchall()}
                    changes, result = transform(self._texts(rows))
                    _refuse_read_only(changes, self._read_only)
                    for params in self._upserts(store, prefix, rows, changes):
                        cur.execute(STORE_UPSERT_SQL, params)
                return result
        except psycopg.Error as exc:
            raise MemoryWriteError(self._display[0], f"PostgreSQL error: {exc}") from exc

    async def _async_transaction(
        self, store: AsyncPostgresStore, prefix: str, transform: Transform[T]
    ) -> T:
        import psycopg
        from psycopg.rows import dict_row

        try:
            async with async_store_connection(store) as conn, conn.transaction():
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(_ADVISORY_LOCK_SQL, (self._lock_id(prefix),))
                    await cur.execute(store_select_sql(store), (prefix, list(self._keys.values())))
                    rows = {row["key"]: row["value"] for row in await cur.fetchall()}
                    changes, result = transform(self._texts(rows))
                    _refuse_read_only(changes, self._read_only)
                    for params in self._upserts(store, prefix, rows, changes):
                        await cur.execute(STORE_UPSERT_SQL, params)
                return result
        except psycopg.Error as exc:
            raise MemoryWriteError(self._display[0], f"PostgreSQL error: {exc}") from exc

    # --- pure helpers ----------------------------------------------------------------------

    def _prefix(self) -> str:
        # Resolved per transaction: a per-user namespace comes from the run's runtime context.
        return store_prefix(namespace_of(self._backend))

    def _local_lock(self, prefix: str) -> KeyedLock:
        return _lock_for_backend(self._store, f"{prefix}\x00{self._keys[self._display[0]]}")

    def _lock_id(self, prefix: str) -> int:
        return advisory_lock_id(prefix, self._keys[self._display[0]])

    def _texts(self, rows: Mapping[str, Any]) -> dict[str, str | None]:
        texts: dict[str, str | None] = {}
        for path in self._display:
            value = rows.get(self._keys[path])
            texts[path] = None if value is None else _row_text(path, value)
        return texts

    def _upserts(
        self,
        store: PostgresStore | AsyncPostgresStore,
        prefix: str,
        rows: Mapping[str, Any],
        changes: Mapping[str, str],
    ) -> Iterator[tuple[Any, ...]]:
        from psycopg.types.json import Jsonb

        ttl = store_default_ttl(store)
        now = datetime.now(UTC).isoformat()
        for path, text in changes.items():
            key = self._keys[path]
            old = rows.get(key)
            created = old.get("created_at") if isinstance(old, Mapping) else None
            value = {
                "content": text,
                "encoding": "utf-8",
                "created_at": created if isinstance(created, str) else now,
                "modified_at": now,
            }
            yield (prefix, key, Jsonb(value), ttl, ttl)


def _row_text(path: str, value: Any) -> str:
    """The file text of a `StoreBackend` row (current or legacy list-of-lines content)."""
    content = value.get("content") if isinstance(value, Mapping) else None
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        content = "\n".join(content)
    if not isinstance(content, str):
        raise MemoryWriteError(path, "store item has no text content")
    if value.get("encoding") == "base64":
        try:
            return base64.standard_b64decode(content).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as exc:
            # Rewriting a file we cannot decode would destroy it.
            raise MemoryWriteError(path, "not UTF-8 text") from exc
    return content


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# --- Any other backend: in-process lock + download/upload -------------------------------


class InProcessLockStrategy:
    """Transactions through `download_files` / `upload_files` under an in-process lock."""

    def __init__(
        self,
        backend: BackendProtocol,
        paths: Sequence[str],
        *,
        lock_key: tuple[Any, str],
        read_only: Mapping[str, ReadOnlyCheck] | None = None,
    ) -> None:
        self._backend = backend
        self._paths = list(paths)
        self._lock = _lock_for_backend(*lock_key)
        self._read_only = dict(read_only or {})

    def transact(self, transform: Transform[T]) -> T:
        with self._lock.hold():
            responses = self._backend.download_files(self._paths)
            changes, result = transform(self._texts(responses))
            if changes:
                _refuse_read_only(changes, self._read_only)
                self._check_uploads(self._backend.upload_files(self._payload(changes)))
            return result

    async def atransact(self, transform: Transform[T]) -> T:
        async with self._lock.ahold():
            responses = await self._backend.adownload_files(self._paths)
            changes, result = transform(self._texts(responses))
            if changes:
                _refuse_read_only(changes, self._read_only)
                self._check_uploads(await self._backend.aupload_files(self._payload(changes)))
            return result

    def _texts(self, responses: Sequence[Any]) -> dict[str, str | None]:
        texts: dict[str, str | None] = {}
        for path, response in zip(self._paths, responses, strict=True):
            if response.error == FILE_NOT_FOUND:
                texts[path] = None
            elif response.error is not None or response.content is None:
                raise MemoryWriteError(path, f"cannot read: {response.error}")
            else:
                texts[path] = decode_for_rewrite(path, response.content)
        return texts

    @staticmethod
    def _payload(changes: Mapping[str, str]) -> list[tuple[str, bytes]]:
        return [(path, _encoded(path, text)) for path, text in changes.items()]

    @staticmethod
    def _check_uploads(responses: Sequence[Any]) -> None:
        for response in responses:
            if response.error is not None:
                raise MemoryWriteError(response.path, f"cannot write: {response.error}")
