"""Calls to a tier that may fail or freeze: one circuit breaker, one deadline on a socket.

`CircuitBreaker` serves every cache tier of the package: `HybridSessionStore`'s L1 and
`CachedCheckpointSaver`'s Redis. `SocketDeadline` bounds a blocking PostgreSQL call.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Literal

from layered_memory._logs import get_logger

__all__ = ["CircuitBreaker", "SocketDeadline"]

State = Literal["closed", "open", "half-open"]

_logger = get_logger(__name__)


class CircuitBreaker:
    """Closed, open or half-open; thread-safe; recovers by itself.

    A failure opens it: callers skip the tier. After ``retry_after`` seconds the next caller is
    let through as a trial (half-open) while the others keep skipping; the trial's success
    closes the breaker, its failure reopens it with the wait doubled (up to ``max_retry_after``),
    so a tier that stays down costs one slow call per wait, not one per call. One warning when
    it opens, one info line when it closes: never a line per call.

    Written by hand (about sixty lines) because the libraries that do this (``pybreaker``,
    ``circuitbreaker``) wrap one function each, have no half-open trial shared by sync and async
    callers, and log per call; a cache tier needs one breaker for every operation, one warning
    per outage and a hook for the moment the tier comes back.

    One rule for both users, the session store's L1 and the checkpoint cache's Redis: both test
    suites expect a single trial after the wait, and a late result of a call that started
    before the breaker opened never closes it (only a trial does). What differs is a parameter:
    the checkpoint cache keeps a fixed wait (``max_retry_after=retry_after``), and its writes
    force a trial during the wait (``allow(force=True)``), because another worker serves an
    older checkpoint until the write's mark reaches Redis.

    Args:
        name: How log lines name the tier.
        retry_after: Seconds to wait after the first failure before a trial (0: every call
            after a failure is a trial).
        max_retry_after: The longest wait between trials.
        clock: Seconds-returning clock (tests inject one to move time without sleeping).
        logger: Where the warning and the info line go (the caller's, so users filter one
            logger per feature).
        while_open: What happens while the tier is skipped, for the warning.
        when_back: What happens once it is back, for the info line.
    """

    def __init__(
        self,
        name: str,
        *,
        retry_after: float,
        max_retry_after: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = _logger,
        while_open: str = "skipping it",
        when_back: str = "using it again",
    ) -> None:
        self.name = name
        self.retry_after = retry_after
        self.max_retry_after = max(max_retry_after, retry_after)
        self._clock = clock
        self._logger = logger
        self._while_open = while_open
        self._when_back = when_back
        self._lock = threading.Lock()
        self._state: State = "closed"
        self._wait = retry_after
        self._next_trial = 0.0
        self._opened_at = 0.0

    @property
    def state(self) -> State:
        """``closed`` (tier used), ``open`` (tier skipped) or ``half-open`` (a trial runs)."""
        return self._state

    @property
    def is_open(self) -> bool:
        """Whether a call failed and no trial has succeeded since (open or half-open)."""
        return self._state != "closed"

    def allow(self, *, force: bool = False) -> bool:
        """Whether the caller may use the tier now (True for the one trial caller too).

        ``force``: the caller must try the tier even during the wait; it runs as a trial.
        """
        with self._lock:
            if self._state == "closed":
                return True
            now = self._clock()
            if now < self._next_trial and not force:
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
        self._logger.info("%s is back after %.1f s; %s", self.name, down_for, self._when_back)
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
            self._logger.warning(
                "%s failed (%s); %s, next try in %.1f s", self.name, reason, self._while_open, wait
            )
        else:
            self._logger.debug("%s still failing (%s); next try in %.1f s", self.name, reason, wait)


# -- A deadline on a blocking socket call: when it passes, the socket is shut down.
#
# psycopg 3 has no client-side timeout for a query: once sent on an open connection, it waits
# for the server's answer as long as that takes, and a frozen server (SIGSTOPped, a paused VM, a
# half-open network path) never answers. The alternatives do not help against it: the server's
# ``statement_timeout`` needs a server that runs; TCP keepalives and libpq's
# ``tcp_user_timeout`` are answered (acknowledged) by the frozen host's kernel; ``conn.cancel()``
# opens a second connection to the same frozen server and waits too.
#
# What does work is ``shutdown(2)`` of the connection's socket from another thread: the thread
# blocked in ``poll()`` on it wakes up with end-of-file, libpq marks the connection bad ("server
# closed the connection unexpectedly"), psycopg raises, and the pool discards the connection when
# it comes back. The descriptor itself stays open until its owner closes it (``close`` from
# another thread could hand the number to a new file while libpq still uses it).
#
# One daemon thread serves every deadline of the process; it sleeps until the earliest one, so
# an idle process pays nothing and a busy one a dict insert and delete per call.


class SocketDeadline:
    """Shut ``fileno``'s socket down at ``deadline`` (`time.monotonic` seconds) unless finished.

    Call `finish` when the work on the socket is over, in a ``finally``: it returns whether the
    socket was shut down (then the connection is dead, and must not be reused).
    """

    def __init__(self, fileno: int, deadline: float) -> None:
        self.fileno = fileno
        self.deadline = deadline
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        _WATCHDOG.watch(self)

    def finish(self) -> bool:
        """Stop watching; True when the deadline passed first (the socket was shut down)."""
        with self._lock:
            self._done = True
            fired = self.fired
        _WATCHDOG.forget(self)
        return fired

    def _expire(self) -> None:
        # Under the lock, so the owner cannot finish and hand the descriptor (and its number)
        # back to the pool, or close it, while it is being shut down.
        with self._lock:
            if self._done:
                return
            self.fired = True
            try:
                # A duplicate descriptor, so closing our socket object leaves the owner's open.
                with socket.socket(fileno=os.dup(self.fileno)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed or not connected: the call fails (or ended) on its own


class _Watchdog:
    def __init__(self) -> None:
        self.start_over()

    def start_over(self) -> None:
        """Forget every deadline and the thread (in a forked child: neither exists there)."""
        self._cond = threading.Condition()
        self._active: dict[int, SocketDeadline] = {}
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None

    def watch(self, deadline: SocketDeadline) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="layered-memory-deadlines", daemon=True
                )
                self._thread.start()
            self._active[id(deadline)] = deadline
            # Only an earlier deadline than the one slept for needs to wake the thread.
            if deadline.deadline < self._wake_at:
                self._cond.notify()

    def forget(self, deadline: SocketDeadline) -> None:
        with self._cond:
            self._active.pop(id(deadline), None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, deadline in list(self._active.items()):
                    if deadline.deadline <= now:
                        del self._active[key]
                        deadline._expire()
                self._wake_at = min((d.deadline for d in self._active.values()), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)


_WATCHDOG = _Watchdog()
# A forked child has no watchdog thread, and the parent's lock may have been held at the fork.
os.register_at_fork(after_in_child=_WATCHDOG.start_over)
