"""STUB — being written (issue 5). Session stores."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SessionStore(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...
    async def aget(self, key: str) -> dict[str, Any] | None: ...


class InMemorySessionStore: ...


class FileSessionStore: ...


class RedisSessionStore: ...


class PostgresSessionStore: ...


class HybridSessionStore: ...
