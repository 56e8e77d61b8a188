"""`CachedCheckpointSaver`: a cache-aside Redis L1 in front of any LangGraph checkpoint saver.

Reads of a thread's latest checkpoint are answered from a per-process snapshot after one Redis
round trip confirms the thread has not changed; everything else (`list`, reads of a given
checkpoint id, delta-channel history) goes to the wrapped saver untouched. Writes go to the
wrapped saver, bracketed by two Redis scripts that make every process drop what it holds for the
thread. See `_redis_side` for why that stays correct across processes, Redis restarts and outages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)

from layered_memory.checkpoint._reads import LocalTuples, ReadPath
from layered_memory.checkpoint._redis_side import RedisSide
from layered_memory.core.validation import check_int, check_seconds
from layered_memory.sessions.stores.urls import redact_url

__all__ = ["DEFAULT_PREFIX", "CachedCheckpointSaver"]

DEFAULT_PREFIX = "layered_memory:checkpoint:"

# Capability methods, as the conformance suite detects them (a method the class overrides).
# The wrapper defines exactly those its wrapped saver overrides, so it claims nothing more.
_CAPABILITY_METHODS = (
    "get_tuple",
    "aget_tuple",
    "list",
    "alist",
    "put",
    "aput",
    "put_writes",
    "aput_writes",
    "delete_thread",
    "adelete_thread",
    "delete_for_runs",
    "adelete_for_runs",
    "copy_thread",
    "acopy_thread",
    "prune",
    "aprune",
)
_CLASSES: dict[frozenset[str], type[CachedCheckpointSaver]] = {}


def _overrides(saver_type: type, name: str) -> bool:
    return getattr(saver_type, name, None) is not getattr(BaseCheckpointSaver, name, None)


def _class_for(saver_type: type) -> type[CachedCheckpointSaver]:
    names = frozenset(n for n in _CAPABILITY_METHODS if _overrides(saver_type, n))
    cls = _CLASSES.get(names)
    if cls is None:
        methods = {n: _Capabilities.__dict__[n] for n in names}
        cls = type("CachedCheckpointSaver", (CachedCheckpointSaver,), methods)
        cls.__qualname__ = "CachedCheckpointSaver"
        _CLASSES[names] = cls
    return cls


_INSTALL_HINT = "CachedCheckpointSaver needs the redis package: pip install 'layered-memory[redis]'"


def _check_url(redis_url: object) -> str:
    if not isinstance(redis_url, str):
        msg = f"redis_url must be a str, got {type(redis_url).__name__}"
        raise TypeError(msg)
    if not redis_url.startswith(("redis://", "rediss://", "unix://")):
        msg = "redis_url must start with redis://, rediss:// or unix://"
        raise ValueError(msg)
    try:
        from redis.connection import parse_url
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    try:
        parse_url(redis_url)  # type: ignore[no-untyped-call]  # no I/O; fails here, not later
    except ValueError as exc:
        msg = f"redis_url {redact_url(redis_url)!r} is malformed: {exc}"
        raise ValueError(msg) from None
    return redis_url


def _check_key(signing_key: object) -> bytes | None:
    if signing_key is None:
        return None
    if isinstance(signing_key, str):
        signing_key = signing_key.encode()
    if not isinstance(signing_key, bytes):
        msg = f"signing_key must be str, bytes or None, got {type(signing_key).__name__}"
        raise TypeError(msg)
    if len(signing_key) < 16:
        msg = "signing_key must be at least 16 bytes (use secrets.token_hex(32))"
        raise ValueError(msg)
    return signing_key


class CachedCheckpointSaver(BaseCheckpointSaver[Any]):
    """A Redis L1 in front of any LangGraph checkpoint saver, sync and async.

    The wrapped saver stays the source of truth: every write goes to it, and every answer is one
    it gave (a cache may be slow to fill, never wrong). A thread's latest checkpoint, read again
    in the same process while unchanged, comes from an in-process snapshot validated by one
    Redis round trip; with a ``signing_key`` shared by all workers, its serialized form (the
    wrapped saver's own serde output, signed) is also kept in Redis for the other workers.

    When Redis is down or frozen, every call is answered by the wrapped saver after at most one
    ``timeout``; one warning is logged and Redis is tried again after ``retry_after`` seconds.

    The wrapper exposes exactly the capabilities (``prune``, ``copy_thread``,
    ``delete_for_runs``, ...) of the saver it wraps. It does not own that saver: close it as
    you would without the cache, and close this wrapper's Redis clients with `close` /
    `aclose` (or a ``with`` / ``async with`` block).

    Args:
        saver: The saver to wrap (``PostgresSaver``, ``AsyncPostgresSaver``, ``SqliteSaver``,
            ``InMemorySaver``, ...). Every worker must write through the wrapper.
        redis_url: The Redis *primary* (``redis://``, ``rediss://`` or ``unix://``).
        ttl: Seconds a thread's cache entries live after their last write or fill.
        prefix: Prepended to every Redis key; savers sharing a prefix share the cache.
        signing_key: Secret shared by the workers (at least 16 bytes). Given: serialized
            checkpoints are kept in Redis, signed, and another worker's first read of a thread
            skips the database. None: Redis holds only version tokens.
        timeout: Redis socket and connect timeout, seconds.
        retry_after: Seconds to leave Redis alone after a failure.
        local_entries: Threads whose latest checkpoint this process keeps (0: none).
        local_max_bytes: Memory budget of those snapshots.

    Example:
        >>> async with AsyncPostgresSaver.from_conn_string(pg_url) as pg:  # doctest: +SKIP
        ...     async with CachedCheckpointSaver(pg, redis_url="redis://localhost:6379/0") as saver:
        ...         agent = create_agent(model, tools, checkpointer=saver)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if cls is CachedCheckpointSaver:
            saver = args[0] if args else kwargs.get("saver")
            if not isinstance(saver, BaseCheckpointSaver):
                msg = f"saver must be a BaseCheckpointSaver, got {type(saver).__name__}"
                raise TypeError(msg)
            cls = _class_for(type(saver))  # type: ignore[assignment]  # noqa: PLW0642
        return super().__new__(cls)

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        *,
        redis_url: str,
        ttl: float = 86400,
        prefix: str = DEFAULT_PREFIX,
        signing_key: str | bytes | None = None,
        timeout: float = 0.25,
        retry_after: float = 5.0,
        local_entries: int = 256,
        local_max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        if not isinstance(saver, BaseCheckpointSaver):
            msg = f"saver must be a BaseCheckpointSaver, got {type(saver).__name__}"
            raise TypeError(msg)
        url = _check_url(redis_url)
        ttl_seconds = check_seconds(ttl, parameter="ttl")
        if not isinstance(prefix, str) or not prefix:
            msg = "prefix must be a non-empty str"
            raise ValueError(msg) if isinstance(prefix, str) else TypeError(msg)
        key = _check_key(signing_key)
        super().__init__(serde=saver.serde)
        self._saver = saver
        self._redis_side = RedisSide(
            url,
            where=redact_url(url),
            prefix=prefix,
            ttl_ms=max(1, int(ttl_seconds * 1000)),
            timeout=check_seconds(timeout, parameter="timeout"),
            retry_after=check_seconds(retry_after, parameter="retry_after", allow_zero=True),
        )
        self._local_limits = (
            check_int(local_entries, parameter="local_entries", unit="a number of entries"),
            check_int(local_max_bytes, parameter="local_max_bytes", unit="a number of bytes"),
        )
        self._reads = ReadPath(
            saver,
            self._redis_side,
            LocalTuples(max_entries=self._local_limits[0], max_bytes=self._local_limits[1]),
            signing_key=key,
        )

    # -- what it wraps ------------------------------------------------------------------------

    @property
    def saver(self) -> BaseCheckpointSaver[Any]:
        """The wrapped saver (the source of truth)."""
        return self._saver

    @property
    def prefix(self) -> str:
        """The Redis key prefix."""
        return self._redis_side.prefix

    @property
    def config_specs(self) -> list[Any]:
        """The wrapped saver's configuration specs."""
        specs: list[Any] = self._saver.config_specs
        return specs

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The wrapped saver's next channel version (its format, e.g. string versions).

        Args:
            current: The channel's current version (None: the first).
            channel: Unused, as in LangGraph's savers.

        Returns:
            The next version.
        """
        return self._saver.get_next_version(current, channel)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Straight from the wrapped saver (its own walk of the parent chain).

        Args:
            config: The checkpoint to start from.
            channels: The delta channels whose history to read.

        Returns:
            Per channel, its history, as the wrapped saver gives it.
        """
        return self._saver.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of `get_delta_channel_history`."""
        return await self._saver.aget_delta_channel_history(config=config, channels=channels)

    def with_allowlist(
        self, extra_allowlist: Collection[tuple[str, ...]]
    ) -> BaseCheckpointSaver[Any]:
        """A wrapper around the wrapped saver's own allowlisted clone.

        The clone shares Redis and the breaker but keeps its own in-process snapshots: they
        were decoded under another allowlist.

        Args:
            extra_allowlist: Module paths the clone's serializer may also decode.

        Returns:
            A `CachedCheckpointSaver` over the wrapped saver's clone (this saver itself when
            the wrapped saver returns itself).
        """
        inner = self._saver.with_allowlist(extra_allowlist)
        if inner is self._saver:
            return self
        clone = object.__new__(_class_for(type(inner)))
        clone.__dict__.update(self.__dict__)
        clone._saver = inner
        clone.serde = inner.serde
        clone._reads = ReadPath(
            inner,
            self._redis_side,
            LocalTuples(max_entries=self._local_limits[0], max_bytes=self._local_limits[1]),
            signing_key=self._reads.signing_key,
        )
        return clone

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the sync Redis client (the wrapped saver is left open)."""
        self._redis_side.close()

    async def aclose(self) -> None:
        """Close the Redis clients (the wrapped saver is left open)."""
        await self._redis_side.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _thread(config: RunnableConfig) -> str | None:
    thread_id = config.get("configurable", {}).get("thread_id")
    return None if thread_id is None else str(thread_id)


def _served_by_cache(config: RunnableConfig) -> bool:
    """Whether a read may go through the cache: the latest checkpoint of a `str` thread id.

    Savers disagree on whether `7` and `"7"` (or a UUID and its text) are one thread
    (PostgreSQL: yes; `InMemorySaver`: no), and the cache keys threads by text, so other ids
    are read from the wrapped saver. Writes still mark `str(thread_id)`: never stale.
    """
    thread_id = config.get("configurable", {}).get("thread_id")
    return isinstance(thread_id, str) and not get_checkpoint_id(config)


class _Capabilities(CachedCheckpointSaver):
    """The capability methods; `_class_for` copies the ones the wrapped saver has.

    Never instantiated: it is only where the methods are written (and type-checked).
    """

    # -- reads --------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if not _served_by_cache(config):
            return self._saver.get_tuple(config)
        return self._reads.get(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if not _served_by_cache(config):
            return await self._saver.aget_tuple(config)
        return await self._reads.aget(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._saver.list(config, filter=filter, before=before, limit=limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._saver.alist(config, filter=filter, before=before, limit=limit):
            yield item

    # -- writes: mark, write through, unmark ---------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with self._reads.writing(_one(_thread(config))):
            return self._saver.put(config, checkpoint, metadata, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        async with self._reads.awriting(_one(_thread(config))):
            return await self._saver.aput(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        with self._reads.writing(_one(_thread(config))):
            self._saver.put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        async with self._reads.awriting(_one(_thread(config))):
            await self._saver.aput_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        with self._reads.writing([str(thread_id)]):
            self._saver.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._reads.awriting([str(thread_id)]):
            await self._saver.adelete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        # Runs map to threads only inside the wrapped saver: every thread is marked.
        with self._reads.writing(None):
            self._saver.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        async with self._reads.awriting(None):
            await self._saver.adelete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with self._reads.writing([str(target_thread_id)]):
            self._saver.copy_thread(source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        async with self._reads.awriting([str(target_thread_id)]):
            await self._saver.acopy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids = _thread_ids(thread_ids)
        with self._reads.writing(_names(ids)):
            self._saver.prune(ids, strategy=strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids = _thread_ids(thread_ids)
        async with self._reads.awriting(_names(ids)):
            await self._saver.aprune(ids, strategy=strategy)


def _thread_ids(thread_ids: Sequence[str]) -> Sequence[str]:
    # A str is passed on as it is (the wrapped saver rejects it); any other iterable is read once.
    return thread_ids if isinstance(thread_ids, str) else list(thread_ids)


def _names(thread_ids: Sequence[str]) -> list[str]:
    return [thread_ids] if isinstance(thread_ids, str) else [str(t) for t in thread_ids]


def _one(thread_id: str | None) -> list[str] | None:
    # No thread id: the wrapped saver decides what it writes, so every thread is marked.
    return None if thread_id is None else [thread_id]
