"""Read-modify-write transactions on memory files, with a lock suited to each backend.

A transaction reads a few files, hands their text to a pure `transform`, and writes the files
the transform changed, all while holding a lock, so concurrent writers never lose an update.
`choose_strategy` picks the strategy by backend type; a new storage is one more `WriteStrategy`
class and one more branch there. Because the transform is pure, a compare-and-swap strategy
may simply call it again after a conflict.

- `FileLockStrategy` (a `FilesystemBackend`, also behind a `CompositeBackend` route): an
  exclusive `fcntl.flock` on a lock file beside the memory file serializes writers across
  processes and threads; each file is written to a temporary file in the same folder, fsynced,
  then `os.replace`d over the original, so a crash leaves either the old or the new file, never
  a truncated one.
- `PostgresStoreLockStrategy` (a `StoreBackend` over langgraph's `PostgresStore` or
  `AsyncPostgresStore`, also behind a `CompositeBackend` route; in `_store_locking`): one SQL
  transaction on the store's own connection that first takes `pg_advisory_xact_lock` on a
  stable 64-bit hash of the row's namespace and key, then reads, transforms and upserts the
  rows. Chosen over a compare-and-swap because a write-back touches two rows, the first one
  creates rows that do not exist yet (nothing to compare), and the lock needs no retry loop;
  both rows commit together and a dead worker's lock goes with its connection. Writers in
  every process and on every host that share the database are serialized.
- `InProcessLockStrategy` (any other backend: `StateBackend`, `StoreBackend` over another
  store, ...): a lock per backend and path inside this process, then `download_files` /
  `upload_files` (which overwrite on every deepagents backend). Writers in *other* processes
  sharing the same store are not serialized: last writer wins. `StateBackend` needs no more
  (its files live in one thread's state).

Neither lock covers an agent editing the same file through its own file tools at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol, TypeVar

from deepagents.backends.composite import CompositeBackend
from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import FILE_NOT_FOUND, BackendProtocol
from deepagents.backends.store import StoreBackend

from layered_memory._disk_cache import special_file_kind
from layered_memory.errors import MemoryWriteError

T = TypeVar("T")

Texts = Mapping[str, str | None]
"""Path -> current text (`None`: the file does not exist)."""

Transform = Callable[[Texts], tuple[Mapping[str, str], T]]
"""Pure: current texts -> (path -> new text for each file to write, in write order; result)."""


class WriteStrategy(Protocol):
    """Runs read-modify-write transactions on a fixed set of paths of one backend."""

    def transact(self, transform: Transform[T]) -> T:
        """Read, transform and write under the strategy's lock; return the transform's result."""
        ...

    async def atransact(self, transform: Transform[T]) -> T:
        """The async form of `transact`."""
        ...


def choose_strategy(backend: BackendProtocol, paths: Sequence[str]) -> WriteStrategy:
    """The write strategy for `paths` (the first one names the lock) on `backend`.

    Args:
        backend: The backend the memory files live in.
        paths: Backend paths of the files a transaction touches; the first is the memory file.

    Returns:
        When every path ends up on one backend (directly or through `CompositeBackend`
        routes): `FileLockStrategy` for a `FilesystemBackend`, `PostgresStoreLockStrategy` for
        a `StoreBackend` built with a langgraph PostgreSQL store; else `InProcessLockStrategy`.
    """
    routed = [_route(backend, path) for path in paths]
    targets = {id(target) for target, _ in routed}
    first_target = routed[0][0]
    keys = [key for _, key in routed]
    if len(targets) == 1 and isinstance(first_target, FilesystemBackend):
        real_paths = {
            path: _real_path(first_target, key) for path, key in zip(paths, keys, strict=True)
        }
        return FileLockStrategy(real_paths, display_paths=list(paths))
    if len(targets) == 1 and _is_postgres_store_backend(first_target):
        from layered_memory._store_locking import PostgresStoreLockStrategy

        assert isinstance(first_target, StoreBackend)  # checked just above (for mypy)
        return PostgresStoreLockStrategy(first_target, keys, display_paths=list(paths))
    return InProcessLockStrategy(backend, list(paths), lock_key=(first_target, routed[0][1]))


def _is_postgres_store_backend(backend: BackendProtocol) -> bool:
    if not isinstance(backend, StoreBackend):
        return False
    # A PostgresStore exists only once its module was imported: the extra stays optional.
    if "langgraph.store.postgres" not in sys.modules:
        return False
    from layered_memory._store_locking import is_postgres_store

    return is_postgres_store(backend._store)  # private: the store it was built with


def _route(backend: BackendProtocol, path: str) -> tuple[BackendProtocol, str]:
    """Follow `CompositeBackend` routes the way the composite does (longest prefix first)."""
    while isinstance(backend, CompositeBackend):
        for prefix, inner in backend.sorted_routes:
            bare = prefix.rstrip("/")
            with_slash = prefix if prefix.endswith("/") else f"{prefix}/"
            if path == bare:
                backend, path = inner, "/"
                break
            if path.startswith(with_slash):
                backend, path = inner, "/" + path[len(with_slash) :]
                break
        else:
            backend = backend.default
    return backend, path


def _real_path(backend: FilesystemBackend, key: str) -> Path:
    """Resolve `key` to the file `FilesystemBackend` itself would open (same rules)."""
    root = Path(backend.cwd)
    if backend.virtual_mode:
        virtual = key if key.startswith("/") else "/" + key
        if ".." in virtual or virtual.startswith("~"):
            raise MemoryWriteError(key, "path traversal is not allowed")
        full = (root / virtual.lstrip("/")).resolve()
        try:
            full.relative_to(root)
        except ValueError:
            raise MemoryWriteError(key, "path is outside the backend root") from None
        return full
    path = Path(key)
    return path if path.is_absolute() else (root / path).resolve()


# --- Locks shared by every writer of one file in this process ------------------------------


class _KeyedLock:
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


_registry_guard = threading.Lock()
_file_locks: dict[str, _KeyedLock] = {}
_backend_locks: weakref.WeakKeyDictionary[Any, dict[str, _KeyedLock]] = weakref.WeakKeyDictionary()


def _lock_for_file(real_path: Path) -> _KeyedLock:
    with _registry_guard:
        return _file_locks.setdefault(str(real_path), _KeyedLock())


def _lock_for_backend(backend: object, key: str) -> _KeyedLock:
    with _registry_guard:
        per_backend = _backend_locks.setdefault(backend, {})
        return per_backend.setdefault(key, _KeyedLock())


# --- Filesystem: flock + atomic replace ---------------------------------------------------


def lock_file_path(real_path: Path) -> Path:
    """The lock file guarding `real_path`: a hidden file beside it, never deleted.

    Deleting a lock file would let two writers lock two different inodes, so it stays.
    """
    return real_path.with_name(f".{real_path.name}.lock")


class FileLockStrategy:
    """Cross-process transactions on local files: `flock` on a lock file + atomic replace."""

    def __init__(self, real_paths: Mapping[str, Path], *, display_paths: Sequence[str]) -> None:
        self._real_paths = dict(real_paths)
        self._display = list(display_paths)
        first = self._real_paths[self._display[0]]
        self._lock_path = lock_file_path(first)
        self._local_lock = _lock_for_file(first)

    def transact(self, transform: Transform[T]) -> T:
        with self._local_lock.hold():
            return self._locked_transact(transform)

    async def atransact(self, transform: Transform[T]) -> T:
        async with self._local_lock.ahold():
            # flock and file I/O block; the loop stays free meanwhile.
            return await asyncio.to_thread(self._locked_transact, transform)

    def _locked_transact(self, transform: Transform[T]) -> T:
        display = self._display[0]
        try:
            self._lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise MemoryWriteError(display, f"cannot open lock file: {exc.strerror}") from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            texts = {path: self._read(path) for path in self._display}
            changes, result = transform(texts)
            for path, text in changes.items():
                self._write(path, text)
            return result
        finally:
            # Closing the descriptor releases the flock, also when the transform raised.
            os.close(lock_fd)

    def _read(self, path: str) -> str | None:
        real = self._real_paths[path]
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
        return _decode(path, data)

    def _write(self, path: str, text: str) -> None:
        try:
            atomic_write(self._real_paths[path], text.encode("utf-8"))
        except OSError as exc:
            raise MemoryWriteError(path, f"cannot write: {exc.strerror or exc}") from exc


def _write_all(stream: IO[bytes], data: bytes) -> None:
    """Write `data` to the temporary file (a seam the crash tests replace)."""
    stream.write(data)


def atomic_write(real_path: Path, data: bytes) -> None:
    """Replace `real_path` with `data` so that readers see the old bytes or the new, never half.

    Raises:
        OSError: The temporary file could not be written or moved into place; the original
            file is untouched and the temporary file removed.
    """
    real_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = real_path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, temp_name = tempfile.mkstemp(
        dir=real_path.parent, prefix=f".{real_path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as stream:
            _write_all(stream, data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, real_path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(real_path.parent)


def _fsync_directory(folder: Path) -> None:
    # Makes the rename itself durable; some filesystems refuse to fsync a directory.
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


# --- Any other backend: in-process lock + download/upload -------------------------------


class InProcessLockStrategy:
    """Transactions through `download_files` / `upload_files` under an in-process lock."""

    def __init__(
        self,
        backend: BackendProtocol,
        paths: Sequence[str],
        *,
        lock_key: tuple[BackendProtocol, str],
    ) -> None:
        self._backend = backend
        self._paths = list(paths)
        self._lock = _lock_for_backend(*lock_key)

    def transact(self, transform: Transform[T]) -> T:
        with self._lock.hold():
            responses = self._backend.download_files(self._paths)
            changes, result = transform(self._texts(responses))
            if changes:
                self._check_uploads(self._backend.upload_files(self._payload(changes)))
            return result

    async def atransact(self, transform: Transform[T]) -> T:
        async with self._lock.ahold():
            responses = await self._backend.adownload_files(self._paths)
            changes, result = transform(self._texts(responses))
            if changes:
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
                texts[path] = _decode(path, response.content)
        return texts

    @staticmethod
    def _payload(changes: Mapping[str, str]) -> list[tuple[str, bytes]]:
        return [(path, text.encode("utf-8")) for path, text in changes.items()]

    @staticmethod
    def _check_uploads(responses: Sequence[Any]) -> None:
        for response in responses:
            if response.error is not None:
                raise MemoryWriteError(response.path, f"cannot write: {response.error}")


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Rewriting a file we cannot decode would destroy it.
        raise MemoryWriteError(path, f"not UTF-8 text ({exc.reason})") from exc


def archive_path_for(path: str) -> str:
    """`/MEMORY.md` -> `/MEMORY.archive.md` (same folder; `.archive` before the suffix)."""
    pure = PurePosixPath(path)
    name = f"{pure.stem}.archive{pure.suffix}" if pure.suffix else f"{pure.name}.archive"
    return str(pure.with_name(name))
