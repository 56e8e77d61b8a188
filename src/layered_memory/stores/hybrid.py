"""Two-tier session store: a fast L1 (Redis, in-memory) in front of a durable L2 (PostgreSQL, file).

Reads try L1, and on a miss read L2 and backfill L1 with the entry's remaining lifetime.
Writes go to L2 first, then L1 (write-through). L1 is only a cache, so when it fails, reads and
writes still succeed through L2 and the failure is logged; L2 is the source of truth, so when it
fails, writes raise: the store never acknowledges a write that is not durable.
"""

from __future__ import annotations

import logging

from layered_memory.stores._common import JsonDict, check_key, check_ttl, encode_value
from layered_memory.stores.base import ExpiryAwareSessionStore, SessionStore, StoredSession

__all__ = ["HybridSessionStore"]

logger = logging.getLogger(__name__)


class HybridSessionStore:
    """L1 cache + L2 source of truth, write-through.

    Known limits of any cache in front of a database: an L1 that was down during a write or a
    delete may serve its older copy once it is back, until that copy expires (bound it with
    ``l1_ttl``); two writers racing on one key may leave L1 and L2 holding different (each
    complete) values until the next write.

    Args:
        l1: The cache tier; its failures are logged and bypassed.
        l2: The durable tier; its failures raise.
        l1_ttl: Most seconds an entry may live in L1 (None: as long as in L2).

    Example:
        >>> store = HybridSessionStore(  # doctest: +SKIP
        ...     RedisSessionStore.from_url("redis://localhost:6379/0"),
        ...     PostgresSessionStore.from_conn_string("postgresql://app@db/app"),
        ... )
    """

    def __init__(self, l1: SessionStore, l2: SessionStore, *, l1_ttl: float | None = None) -> None:
        self.l1 = l1
        self.l2 = l2
        self.l1_ttl = check_ttl(l1_ttl)

    def _l1_ttl(self, ttl: float | None) -> float | None:
        if ttl is None:
            return self.l1_ttl
        return ttl if self.l1_ttl is None else min(ttl, self.l1_ttl)

    def _l1_failed(self, operation: str, key: str, exc: Exception) -> None:
        logger.warning(
            "session store L1 (%s) %s failed for key %r, continuing with L2: %s",
            type(self.l1).__name__,
            operation,
            key,
            exc,
        )

    # -- sync ---------------------------------------------------------------------------------

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and remaining TTL from L1, else from L2 (backfilling L1)."""
        check_key(key)
        try:
            cached = _read(self.l1, key)
        except Exception as exc:  # an L1 outage must not fail the read
            self._l1_failed("get", key, exc)
            return _read(self.l2, key)
        if cached is not None:
            return cached
        entry = _read(self.l2, key)
        if entry is not None and (entry.ttl is None or entry.ttl > 0):
            try:
                self.l1.set(key, entry.value, ttl=self._l1_ttl(entry.ttl))
            except Exception as exc:
                self._l1_failed("backfill", key, exc)
        return entry

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        entry = self.get_entry(key)
        return None if entry is None else entry.value

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Write to L2 (errors raise), then to L1 (errors logged)."""
        check_key(key)
        check_ttl(ttl)
        encode_value(key, value)  # reject a bad value before either tier is touched
        self.l2.set(key, value, ttl=ttl)
        try:
            self.l1.set(key, value, ttl=self._l1_ttl(ttl))
        except Exception as exc:
            self._l1_failed("set", key, exc)
            self._forget_in_l1(key)

    def delete(self, key: str) -> None:
        """Delete from L2 (errors raise), then from L1 (errors logged)."""
        check_key(key)
        self.l2.delete(key)
        self._forget_in_l1(key)

    def _forget_in_l1(self, key: str) -> None:
        try:
            self.l1.delete(key)
        except Exception as exc:
            self._l1_failed("delete", key, exc)

    # -- async --------------------------------------------------------------------------------

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        check_key(key)
        try:
            cached = await _aread(self.l1, key)
        except Exception as exc:
            self._l1_failed("get", key, exc)
            return await _aread(self.l2, key)
        if cached is not None:
            return cached
        entry = await _aread(self.l2, key)
        if entry is not None and (entry.ttl is None or entry.ttl > 0):
            try:
                await self.l1.aset(key, entry.value, ttl=self._l1_ttl(entry.ttl))
            except Exception as exc:
                self._l1_failed("backfill", key, exc)
        return entry

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        entry = await self.aget_entry(key)
        return None if entry is None else entry.value

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        check_key(key)
        check_ttl(ttl)
        encode_value(key, value)
        await self.l2.aset(key, value, ttl=ttl)
        try:
            await self.l1.aset(key, value, ttl=self._l1_ttl(ttl))
        except Exception as exc:
            self._l1_failed("set", key, exc)
            await self._aforget_in_l1(key)

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        check_key(key)
        await self.l2.adelete(key)
        await self._aforget_in_l1(key)

    async def _aforget_in_l1(self, key: str) -> None:
        try:
            await self.l1.adelete(key)
        except Exception as exc:
            self._l1_failed("delete", key, exc)


def _read(store: SessionStore, key: str) -> StoredSession | None:
    if isinstance(store, ExpiryAwareSessionStore):
        return store.get_entry(key)
    value = store.get(key)
    return None if value is None else StoredSession(value, None)


async def _aread(store: SessionStore, key: str) -> StoredSession | None:
    if isinstance(store, ExpiryAwareSessionStore):
        return await store.aget_entry(key)
    value = await store.aget(key)
    return None if value is None else StoredSession(value, None)
