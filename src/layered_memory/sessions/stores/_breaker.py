"""A circuit breaker for a cache tier: after a failure skip it for a while, then try it again.

Written by hand (about sixty lines) because the libraries that do this (``pybreaker``,
``circuitbreaker``) wrap one function each, have no half-open trial shared by sync and async
callers, and log per call; `HybridSessionStore` needs one breaker for every L1 operation, one
warning per outage and a hook for the moment the tier comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from layered_memory._logs import get_logger

__all__ = ["CircuitBreaker"]

logger = get_logger("layered_memory.sessions.stores.hybrid")

State = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    """Closed, open or half-open; thread-safe; recovers by itself.

    A failure opens it: callers skip the tier. After ``retry_after`` seconds the next caller is
    let through as a trial (half-open) while the others keep skipping; the trial's success
    closes the breaker, its failure reopens it with the wait doubled (up to ``max_retry_after``),
    so a tier that stays down costs one slow call per wait, not one per call. One warning when
    it opens, one info line when it closes: never a line per call.

    Args:
        name: How log lines name the tier.
        retry_after: Seconds to wait after the first failure before a trial.
        max_retry_after: The longest wait between trials.
        clock: Seconds-returning clock (tests inject one to move time without sleeping).
    """

    def __init__(
        self,
        name: str,
        *,
        retry_after: float,
        max_retry_after: float = 60.0,
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self.retry_after = retry_after
        self.max_retry_after = max(max_retry_after, retry_after)
        self._clock = clock
        self._lock = threading.Lock()
        self._state: State = "closed"
        self._wait = retry_after
        self._next_trial = 0.0
        self._opened_at = 0.0

    @property
    def state(self) -> State:
        """``closed`` (tier used), ``open`` (tier skipped) or ``half-open`` (a trial runs)."""
        return self._state

    def allow(self) -> bool:
        """Whether the caller may use the tier now (True for the one trial caller too)."""
        with self._lock:
            if self._state == "closed":
                return True
            now = self._clock()
            if now < self._next_trial:
                return False
            # Also when a trial never reported (its caller was cancelled): try again.
            self._state = "half-open"
            self._next_trial = now + self._wait
            return True

    def succeeded(self) -> bool:
        """Record a successful call; True when it closed an open breaker (the tier is back)."""
        with self._lock:
            if self._state != "half-open":
                # Closed: nothing to do. Open: a call started before the breaker opened; only
                # the trial decides that the tier is back.
                return False
            down_for = self._clock() - self._opened_at
            self._state, self._wait = "closed", self.retry_after
        logger.info("%s is back after %.1f s; using it again", self.name, down_for)
        return True

    def failed(self, reason: str) -> None:
        """Record a failed (or too slow) call: open the breaker, or keep it open."""
        with self._lock:
            now = self._clock()
            if self._state == "open":
                return  # a call started before the breaker opened: already counted
            first = self._state == "closed"
            if first:
                self._opened_at = now
                self._wait = self.retry_after
            else:  # the trial failed
                self._wait = min(self._wait * 2, self.max_retry_after)
            self._state = "open"
            self._next_trial = now + self._wait
            wait = self._wait
        if first:
            logger.warning(
                "%s failed (%s); skipping it, next try in %.0f s", self.name, reason, wait
            )
        else:
            logger.debug("%s still failing (%s); next try in %.0f s", self.name, reason, wait)
