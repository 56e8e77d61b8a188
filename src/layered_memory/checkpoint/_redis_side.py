"""The Redis side of the cache: its keys, the signed payloads, the Lua scripts, and the I/O
(`RedisSide`: one object per saver, a sync and an async half of every call).

Every call goes through the breaker: a failure is recorded (one warning per outage) and the
call returns None, which the saver reads as "answer from the wrapped saver". Nothing here
raises because of Redis.

**Keys and payloads** (pure, shared by both halves): the Redis key names of a thread, the
random tokens, and the signed payload format of the tuples Redis holds.

**The Lua scripts** that keep the Redis side of the cache consistent (one round trip each).

Redis holds, per thread, a *version token* and (with a signing key) the serialized latest tuple
of each namespace; a global *epoch* token covers what cannot be tied to one thread. A cached
tuple is served only while ``epoch|version`` is exactly what it was when the tuple was read from
the wrapped saver. Three rules make that safe:

- Every token is ``<replid>:<hex>``, made under the server's replication id (``master_replid``
  of ``INFO replication``); a token of another shape or another replication id is never
  trusted (it is replaced). Redis gives a server a new replication id whenever its data may
  have lost writes it acknowledged: at every start (a restart from an older RDB; Redis 7 keeps
  the old id only as ``master_replid2``), at every promotion of a replica (``REPLICAOF NO
  ONE``, a Sentinel or cluster failover), and when a replica resyncs it takes its primary's.
  So a failback (the old primary demoted, resynced and promoted again in the same process,
  its ``run_id`` unchanged) brings back old tokens under a new id, and everything misses. The
  scripts refuse a server that is not a primary (a replica shares its primary's id, and its
  writes would never reach the primary): the call fails and the wrapped saver answers. The
  id also changes, harmlessly (one cold cache), when a primary without a backlog gets its
  first replica and when it frees its backlog (``repl-backlog-ttl`` after its last replica).
- A writer marks the thread *pending* (with a lease) and drops its token before writing to the
  wrapped saver, and drops it again (clearing the mark) after; the next read makes a fresh
  random token, which no worker holds a snapshot under. While a mark is pending nothing
  is served or filled for that thread, so a write whose second step never reached Redis leaves
  the thread uncached until the lease runs out, never stale.
- A fill is a compare-and-set on the token read *before* the wrapped saver was read.

Scripts read the replication id with ``INFO replication`` (as cheap as ``INFO server``, the
``run_id`` the tokens carried before: a ``run_id`` survives a failback) so no client-side state
can be out of date, whatever the connection saw. Keys of the wrong type (planted, or left by
another program) are deleted.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from layered_memory._logs import get_logger
from layered_memory.errors import CheckpointCacheError
from layered_memory.sessions.stores.resilience import CircuitBreaker

if TYPE_CHECKING:
    import redis as redis_sync
    import redis.asyncio as redis_async

__all__ = [
    "BEGIN_WRITE",
    "END_WRITE",
    "FILL",
    "READ",
    "REPAIR",
    "SAFE_SERDE_TYPES",
    "Keys",
    "Op",
    "Read",
    "RedisSide",
    "decode_payload",
    "encode_payload",
    "new_token",
    "payload_field",
]

logger = get_logger("layered_memory.checkpoint")

# Serializer type tags whose decoding never runs pickle. `EncryptedSerializer` appends
# "+<cipher>"; only the part before it names the format. JsonPlusSerializer decodes "pickle"
# with `pickle.loads` when built with pickle_fallback=True: such bytes are never stored in,
# nor accepted from, Redis.
SAFE_SERDE_TYPES = frozenset({"msgpack", "json", "null", "bytes", "bytearray"})
_MAC_BYTES = 32
_SEP = b"\n"


def new_token() -> str:
    """A random token suffix (the scripts prefix it with the server's replication id)."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Keys:
    """The Redis keys of one thread under a prefix.

    Attributes:
        epoch: The global epoch token (bumped by `delete_for_runs` and after outages).
        thread: Hash with the thread's version token ``v`` and one payload per namespace.
        pending: Sorted set of the thread's writes in progress (score: lease end, ms).
        global_pending: Sorted set of writes in progress that touch unknown threads.
    """

    epoch: bytes
    thread: bytes
    pending: bytes
    global_pending: bytes

    @classmethod
    def of(cls, prefix: str, thread_id: str) -> Keys:
        """Keys of ``thread_id``; the id is kept readable (``redis-cli --scan`` by prefix)."""
        base = prefix.encode()
        # surrogatepass: a thread id with a lone surrogate must not make Redis calls fail.
        tid = thread_id.encode("utf-8", "surrogatepass")
        return cls(base + b"epoch", base + b"t:" + tid, base + b"p:" + tid, base + b"pending")

    def as_list(self) -> list[bytes]:
        """KEYS of every script, in the order the scripts expect."""
        return [self.epoch, self.thread, self.pending, self.global_pending]


def payload_field(checkpoint_ns: str) -> bytes:
    """The hash field holding the latest tuple of one namespace."""
    return b"d:" + checkpoint_ns.encode("utf-8", "surrogatepass")


def _mac(key: bytes, parts: tuple[bytes, ...]) -> bytes:
    digest = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        # Length-prefixed, so no two different part lists sign the same bytes.
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


def _safe_type(type_tag: str) -> bool:
    return type_tag.split("+", 1)[0] in SAFE_SERDE_TYPES


def encode_payload(
    serde: SerializerProtocol,
    tup: CheckpointTuple,
    *,
    key: bytes,
    scope: tuple[bytes, bytes, bytes],
    version: str,
) -> bytes | None:
    """Serialize a tuple with the wrapped saver's serde, signed; None when it must not be stored.

    Args:
        serde: The wrapped saver's serializer.
        tup: The tuple as the wrapped saver returned it.
        key: The HMAC key.
        scope: Prefix, thread id and namespace (bound into the signature, so a payload cannot be
            replayed under another thread).
        version: The ``epoch|version`` the payload is valid for.

    Returns:
        ``version \\n mac type \\n data``, or None when the serde produced a type that could
        unpickle (or anything it cannot encode).
    """
    body = [tup.config, tup.checkpoint, tup.metadata, tup.parent_config, tup.pending_writes]
    try:
        type_tag, data = serde.dumps_typed(body)
    except Exception:  # the wrapped saver stored it, so only our envelope can fail
        return None
    if not _safe_type(type_tag) or "\n" in type_tag:
        return None
    head = version.encode()
    tag = type_tag.encode()
    mac = _mac(key, (*scope, head, tag, data))
    return head + _SEP + mac + tag + _SEP + data


def decode_payload(
    serde: SerializerProtocol,
    raw: bytes,
    *,
    key: bytes,
    scope: tuple[bytes, bytes, bytes],
    version: str,
) -> CheckpointTuple:
    """Check a payload read from Redis and decode it; anything odd raises.

    The signature is checked before a single byte reaches the serializer, and the type tag must
    be one whose decoding cannot unpickle (checked again after the signature, in case a signer
    was misconfigured).

    Raises:
        CheckpointCacheError: Wrong version, bad signature, unsafe type tag, or a shape that is
            not a checkpoint tuple.
    """
    thread = scope[1].decode("utf-8", "surrogatepass")
    head, sep, rest = raw.partition(_SEP)
    if not sep or head != version.encode():
        raise CheckpointCacheError(thread, "payload belongs to another version")
    mac, rest = rest[:_MAC_BYTES], rest[_MAC_BYTES:]
    tag, sep, data = rest.partition(_SEP)
    if not sep or not hmac.compare_digest(mac, _mac(key, (*scope, head, tag, data))):
        raise CheckpointCacheError(thread, "payload signature does not match")
    type_tag = tag.decode("ascii", "replace")
    if not _safe_type(type_tag):
        raise CheckpointCacheError(thread, f"payload type {type_tag!r} is not allowed")
    body = serde.loads_typed((type_tag, data))
    return _as_tuple(thread, body)


def _as_tuple(thread: str, body: Any) -> CheckpointTuple:
    if not (isinstance(body, list) and len(body) == 5):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    config, checkpoint, metadata, parent_config, writes = body
    if not (isinstance(config, dict) and isinstance(checkpoint, dict)):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    if not isinstance(metadata, dict) or not (
        parent_config is None or isinstance(parent_config, dict)
    ):
        raise CheckpointCacheError(thread, "payload is not a checkpoint tuple")
    pending = None
    if writes is not None:
        if not all(isinstance(w, list | tuple) and len(w) == 3 for w in writes):
            raise CheckpointCacheError(thread, "payload has malformed pending writes")
        pending = [(w[0], w[1], w[2]) for w in writes]
    return CheckpointTuple(config, checkpoint, metadata, parent_config, pending)  # type: ignore[arg-type]


# The replication id every token is made under; refuses a server that is not a primary.
_SERVER = """
local info = redis.call('INFO', 'replication')
local replid = string.match(info, 'master_replid:(%x+)')
if not replid then
  return redis.error_reply('INFO replication has no master_replid: the checkpoint cache needs '
    .. 'Redis 4.0.2 or later (or a server that reports it)')
end
if not string.find(info, 'role:master', 1, true) then
  return redis.error_reply('this Redis server is a replica: the checkpoint cache needs the '
    .. 'primary (redis_url)')
end
"""

_PRELUDE = (
    _SERVER
    + """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local function ensure_type(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then redis.call('DEL', key) end
end
local function current(token)
  -- The whole token, not its start: bytes planted after a valid replication id are never served.
  return token and string.match(token, '^' .. replid .. ':%x+$') ~= nil
end
local function pending(key)
  ensure_type(key, 'zset')
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key) > 0
end
ensure_type(KEYS[1], 'string')
ensure_type(KEYS[2], 'hash')
"""
)

# KEYS: epoch, thread hash, thread pending zset, global pending zset.
# ARGV: fresh epoch suffix, fresh version suffix, ttl ms, payload field ('' = none),
#       the version the caller already holds ('' = none).
# Returns {} while a write is pending, else {version} or {version, payload}.
READ = (
    _PRELUDE
    + """
if pending(KEYS[3]) or pending(KEYS[4]) then return {} end
local epoch = redis.call('GET', KEYS[1])
if not current(epoch) then
  epoch = replid .. ':' .. ARGV[1]
  redis.call('SET', KEYS[1], epoch, 'PX', ARGV[3])
end
local version = redis.call('HGET', KEYS[2], 'v')
if not current(version) then
  version = replid .. ':' .. ARGV[2]
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'v', version)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
local full = epoch .. '|' .. version
if ARGV[4] ~= '' and ARGV[5] ~= full then
  local payload = redis.call('HGET', KEYS[2], ARGV[4])
  if payload and string.sub(payload, 1, #full + 1) == full .. '\\n' then
    return {full, payload}
  end
end
return {full}
"""
)

# KEYS: as READ. ARGV: the version read before the wrapped saver was, payload field, payload,
# ttl ms. Returns 1 when stored, 0 when the thread changed meanwhile.
FILL = (
    _PRELUDE
    + """
if pending(KEYS[3]) or pending(KEYS[4]) then return 0 end
local epoch = redis.call('GET', KEYS[1])
local version = redis.call('HGET', KEYS[2], 'v')
if not (current(epoch) and current(version)) then return 0 end
if epoch .. '|' .. version ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
)

# Dropping a token is enough to change it: the next READ makes a fresh random one, which no
# worker holds a snapshot under. It also leaves nothing behind a deleted thread.
_DROP_TOKEN = """
if ARGV[3] == 'global' then
  redis.call('DEL', KEYS[1])
else
  redis.call('DEL', KEYS[2])
end
return 1
"""

# KEYS: as READ. ARGV: operation id, lease ms, 'thread' | 'global'.
BEGIN_WRITE = (
    _PRELUDE
    + """
local marks = KEYS[3]
if ARGV[3] == 'global' then marks = KEYS[4] end
ensure_type(marks, 'zset')
redis.call('ZADD', marks, now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', marks, ARGV[2])
"""
    + _DROP_TOKEN
)

END_WRITE = (
    _PRELUDE
    + """
local marks = KEYS[3]
if ARGV[3] == 'global' then marks = KEYS[4] end
ensure_type(marks, 'zset')
redis.call('ZREM', marks, ARGV[1])
"""
    + _DROP_TOKEN
)

# KEYS: epoch. After an outage whatever was cached before is stale: drop the epoch (on the
# primary: a repair that reached a replica must not close the breaker).
REPAIR = (
    _SERVER
    + """
redis.call('DEL', KEYS[1])
return 1
"""
)

_SCRIPTS = {
    "READ": READ,
    "FILL": FILL,
    "BEGIN_WRITE": BEGIN_WRITE,
    "END_WRITE": END_WRITE,
    "REPAIR": REPAIR,
}


# How long a write in progress keeps its thread out of the cache when its second step never
# reaches Redis (the writer died, or lost Redis mid-write). Long, because a write slower than
# this whose second step also failed could let a reader cache the older checkpoint.
WRITE_LEASE_MS = 300_000
# Unfinished writes remembered for the repair after an outage; older ones just expire.
_MAX_UNFINISHED = 1024


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
                    n: client.register_script(source) for n, source in _SCRIPTS.items()
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
            self._ascripts = {n: client.register_script(source) for n, source in _SCRIPTS.items()}
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
