"""Redis session store (the ``redis`` extra): one string per session, expiry by SETEX semantics.

Redis is the usual L1 of a `HybridSessionStore`: fast, shared by every worker, expiring entries
on its own. The ``redis`` package is imported only when a store is built.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self

from layered_memory.errors import SessionStoreError, StoreUnavailableError
from layered_memory.stores._common import (
    JsonDict,
    check_key,
    check_ttl,
    decode_value,
    encode_value,
    redact_url,
    scrub,
)
from layered_memory.stores.base import StoredSession

if TYPE_CHECKING:
    import redis as redis_sync
    import redis.asyncio as redis_async

__all__ = ["DEFAULT_REDIS_PREFIX", "RedisSessionStore"]

DEFAULT_REDIS_PREFIX = "layered_memory:session:"
_INSTALL_HINT = "RedisSessionStore needs the redis package: pip install 'layered-memory[redis]'"


def _import_redis() -> Any:
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ImportError(_INSTALL_HINT) from exc
    return redis


class RedisSessionStore:
    """Sessions in Redis under ``<prefix><key>``, each with its own expiry.

    Build it with `from_url`; close it with `close` / `aclose` (or use it as a context
    manager). Network failures raise `StoreUnavailableError` naming the URL without its password.

    Args:
        client: A sync ``redis.Redis`` client (``decode_responses=False``).
        aclient: An async ``redis.asyncio.Redis`` client for the async methods; when None, one is
            made from ``url`` on first async use.
        prefix: Prepended to every key, so several apps (or tests) can share one database.
        url: The server URL, used to make ``aclient`` and in error messages (password removed).
        client_options: Keyword arguments for the lazily made ``aclient`` (timeouts and
            ``retries``); `from_url` fills them in.

    Example:
        >>> store = RedisSessionStore.from_url("redis://localhost:6379/0")  # doctest: +SKIP
        >>> store.set("entity:acme:research", {"summary": "..."}, ttl=3600)  # doctest: +SKIP
    """

    def __init__(
        self,
        client: redis_sync.Redis,
        *,
        aclient: redis_async.Redis | None = None,
        prefix: str = DEFAULT_REDIS_PREFIX,
        url: str | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self._redis = _import_redis()
        self._client = client
        self._aclient = aclient
        self.prefix = prefix
        self._url = url
        self._client_options = dict(client_options or {})

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_REDIS_PREFIX,
        socket_timeout: float = 2.0,
        connect_timeout: float = 2.0,
        retries: int = 2,
    ) -> RedisSessionStore:
        """Connect (lazily) to the Redis server at ``url``.

        Args:
            url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://``, ``unix://``).
            prefix: Prepended to every key.
            socket_timeout: Seconds to wait for a reply.
            connect_timeout: Seconds to wait for a connection.
            retries: Retries of a failed command. Kept low (redis-py retries 10 times by
                default) so a dead L1 costs milliseconds, not seconds, before the hybrid store
                falls back to L2.

        Returns:
            The store; no connection is made until the first command.
        """
        redis = _import_redis()
        options: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
        }
        client = redis.Redis.from_url(url, retry=_sync_retry(retries), **options)
        return cls(
            client,
            prefix=prefix,
            url=url,
            client_options={**options, "retries": retries},
        )

    def _name(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _raise(self, exc: Exception, key: str | None) -> NoReturn:
        where = redact_url(self._url) if self._url else "Redis"
        detail = scrub(str(exc), self._url) if self._url else str(exc)
        if isinstance(exc, self._redis.ConnectionError | self._redis.TimeoutError):
            msg = f"Redis at {where} is unreachable: {detail}"
            raise StoreUnavailableError(msg, key=key) from None
        msg = f"Redis at {where} failed: {detail}"
        raise SessionStoreError(msg, key=key) from None

    def _async_client(self) -> redis_async.Redis:
        if self._aclient is None:
            if self._url is None:
                msg = "RedisSessionStore needs aclient= or url= for its async methods"
                raise SessionStoreError(msg)
            import redis.asyncio as redis_async

            options = dict(self._client_options)
            retries = options.pop("retries", 2)
            self._aclient = redis_async.Redis.from_url(
                self._url, retry=_async_retry(retries), **options
            )
        return self._aclient

    # -- sync ---------------------------------------------------------------------------------

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None when missing or expired."""
        name = self._name(key)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.get(name)
            pipe.pttl(name)
            raw, pttl = pipe.execute()
        except self._redis.RedisError as exc:
            self._raise(exc, key)
        return _entry(key, raw, pttl)

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        name = self._name(key)
        try:
            raw = self._client.get(name)
        except self._redis.RedisError as exc:
            self._raise(exc, key)
        return None if raw is None else decode_value(key, raw)

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Store ``value``; with a ttl, atomically with its expiry (``SET ... EX``, i.e. SETEX)."""
        name = self._name(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        try:
            ex, px = _expiry(seconds)
            self._client.set(name, text, ex=ex, px=px)
        except self._redis.RedisError as exc:
            self._raise(exc, key)

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        name = self._name(key)
        try:
            self._client.delete(name)
        except self._redis.RedisError as exc:
            self._raise(exc, key)

    def close(self) -> None:
        """Close the sync client (use `aclose` when the async methods were used)."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- async --------------------------------------------------------------------------------

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        name = self._name(key)
        try:
            pipe = self._async_client().pipeline(transaction=True)
            pipe.get(name)
            pipe.pttl(name)
            raw, pttl = await pipe.execute()
        except self._redis.RedisError as exc:
            self._raise(exc, key)
        return _entry(key, raw, pttl)

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        name = self._name(key)
        try:
            raw = await self._async_client().get(name)
        except self._redis.RedisError as exc:
            self._raise(exc, key)
        return None if raw is None else decode_value(key, raw)

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        name = self._name(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        client = self._async_client()
        try:
            ex, px = _expiry(seconds)
            await client.set(name, text, ex=ex, px=px)
        except self._redis.RedisError as exc:
            self._raise(exc, key)

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        name = self._name(key)
        try:
            await self._async_client().delete(name)
        except self._redis.RedisError as exc:
            self._raise(exc, key)

    async def aclose(self) -> None:
        """Close both clients."""
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _expiry(seconds: float | None) -> tuple[int | None, int | None]:
    """``(ex, px)`` for ``SET``: whole seconds as EX, sub-second TTLs exactly as PX."""
    # `SET key value EX n` is SETEX spelled the way Redis (and redis-py, which deprecates
    # `setex()`) recommend: value and expiry are written atomically either way.
    if seconds is None:
        return None, None
    if seconds.is_integer():
        return int(seconds), None
    return None, math.ceil(seconds * 1000)


def _entry(key: str, raw: bytes | None, pttl: int) -> StoredSession | None:
    # PTTL is -2 for a missing key and -1 for a key without expiry.
    if raw is None or pttl == -2:
        return None
    return StoredSession(decode_value(key, raw), None if pttl < 0 else pttl / 1000)


def _sync_retry(retries: int) -> Any:
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return Retry(ExponentialBackoff(cap=0.2, base=0.01), retries)


def _async_retry(retries: int) -> Any:
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff

    return Retry(ExponentialBackoff(cap=0.2, base=0.01), retries)
