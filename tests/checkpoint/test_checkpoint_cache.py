"""Behaviour of `CachedCheckpointSaver` on a live Redis, around in-process savers.

Two wrappers on one wrapped saver and one Redis prefix stand for two workers sharing Redis and
a database (`test_checkpoint_faults.py` runs real separate processes on PostgreSQL).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from checkpoint_harness import (
    ExtendedInMemorySaver,
    aput_messages,
    conversation,
    latest,
    put_messages,
)
from checkpoint_harness import (
    _checkpoint as new_checkpoint,
)
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from layered_memory import build_thread_config
from layered_memory.checkpoint import CachedCheckpointSaver
from layered_memory.checkpoint._redis_side import Keys, encode_payload, payload_field
from layered_memory.sessions import alist_thread_ids, list_thread_ids

pytestmark = pytest.mark.redis
KEY = "a-signing-key-shared-by-workers-0123"


class CountingSaver(ExtendedInMemorySaver):
    """Counts reads of the latest checkpoint that reach the wrapped saver."""

    def __init__(self, serde: Any = None) -> None:
        super().__init__(serde=serde)
        self.latest_reads = 0

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        if not config["configurable"].get("checkpoint_id"):
            self.latest_reads += 1
        return super().get_tuple(config)

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return self.get_tuple(config)


@pytest.fixture
def inner() -> CountingSaver:
    return CountingSaver()


@pytest.fixture
def workers(
    inner: CountingSaver, redis_url: str, prefix: str
) -> Iterator[tuple[CachedCheckpointSaver, CachedCheckpointSaver]]:
    first = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix, signing_key=KEY)
    second = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix, signing_key=KEY)
    yield first, second
    first.close()
    second.close()


async def read(saver: BaseCheckpointSaver[Any], config: Any, use_async: bool) -> Any:
    if use_async:
        return await saver.aget_tuple(config)
    return saver.get_tuple(config)


async def put(saver: BaseCheckpointSaver[Any], thread: str, messages: Any, use_async: bool) -> Any:
    if not use_async:
        return put_messages(saver, thread, messages)
    stored = await aput_messages(saver, thread, messages)
    if isinstance(saver, CachedCheckpointSaver):
        # The unmark of an async write finishes in the background: until then the thread is
        # read from the wrapped saver (correct, just not cached yet).
        await saver._redis_side.settle()
    return stored


async def aclose(*savers: CachedCheckpointSaver) -> None:
    for saver in savers:
        await saver.aclose()


def messages_of(tup: CheckpointTuple | None) -> list[Any]:
    assert tup is not None
    return list(tup.checkpoint["channel_values"]["messages"])


@pytest.mark.parametrize("signing_key", [None, KEY], ids=["tokens-only", "signed"])
@pytest.mark.parametrize("use_async", [False, True])
async def test_hot_reads_come_from_the_cache_as_private_copies(
    inner: CountingSaver,
    redis_url: str,
    prefix: str,
    signing_key: str | None,
    use_async: bool,
) -> None:
    saver = CachedCheckpointSaver(
        inner, redis_url=redis_url, prefix=prefix, signing_key=signing_key
    )
    await put(saver, "t", conversation(20), use_async)
    first = await read(saver, latest("t"), use_async)
    # Kept on the version's second read (third for async reads without a key, whose first
    # two overlap the Redis and database calls).
    await read(saver, latest("t"), use_async)
    await read(saver, latest("t"), use_async)
    reads_before = inner.latest_reads
    hit = await read(saver, latest("t"), use_async)
    assert inner.latest_reads == reads_before  # answered without the wrapped saver
    assert hit == first == inner.get_tuple(latest("t"))

    # A caller editing what it got changes nothing for the next caller.
    hit.checkpoint["channel_values"]["messages"][0].content = "edited in place"
    hit.checkpoint["channel_values"]["messages"].append(HumanMessage("appended"))
    hit.metadata["step"] = 99
    again = await read(saver, latest("t"), use_async)
    assert again == first
    await aclose(saver)


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_second_worker_reads_the_signed_payload(
    workers: tuple[CachedCheckpointSaver, CachedCheckpointSaver],
    inner: CountingSaver,
    use_async: bool,
) -> None:
    first, second = workers
    await put(first, "t", conversation(10), use_async)
    await read(first, latest("t"), use_async)
    expected = await read(first, latest("t"), use_async)  # stores the payload
    reads_before = inner.latest_reads
    assert await read(second, latest("t"), use_async) == expected
    assert inner.latest_reads == reads_before
    await aclose(*workers)


async def _write(saver: Any, op: str, use_async: bool, stored: dict[str, Any]) -> None:
    calls: dict[str, tuple[str, tuple[Any, ...], dict[str, Any]]] = {
        "put": ("put", (), {}),
        "put_writes": ("put_writes", (stored, [("messages", "a pending write")], "task-1"), {}),
        "delete_thread": ("delete_thread", ("t",), {}),
        "prune_delete": ("prune", (["t"],), {"strategy": "delete"}),
        "copy_thread": ("copy_thread", ("other", "t"), {}),
        "delete_for_runs": ("delete_for_runs", (["run-2"],), {}),
    }
    name, args, kwargs = calls[op]
    if name == "put":
        await put(saver, "t", conversation(4, tag="new"), use_async)
        return
    method = getattr(saver, ("a" + name) if use_async else name)
    result = method(*args, **kwargs)
    if use_async:
        await result


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    "op", ["put", "put_writes", "delete_thread", "prune_delete", "copy_thread", "delete_for_runs"]
)
async def test_whatever_one_worker_writes_the_other_reads_next(
    workers: tuple[CachedCheckpointSaver, CachedCheckpointSaver],
    inner: CountingSaver,
    op: str,
    use_async: bool,
) -> None:
    writer, reader = workers
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "run_id": "run-2"}}
    checkpoint, cfg, versions = _one_checkpoint(inner, config)
    stored = inner.put(cfg, checkpoint, {"source": "loop", "step": 1, "run_id": "run-2"}, versions)
    put_messages(inner, "other", conversation(6, tag="copied"))  # newer: copying it changes "t"
    for _ in range(3):  # the reader holds the thread hot
        await read(reader, latest("t"), use_async)

    before = inner.get_tuple(latest("t"))
    await _write(writer, op, use_async, dict(stored))
    assert inner.get_tuple(latest("t")) != before  # the write changed what the thread holds
    assert await read(reader, latest("t"), use_async) == inner.get_tuple(latest("t"))
    # and it stays right once the new version is hot again
    for _ in range(3):
        assert await read(reader, latest("t"), use_async) == inner.get_tuple(latest("t"))
    await aclose(*workers)


def _one_checkpoint(saver: Any, config: Any) -> tuple[Any, Any, Any]:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"messages": conversation(3)}
    checkpoint["channel_versions"] = {"messages": version}
    return checkpoint, config, {"messages": version}


@pytest.mark.parametrize("use_async", [False, True])
async def test_list_and_reads_by_checkpoint_id_are_the_wrapped_savers(
    workers: tuple[CachedCheckpointSaver, CachedCheckpointSaver],
    inner: CountingSaver,
    use_async: bool,
) -> None:
    saver, _ = workers
    first = await put(saver, "t", conversation(2), use_async)
    second = put_messages(saver, "t", conversation(4), parent=first, step=1)
    for config in (first, second, {"configurable": {**first["configurable"], "extra": 1}}):
        assert await read(saver, config, use_async) == inner.get_tuple(config)
    listed = (
        [t async for t in saver.alist(latest("t"), limit=5)]
        if use_async
        else list(saver.list(latest("t"), limit=5))
    )
    assert listed == list(inner.list(latest("t"), limit=5))
    assert list(saver.list(None, filter={"step": 1})) == list(inner.list(None, filter={"step": 1}))
    await aclose(*workers)


@pytest.mark.parametrize("use_async", [False, True])
async def test_session_key_threads_and_prefix_listing(
    workers: tuple[CachedCheckpointSaver, CachedCheckpointSaver], use_async: bool
) -> None:
    saver, other = workers
    threads = [
        build_thread_config("Acme Corp", "research"),
        build_thread_config("Acme Corp", "evaluation", "quality evaluator"),
        build_thread_config("Globex", "research"),
    ]
    for config in threads:
        thread_id = config["configurable"]["thread_id"]
        await put(saver, thread_id, conversation(2, tag=thread_id), use_async)
        for _ in range(3):
            tup = await read(other, config, use_async)
            assert tup is not None
            assert tup.config["configurable"]["thread_id"] == thread_id
    if use_async:
        found = await alist_thread_ids(other, "acme corp")
        research = await alist_thread_ids(other, "acme corp", "research")
    else:
        found = list_thread_ids(other, "acme corp")
        research = list_thread_ids(other, "acme corp", "research")
    assert found == ["entity:acme_corp:evaluation:quality_evaluator", "entity:acme_corp:research"]
    assert research == ["entity:acme_corp:research"]
    await aclose(*workers)


class _Boom:
    """Unpickling this creates a file: proof that bytes were unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(self.path),))


@pytest.mark.parametrize("signed", [False, True], ids=["forged", "signed"])
@pytest.mark.parametrize("use_async", [False, True])
async def test_hostile_payload_planted_in_redis_is_never_unpickled(
    redis_url: str,
    prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    signed: bool,
    use_async: bool,
) -> None:
    """A pickle payload under the current version, forged or even correctly signed (a signer
    whose serde fell back to pickle): the answer is the wrapped saver's, the file never
    appears. The wrapped saver's serde is the dangerous kind, one that unpickles "pickle"."""
    inner = CountingSaver(serde=JsonPlusSerializer(pickle_fallback=True))
    marker = tmp_path / "unpickled"
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix, signing_key=KEY)
    put_messages(inner, "t", conversation(2))
    await read(saver, latest("t"), use_async)  # creates the version tokens
    client = redis.Redis.from_url(redis_url)
    keys = Keys.of(prefix, "t")
    version = (
        (client.get(keys.epoch) or b"").decode() + "|" + client.hget(keys.thread, "v").decode()
    )
    evil = pickle.dumps(_Boom(str(marker)))
    scope = (prefix.encode(), b"t", b"")

    class PickleSerde:
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "pickle", evil

    if signed:
        # encode_payload refuses pickle, so sign it by hand the way a broken signer would.
        from layered_memory.checkpoint._redis_side import _mac

        head, tag = version.encode(), b"pickle"
        planted = head + b"\n" + _mac(KEY.encode(), (*scope, head, tag, evil)) + tag + b"\n" + evil
    else:
        planted = version.encode() + b"\n" + b"\0" * 32 + b"pickle\n" + evil
    assert (
        encode_payload(
            PickleSerde(),
            inner.get_tuple(latest("t")),
            key=KEY.encode(),
            scope=scope,
            version=version,
        )
        is None
    )  # type: ignore[arg-type, arg-type]
    client.hset(keys.thread, payload_field(""), planted)
    client.close()

    with caplog.at_level(logging.WARNING, logger="layered_memory.checkpoint"):
        assert await read(saver, latest("t"), use_async) == inner.get_tuple(latest("t"))
    assert not marker.exists()
    assert any("rejected" in r.getMessage() for r in caplog.records)
    await aclose(saver)


@pytest.mark.parametrize("use_async", [False, True])
async def test_keys_of_the_wrong_type_are_replaced(
    inner: CountingSaver, redis_url: str, prefix: str, use_async: bool
) -> None:
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)
    keys = Keys.of(prefix, "t")
    client = redis.Redis.from_url(redis_url)
    client.set(keys.thread, "planted")
    client.rpush(keys.pending, "planted")
    client.hset(keys.epoch, "x", "planted")
    client.set(keys.global_pending, "planted")
    client.close()
    await put(saver, "t", conversation(2), use_async)
    for _ in range(3):
        assert await read(saver, latest("t"), use_async) == inner.get_tuple(latest("t"))
    assert not saver._redis_side.breaker.is_open
    await aclose(saver)


@pytest.mark.parametrize("where", ["epoch", "version"])
@pytest.mark.parametrize("use_async", [False, True])
async def test_tokens_with_planted_bytes_are_replaced_not_served(
    inner: CountingSaver, redis_url: str, prefix: str, use_async: bool, where: str
) -> None:
    """A token that starts with the server's replication id but carries other bytes (not
    UTF-8, not hex) is a miss: answered by the wrapped saver, then replaced by a fresh token."""
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)
    await put(saver, "t", conversation(2), use_async)
    for _ in range(3):
        await read(saver, latest("t"), use_async)
    keys = Keys.of(prefix, "t")
    client = redis.Redis.from_url(redis_url)
    replid = client.info("replication")["master_replid"].encode()
    planted = replid + b":\xff\xfe"
    if where == "epoch":
        client.set(keys.epoch, planted)
    else:
        client.hset(keys.thread, "v", planted)
    for _ in range(3):
        assert await read(saver, latest("t"), use_async) == inner.get_tuple(latest("t"))
    assert await read(saver, latest("other"), use_async) is None
    token = client.get(keys.epoch) if where == "epoch" else client.hget(keys.thread, "v")
    client.close()
    assert token != planted
    assert token is not None
    assert token.decode("ascii").startswith(replid.decode() + ":")
    assert not saver._redis_side.breaker.is_open
    await aclose(saver)


@pytest.mark.parametrize("use_async", [False, True])
async def test_thread_ids_that_differ_only_in_type_are_never_mixed(
    redis_url: str, prefix: str, use_async: bool
) -> None:
    """`InMemorySaver` keeps thread 7 and thread "7" apart (PostgreSQL does not): the cache,
    which names threads by text, must not answer one with the other's checkpoint."""
    inner = InMemorySaver()
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)
    as_int: Any = {"configurable": {"thread_id": 7, "checkpoint_ns": ""}}
    checkpoint, _config, versions = new_checkpoint(saver, "7", conversation(2), None)
    saver.put(as_int, checkpoint, {"source": "loop", "step": 0}, versions)
    for _ in range(3):
        assert await read(saver, as_int, use_async) == inner.get_tuple(as_int)
    assert inner.get_tuple(latest("7")) is None
    for _ in range(3):
        assert await read(saver, latest("7"), use_async) is None
    put_messages(saver, "7", conversation(4, tag="text"))
    for _ in range(3):
        assert await read(saver, latest("7"), use_async) == inner.get_tuple(latest("7"))
        assert await read(saver, as_int, use_async) == inner.get_tuple(as_int)
    await aclose(saver)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"redis_url": 5}, TypeError, "redis_url"),
        ({"redis_url": "http://x"}, ValueError, "redis_url"),
        ({"redis_url": "redis://host:port/0"}, ValueError, "redis_url"),
        ({"ttl": 0}, ValueError, "ttl"),
        ({"ttl": True}, TypeError, "ttl"),
        ({"prefix": ""}, ValueError, "prefix"),
        ({"signing_key": "short"}, ValueError, "signing_key"),
        ({"signing_key": 3}, TypeError, "signing_key"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"retry_after": "soon"}, TypeError, "retry_after"),
        ({"local_entries": -1}, ValueError, "local_entries"),
        ({"local_max_bytes": 1.5}, TypeError, "local_max_bytes"),
    ],
)
def test_constructor_names_the_bad_parameter(
    kwargs: dict[str, Any], error: type[Exception], name: str
) -> None:
    options: dict[str, Any] = {"redis_url": "redis://127.0.0.1:6379/0", **kwargs}
    with pytest.raises(error, match=name):
        CachedCheckpointSaver(InMemorySaver(), **options)


def test_saver_must_be_a_checkpoint_saver() -> None:
    with pytest.raises(TypeError, match="saver"):
        CachedCheckpointSaver(object(), redis_url="redis://127.0.0.1:6379/0")  # type: ignore[arg-type]


def test_delegates_versions_and_specs(redis_url: str, prefix: str) -> None:
    inner = InMemorySaver()
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)
    assert isinstance(saver.get_next_version(None, None), str)  # the wrapped saver's format
    assert saver.config_specs == inner.config_specs
    assert saver.serde is inner.serde or type(saver.serde) is type(inner.serde)
    saver.close()


def test_with_allowlist_wraps_the_wrapped_savers_own_clone(redis_url: str, prefix: str) -> None:
    # A serializer with an explicit msgpack allowlist: `with_allowlist` then returns a new saver
    # (a plain `InMemorySaver()` returns itself, which would not reach the clone's branch).
    inner = InMemorySaver(
        serde=JsonPlusSerializer(allowed_msgpack_modules=[("decimal", "Decimal")])
    )
    extra = [("fractions", "Fraction")]
    assert inner.with_allowlist(extra) is not inner
    saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)

    clone = saver.with_allowlist(extra)

    assert isinstance(clone, CachedCheckpointSaver)
    assert clone is not saver
    assert clone.saver is not inner  # the wrapped saver's own allowlisted clone
    assert clone.serde is clone.saver.serde
    assert clone.serde is not saver.serde
    # It is a working saver: a checkpoint put through it reads back through it and the original.
    stored = put_messages(clone, "t", conversation(2))
    assert clone.get_tuple(stored) == inner.get_tuple(stored)
    assert saver.get_tuple(stored) == inner.get_tuple(stored)
    saver.close()


def test_without_the_redis_package_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "redis.connection", None)
    with pytest.raises(ImportError) as caught:
        CachedCheckpointSaver(InMemorySaver(), redis_url="redis://localhost:6379/0")
    assert str(caught.value) == (
        "CachedCheckpointSaver needs the redis package: pip install 'layered-memory[redis]'"
    )
