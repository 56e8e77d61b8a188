"""The session store port: what every adapter implements, and what the hybrid store needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from layered_memory.sessions.stores._common import JsonDict

__all__ = [
    "ConditionalSessionStore",
    "ExpiryAwareSessionStore",
    "GenerationalSessionStore",
    "SessionStore",
    "StoredSession",
]


@runtime_checkable
class SessionStore(Protocol):
    """A key-value store of session data: JSON-serializable dicts with an optional TTL.

    ``get`` returns None for a missing or expired key; ``set`` replaces the whole value (last
    write wins); ``delete`` of a missing key is not an error. Each method has an async twin.
    """

    def get(self, key: str) -> JsonDict | None:
        """Return the value stored under ``key``, or None when missing or expired."""
        ...

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, expiring after ``ttl`` seconds (None: never)."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""
        ...

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        ...

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        ...

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        ...


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A stored value with its remaining lifetime.

    Attributes:
        value: The stored dict.
        ttl: Seconds until it expires, or None when it never does.
        generation: The store's `GenerationalSessionStore.generation`, read atomically with
            the value (None: the store does not say).
    """

    value: JsonDict
    ttl: float | None
    generation: str | None = None


@runtime_checkable
class ExpiryAwareSessionStore(SessionStore, Protocol):
    """A store that can also tell how long an entry has left to live.

    `HybridSessionStore` uses it to backfill L1 with the entry's remaining lifetime, so L1 never
    serves a value L2 has already expired. Every built-in adapter implements it.
    """

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None when missing or expired."""
        ...

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        ...


@runtime_checkable
class ConditionalSessionStore(SessionStore, Protocol):
    """A store with atomic conditional writes (memcached's ``add``, a compare-and-set).

    `HybridSessionStore` uses them on its L1 so a reader's backfill can never overwrite a
    writer's newer value, and a stale entry is replaced only if nobody changed it meanwhile;
    `register_session_save` merges with them, so writers in several processes lose no update.
    Every built-in store implements it (atomically across processes; `HybridSessionStore` as
    its L2 does).
    """

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired; True when stored."""
        ...

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected`` (None: delete); True if done."""
        ...

    async def aadd(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        ...

    async def areplace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Async twin of `replace`."""
        ...


@runtime_checkable
class GenerationalSessionStore(Protocol):
    """A store whose server may come back with older data, and that can tell when it did.

    ``generation`` names the history of the data the store serves (Redis: the server's
    replication id, ``master_replid``). It changes whenever that data may have lost writes it
    acknowledged: the server restarted (possibly from an older snapshot), a replica was
    promoted, or an old primary was demoted, resynced and promoted again (a failback; its
    ``run_id`` stays, so the ``run_id`` is not enough). An entry stamped with another generation
    may be older than its source. A connection survives a role change, so the store reports
    the generation with each entry it reads (`StoredSession.generation`); the property is the
    last one seen. None until the first connection, or when the server does not say.
    """

    @property
    def generation(self) -> str | None:
        """The current server instance's id, or None when unknown."""
        ...
