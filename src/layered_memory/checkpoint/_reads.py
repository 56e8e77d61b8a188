"""The read and write protocol of the cache, shared by the sync and async halves.

Read of a thread's latest checkpoint:

1. One Redis script returns the thread's current ``epoch|version`` (made fresh, under the
   server's replication id, when missing or left by another replication history), or "busy"
   while a write is in progress (then: the wrapped saver answers, nothing is cached).
2. A snapshot kept under exactly that version is restored: a hit.
3. Otherwise a signed payload from Redis (when a signing key is set), else the wrapped saver.
4. On the second read of one version in this process, the tuple is snapshotted (and its payload
   stored with a compare-and-set on the version read in step 1, before the wrapped saver was).

An async read that cannot keep anything (no snapshot held, version not yet read twice, no
signing key) sends step 1 and the wrapped saver's read at once: it only notes the version.

Write: mark the thread(s) pending and change the version, write through, unmark and change the
version again. Async writes send the mark alongside the wrapped write and wait for both; the
unmark then finishes in the background (the mark already keeps every worker off the thread).
If Redis fails at any step, the breaker opens and the repair after the outage bumps the global
epoch, so nothing cached before it is served again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from layered_memory._logs import get_logger
from layered_memory.checkpoint._codec import decode_payload, encode_payload, restore, snapshot
from layered_memory.checkpoint._local import LocalTuples
from layered_memory.checkpoint._redis_side import Read, RedisSide
from layered_memory.errors import CheckpointCacheError

__all__ = ["ReadPath"]

logger = get_logger("layered_memory.checkpoint")


def _target(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns") or "")


class ReadPath:
    """Reads of latest checkpoints through the two cache tiers, and the write brackets.

    Args:
        saver: The wrapped saver.
        redis_side: Redis I/O and breaker.
        local: The in-process snapshots.
        signing_key: HMAC key of Redis payloads; None keeps payloads out of Redis.
    """

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        redis_side: RedisSide,
        local: LocalTuples,
        *,
        signing_key: bytes | None,
    ) -> None:
        self._saver = saver
        self._redis = redis_side
        self._local = local
        self.signing_key = signing_key

    # -- pure steps ---------------------------------------------------------------------------

    def _scope(self, thread_id: str, ns: str) -> tuple[bytes, bytes, bytes]:
        encode = "utf-8", "surrogatepass"
        return self._redis.prefix.encode(), thread_id.encode(*encode), ns.encode(*encode)

    def _hit(self, thread_id: str, ns: str, read: Read) -> CheckpointTuple | None:
        blob = self._local.get(thread_id, ns, read.version)
        return None if blob is None else restore(blob)

    def _from_payload(self, thread_id: str, ns: str, read: Read) -> CheckpointTuple | None:
        if read.payload is None or self.signing_key is None:
            return None
        try:
            return decode_payload(
                self._saver.serde,
                read.payload,
                key=self.signing_key,
                scope=self._scope(thread_id, ns),
                version=read.version,
            )
        except CheckpointCacheError as exc:
            logger.warning("%s; reading thread %r from the wrapped saver", exc, thread_id)
        except Exception as exc:  # a signed payload the serde cannot read: same answer
            logger.warning(
                "cached checkpoint of thread %r could not be decoded (%s); reading the "
                "wrapped saver",
                thread_id,
                type(exc).__name__,
            )
        return None

    def _keep(
        self, thread_id: str, ns: str, read: Read, tup: CheckpointTuple, *, from_redis: bool
    ) -> bytes | None:
        """Snapshot on a version's second read; return the payload to store, if any."""
        if not self._local.admit(thread_id, ns, read.version):
            return None
        blob = snapshot(tup)
        if blob is not None:
            self._local.put(thread_id, ns, read.version, blob)
        if self.signing_key is None or from_redis:
            return None
        return encode_payload(
            self._saver.serde,
            tup,
            key=self.signing_key,
            scope=self._scope(thread_id, ns),
            version=read.version,
        )

    def _held(self, thread_id: str, ns: str) -> str | None:
        return self._local.version_of(thread_id, ns)

    # -- sync ---------------------------------------------------------------------------------

    def get(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The latest tuple of the config's thread and namespace."""
        thread_id, ns = _target(config)
        read = self._redis.read(
            thread_id, ns, held=self._held(thread_id, ns), payload=self.signing_key is not None
        )
        if read is None:
            return self._saver.get_tuple(config)
        hit = self._hit(thread_id, ns, read)
        if hit is not None:
            return hit
        tup = self._from_payload(thread_id, ns, read)
        from_redis = tup is not None
        if tup is None:
            tup = self._saver.get_tuple(config)
        if tup is not None:
            payload = self._keep(thread_id, ns, read, tup, from_redis=from_redis)
            if payload is not None:
                self._redis.fill(thread_id, ns, read.version, payload)
        return tup

    @contextmanager
    def writing(self, thread_ids: Sequence[str] | None) -> Iterator[None]:
        """Bracket a write of the wrapped saver on ``thread_ids`` (None: unknown threads)."""
        op = self._redis.new_op(thread_ids)
        self._forget(thread_ids)
        self._redis.begin(op)
        try:
            yield
        finally:
            self._forget(thread_ids)
            self._redis.end(op)

    def _forget(self, thread_ids: Sequence[str] | None) -> None:
        if thread_ids is None:
            self._local.clear()
        else:
            for thread_id in thread_ids:
                self._local.drop_thread(thread_id)

    # -- async --------------------------------------------------------------------------------

    async def aget(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of `get`; a read that keeps nothing asks Redis and the saver at once."""
        thread_id, ns = _target(config)
        if self.signing_key is None and not self._local.wants_ordered_read(thread_id, ns):
            # Nothing read here is kept (the read that keeps a snapshot asks Redis first), so
            # the two calls may overlap: a cold read costs the slower of them, not their sum.
            # The saver's query goes out first: the Redis client's own Python work then runs
            # while the database answers, instead of delaying its query.
            found, read = await asyncio.gather(
                self._saver.aget_tuple(config),
                self._redis.aread(thread_id, ns, held=None, payload=False),
            )
            tup: CheckpointTuple | None = found
            if read is not None and tup is not None:
                self._local.note_unordered_read(thread_id, ns, read.version)
            return tup
        read = await self._redis.aread(
            thread_id, ns, held=self._held(thread_id, ns), payload=self.signing_key is not None
        )
        if read is None:
            return await self._saver.aget_tuple(config)
        hit = self._hit(thread_id, ns, read)
        if hit is not None:
            return hit
        tup = self._from_payload(thread_id, ns, read)
        from_redis = tup is not None
        if tup is None:
            tup = await self._saver.aget_tuple(config)
        if tup is not None:
            payload = self._keep(thread_id, ns, read, tup, from_redis=from_redis)
            if payload is not None:
                await self._redis.afill(thread_id, ns, read.version, payload)
        return tup

    @asynccontextmanager
    async def awriting(self, thread_ids: Sequence[str] | None) -> AsyncIterator[None]:
        """Async twin of `writing`."""
        op = self._redis.new_op(thread_ids)
        self._forget(thread_ids)
        # The mark goes out while the wrapped saver writes; it is in Redis before this write
        # returns, and from then on no worker serves or fills the thread until the unmark,
        # which can therefore finish in the background.
        begin = asyncio.ensure_future(self._redis.abegin(op))
        try:
            yield
        finally:
            await begin
            self._forget(thread_ids)
            self._redis.spawn_end(op)
