"""What every write strategy shares: the transaction types and the in-process locks.

A transaction reads a few files, hands their text to a pure `transform`, and writes the files
the transform changed, all while holding a lock, so concurrent writers never lose an update.
The strategies (`_locking.py`, `_store_locking.py`) build on this module, never on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

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


def decode_for_rewrite(path: str, data: bytes) -> str:
    """A file's text before a rewrite; a file that is not UTF-8 is never rewritten (its bytes
    would be destroyed)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryWriteError(path, f"not UTF-8 text ({exc.reason})") from exc


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


_registry_guard = threading.Lock()
_file_locks: dict[str, KeyedLock] = {}
_backend_locks: weakref.WeakKeyDictionary[Any, dict[str, KeyedLock]] = weakref.WeakKeyDictionary()


def lock_for_file(real_path: str) -> KeyedLock:
    """The process-wide lock of one file on disk."""
    with _registry_guard:
        return _file_locks.setdefault(real_path, KeyedLock())


def lock_for_backend(backend: object, key: str) -> KeyedLock:
    """The process-wide lock of one key of one backend (or store) object."""
    with _registry_guard:
        per_backend = _backend_locks.setdefault(backend, {})
        return per_backend.setdefault(key, KeyedLock())
