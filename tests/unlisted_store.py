"""A session store of a user's own: the port's methods and no key listing (`keys`)."""

from __future__ import annotations

from typing import Any

from layered_memory.sessions.stores import InMemorySessionStore


class UnlistedStore:
    """The port's methods over an in-memory store, without `keys`/`akeys`."""

    def __init__(self) -> None:
        self.inner = InMemorySessionStore()

    def get(self, key: str) -> Any:
        return self.inner.get(key)

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    async def aget(self, key: str) -> Any:
        return self.inner.get(key)

    async def aset(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    async def adelete(self, key: str) -> None:
        self.inner.delete(key)
