"""The read and write protocol of the cache, shared by the sync and async halves, and the
per-process tier it reads first.

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

**The per-process tier** (`LocalTuples`): deserialized tuples kept as private snapshots,
checked against Redis.

Deserializing a 200-message checkpoint is most of what ``get_tuple`` costs, so a hit must not
deserialize: it restores an in-process snapshot (`snapshot`) after one Redis round
trip has confirmed the thread's version is unchanged.

Admission: a version is snapshotted on its second read in this process (async reads without a
signing key: on its third, because their first reads overlap the Redis and database calls,
which is only safe when nothing is kept). A thread read once per version (a chat turn reads its
thread once, then writes) never pays for a snapshot, so the cold path stays as cheap as the
wrapped saver; a thread read again (state polling, history views, several graphs on one thread)
becomes hot after that.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from layered_memory._logs import get_logger
from layered_memory.checkpoint._redis_side import Read, RedisSide, decode_payload, encode_payload
from layered_memory.errors import CheckpointCacheError

__all__ = ["LocalTuples", "ReadPath", "restore", "snapshot"]

logger = get_logger("layered_memory.checkpoint")


def snapshot(tup: CheckpointTuple) -> bytes | None:
    """A private copy of a tuple, kept in this process only; None when it cannot be copied.

    Callers get their own objects on every hit, so a caller that edits a message in place
    cannot change what the next caller gets. Safe to unpickle: these bytes are made here from
    objects the wrapped saver returned, live only in this process's memory, and are never
    written to or read from Redis or disk.
    """
    # Pickle: the fastest deep copy of a 200-message checkpoint (3-4x `copy.deepcopy`).
    try:
        return pickle.dumps(tup, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an unpicklable channel value: that thread is not kept in process
        return None


def restore(blob: bytes) -> CheckpointTuple:
    """A fresh copy of a tuple kept by `snapshot` (in-process bytes only, see there)."""
    tup: CheckpointTuple = pickle.loads(blob)
    return tup


@dataclass(slots=True)
class _Entry:
    version: str
    blob: bytes | None  # None: read once under `version`, not kept yet
    ready: bool = False  # read twice, concurrently with Redis: the next read keeps it


class LocalTuples:
    """An LRU of snapshots by thread and namespace, bounded in entries and bytes.

    Args:
        max_entries: Threads kept (0 turns the tier off).
        max_bytes: Total snapshot bytes kept.
    """

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._threads: OrderedDict[str, dict[str, _Entry]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything is ever kept."""
        return self._max_entries > 0

    def version_of(self, thread_id: str, checkpoint_ns: str) -> str | None:
        """The version of the kept snapshot, if any (sent to Redis to skip the payload)."""
        with self._lock:
            entry = self._threads.get(thread_id, {}).get(checkpoint_ns)
            return entry.version if entry is not None and entry.blob is not None else None

    def wants_ordered_read(self, thread_id: str, checkpoint_ns: str) -> bool:
        """Whether the next read may keep a snapshot, so Redis must answer before the database.

        True when a snapshot is held (it may be a hit) or the version was already read twice.
        """
        with self._lock:
            entry = self._threads.get(thread_id, {}).get(checkpoint_ns)
            return entry is not None and (entry.blob is not None or entry.ready)

    def note_unordered_read(self, thread_id: str, checkpoint_ns: str, version: str) -> None:
        """Record a read whose Redis and database calls overlapped (nothing is kept)."""
        if not self.enabled:
            return
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            entry = spaces.get(checkpoint_ns)
            if entry is not None and entry.version == version:
                entry.ready = True
            else:
                self._replace(spaces, checkpoint_ns, _Entry(version, None))
            self._evict()

    def get(self, thread_id: str, checkpoint_ns: str, version: str) -> bytes | None:
        """The snapshot kept under exactly ``version``, or None."""
        with self._lock:
            spaces = self._threads.get(thread_id)
            entry = spaces.get(checkpoint_ns) if spaces else None
            if entry is None or entry.version != version or entry.blob is None:
                return None
            self._threads.move_to_end(thread_id)
            return entry.blob

    def admit(self, thread_id: str, checkpoint_ns: str, version: str) -> bool:
        """Record a read of ``version`` that missed; True when it is the second one."""
        if not self.enabled:
            return False
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            entry = spaces.get(checkpoint_ns)
            if entry is not None and entry.version == version:
                return True
            self._replace(spaces, checkpoint_ns, _Entry(version, None))
            self._evict()
            return False

    def put(self, thread_id: str, checkpoint_ns: str, version: str, blob: bytes) -> None:
        """Keep a snapshot of ``version`` (dropped at once when larger than the byte budget)."""
        if not self.enabled or len(blob) > self._max_bytes:
            return
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            self._replace(spaces, checkpoint_ns, _Entry(version, blob))
            self._evict()

    def drop_thread(self, thread_id: str) -> None:
        """Forget every namespace of a thread."""
        with self._lock:
            for entry in self._threads.pop(thread_id, {}).values():
                self._bytes -= len(entry.blob or b"")

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._threads.clear()
            self._bytes = 0

    def _replace(self, spaces: dict[str, _Entry], checkpoint_ns: str, entry: _Entry) -> None:
        old = spaces.get(checkpoint_ns)
        if old is not None:
            self._bytes -= len(old.blob or b"")
        spaces[checkpoint_ns] = entry
        self._bytes += len(entry.blob or b"")

    def _evict(self) -> None:
        while self._threads and (
            len(self._threads) > self._max_entries or self._bytes > self._max_bytes
        ):
            _, spaces = self._threads.popitem(last=False)
            self._bytes -= sum(len(e.blob or b"") for e in spaces.values())


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
