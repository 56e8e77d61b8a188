"""Redis I/O of the cache: one object per saver, a sync and an async half of every call.

Every call goes through the breaker: a failure is recorded (one warning per outage) and the
call returns None, which the saver reads as "answer from the wrapped saver". Nothing here
raises because of Redis.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from layered_memory._logs import get_logger
from layered_memory.checkpoint import _scripts
from layered_memory.checkpoint._codec import Keys, new_token, payload_field
from layered_memory.sessions.stores.resilience import CircuitBreaker

if TYPE_CHECKING:
    import redis as redis_sync
    import redis.asyncio as redis_async

__all__ = ["Op", "Read", "RedisSide"]

logger = get_logger("layered_memory.checkpoint")

# How long a write in progress keeps its thread out of the cache when its second step never
# reaches Redis (the writer died, or lost Redis mid-write). Long, because a write slower than
# this whose second step also failed could let a reader cache the older checkpoint.
WRITE_LEASE_MS = 300_000
# Unfinished writes remembered for the repair after an outage; older ones just expire.
_MAX_UNFINISHED = 1024
_SCRIPT_NAMES = ("READ", "FILL", "BEGIN_WRITE", "END_WRITE", "REPAIR")


@dataclass(frozen=True, slots=True)
class Read:
    """What Redis said about a thread: its current version and, maybe, a payload."""

    version: str
    payload: bytes | None


@dataclass(slots=True)
class Op:
    """A write in progress: the threads it marked (empty: global), and whether Redis saw it."""

    id: str
    scope: Literal["thread", "global"]
    threads: tuple[str, ...]
    begun: bool = False


def _redis() -> Any:
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        msg = "CachedCheckpointSaver needs the redis package: pip install 'layered-memory[redis]'"
        raise ImportError(msg) from exc
    return redis


class RedisSide:
    """Clients, scripts and breaker of one cached saver.

    Args:
        url: The Redis URL.
        where: ``url`` without its password, for logs.
        prefix: Key prefix.
        ttl_ms: Lifetime of a thread's version and payloads after its last write or fill.
        timeout: Socket and connect timeout, seconds.
        retry_after: Breaker cool-down, seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        where: str,
        prefix: str,
        ttl_ms: int,
        timeout: float,
        retry_after: float,
    ) -> None:
        self._redis = _redis()
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        # A fixed wait (no doubling): a Redis back from an outage is used again within
        # `retry_after`, as the saver's docstring promises.
        self.breaker = CircuitBreaker(
            f"Redis at {where}",
            retry_after=retry_after,
            max_retry_after=retry_after,
            logger=logger,
            while_open="checkpoints are served by the wrapped saver alone until it answers again",
            when_back="it answers again: checkpoint cache back in use",
        )
        self._url = url
        self._timeout = timeout
        self._errors: tuple[type[BaseException], ...] = (self._redis.RedisError, OSError)
        self._client: redis_sync.Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._aclient: redis_async.Redis | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._ascripts: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._unfinished: dict[str, Op] = {}
        self._tasks: set[asyncio.Future[None]] = set()

    # -- clients ------------------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        return {
            "socket_timeout": self._timeout,
            "socket_connect_timeout": self._timeout,
            "health_check_interval": 0,
        }

    def _sync(self) -> dict[str, Any]:
        with self._lock:
            if self._client is None:
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                # One retry on a broken connection (a restarted server), none on a timeout: a
                # frozen server must cost one timeout, not several.
                retry = Retry(NoBackoff(), 1, supported_errors=(self._redis.ConnectionError,))
                client = self._redis.Redis.from_url(self._url, retry=retry, **self._options())
                self._scripts = {
                    n: client.register_script(getattr(_scripts, n)) for n in _SCRIPT_NAMES
                }
                self._client = client
            return self._scripts

    def _async(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            import redis.asyncio as redis_async
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            retry = Retry(NoBackoff(), 1, supported_errors=(self._redis.ConnectionError,))
            # A client belongs to the event loop it was made in.
            client = redis_async.Redis.from_url(self._url, retry=retry, **self._options())
            self._ascripts = {
                n: client.register_script(getattr(_scripts, n)) for n in _SCRIPT_NAMES
            }
            self._aclient, self._aloop = client, loop
        return self._ascripts

    def close(self) -> None:
        """Close the sync client."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def spawn_end(self, op: Op) -> None:
        """Unmark a finished write in the background (kept until done; `aclose` waits for it).

        An unmark cancelled before it ran (its event loop ended: `asyncio.run` per request) is
        remembered and sent before this saver's next Redis call, so the thread is not left
        uncached for the whole write lease.
        """
        task = asyncio.ensure_future(self.aend(op))
        self._tasks.add(task)

        def done(finished: asyncio.Future[None]) -> None:
            self._tasks.discard(finished)
            if finished.cancelled() and op.begun:
                self._remember(op)

        task.add_done_callback(done)

    async def settle(self) -> None:
        """Wait for the background calls (the unmarks of finished writes)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))

    async def aclose(self) -> None:
        """Finish background calls, then close both clients (the async one only from the loop
        that made it)."""
        await self.settle()
        self.close()
        if self._aclient is not None:
            if self._aloop is asyncio.get_running_loop():
                await self._aclient.aclose()
            self._aclient = None

    # -- pure parts ---------------------------------------------------------------------------

    def _read_args(self, ns: str, held: str | None, *, payload: bool) -> list[Any]:
        field_name = payload_field(ns) if payload else b""
        return [new_token(), new_token(), self.ttl_ms, field_name, held or ""]

    @staticmethod
    def _parse_read(reply: Sequence[bytes]) -> Read | None:
        if not reply:
            return None  # a write is in progress: nothing may be served or filled
        payload = reply[1] if len(reply) > 1 else None
        try:
            version = reply[0].decode("ascii")
        except UnicodeDecodeError:  # READ only returns hex tokens: this one was planted
            return None
        return Read(version, payload)

    def _keys(self, thread_id: str) -> list[bytes]:
        return Keys.of(self.prefix, thread_id).as_list()

    def _write_calls(self, op: Op) -> list[tuple[list[bytes], list[Any]]]:
        threads = op.threads if op.scope == "thread" else ("",)
        return [(self._keys(t), [op.id, WRITE_LEASE_MS, op.scope]) for t in threads]

    def _unfinished_ops(self) -> list[Op]:
        with self._lock:
            ops = list(self._unfinished.values())
            self._unfinished.clear()
            return ops

    def _remember(self, op: Op) -> None:
        with self._lock:
            if len(self._unfinished) < _MAX_UNFINISHED:
                self._unfinished[op.id] = op

    def _failed(self, exc: BaseException, op: Op | None = None) -> None:
        if op is not None and op.begun:
            self._remember(op)
        self.breaker.failed(f"{type(exc).__name__}: {exc}")

    @staticmethod
    def new_op(threads: Sequence[str] | None) -> Op:
        """A write on ``threads`` (None: threads unknown, the whole cache)."""
        if threads is None:
            return Op(uuid.uuid4().hex, "global", ())
        return Op(uuid.uuid4().hex, "thread", tuple(dict.fromkeys(threads)))

    # -- sync ---------------------------------------------------------------------------------

    def _ready(self, *, writing: bool = False) -> dict[str, Any] | None:
        # A write tries Redis even in the breaker's cool-down: while its mark is not sent,
        # other workers keep serving the thread's older checkpoint. One timeout bounds it.
        if not self.breaker.allow(force=writing):
            return None
        scripts = self._sync()
        if self.breaker.is_open or self._unfinished:
            try:
                self._repair(scripts)
            except self._errors as exc:
                self._failed(exc)
                return None
            self.breaker.succeeded()
        return scripts

    def _repair(self, scripts: dict[str, Any]) -> None:
        if self.breaker.is_open:
            self._run_many(scripts["REPAIR"], [([Keys.of(self.prefix, "").epoch], [])])
        for op in self._unfinished_ops():
            self._run_many(scripts["END_WRITE"], self._write_calls(op))

    def _run_many(self, script: Any, calls: list[tuple[list[bytes], list[Any]]]) -> None:
        # EVAL with the text, not EVALSHA: when Redis is frozen, the command queued in its socket
        # runs when it wakes up, and an EVALSHA of a script it never loaded would just fail.
        assert self._client is not None
        pipe = self._client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.eval(script.script, len(keys), *keys, *args)
        pipe.execute()

    def read(self, thread_id: str, ns: str, *, held: str | None, payload: bool) -> Read | None:
        """The thread's current version (and payload); None: use the wrapped saver."""
        scripts = self._ready()
        if scripts is None:
            return None
        try:
            reply = scripts["READ"](
                keys=self._keys(thread_id), args=self._read_args(ns, held, payload=payload)
            )
        except self._errors as exc:
            self._failed(exc)
            return None
        return self._parse_read(reply)

    def fill(self, thread_id: str, ns: str, version: str, payload: bytes) -> None:
        """Store a payload if the thread is still at ``version``."""
        scripts = self._ready()
        if scripts is None:
            return
        try:
            scripts["FILL"](
                keys=self._keys(thread_id), args=[version, payload_field(ns), payload, self.ttl_ms]
            )
        except self._errors as exc:
            self._failed(exc)

    def begin(self, op: Op) -> None:
        """Mark the threads pending and change their versions, before the wrapped write."""
        scripts = self._ready(writing=True)
        if scripts is None:
            return
        try:
            self._run_many(scripts["BEGIN_WRITE"], self._write_calls(op))
        except self._errors as exc:
            # The marks may have reached Redis (a frozen server runs them when it wakes up).
            op.begun = True
            self._failed(exc, op)
            return
        op.begun = True

    def end(self, op: Op) -> None:
        """Clear the marks and change the versions again, after the wrapped write."""
        scripts = self._ready()
        if scripts is None:
            if op.begun:
                self._remember(op)
            return
        try:
            self._run_many(scripts["END_WRITE"], self._write_calls(op))
        except self._errors as exc:
            self._failed(exc, op)

    # -- async --------------------------------------------------------------------------------

    async def _aready(self, *, writing: bool = False) -> dict[str, Any] | None:
        if not self.breaker.allow(force=writing):
            return None
        scripts = self._async()
        if self.breaker.is_open or self._unfinished:
            try:
                await self._arepair(scripts)
            except self._errors as exc:
                self._failed(exc)
                return None
            self.breaker.succeeded()
        return scripts

    async def _arepair(self, scripts: dict[str, Any]) -> None:
        if self.breaker.is_open:
            await self._arun_many(scripts["REPAIR"], [([Keys.of(self.prefix, "").epoch], [])])
        for op in self._unfinished_ops():
            await self._arun_many(scripts["END_WRITE"], self._write_calls(op))

    async def _arun_many(self, script: Any, calls: list[tuple[list[bytes], list[Any]]]) -> None:
        assert self._aclient is not None
        pipe = self._aclient.pipeline(transaction=False)
        for keys, args in calls:
            pipe.eval(script.script, len(keys), *keys, *args)
        await pipe.execute()

    async def aread(
        self, thread_id: str, ns: str, *, held: str | None, payload: bool
    ) -> Read | None:
        """Async twin of `read`."""
        scripts = await self._aready()
        if scripts is None:
            return None
        try:
            reply = await scripts["READ"](
                keys=self._keys(thread_id), args=self._read_args(ns, held, payload=payload)
            )
        except self._errors as exc:
            self._failed(exc)
            return None
        return self._parse_read(reply)

    async def afill(self, thread_id: str, ns: str, version: str, payload: bytes) -> None:
        """Async twin of `fill`."""
        scripts = await self._aready()
        if scripts is None:
            return
        try:
            await scripts["FILL"](
                keys=self._keys(thread_id), args=[version, payload_field(ns), payload, self.ttl_ms]
            )
        except self._errors as exc:
            self._failed(exc)

    async def abegin(self, op: Op) -> None:
        """Async twin of `begin`."""
        scripts = await self._aready(writing=True)
        if scripts is None:
            return
        try:
            await self._arun_many(scripts["BEGIN_WRITE"], self._write_calls(op))
        except self._errors as exc:
            op.begun = True
            self._failed(exc, op)
            return
        op.begun = True

    async def aend(self, op: Op) -> None:
        """Async twin of `end`."""
        scripts = await self._aready()
        if scripts is None:
            if op.begun:
                self._remember(op)
            return
        try:
            await self._arun_many(scripts["END_WRITE"], self._write_calls(op))
        except self._errors as exc:
            self._failed(exc, op)
