"""Redis session store (the ``redis`` extra): one string per session, expiry by SETEX semantics.

Redis is the usual L1 of a `HybridSessionStore`: fast, shared by every worker, expiring entries
on its own. The ``redis`` package is imported only when a store is built.

Faults: every command waits at most ``socket_timeout`` (1 s by default) and is retried only
when the connection broke (a restarted server), never after a timeout (a frozen server would
not answer the retry either); failures raise `StoreUnavailableError` naming the URL without its
password. The server's replication id (`RedisSessionStore.generation`) is read on each new
connection and with every `get_entry`, in the same script as the entry: it changes when the
server restarts (possibly from an older snapshot) and when it is promoted (a failover, or a
failback to an old primary that kept its ``run_id``), so a cache above it can tell entries
written before. The async methods keep one client per event loop, so the store works across
``asyncio.run`` calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from layered_memory._logs import get_logger
from layered_memory.core.validation import check_ttl
from layered_memory.errors import SessionStoreError, StoreUnavailableError, StoreURLError
from layered_memory.sessions.stores.base import (
    KEY_PAGE_SIZE,
    JsonDict,
    SkippedNames,
    StoredSession,
    check_key,
    check_prefix,
    decode_value,
    encode_value,
)
from layered_memory.sessions.stores.urls import driver_detail, redact_url, scrub

if TYPE_CHECKING:
    import redis as redis_sync
    import redis.asyncio as redis_async

__all__ = ["DEFAULT_REDIS_PREFIX", "RedisSessionStore"]

logger = get_logger(__name__)

DEFAULT_REDIS_PREFIX = "layered_memory:session:"
_INSTALL_HINT = "RedisSessionStore needs the redis package: pip install 'layered-memory[redis]'"
_REPLID = re.compile(rb"^master_replid:([0-9a-fA-F]+)\s*$", re.MULTILINE)
# One entry with its remaining lifetime and the server's replication id, read atomically (also
# faster than MULTI GET PTTL EXEC through redis-py). INFO may be refused by an ACL: then no id.
_READ_SCRIPT = """
local info = redis.pcall('INFO', 'replication')
local replid = false
if type(info) == 'string' then replid = string.match(info, 'master_replid:(%x+)') or false end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), replid}
"""
_READ_SHA = hashlib.sha1(_READ_SCRIPT.encode(), usedforsecurity=False).hexdigest()
# Compare-and-set: replace (or delete, when ARGV[2] is empty) only if the value is unchanged.
_REPLACE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1])
elseif ARGV[3] == '' then redis.call('SET', KEYS[1], ARGV[2])
else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"""

_T = TypeVar("_T")
_GLOB_SPECIAL = re.compile(rb"([*?\[\]\\])")


def _import_redis() -> Any:
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ImportError(_INSTALL_HINT) from exc
    return redis


@dataclass
class _LoopClient:
    """The async client of one event loop, and the generator that closes it with the loop."""

    loop: weakref.ref[asyncio.AbstractEventLoop]
    client: redis_async.Redis
    closer: Any  # the suspended async generator of `_close_with_loop`


class RedisSessionStore:
    """Sessions in Redis under ``<prefix><key>``, each with its own expiry.

    Build it with `from_url`; close it with `close` / `aclose` (or use it as a context
    manager). Network failures raise `StoreUnavailableError` naming the URL without its password.

    Args:
        client: A sync ``redis.Redis`` client (``decode_responses=False``).
        aclient: An async ``redis.asyncio.Redis`` client for the async methods, used on the
            first event loop that calls them; other event loops get their own client made from
            ``url``. When None, every event loop's client is made from ``url``.
        prefix: Prepended to every key, so several apps (or tests) can share one database.
        url: The server URL, used to make async clients and in error messages (password removed).
        client_options: Keyword arguments for the async clients made from ``url`` (timeouts
            and ``retries``); `from_url` fills them in.

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
        self._given_aclient = aclient
        self.prefix = prefix
        self._url = url
        self._client_options = dict(client_options or {})
        self._lock = threading.Lock()
        self._aclients: dict[int, _LoopClient] = {}
        self._generation: str | None = None
        self._generation_unknown_logged = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_REDIS_PREFIX,
        socket_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        retries: int = 1,
    ) -> RedisSessionStore:
        """Connect (lazily) to the Redis server at ``url``.

        Args:
            url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://``, ``unix://``).
            prefix: Prepended to every key.
            socket_timeout: Seconds to wait for a reply: the most a frozen server costs a call.
            connect_timeout: Seconds to wait for a connection.
            retries: Retries of a command whose connection broke (redis-py retries 3 to 10
                times, on timeouts too). A timeout is never retried.

        Returns:
            The store; no connection is made until the first command.

        Raises:
            StoreURLError: ``url`` is malformed (a `ValueError`); the message names it without
                its password.
        """
        redis = _import_redis()
        options: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
        }
        stores: list[RedisSessionStore] = []

        def on_connect(connection: Any) -> None:  # the store is built after its client
            stores[0]._on_connect(connection)

        failure: StoreURLError | None = None
        try:
            client = redis.Redis.from_url(
                url,
                retry=_retry(retries),
                redis_connect_func=on_connect,
                **options,
            )
        except ValueError as exc:
            where = redact_url(url)
            detail = driver_detail(str(exc), url)
            failure = StoreURLError(f"invalid Redis URL {where}: {detail}", url=where)
        if failure is not None:
            # Raised outside the `except`: the driver's exception may quote the whole URL.
            raise failure
        stores.append(
            cls(client, prefix=prefix, url=url, client_options={**options, "retries": retries})
        )
        return stores[0]

    @property
    def generation(self) -> str | None:
        """The replication id (``master_replid``) the server last reported (None: unknown).

        Redis gives a server a new one when it restarts (from any snapshot), when a replica is
        promoted, when a replica resyncs (it takes its primary's) and when a primary's backlog
        is created or freed; so it changes whenever the data may have lost acknowledged writes
        (a failback to an old primary too, whose ``run_id`` stays), which lets
        `HybridSessionStore` distrust entries cached before. Read on each new connection (stores
        built with `from_url`) and with every `get_entry`, which also returns it with the entry
        (`StoredSession.generation`).
        """
        return self._generation

    def __repr__(self) -> str:
        where = redact_url(self._url) if self._url else "<client>"
        return f"RedisSessionStore(url={where!r}, prefix={self.prefix!r})"

    # -- connection events ---------------------------------------------------------------------

    def _on_connect(self, connection: Any) -> None:
        connection.on_connect()
        try:
            connection.send_command("INFO", "replication")
            reply = connection.read_response()
        except self._redis.ResponseError as exc:  # INFO refused by the server's ACL
            self._generation_unavailable(exc)
            reply = None
        self._note_generation(_replid(reply))

    async def _aon_connect(self, connection: Any) -> None:
        await connection.on_connect()
        try:
            await connection.send_command("INFO", "replication")
            reply = await connection.read_response()
        except self._redis.ResponseError as exc:  # INFO refused by the server's ACL
            self._generation_unavailable(exc)
            reply = None
        self._note_generation(_replid(reply))

    def _generation_unavailable(self, exc: Exception) -> None:
        if not self._generation_unknown_logged:
            self._generation_unknown_logged = True
            logger.warning(
                "Redis at %s refused INFO (%s): a restart from an older snapshot or a failover "
                "cannot be detected; grant the +info command to detect it",
                self._where(),
                exc,
            )

    def _note_generation(self, replid: str | None) -> None:
        if replid == self._generation:  # every read: no lock for the usual case
            return
        with self._lock:
            previous, self._generation = self._generation, replid
        if previous not in (None, replid) and replid is not None:
            logger.warning(
                "Redis at %s has a new replication history (replication id changed): it "
                "restarted, was restored from a snapshot, was promoted or failed over, or its "
                "backlog was reset; entries cached before are checked once",
                self._where(),
            )

    # -- errors --------------------------------------------------------------------------------

    def _where(self) -> str:
        return redact_url(self._url) if self._url else "Redis"

    def _error(self, exc: Exception, key: str | None) -> SessionStoreError:
        # redis-py splits a URL at the last `@`, so a raw `@` in the password works: no hint.
        detail = scrub(str(exc), self._url) or type(exc).__name__
        if isinstance(exc, self._redis.TimeoutError):
            timeout = self._client_options.get("socket_timeout")
            within = f" within {timeout:g} s" if isinstance(timeout, int | float) else ""
            msg = (
                f"Redis at {self._where()} did not answer{within} (frozen, overloaded or cut "
                f"off?): {detail}"
            )
            return StoreUnavailableError(msg, key=key)
        if isinstance(exc, self._redis.ConnectionError):
            return StoreUnavailableError(
                f"Redis at {self._where()} is unreachable: {detail}", key=key
            )
        return SessionStoreError(f"Redis at {self._where()} failed: {detail}", key=key)

    def _call(self, operation: Callable[[], _T], key: str | None) -> _T:
        """Run a sync command; a driver error becomes the package's error, raised unchained."""
        try:
            return operation()
        except self._redis.RedisError as exc:
            failure = self._error(exc, key)
        raise failure

    async def _acall(
        self, operation: Callable[[redis_async.Redis], Awaitable[_T]], key: str | None
    ) -> _T:
        """Run an async command on this event loop's client; errors as in `_call`."""
        client = await self._async_client()
        try:
            return await operation(client)
        except self._redis.RedisError as exc:
            failure = self._error(exc, key)
        raise failure

    # -- one async client per event loop -------------------------------------------------------

    async def _async_client(self) -> redis_async.Redis:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._aclients.get(id(loop))
            if entry is not None and entry.loop() is loop:
                return entry.client
            self._forget_dead_loops()
            client = self._new_async_client()
            closer = _close_with_loop(self, id(loop), client)
            self._aclients[id(loop)] = _LoopClient(weakref.ref(loop), client, closer)
        # Started on this loop, the generator is closed by the loop's shutdown_asyncgens()
        # (which asyncio.run calls), and its `finally` closes the client while the loop still
        # runs: no connection outlives its loop, and no "Event loop is closed" later.
        await closer.asend(None)
        return client

    def _new_async_client(self) -> redis_async.Redis:
        if self._given_aclient is not None:
            client, self._given_aclient = self._given_aclient, None
            return client
        if self._url is None:
            msg = (
                "RedisSessionStore has no URL to open a client for this event loop: build it "
                "with RedisSessionStore.from_url(), or pass url= with aclient="
            )
            raise SessionStoreError(msg)
        import redis.asyncio as redis_async

        options = dict(self._client_options)
        retries = options.pop("retries", 1)
        return redis_async.Redis.from_url(
            self._url,
            retry=_async_retry(retries),
            redis_connect_func=self._aon_connect,
            **options,
        )

    def _forget_dead_loops(self) -> None:
        for loop_id, entry in list(self._aclients.items()):
            loop = entry.loop()
            if loop is None or loop.is_closed():
                # Its loop ended without shutting down async generators (loop.close() without
                # asyncio.run): nothing can close the client any more; let it go.
                del self._aclients[loop_id]

    def _loop_closed(self, loop_id: int, client: redis_async.Redis) -> None:
        with self._lock:
            entry = self._aclients.get(loop_id)
            if entry is not None and entry.client is client:
                del self._aclients[loop_id]

    # -- sync ----------------------------------------------------------------------------------

    def _name(self, key: str) -> str:
        return self.prefix + check_key(key)

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value, its remaining TTL and the server's replication id read with it,
        or None when missing or expired."""
        name = self._name(key)

        def run() -> Any:
            try:
                return self._client.evalsha(_READ_SHA, 1, name)
            except self._redis.exceptions.NoScriptError:  # new server, or SCRIPT FLUSH
                return self._client.eval(_READ_SCRIPT, 1, name)

        return self._entry(key, self._call(run, key))

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        name = self._name(key)
        raw = self._call(lambda: self._client.get(name), key)
        return None if raw is None else decode_value(key, raw)

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Store ``value``; with a ttl, atomically with its expiry (``SET ... EX``, i.e. SETEX)."""
        name = self._name(key)
        ex, px = _expiry(check_ttl(ttl))
        text = encode_value(key, value)
        self._call(lambda: self._client.set(name, text, ex=ex, px=px), key)

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing (``SET ... NX``); True when stored."""
        name = self._name(key)
        ex, px = _expiry(check_ttl(ttl))
        text = encode_value(key, value)
        return bool(self._call(lambda: self._client.set(name, text, ex=ex, px=px, nx=True), key))

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected`` (None: delete), atomically."""
        args = self._replace_args(key, expected, value, ttl)
        return bool(self._call(lambda: self._client.eval(_REPLACE_SCRIPT, 1, *args), key))

    def _replace_args(
        self, key: str, expected: JsonDict, value: JsonDict | None, ttl: float | None
    ) -> tuple[str, str, str, str]:
        name = self._name(key)
        seconds = check_ttl(ttl)
        text = "" if value is None else encode_value(key, value)
        px = "" if seconds is None else str(math.ceil(seconds * 1000))
        return name, encode_value(key, expected), text, px

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        name = self._name(key)
        self._call(lambda: self._client.delete(name), key)

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The live keys under this store's prefix that start with ``prefix``.

        One ``SCAN`` per page (``MATCH`` on the store's prefix, ``COUNT`` `KEY_PAGE_SIZE`),
        never ``KEYS``: the server answers other clients between pages. A key may be listed
        twice (SCAN's own guarantee); a name under the prefix that is no session key (not
        UTF-8, too long) is skipped with a warning.
        """
        match = self._match(check_prefix(prefix))
        skipped = SkippedNames(f"Redis at {self._where()}")
        cursor: Any = 0
        while True:

            def scan(at: Any = cursor) -> Any:
                return self._client.scan(at, match=match, count=KEY_PAGE_SIZE)

            cursor, names = self._call(scan, None)
            yield from self._listed(names, skipped)
            if int(cursor) == 0:
                skipped.report()
                return

    async def akeys(self, prefix: str = "") -> AsyncIterator[str]:
        """Async twin of `keys`."""
        match = self._match(check_prefix(prefix))
        skipped = SkippedNames(f"Redis at {self._where()}")
        cursor: Any = 0
        while True:

            async def scan(client: redis_async.Redis, at: Any = cursor) -> Any:
                return await client.scan(at, match=match, count=KEY_PAGE_SIZE)

            cursor, names = await self._acall(scan, None)
            for key in self._listed(names, skipped):
                yield key
            if int(cursor) == 0:
                skipped.report()
                return

    def _match(self, prefix: str) -> bytes:
        # The pattern is the store's prefix and the caller's, glob characters escaped: a key
        # holding `*` or `[` matches itself only.
        literal = (self.prefix + prefix).encode("utf-8")
        return _GLOB_SPECIAL.sub(rb"\\\1", literal) + b"*"

    def _listed(self, names: list[Any], skipped: SkippedNames) -> list[str]:
        start = len(self.prefix.encode("utf-8"))
        keys = []
        for name in names:
            raw = name if isinstance(name, bytes) else str(name).encode("utf-8")
            try:
                key: object = raw[start:].decode("utf-8")
            except UnicodeDecodeError:
                key = raw[start:]
            found = skipped.key(key)
            if found is not None:
                keys.append(found)
        return keys

    def close(self) -> None:
        """Close the sync client; async clients of event loops still running close with them."""
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

    # -- async ---------------------------------------------------------------------------------

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        name = self._name(key)

        async def run(client: redis_async.Redis) -> Any:
            try:
                return await client.evalsha(_READ_SHA, 1, name)  # type: ignore[misc]
            except self._redis.exceptions.NoScriptError:
                return await client.eval(_READ_SCRIPT, 1, name)  # type: ignore[misc]

        return self._entry(key, await self._acall(run, key))

    def _entry(self, key: str, reply: Any) -> StoredSession | None:
        raw, pttl, replid = reply
        generation = replid.decode("ascii") if isinstance(replid, bytes) else None
        self._note_generation(generation)
        # PTTL is -2 for a missing key and -1 for a key without expiry.
        if raw is None or pttl == -2:
            return None
        ttl = None if pttl < 0 else pttl / 1000
        return StoredSession(decode_value(key, raw), ttl, generation)

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        name = self._name(key)
        raw = await self._acall(lambda client: client.get(name), key)
        return None if raw is None else decode_value(key, raw)

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        name = self._name(key)
        ex, px = _expiry(check_ttl(ttl))
        text = encode_value(key, value)
        await self._acall(lambda client: client.set(name, text, ex=ex, px=px), key)

    async def aadd(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        name = self._name(key)
        ex, px = _expiry(check_ttl(ttl))
        text = encode_value(key, value)
        return bool(
            await self._acall(lambda client: client.set(name, text, ex=ex, px=px, nx=True), key)
        )

    async def areplace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Async twin of `replace`."""
        args = self._replace_args(key, expected, value, ttl)
        return bool(await self._acall(lambda client: client.eval(_REPLACE_SCRIPT, 1, *args), key))

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        name = self._name(key)
        await self._acall(lambda client: client.delete(name), key)

    async def aclose(self) -> None:
        """Close the sync client and this event loop's async client."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._aclients.pop(id(loop), None)
        if entry is not None and entry.loop() is loop:
            await entry.closer.aclose()
        if self._given_aclient is not None:  # given but never used
            await self._given_aclient.aclose()
            self._given_aclient = None
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


async def _close_with_loop(
    store: RedisSessionStore, loop_id: int, client: redis_async.Redis
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        store._loop_closed(loop_id, client)
        await client.aclose()


def _replid(reply: object) -> str | None:
    if isinstance(reply, str):
        reply = reply.encode()
    if not isinstance(reply, bytes):
        return None
    match = _REPLID.search(reply)
    return match.group(1).decode("ascii") if match else None


def _expiry(seconds: float | None) -> tuple[int | None, int | None]:
    """``(ex, px)`` for ``SET``: whole seconds as EX, sub-second TTLs exactly as PX."""
    # `SET key value EX n` is SETEX spelled the way Redis (and redis-py, which deprecates
    # `setex()`) recommend: value and expiry are written atomically either way.
    if seconds is None:
        return None, None
    if seconds.is_integer():
        return int(seconds), None
    return None, math.ceil(seconds * 1000)


def _retry(retries: int) -> Any:
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.retry import Retry

    # Only a broken connection is retried: after a restart the pooled sockets are dead, and
    # one reconnect succeeds. A timeout is not: a frozen server would time out again.
    return Retry(ExponentialBackoff(cap=0.2, base=0.01), retries, (RedisConnectionError,))


def _async_retry(retries: int) -> Any:
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return Retry(ExponentialBackoff(cap=0.2, base=0.01), retries, (RedisConnectionError,))
