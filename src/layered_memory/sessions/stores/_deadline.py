"""A deadline on a blocking socket call: when it passes, the socket is shut down.

psycopg 3 has no client-side timeout for a query: once sent on an open connection, it waits
for the server's answer as long as that takes, and a frozen server (SIGSTOPped, a paused VM, a
half-open network path) never answers. The alternatives do not help against it: the server's
``statement_timeout`` needs a server that runs; TCP keepalives and libpq's
``tcp_user_timeout`` are answered (acknowledged) by the frozen host's kernel; ``conn.cancel()``
opens a second connection to the same frozen server and waits too.

What does work is ``shutdown(2)`` of the connection's socket from another thread: the thread
blocked in ``poll()`` on it wakes up with end-of-file, libpq marks the connection bad ("server
closed the connection unexpectedly"), psycopg raises, and the pool discards the connection when
it comes back. The descriptor itself stays open until its owner closes it (``close`` from
another thread could hand the number to a new file while libpq still uses it).

One daemon thread serves every deadline of the process; it sleeps until the earliest one, so
an idle process pays nothing and a busy one a dict insert and delete per call.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time

__all__ = ["SocketDeadline"]


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
