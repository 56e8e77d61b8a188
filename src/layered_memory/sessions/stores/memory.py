"""In-process session store: a dict with per-entry TTL, evicted lazily on read."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import AsyncIterator, Generator

from layered_memory.core.validation import check_ttl
from layered_memory.sessions.stores.base import (
    KEY_PAGE_SIZE,
    Clock,
    JsonDict,
    PagedKeys,
    StoredSession,
    check_key,
    check_prefix,
    decode_value,
    encode_value,
)

__all__ = ["InMemorySessionStore"]


class InMemorySessionStore(PagedKeys):
    """A thread-safe in-process store; entries expire lazily (no background thread).

    Values are kept as JSON text, so every adapter has the same value semantics: what ``get``
    returns is a fresh dict, and mutating a dict after ``set`` does not change the stored value.

    Args:
        clock: Seconds-returning clock for expiry (default ``time.monotonic``); tests inject one.

    Example:
        >>> store = InMemorySessionStore()
        >>> store.set("entity:acme:research", {"summary": "..."}, ttl=3600)
        >>> store.get("entity:acme:research")
        {'summary': '...'}
    """

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[str, float | None]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of entries held, expired ones not yet evicted included."""
        return len(self._entries)

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None (evicting it) when expired."""
        check_key(key)
        now = self._clock()
        with self._lock:
            stored = self._entries.get(key)
            if stored is None:
                return None
            text, expires_at = stored
            if expires_at is not None and expires_at <= now:
                del self._entries[key]
                return None
        remaining = None if expires_at is None else expires_at - now
        return StoredSession(decode_value(key, text), remaining)

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        entry = self.get_entry(key)
        return None if entry is None else entry.value

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (None: until deleted)."""
        check_key(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        expires_at = None if seconds is None else self._clock() + seconds
        with self._lock:
            self._entries[key] = (text, expires_at)

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        check_key(key)
        with self._lock:
            self._entries.pop(key, None)

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired; True when stored."""
        check_key(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        now = self._clock()
        with self._lock:
            stored = self._entries.get(key)
            if stored is not None and (stored[1] is None or stored[1] > now):
                return False
            self._entries[key] = (text, None if seconds is None else now + seconds)
        return True

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected`` (None: delete); True if done."""
        check_key(key)
        seconds = check_ttl(ttl)
        expected_text = encode_value(key, expected)
        text = None if value is None else encode_value(key, value)
        now = self._clock()
        with self._lock:
            stored = self._entries.get(key)
            if stored is None or stored[0] != expected_text:
                return False
            if stored[1] is not None and stored[1] <= now:
                return False
            if text is None:
                del self._entries[key]
            else:
                self._entries[key] = (text, None if seconds is None else now + seconds)
        return True

    def _key_pages(self, prefix: str) -> Generator[list[str]]:
        # The names are copied under the lock (references: 8 bytes a key), then read a page
        # at a time; a key written meanwhile may or may not be listed, as with every store.
        with self._lock:
            names = list(self._entries)
        keys = iter(names)
        while page := list(itertools.islice(keys, KEY_PAGE_SIZE)):
            now = self._clock()
            with self._lock:
                live = [
                    key
                    for key in page
                    if key.startswith(prefix)
                    and (stored := self._entries.get(key)) is not None
                    and (stored[1] is None or stored[1] > now)
                ]
            if live:
                yield live

    def purge_expired(self) -> int:
        """Drop every expired entry now; returns how many were dropped."""
        now = self._clock()
        with self._lock:
            expired = [
                key for key, (_, exp) in self._entries.items() if exp is not None and exp <= now
            ]
            for key in expired:
                del self._entries[key]
        return len(expired)

    # Nothing here blocks for long, so the async twins call the sync methods directly.
    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        return self.get_entry(key)

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        return self.get(key)

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        self.set(key, value, ttl=ttl)

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        self.delete(key)

    async def aadd(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        return self.add(key, value, ttl=ttl)

    async def akeys(self, prefix: str = "") -> AsyncIterator[str]:
        """Async twin of `keys`."""
        for page in self._key_pages(check_prefix(prefix)):
            for key in page:
                yield key

    async def areplace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Async twin of `replace`."""
        return self.replace(key, expected, value, ttl=ttl)
