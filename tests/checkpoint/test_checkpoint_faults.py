"""Faults: Redis killed, restarted from an older snapshot, failed over and back, frozen; two
worker processes.

Each test that kills, freezes or restarts Redis owns its redis-server (`own_redis`). Nothing is
timed: a frozen server is tested in a subprocess with a generous limit, so a hang fails the
test instead of stalling the suite.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from checkpoint_harness import RedisServer, aput_messages, conversation, latest, put_messages
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from layered_memory.checkpoint import CachedCheckpointSaver
from layered_memory.checkpoint._redis_side import Keys
from redis_replication import follow, promote, replicated

pytestmark = pytest.mark.redis
HANG_GUARD_SECONDS = 120  # only stops a hung scenario; nothing is timed
WORKER = Path(__file__).with_name("checkpoint_fault_worker.py")


async def read(saver: Any, thread: str, use_async: bool) -> Any:
    return await saver.aget_tuple(latest(thread)) if use_async else saver.get_tuple(latest(thread))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "layered_memory.checkpoint" and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_redis_killed_then_back(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    inner = InMemorySaver()
    saver = CachedCheckpointSaver(inner, redis_url=own_redis.url, retry_after=0, timeout=0.5)
    put_messages(saver, "t", conversation(4))
    for _ in range(3):
        await read(saver, "t", use_async)

    own_redis.stop()
    with caplog.at_level(logging.INFO, logger="layered_memory.checkpoint"):
        stored = put_messages(saver, "t", conversation(6, tag="down"))
        for _ in range(3):
            tup = await read(saver, "t", use_async)
            assert tup == inner.get_tuple(latest("t"))
            assert (
                tup.config["configurable"]["checkpoint_id"]
                == stored["configurable"]["checkpoint_id"]
            )
        assert len(warnings_of(caplog)) == 1  # one warning for the whole outage
        assert saver._redis_side.breaker.is_open

        own_redis.start()
        for _ in range(3):
            assert await read(saver, "t", use_async) == inner.get_tuple(latest("t"))
    assert not saver._redis_side.breaker.is_open  # recovered by itself
    assert len(warnings_of(caplog)) == 1
    assert any("answers again" in r.getMessage() for r in caplog.records)
    await saver.aclose()


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_write_in_the_breakers_cool_down_still_reaches_redis(
    redis_url: str, prefix: str, use_async: bool
) -> None:
    """One timeout opens a worker's breaker for `retry_after` seconds. Redis answers again,
    and the worker writes: its mark must go out, or the other workers keep serving the
    older checkpoint until the worker's next call (or the TTL)."""
    inner = InMemorySaver()
    writer = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix, retry_after=3600)
    reader = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix, retry_after=3600)
    put_messages(writer, "t", conversation(4, tag="old"))
    for _ in range(3):
        await read(reader, "t", use_async)  # the reader holds the old checkpoint, hot
    writer._redis_side.breaker.failed("TimeoutError: one slow call")  # as a timeout does
    assert writer._redis_side.breaker.is_open
    if use_async:
        stored = await aput_messages(writer, "t", conversation(6, tag="new"))
        await writer._redis_side.settle()
    else:
        stored = put_messages(writer, "t", conversation(6, tag="new"))
    tup = await read(reader, "t", use_async)
    assert tup is not None
    assert tup.config["configurable"]["checkpoint_id"] == stored["configurable"]["checkpoint_id"]
    assert not writer._redis_side.breaker.is_open  # Redis answered the write: back in use
    await writer.aclose()
    await reader.aclose()


def test_an_event_loop_per_request_leaves_no_write_mark_behind(redis_url: str, prefix: str) -> None:
    """`asyncio.run` per request (a sync web handler) ends the loop before the background
    unmark of a write ran; the next call sends it, so the thread is cached again at once
    instead of after the 5-minute write lease. In a child process: the loop's abandoned
    client is left to the garbage collector there (a ResourceWarning)."""
    script = f"""
import asyncio, json, sys
sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parent.parent)!r}]
import redis
from checkpoint_harness import aput_messages, conversation
from langgraph.checkpoint.memory import InMemorySaver
from layered_memory.checkpoint import CachedCheckpointSaver
from layered_memory.checkpoint._redis_side import Keys

saver = CachedCheckpointSaver(InMemorySaver(), redis_url={redis_url!r}, prefix={prefix!r})
asyncio.run(aput_messages(saver, "t", conversation(2)))
client = redis.Redis.from_url({redis_url!r})
marks = Keys.of({prefix!r}, "t").pending
left = client.zcard(marks)
saver.get_tuple({{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}})
print(json.dumps({{"left": left, "after": client.zcard(marks)}}))
"""
    done = subprocess.run(
        [sys.executable, "-W", "ignore::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"left": 1, "after": 0}


def tokens(server: RedisServer, prefix: str) -> tuple[Any, Any]:
    keys = Keys.of(prefix, "t")
    client = server.client()
    try:
        return client.get(keys.epoch), client.hgetall(keys.thread)
    finally:
        client.close()


@pytest.mark.parametrize("use_async", [False, True])
async def test_restart_from_an_older_snapshot_serves_nothing_older(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    """The snapshot holds version tokens that were valid before the last write; after the
    restart they come back under a new run_id and must not be trusted."""
    inner = InMemorySaver()
    writer = CachedCheckpointSaver(inner, redis_url=own_redis.url, retry_after=0)
    reader = CachedCheckpointSaver(inner, redis_url=own_redis.url, retry_after=0)
    put_messages(writer, "t", conversation(4, tag="old"))
    for _ in range(3):
        await read(reader, "t", use_async)  # reader holds the old checkpoint, hot
    own_redis.save()  # the snapshot: tokens under which the old checkpoint is valid
    client = own_redis.client()
    snapshot_tokens = (
        client.get(Keys.of(writer.prefix, "t").epoch),
        client.hgetall(Keys.of(writer.prefix, "t").thread),
    )
    client.close()

    put_messages(writer, "t", conversation(6, tag="new"))
    own_redis.stop()  # SIGKILL: the older snapshot is what the next start loads
    own_redis.start()
    client = own_redis.client()
    restored = (
        client.get(Keys.of(writer.prefix, "t").epoch),
        client.hgetall(Keys.of(writer.prefix, "t").thread),
    )
    client.close()
    assert restored == snapshot_tokens  # the old tokens are back

    with caplog.at_level(logging.WARNING, logger="layered_memory.checkpoint"):
        for _ in range(3):
            assert await read(reader, "t", use_async) == inner.get_tuple(latest("t"))
    # Answered through Redis (a reconnect, no outage), not by falling back to the saver:
    assert not reader._redis_side.breaker.is_open
    assert warnings_of(caplog) == []
    await writer.aclose()
    await reader.aclose()


def test_frozen_redis_every_call_answered_then_recovered(own_redis: RedisServer) -> None:
    assert own_redis.proc is not None
    done = subprocess.run(
        [sys.executable, str(WORKER), "frozen", own_redis.url, str(own_redis.proc.pid)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["during"] == {"writer": True, "reader": True}
    assert result["after"] == {"idle": True, "reader": True, "writer": True, "idle_u": True}
    assert result["hot_after"] is True
    assert result["warnings"] == 2  # the writer and the reader saw it once each; idle never
    assert result["open"] == [False, False, False]


@pytest.mark.postgres
def test_two_processes_share_redis_and_postgres(
    pg_conninfo: str, redis_url: str, prefix: str
) -> None:
    """Whatever the other process writes, this one's next read sees, though it held the thread
    hot in its own memory."""
    with PostgresSaver.from_conn_string(pg_conninfo) as inner:
        inner.setup()
        saver = CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix)
        put_messages(saver, "t", conversation(10))

        other = subprocess.Popen(
            [sys.executable, str(WORKER), "serve", pg_conninfo, redis_url, prefix, "t"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert other.stdin is not None
        assert other.stdout is not None
        try:
            for n in (12, 0, 14, -1):
                for _ in range(3):
                    saver.get_tuple(latest("t"))  # hot here
                other.stdin.write(f"{n}\n")
                other.stdin.flush()
                assert json.loads(other.stdout.readline())  # the other process has written
                assert saver.get_tuple(latest("t")) == inner.get_tuple(latest("t"))
        finally:
            _, errors = other.communicate(timeout=HANG_GUARD_SECONDS)
        assert other.returncode == 0, errors[-3000:]
        assert saver.get_tuple(latest("t")) is None  # deleted by the other process
        saver.close()


FAILBACK_KEY = "failback-signing-key-0123456789abcdef"


@contextlib.asynccontextmanager
async def wrapped_saver(kind: str, use_async: bool, conninfo: str) -> AsyncIterator[Any]:
    """The saver every worker writes through: in memory, or the real PostgreSQL one."""
    if kind == "memory":
        yield InMemorySaver()
    elif use_async:
        async with AsyncPostgresSaver.from_conn_string(conninfo) as saver:
            await saver.setup()
            yield saver
    else:
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            yield saver


async def write(saver: Any, thread: str, messages: Any, use_async: bool) -> None:
    if use_async:
        await aput_messages(saver, thread, messages)
        await saver._redis_side.settle()
    else:
        put_messages(saver, thread, messages)


@pytest.mark.parametrize("kind", ["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_failback_to_the_old_primary_serves_nothing_older(
    own_redis: RedisServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    kind: str,
    use_async: bool,
) -> None:
    """The old primary acknowledged writes its replica never got; the replica is promoted;
    the old primary is demoted, resynced from it (its own writes are gone) and promoted again,
    keeping its run_id. Its data holds the tokens and the signed payload of checkpoint 1 again;
    no worker, old or new, may serve them: the wrapped saver holds checkpoint 3."""
    primary = own_redis
    replica = RedisServer(tmp_path / "replica")
    (tmp_path / "replica").mkdir()
    replica.start()
    options: dict[str, Any] = {"redis_url": primary.url, "signing_key": FAILBACK_KEY}
    try:
        conninfo = request.getfixturevalue("pg_conninfo") if kind == "postgres" else ""
        async with wrapped_saver(kind, use_async, conninfo) as inner:
            follow(replica.port, primary.port)
            writer = CachedCheckpointSaver(inner, **options)
            reader = CachedCheckpointSaver(inner, **options)
            await write(writer, "t", conversation(2, tag="one"), use_async)
            for _ in range(3):  # hot in the reader, and the signed payload is in Redis
                assert (await read(reader, "t", use_async)).checkpoint["channel_values"]
            assert any(f.startswith(b"d:") for f in tokens(primary, writer.prefix)[1])

            replicated(primary.port, replica.port)
            promote(replica.port)  # failover: the primary is cut off, not told
            await write(writer, "t", conversation(4, tag="two"), use_async)  # only it has them
            await write(writer, "t", conversation(6, tag="three"), use_async)
            follow(primary.port, replica.port)  # demoted: a full resync from the new primary
            promote(primary.port)  # failback, same process, same run_id

            newcomer = CachedCheckpointSaver(inner, **options)
            workers = {"reader": reader, "newcomer": newcomer, "writer": writer}
            served = {name: [] for name in workers}  # the checkpoint number each read got
            for name, worker in workers.items():
                for _ in range(3):
                    tup = await read(worker, "t", use_async)
                    served[name].append(len(tup.checkpoint["channel_values"]["messages"]) // 2)
            assert served == {name: [3, 3, 3] for name in workers}
            for worker in workers.values():
                assert not worker._redis_side.breaker.is_open  # answered through Redis
                await worker.aclose()
    finally:
        replica.stop()


def test_a_replica_is_refused_even_when_writable(
    own_redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica shares its primary's replication id, and what a worker writes on a writable
    replica never reaches the primary: tokens made there would be trusted by mistake. The
    scripts refuse it; the wrapped saver answers, with one warning that says why."""
    (tmp_path / "replica").mkdir()
    replica = RedisServer(tmp_path / "replica")
    replica.start()
    try:
        follow(replica.port, own_redis.port)
        client = replica.client()
        client.config_set("replica-read-only", "no")
        client.close()
        inner = InMemorySaver()
        saver = CachedCheckpointSaver(inner, redis_url=replica.url, retry_after=0)
        with caplog.at_level(logging.WARNING, logger="layered_memory.checkpoint"):
            put_messages(saver, "t", conversation(2))
            for _ in range(3):
                assert saver.get_tuple(latest("t")) == inner.get_tuple(latest("t"))
        assert saver._redis_side.breaker.is_open
        assert len(warnings_of(caplog)) == 1
        assert "is a replica" in warnings_of(caplog)[0]
        assert tokens(replica, saver.prefix) == (None, {})  # nothing was written there
        saver.close()
    finally:
        replica.stop()
