"""Read-modify-write transactions on memory files, with a lock suited to each backend.

A transaction reads a few files, hands their text to a pure `transform`, and writes the files
the transform changed, all while holding a lock, so concurrent writers never lose an update.
`choose_strategy` picks the strategy by backend type; a new storage is one more `WriteStrategy`
class and one more branch there. Because the transform is pure, a compare-and-swap strategy
may simply call it again after a conflict.

- `FileLockStrategy` (a `FilesystemBackend`, also behind a `CompositeBackend` route): an
  exclusive lock (`filelock`: `flock` on POSIX, `msvcrt` on Windows) on a lock file beside the
  memory file serializes writers across processes and threads; each file is replaced
  atomically (`_atomic.atomic_write`), so a crash leaves either the old or the new file, never
  a truncated one. Each file is a `_disk_target.DiskTarget`: pinned to its real folder when
  the writer is built, and never written through a symlink swapped in since.
- `PostgresStoreLockStrategy` (a `StoreBackend` over langgraph's `PostgresStore` or
  `AsyncPostgresStore`, also behind a `CompositeBackend` route; in `_store_locking`, imported
  only when langgraph's PostgreSQL store is): one SQL
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
import sys
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import FILE_NOT_FOUND, BackendProtocol
from deepagents.backends.store import StoreBackend
from filelock import FileLock

from layered_memory.core import _atomic
from layered_memory.core._disk_cache import special_file_kind
from layered_memory.core._internals import final_route, store_of
from layered_memory.core.guard import is_protected, refusal
from layered_memory.errors import MemoryWriteError
from layered_memory.writeback._disk_target import DiskTarget, ReadOnlyCheck
from layered_memory.writeback._transactions import (
    T,
    Texts,
    Transform,
    WriteStrategy,
    decode_for_rewrite,
    lock_for_backend,
    lock_for_file,
)

__all__ = [
    "FileLockStrategy",
    "InProcessLockStrategy",
    "Texts",
    "Transform",
    "WriteStrategy",
    "archive_path_for",
    "choose_strategy",
]


def choose_strategy(backend: BackendProtocol, paths: Sequence[str]) -> WriteStrategy:
    """The write strategy for `paths` (the first one names the lock) on `backend`.

    Args:
        backend: The backend the memory files live in (the guard's protected view too: then a
            write the guard would refuse is refused here as well).
        paths: Backend paths of the files a transaction touches; the first is the memory file.

    Returns:
        When every path ends up on one backend (directly or through `CompositeBackend`
        routes): `FileLockStrategy` for a `FilesystemBackend`, `PostgresStoreLockStrategy` for
        a `StoreBackend` built with a langgraph PostgreSQL store; else `InProcessLockStrategy`.

    Raises:
        MemoryWriteError: A path the `FilesystemBackend` behind it refuses (`..`, out of its
            root).
    """
    routed = [final_route(backend, path) for path in paths]
    targets = {id(target) for target, _ in routed}
    first_target = routed[0][0]
    keys = [key for _, key in routed]
    if len(targets) == 1 and isinstance(first_target, FilesystemBackend):
        return FileLockStrategy(
            [
                DiskTarget.pin(first_target, key, path, read_only=_read_only_check(backend, path))
                for path, key in zip(paths, keys, strict=True)
            ]
        )
    if len(targets) == 1 and _is_postgres_store_backend(first_target):
        from layered_memory.writeback._store_locking import PostgresStoreLockStrategy

        assert isinstance(first_target, StoreBackend)  # checked just above (for mypy)
        return PostgresStoreLockStrategy(first_target, keys, display_paths=list(paths))
    return InProcessLockStrategy(backend, list(paths), lock_key=(first_target, routed[0][1]))


def _read_only_check(backend: BackendProtocol, path: str) -> ReadOnlyCheck | None:
    """The guard's verdict on writing `path`, when `backend` is its protected view.

    The file strategy writes to disk itself, past the view's own `write`, so it asks the
    same question the view would. (The in-process strategy writes through the view's own
    `upload_files`, which asks it; a PostgreSQL store has no symlinks or hard links to swap.)
    """
    if not is_protected(backend):
        return None
    protected = backend._layered_memory_protected  # type: ignore[attr-defined]
    return lambda: refusal(backend, protected, "write", path)


def _is_postgres_store_backend(backend: BackendProtocol) -> bool:
    if not isinstance(backend, StoreBackend):
        return False
    # A PostgresStore exists only once its module was imported: the extra stays optional.
    if "langgraph.store.postgres" not in sys.modules:
        return False
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    return isinstance(store_of(backend), PostgresStore | AsyncPostgresStore)


# --- Filesystem: a lock file + atomic replace ----------------------------------------------


class FileLockStrategy:
    """Cross-process transactions on local files: a lock file + atomic replace.

    Every file is a `DiskTarget`, checked before the lock file is created, before the files
    are read and before each is replaced: a symlink swapped in since the writer was built
    makes the write fail with `MemoryWriteError`, never land elsewhere.
    """

    def __init__(self, targets: Sequence[DiskTarget]) -> None:
        self._targets = {target.path: target for target in targets}
        self._display = [target.path for target in targets]
        self._first = targets[0]
        self._local_lock = lock_for_file(str(self._first.pinned))

    def transact(self, transform: Transform[T]) -> T:
        with self._local_lock.hold():
            return self._locked_transact(transform)

    async def atransact(self, transform: Transform[T]) -> T:
        async with self._local_lock.ahold():
            # Locking the file and its I/O block; the loop stays free meanwhile.
            return await asyncio.to_thread(self._locked_transact, transform)

    def _locked_transact(self, transform: Transform[T]) -> T:
        display = self._display[0]
        # Checked before anything is created: the lock file must not land where a swapped-in
        # symlink leads either.
        lock_path = self._first.check_lock_file()
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path), mode=0o644)
            lock.acquire()
        except OSError as exc:
            raise MemoryWriteError(display, f"cannot lock: {exc.strerror or exc}") from exc
        try:
            texts = {path: self._read(path) for path in self._display}
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
        try:
            _atomic.atomic_write(real, text.encode("utf-8"))
        except OSError as exc:
            raise MemoryWriteError(path, f"cannot write: {exc.strerror or exc}") from exc


# --- Any other backend: in-process lock + download/upload -------------------------------


class InProcessLockStrategy:
    """Transactions through `download_files` / `upload_files` under an in-process lock."""

    def __init__(
        self,
        backend: BackendProtocol,
        paths: Sequence[str],
        *,
        lock_key: tuple[Any, str],
    ) -> None:
        self._backend = backend
        self._paths = list(paths)
        self._lock = lock_for_backend(*lock_key)

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
                texts[path] = decode_for_rewrite(path, response.content)
        return texts

    @staticmethod
    def _payload(changes: Mapping[str, str]) -> list[tuple[str, bytes]]:
        return [(path, text.encode("utf-8")) for path, text in changes.items()]

    @staticmethod
    def _check_uploads(responses: Sequence[Any]) -> None:
        for response in responses:
            if response.error is not None:
                raise MemoryWriteError(response.path, f"cannot write: {response.error}")


def archive_path_for(path: str) -> str:
    """`/MEMORY.md` -> `/MEMORY.archive.md` (same folder; `.archive` before the suffix)."""
    pure = PurePosixPath(path)
    name = f"{pure.stem}.archive{pure.suffix}" if pure.suffix else f"{pure.name}.archive"
    return str(pure.with_name(name))
