"""A circuit breaker for the Redis side: one warning per outage, retried on its own.

While open, every call goes straight to the wrapped saver. After ``retry_after`` seconds the next
call probes Redis; the saver then repairs the cache (bumps the epoch) before trusting it again,
because writes made during the outage never reached Redis.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from layered_memory._logs import get_logger

__all__ = ["Breaker"]

logger = get_logger("layered_memory.checkpoint")


class Breaker:
    """Open on a Redis failure, half-open after ``retry_after`` seconds, closed on success.

    Args:
        where: The Redis URL without its password, for log lines.
        retry_after: Seconds to leave Redis alone after a failure.
        clock: Monotonic clock (tests pass a fake one).
    """

    def __init__(
        self, where: str, *, retry_after: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._where = where
        self._retry_after = retry_after
        self._clock = clock
        self._lock = threading.Lock()
        self._open_since: float | None = None
        self._needs_repair = False

    @property
    def is_open(self) -> bool:
        """Whether the last Redis call failed and no call has succeeded since."""
        return self._open_since is not None

    def allow(self) -> bool:
        """Whether this call may use Redis (closed, or open long enough to probe)."""
        with self._lock:
            if self._open_since is None:
                return True
            return self._clock() - self._open_since >= self._retry_after

    def needs_repair(self) -> bool:
        """Whether Redis must be repaired before its content is trusted again."""
        return self._needs_repair

    def failure(self, exc: BaseException) -> None:
        """Record a failed Redis call; warn once per outage."""
        with self._lock:
            first = self._open_since is None
            self._open_since = self._clock()
            self._needs_repair = True
        if first:
            logger.warning(
                "Redis at %s failed (%s: %s); checkpoints are served by the wrapped saver "
                "alone until it answers again (next try in %.1f s)",
                self._where,
                type(exc).__name__,
                exc,
                self._retry_after,
            )

    def repaired(self) -> None:
        """Record that the cache was repaired after an outage and Redis answered."""
        with self._lock:
            was_open = self._open_since is not None
            self._open_since = None
            self._needs_repair = False
        if was_open:
            logger.info("Redis at %s answers again; checkpoint cache back in use", self._where)
