"""Two-tier session store: a fast L1 (Redis, in-memory) in front of a durable L2 (PostgreSQL, file).

Reads try L1, and on a miss read L2 and backfill L1 with the entry's remaining lifetime.
Writes go to L2, then L1 (write-through). L1 is only a cache, so when it fails, reads and writes
still succeed through L2; L2 is the source of truth, so when it fails, writes raise: the store
never acknowledges a write that is not durable.

Faults, and what is guaranteed (docs/sessions.md, "Faults", says the same for users):

- **A slow or frozen L1** costs one call at most its client's timeout (1 s for
  `RedisSessionStore.from_url`; async calls also at most ``l1_timeout``): the failure opens a
  circuit breaker and every later call goes straight to L2, with one warning. After
  ``l1_retry_after`` seconds one call tries L1 again (the wait doubles while it keeps failing).
- **A frozen L2 costs an operation one L2 timeout**, not two: when the read of the
  missed-writes marker (below) gets `StoreUnavailableError`, the operation fails with it
  instead of calling L2 again (a fresh L1 entry is still served).
- **L1 never serves a value older than L2's** when L1 restarted (even from an older snapshot),
  failed over, failed back (an old primary demoted, resynced and promoted again, its
  ``run_id`` unchanged), or missed a write while it was unreachable. Each L1 entry is stamped
  with the L1 generation it was written under (the Redis server's replication id, which Redis
  renews at each of those events; L1 reports it with every entry it reads, since a connection
  outlives a failback) and the write time; entries of another generation, or written before
  the last write L1 is known to have missed, are checked against L2 before use and replaced
  atomically.
  A writer puts a tombstone in L1 before writing L2, so a concurrent reader's backfill (an
  atomic add) can never overwrite its newer value, and a writer that dies between the two
  writes leaves L1 pointing readers to L2 rather than at the old value.
- **Missed writes are shared between workers** through one L2 entry (`MARKER_KEY`), written
  before the L2 write the L1 missed and read by every worker at least every
  ``l1_check_interval`` seconds and whenever its own L1 comes back. A worker that was idle during
  another worker's L1 outage may therefore serve an older value for at most that long. Session
  keys starting with `RESERVED_PREFIX` are refused, so no session can overwrite the marker
  (a marker far in the future would make every L1 entry suspect; a value without one would
  hide a missed write and bring stale reads back).

Assumed: worker clocks agree within a second; L1 compare-and-set support (`RedisSessionStore`,
`InMemorySessionStore`); without it (another L1) backfills and write completions are plain
writes, which a concurrent writer can race.

The store's own `add` and `replace` (a `ConditionalSessionStore`, which `register_session_save`
merges with) are L2's, atomic when L2 has them (every built-in store); L1 follows as for `set`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar

from layered_memory._logs import get_logger
from layered_memory.core.validation import check_seconds, check_ttl
from layered_memory.errors import SessionDataError, SessionStoreError, StoreUnavailableError
from layered_memory.sessions.stores.base import (
    Clock,
    ConditionalSessionStore,
    GenerationalSessionStore,
    JsonDict,
    ListableSessionStore,
    SessionStore,
    StoredSession,
    aread_entry,
    check_key,
    clean_value,
    compact_json,
    read_entry,
    wall_clock,
)
from layered_memory.sessions.stores.resilience import CircuitBreaker
from layered_memory.sessions.stores.urls import scrub

__all__ = ["MARKER_KEY", "RESERVED_PREFIX", "HybridSessionStore"]

logger = get_logger(__name__)

_T = TypeVar("_T")


# -- L1 entries: what this store keeps in its L1, and when an L1 entry may be served -------
#
# Every L1 value is an envelope stamped with the L1 *generation* it was written under (Redis:
# the server's replication id) and the writer's wall-clock time::
#
#     {"lm": {"g": "<replid>", "t": 1700000000.123}, "value": {...}}       # a cached value
#     {"lm": {"g": "<replid>", "t": 1700000000.123, "pending": "<nonce>"}}  # a write in progress
#
# An entry is *fresh* (served) when it was written under the current generation and after the
# last moment L1 is known to have missed a write (`trusted_after`); otherwise it is *suspect* and
# checked against L2 before use. A *pending* entry (a tombstone a writer puts before it writes
# L2) sends readers to L2 and blocks their backfills until the writer replaces it.
#
# Pure functions and one small piece of thread-safe state (`L1Trust`): the sync and async
# halves of the store share them; only the I/O is written twice.

STAMP = "lm"

PENDING_TTL = 60.0
"""Seconds a write-in-progress tombstone lives: longer than any L2 write may take."""

RESERVED_PREFIX = "layered_memory:hybrid:"
"""L2 keys starting with it are the hybrid store's own: it refuses them as session keys."""

MARKER_KEY = RESERVED_PREFIX + "l1-missed-writes"
"""The L2 entry through which workers tell each other that L1 missed a write."""

CLOCK_MARGIN = 1.0
"""Seconds worker clocks may disagree: a missed write distrusts entries stamped this much later."""

Kind = Literal["fresh", "suspect", "pending"]


@dataclass(frozen=True, slots=True)
class L1View:
    """An L1 entry as the store sees it.

    Attributes:
        kind: ``fresh`` (serve ``value``), ``suspect`` (check L2 first) or ``pending``.
        value: The cached value (fresh entries only).
    """

    kind: Kind
    value: JsonDict | None = None


def _stamp(generation: str, now: float) -> dict[str, object]:
    return {"g": generation, "t": round(now, 3)}


def wrap(value: JsonDict, *, generation: str, now: float) -> JsonDict:
    """The L1 envelope of ``value``."""
    return {STAMP: _stamp(generation, now), "value": value}


def pending(*, generation: str, now: float) -> JsonDict:
    """A unique write-in-progress tombstone (unique, so a writer replaces only its own)."""
    return {STAMP: {**_stamp(generation, now), "pending": secrets.token_hex(8)}}


def classify(stored: JsonDict, *, generation: str, trusted_after: float) -> L1View:
    """Whether an L1 entry may be served as it is.

    Args:
        stored: The value L1 returned.
        generation: L1's generation, read with the entry (atomically) or after it, never
            before: a stale entry may be what a newer generation brought back.
        trusted_after: Entries stamped before this wall-clock time are suspect.
    """
    stamp = stored.get(STAMP)
    if not isinstance(stamp, dict):
        return L1View("suspect")  # not written by this version: an unknown age
    if "pending" in stamp:
        return L1View("pending")
    value = stored.get("value")
    written_at = stamp.get("t")
    if (
        not isinstance(value, dict)
        or stamp.get("g") != generation
        or not isinstance(written_at, int | float)
        or written_at < trusted_after
    ):
        return L1View("suspect")
    return L1View("fresh", value)


def marker_value(before: float) -> JsonDict:
    """The L2 marker saying: L1 entries stamped before ``before`` may be stale."""
    return {"l1_missed_writes_before": round(before, 3)}


def marker_time(value: JsonDict | None) -> float | None:
    """The time a marker read from L2 carries, or None."""
    if value is None:
        return None
    before = value.get("l1_missed_writes_before")
    return float(before) if isinstance(before, int | float) else None


class L1Trust:
    """What one store knows about its L1's entries: which may be served, when to ask L2.

    Thread-safe. ``trusted_after``: L1 entries stamped before it are suspect (raised by a write
    L1 missed here, or by the marker another worker left in L2).

    Args:
        check_interval: Seconds between two reads of the L2 marker.
        clock: Wall-clock seconds.
    """

    def __init__(self, *, check_interval: float, clock: Clock) -> None:
        self.check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self.trusted_after = -math.inf
        self._marker_until = -math.inf
        self._marker_checked_at = -math.inf

    def view(self, stored: JsonDict, *, generation: str) -> L1View:
        """`classify` against what this store knows."""
        return classify(stored, generation=generation, trusted_after=self.trusted_after)

    def marker_due(self, *, force: bool) -> bool:
        """Whether to read the L2 marker now (and note that it is being read)."""
        now = self._clock()
        with self._lock:
            if not force and now < self._marker_checked_at + self.check_interval:
                return False
            self._marker_checked_at = now
            return True

    def distrust_before(self, before: float | None) -> None:
        """Treat L1 entries stamped before ``before`` as suspect (None: no change)."""
        if before is not None:
            with self._lock:
                self.trusted_after = max(self.trusted_after, before)

    def missed_write(self) -> float | None:
        """L1 missed a write: distrust older entries; the marker time to publish, if due."""
        now = self._clock()
        before = now + 2 * CLOCK_MARGIN  # covers this write and the next second's
        self.distrust_before(before)
        with self._lock:
            return before if self._marker_until < now + CLOCK_MARGIN else None

    def published(self, before: float) -> None:
        """The marker ``before`` is in L2: no need to write it again for a second."""
        with self._lock:
            self._marker_until = max(self._marker_until, before)


class _Skipped:
    """An L1 call that did not happen (breaker open) or failed."""


SKIPPED: Final = _Skipped()


class _Corrupt:
    """An L1 entry that could not be decoded."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class HybridSessionStore:
    """L1 cache + L2 source of truth, write-through, safe against L1 faults (see the module).

    L1 holds each value in a small envelope (its generation and write time), so give L1 a
    key prefix of its own; L2 holds plain values plus, after an L1 outage, one `MARKER_KEY`
    entry. Keys starting with `RESERVED_PREFIX` are the store's own and raise
    `SessionStoreError`.

    Args:
        l1: The cache tier; its failures are logged once per outage and bypassed.
        l2: The durable tier; its failures raise.
        l1_ttl: Most seconds an entry may live in L1 (None: as long as in L2).
        l1_timeout: Seconds an L1 call may take: async calls are cancelled then, and a sync
            call that took longer counts as a failure (bound sync calls with the L1 client's
            own timeout, e.g. ``RedisSessionStore.from_url(url, socket_timeout=...)``).
        l1_retry_after: Seconds to skip L1 after it failed before trying it again.
        l1_check_interval: Seconds between two reads of the missed-writes marker in L2.
        clock: Wall-clock seconds (tests inject one to move time without sleeping).

    Example:
        >>> store = HybridSessionStore(  # doctest: +SKIP
        ...     RedisSessionStore.from_url("redis://localhost:6379/0"),
        ...     PostgresSessionStore.from_conn_string("postgresql://app@db/app"),
        ... )
    """

    def __init__(
        self,
        l1: SessionStore,
        l2: SessionStore,
        *,
        l1_ttl: float | None = None,
        l1_timeout: float = 0.5,
        l1_retry_after: float = 5.0,
        l1_check_interval: float = 5.0,
        clock: Clock = wall_clock,
    ) -> None:
        for name, tier in (("l1", l1), ("l2", l2)):
            if not isinstance(tier, SessionStore):
                msg = (
                    f"{name} must be a session store (get/set/delete and their async twins), "
                    f"got {type(tier).__name__}"
                )
                raise TypeError(msg)
        self.l1 = l1
        self.l2 = l2
        self.l1_ttl = check_ttl(l1_ttl)
        self.l1_timeout = check_seconds(l1_timeout, parameter="l1_timeout")
        self.l1_check_interval = check_seconds(l1_check_interval, parameter="l1_check_interval")
        self._clock = clock
        self._breaker = CircuitBreaker(
            f"session store L1 ({type(l1).__name__})",
            retry_after=check_seconds(l1_retry_after, parameter="l1_retry_after"),
            clock=clock,
            logger=logger,
        )
        self._conditional = isinstance(l1, ConditionalSessionStore)
        self._generational = isinstance(l1, GenerationalSessionStore)
        self._trust = L1Trust(check_interval=self.l1_check_interval, clock=clock)

    def __repr__(self) -> str:
        return f"HybridSessionStore(l1={self.l1!r}, l2={self.l2!r})"

    @property
    def l1_state(self) -> str:
        """The L1 circuit breaker: ``closed`` (used), ``open`` (skipped) or ``half-open``."""
        return self._breaker.state

    # -- pure helpers shared by both halves ------------------------------------------------------

    def _l1_ttl(self, ttl: float | None) -> float | None:
        if ttl is None:
            return self.l1_ttl
        return ttl if self.l1_ttl is None else min(ttl, self.l1_ttl)

    def _generation(self, read: StoredSession | None = None) -> str:
        """L1's generation: the one L1 reported with ``read`` (atomically: a connection outlives
        a failback), else the last one it reported."""
        if not self._generational:
            return ""
        if read is not None and read.generation is not None:
            return read.generation
        return self.l1.generation or ""  # type: ignore[attr-defined]

    def _wrap(self, value: JsonDict) -> JsonDict:
        return wrap(value, generation=self._generation(), now=self._clock())

    def _tombstone(self) -> JsonDict:
        return pending(generation=self._generation(), now=self._clock())

    def _failed(self, exc: BaseException) -> None:
        detail = scrub(str(exc), None) or "no detail"
        self._breaker.failed(f"{type(exc).__name__}: {detail}")

    # -- sync --------------------------------------------------------------------------------

    def _l1_call(self, operation: Callable[[], _T]) -> _T | _Skipped:
        if not self._breaker.allow():
            return SKIPPED
        started = time.monotonic()
        try:
            result = operation()
        except Exception as exc:  # L1 is a cache: whatever it raises, L2 answers
            self._failed(exc)
            return SKIPPED
        elapsed = time.monotonic() - started
        if elapsed > self.l1_timeout:
            self._breaker.failed(f"answered after {elapsed:.2f} s (l1_timeout={self.l1_timeout:g})")
        elif self._breaker.succeeded():
            self._check_marker(force=True)
        return result

    def _check_marker(self, *, force: bool = False) -> StoreUnavailableError | None:
        """Read the L2 marker when due; L2's error when it did not answer, else None.

        An operation that got an error here fails with it rather than call L2 a second time:
        a frozen L2 costs one timeout per operation, not two.
        """
        if not self._trust.marker_due(force=force):
            return None
        try:
            marker = self.l2.get(MARKER_KEY)
        except StoreUnavailableError as exc:
            logger.debug("cannot read the L1 missed-writes marker from L2: %s", exc)
            return exc
        except SessionStoreError as exc:  # other L2 trouble shows on the operation itself
            logger.debug("cannot read the L1 missed-writes marker from L2: %s", exc)
            return None
        self._trust.distrust_before(marker_time(marker))
        return None

    def _read_l2(self, key: str, down: StoreUnavailableError | None) -> StoredSession | None:
        if down is not None:
            raise _unavailable(key, down)
        return read_entry(self.l2, key)

    def _l1_missed_write(self) -> None:
        before = self._trust.missed_write()
        if before is not None:
            # Before the L2 write L1 missed: a crash in between still leaves the mark.
            self.l2.set(MARKER_KEY, marker_value(before))
            self._trust.published(before)

    def _read_l1(self, key: str) -> StoredSession | _Corrupt | None:
        try:
            return read_entry(self.l1, key)
        except SessionDataError as exc:
            return _Corrupt(str(exc))

    def _drop_corrupt(self, key: str, corrupt: _Corrupt) -> None:
        logger.warning(
            "session store L1 entry for key %r is unreadable, dropping it: %s", key, corrupt.reason
        )
        self._l1_call(lambda: self.l1.delete(key))

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and remaining TTL from L1 when fresh, else from L2 (see the module)."""
        _check_session_key(key)
        down = self._check_marker()
        cached = self._l1_call(lambda: self._read_l1(key))
        if isinstance(cached, _Skipped):
            return self._read_l2(key, down)
        if isinstance(cached, _Corrupt):
            self._drop_corrupt(key, cached)
            cached = None
        if cached is not None:
            view = self._trust.view(cached.value, generation=self._generation(cached))
            if view.kind == "fresh" and view.value is not None:
                return StoredSession(view.value, cached.ttl)
            entry = self._read_l2(key, down)
            if view.kind == "suspect":
                stale = cached.value
                self._l1_call(lambda: self._replace(key, stale, entry))
            return entry
        entry = self._read_l2(key, down)
        if _live(entry):
            self._l1_call(lambda: self._add(key, entry))
        return entry

    def _add(self, key: str, entry: StoredSession | None) -> None:
        if entry is None:
            return
        if self._conditional:
            self.l1.add(key, self._wrap(entry.value), ttl=self._l1_ttl(entry.ttl))  # type: ignore[attr-defined]
        else:
            self.l1.set(key, self._wrap(entry.value), ttl=self._l1_ttl(entry.ttl))

    def _replace(self, key: str, stale: JsonDict, entry: StoredSession | None) -> None:
        fresh = self._wrap(entry.value) if _live(entry) and entry is not None else None
        ttl = self._l1_ttl(entry.ttl) if entry is not None else None
        if self._conditional:
            self.l1.replace(key, stale, fresh, ttl=ttl)  # type: ignore[attr-defined]
        elif fresh is None:
            self.l1.delete(key)
        else:
            self.l1.set(key, fresh, ttl=ttl)

    def _finish_write(
        self, key: str, tombstone: JsonDict, value: JsonDict, ttl: float | None
    ) -> None:
        fresh = self._wrap(value)
        if not self._conditional:
            self.l1.set(key, fresh, ttl=self._l1_ttl(ttl))
        elif not self.l1.replace(key, tombstone, fresh, ttl=self._l1_ttl(ttl)):  # type: ignore[attr-defined]
            # Another writer's tombstone (or value) is there: the order of the two L2 writes
            # is unknown here, so leave no value behind; the next read fetches L2's.
            self.l1.delete(key)

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        entry = self.get_entry(key)
        return None if entry is None else entry.value

    def _mark(self, key: str) -> JsonDict:
        """Put a tombstone in L1 before an L2 write (or publish that L1 missed it); return it."""
        down = self._check_marker()
        if down is not None:
            raise _unavailable(key, down)  # before L1 is touched: the write cannot happen
        tombstone = self._tombstone()
        if isinstance(
            self._l1_call(lambda: self.l1.set(key, tombstone, ttl=PENDING_TTL)), _Skipped
        ):
            self._l1_missed_write()
        return tombstone

    def _settle(
        self,
        key: str,
        tombstone: JsonDict,
        value: JsonDict | None,
        *,
        done: bool,
        ttl: float | None,
    ) -> None:
        """Bring L1 in line after a conditional L2 write (``done``: it happened)."""
        if not done:
            # L2 is unchanged by us: take our own tombstone away, and only ours.
            self._l1_call(lambda: self._drop_tombstone(key, tombstone))
        elif value is not None:
            self._l1_call(lambda: self._finish_write(key, tombstone, value, ttl))
        # A delete keeps its tombstone until it expires, as `delete` does.

    def _drop_tombstone(self, key: str, tombstone: JsonDict) -> None:
        if self._conditional:
            self.l1.replace(key, tombstone, None)  # type: ignore[attr-defined]
        else:
            self.l1.delete(key)

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Mark the key in L1, write L2 (errors raise), then put the value in L1."""
        _check_session_key(key)
        check_ttl(ttl)
        # Checked, and its secrets redacted once, before either tier is touched.
        value = clean_value(key, value)
        tombstone = self._mark(key)
        self.l2.set(key, value, ttl=ttl)
        self._l1_call(lambda: self._finish_write(key, tombstone, value, ttl))

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired in L2; True when stored.

        Atomic when L2 is a `ConditionalSessionStore` (every built-in store); with another L2
        it is a read, then a write, which a concurrent writer can race. L1 as for `set`.
        """
        _check_session_key(key)
        check_ttl(ttl)
        value = clean_value(key, value)
        tombstone = self._mark(key)
        done = _l2_add(self.l2, key, value, ttl)
        self._settle(key, tombstone, value, done=done, ttl=ttl)
        return done

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace L2's value only if it still equals ``expected`` (None: delete); True if done.

        Atomic when L2 is a `ConditionalSessionStore` (every built-in store); with another L2
        it is a read, then a write, which a concurrent writer can race. L1 as for `set`.
        """
        _check_session_key(key)
        check_ttl(ttl)
        compact_json(key, expected)
        value = None if value is None else clean_value(key, value)
        tombstone = self._mark(key)
        done = _l2_replace(self.l2, key, expected, value, ttl)
        self._settle(key, tombstone, value, done=done, ttl=ttl)
        return done

    def delete(self, key: str) -> None:
        """Mark the key in L1 (the mark expires by itself), then delete it from L2."""
        _check_session_key(key)
        self._mark(key)
        self.l2.delete(key)

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The live keys starting with ``prefix``, as L2 (the source of truth) lists them.

        L1 is a cache of L2: a key only L1 holds is no session. The store's own entries
        (`RESERVED_PREFIX`) are left out.

        Raises:
            SessionStoreError: L2 cannot list its keys (not a `ListableSessionStore`).
        """
        for key in self._listable_l2().keys(prefix):
            if not key.startswith(RESERVED_PREFIX):
                yield key

    async def akeys(self, prefix: str = "") -> AsyncIterator[str]:
        """Async twin of `keys`."""
        async for key in self._listable_l2().akeys(prefix):
            if not key.startswith(RESERVED_PREFIX):
                yield key

    def _listable_l2(self) -> ListableSessionStore:
        if not isinstance(self.l2, ListableSessionStore):
            msg = (
                f"HybridSessionStore cannot list keys: its L2 ({type(self.l2).__name__}) has no "
                "keys() method; give the keys yourself (e.g. forget(..., session_keys=[...]))"
            )
            raise SessionStoreError(msg)
        return self.l2

    def close(self) -> None:
        """Close both tiers (those that have a ``close`` method)."""
        for tier in (self.l1, self.l2):
            close = getattr(tier, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- async -------------------------------------------------------------------------------

    async def _al1_call(self, operation: Callable[[], Awaitable[_T]]) -> _T | _Skipped:
        if not self._breaker.allow():
            return SKIPPED
        try:
            async with asyncio.timeout(self.l1_timeout):
                result = await operation()
        except Exception as exc:  # TimeoutError included; cancellation is not caught
            self._failed(exc)
            return SKIPPED
        if self._breaker.succeeded():
            await self._acheck_marker(force=True)
        return result

    async def _acheck_marker(self, *, force: bool = False) -> StoreUnavailableError | None:
        if not self._trust.marker_due(force=force):
            return None
        try:
            marker = await self.l2.aget(MARKER_KEY)
        except StoreUnavailableError as exc:
            logger.debug("cannot read the L1 missed-writes marker from L2: %s", exc)
            return exc
        except SessionStoreError as exc:
            logger.debug("cannot read the L1 missed-writes marker from L2: %s", exc)
            return None
        self._trust.distrust_before(marker_time(marker))
        return None

    async def _aread_l2(self, key: str, down: StoreUnavailableError | None) -> StoredSession | None:
        if down is not None:
            raise _unavailable(key, down)
        return await aread_entry(self.l2, key)

    async def _al1_missed_write(self) -> None:
        before = self._trust.missed_write()
        if before is not None:
            await self.l2.aset(MARKER_KEY, marker_value(before))
            self._trust.published(before)

    async def _aread_l1(self, key: str) -> StoredSession | _Corrupt | None:
        try:
            return await aread_entry(self.l1, key)
        except SessionDataError as exc:
            return _Corrupt(str(exc))

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        _check_session_key(key)
        down = await self._acheck_marker()
        cached = await self._al1_call(lambda: self._aread_l1(key))
        if isinstance(cached, _Skipped):
            return await self._aread_l2(key, down)
        if isinstance(cached, _Corrupt):
            logger.warning(
                "session store L1 entry for key %r is unreadable, dropping it: %s",
                key,
                cached.reason,
            )
            await self._al1_call(lambda: self.l1.adelete(key))
            cached = None
        if cached is not None:
            view = self._trust.view(cached.value, generation=self._generation(cached))
            if view.kind == "fresh" and view.value is not None:
                return StoredSession(view.value, cached.ttl)
            entry = await self._aread_l2(key, down)
            if view.kind == "suspect":
                stale = cached.value
                await self._al1_call(lambda: self._areplace(key, stale, entry))
            return entry
        entry = await self._aread_l2(key, down)
        if _live(entry):
            await self._al1_call(lambda: self._aadd(key, entry))
        return entry

    async def _aadd(self, key: str, entry: StoredSession | None) -> None:
        if entry is None:
            return
        if self._conditional:
            await self.l1.aadd(key, self._wrap(entry.value), ttl=self._l1_ttl(entry.ttl))  # type: ignore[attr-defined]
        else:
            await self.l1.aset(key, self._wrap(entry.value), ttl=self._l1_ttl(entry.ttl))

    async def _areplace(self, key: str, stale: JsonDict, entry: StoredSession | None) -> None:
        fresh = self._wrap(entry.value) if _live(entry) and entry is not None else None
        ttl = self._l1_ttl(entry.ttl) if entry is not None else None
        if self._conditional:
            await self.l1.areplace(key, stale, fresh, ttl=ttl)  # type: ignore[attr-defined]
        elif fresh is None:
            await self.l1.adelete(key)
        else:
            await self.l1.aset(key, fresh, ttl=ttl)

    async def _afinish_write(
        self, key: str, tombstone: JsonDict, value: JsonDict, ttl: float | None
    ) -> None:
        fresh = self._wrap(value)
        if not self._conditional:
            await self.l1.aset(key, fresh, ttl=self._l1_ttl(ttl))
        elif not await self.l1.areplace(key, tombstone, fresh, ttl=self._l1_ttl(ttl)):  # type: ignore[attr-defined]
            await self.l1.adelete(key)

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        entry = await self.aget_entry(key)
        return None if entry is None else entry.value

    async def _amark(self, key: str) -> JsonDict:
        down = await self._acheck_marker()
        if down is not None:
            raise _unavailable(key, down)
        tombstone = self._tombstone()
        marked = await self._al1_call(lambda: self.l1.aset(key, tombstone, ttl=PENDING_TTL))
        if isinstance(marked, _Skipped):
            await self._al1_missed_write()
        return tombstone

    async def _asettle(
        self,
        key: str,
        tombstone: JsonDict,
        value: JsonDict | None,
        *,
        done: bool,
        ttl: float | None,
    ) -> None:
        if not done:
            await self._al1_call(lambda: self._adrop_tombstone(key, tombstone))
        elif value is not None:
            await self._al1_call(lambda: self._afinish_write(key, tombstone, value, ttl))

    async def _adrop_tombstone(self, key: str, tombstone: JsonDict) -> None:
        if self._conditional:
            await self.l1.areplace(key, tombstone, None)  # type: ignore[attr-defined]
        else:
            await self.l1.adelete(key)

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        _check_session_key(key)
        check_ttl(ttl)
        value = clean_value(key, value)
        tombstone = await self._amark(key)
        await self.l2.aset(key, value, ttl=ttl)
        await self._al1_call(lambda: self._afinish_write(key, tombstone, value, ttl))

    async def aadd(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        _check_session_key(key)
        check_ttl(ttl)
        value = clean_value(key, value)
        tombstone = await self._amark(key)
        done = await _al2_add(self.l2, key, value, ttl)
        await self._asettle(key, tombstone, value, done=done, ttl=ttl)
        return done

    async def areplace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Async twin of `replace`."""
        _check_session_key(key)
        check_ttl(ttl)
        compact_json(key, expected)
        value = None if value is None else clean_value(key, value)
        tombstone = await self._amark(key)
        done = await _al2_replace(self.l2, key, expected, value, ttl)
        await self._asettle(key, tombstone, value, done=done, ttl=ttl)
        return done

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        _check_session_key(key)
        await self._amark(key)
        await self.l2.adelete(key)

    async def aclose(self) -> None:
        """Close both tiers (``aclose``, else ``close``)."""
        for tier in (self.l1, self.l2):
            aclose: Any = getattr(tier, "aclose", None)
            if callable(aclose):
                await aclose()
            elif callable(getattr(tier, "close", None)):
                tier.close()  # type: ignore[attr-defined]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _check_session_key(key: str) -> None:
    check_key(key)
    if key.startswith(RESERVED_PREFIX):
        msg = (
            f"session key {key!r} is reserved: HybridSessionStore keeps its own entries in L2 "
            f"under {RESERVED_PREFIX!r}; use a key that does not start with it"
        )
        raise SessionStoreError(msg, key=key)


def _unavailable(key: str, failure: StoreUnavailableError) -> StoreUnavailableError:
    """L2's failure to read the marker, as the failure of the operation on ``key``."""
    return StoreUnavailableError(str(failure), key=key)


def _live(entry: StoredSession | None) -> bool:
    return entry is not None and (entry.ttl is None or entry.ttl > 0)


def _same(key: str, entry: StoredSession | None, expected: JsonDict) -> bool:
    return entry is not None and compact_json(key, entry.value) == compact_json(key, expected)


def _l2_add(store: SessionStore, key: str, value: JsonDict, ttl: float | None) -> bool:
    if isinstance(store, ConditionalSessionStore):
        return store.add(key, value, ttl=ttl)
    if read_entry(store, key) is not None:
        return False
    store.set(key, value, ttl=ttl)
    return True


def _l2_replace(
    store: SessionStore, key: str, expected: JsonDict, value: JsonDict | None, ttl: float | None
) -> bool:
    if isinstance(store, ConditionalSessionStore):
        return store.replace(key, expected, value, ttl=ttl)
    if not _same(key, read_entry(store, key), expected):
        return False
    if value is None:
        store.delete(key)
    else:
        store.set(key, value, ttl=ttl)
    return True


async def _al2_add(store: SessionStore, key: str, value: JsonDict, ttl: float | None) -> bool:
    if isinstance(store, ConditionalSessionStore):
        return await store.aadd(key, value, ttl=ttl)
    if await aread_entry(store, key) is not None:
        return False
    await store.aset(key, value, ttl=ttl)
    return True


async def _al2_replace(
    store: SessionStore, key: str, expected: JsonDict, value: JsonDict | None, ttl: float | None
) -> bool:
    if isinstance(store, ConditionalSessionStore):
        return await store.areplace(key, expected, value, ttl=ttl)
    if not _same(key, await aread_entry(store, key), expected):
        return False
    if value is None:
        await store.adelete(key)
    else:
        await store.aset(key, value, ttl=ttl)
    return True
