"""The async twins of a store whose I/O blocks (files; psycopg's sync pool): each runs the sync
method in a worker thread, so an event loop never waits on the disk or the network."""

from __future__ import annotations

import asyncio
from typing import Protocol

from layered_memory.sessions.stores._common import JsonDict
from layered_memory.sessions.stores.base import StoredSession

__all__ = ["ThreadedAsyncTwins"]


class _Blocking(Protocol):
    def get_entry(self, key: str) -> StoredSession | None: ...
    def get(self, key: str) -> JsonDict | None: ...
    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None: ...
    def delete(self, key: str) -> None: ...
    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool: ...
    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool: ...


class ThreadedAsyncTwins:
    """`aget_entry`, `aget`, `aset`, `adelete`, `aadd`, `areplace` over the sync methods."""

    async def aget_entry(self: _Blocking, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        return await asyncio.to_thread(self.get_entry, key)

    async def aget(self: _Blocking, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        return await asyncio.to_thread(self.get, key)

    async def aset(self: _Blocking, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        await asyncio.to_thread(self.set, key, value, ttl=ttl)

    async def adelete(self: _Blocking, key: str) -> None:
        """Async twin of `delete`."""
        await asyncio.to_thread(self.delete, key)

    async def aadd(self: _Blocking, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        return await asyncio.to_thread(self.add, key, value, ttl=ttl)

    async def areplace(
        self: _Blocking,
        key: str,
        expected: JsonDict,
        value: JsonDict | None,
        *,
        ttl: float | None = None,
    ) -> bool:
        """Async twin of `replace`."""
        return await asyncio.to_thread(self.replace, key, expected, value, ttl=ttl)
