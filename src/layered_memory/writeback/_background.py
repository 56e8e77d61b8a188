"""The background queue a consolidator runs its consolidations on, in the order they came."""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["BackgroundQueue"]


class BackgroundQueue:
    """One background thread running consolidations in the order they were queued.

    `concurrent.futures` joins its threads when the interpreter exits, so a process that ends
    normally finishes the queued work first. The run's context variables go along (a
    `StoreBackend`'s per-user namespace is read from the run's config).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: set[concurrent.futures.Future[None]] = set()

    def submit(self, job: Callable[..., None], *args: Any) -> bool:
        """Queue `job(*args)`; False when the interpreter is shutting down (run it inline)."""
        context = contextvars.copy_context()
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="layered-memory-consolidation"
                )
            try:
                future = self._executor.submit(context.run, job, *args)
            except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
                return False
            self._futures.add(future)
        future.add_done_callback(self._forget)
        return True

    def _forget(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def flush(self, timeout: float | None) -> bool:
        with self._lock:
            waiting = list(self._futures)
        _done, not_done = concurrent.futures.wait(waiting, timeout=timeout)
        return not not_done

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
