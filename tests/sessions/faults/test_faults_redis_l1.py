"""A real Redis L1 that freezes, dies, comes back from an older snapshot, fails over and back.

Each test runs its own redis-server on a free loopback port (see `faults_redis_server.py`) and
breaks it by its PID: SIGSTOP (frozen), SIGKILL (crash) and a restart that loads an older
``dump.rdb``. L2 is a `FileSessionStore`, so a subprocess can share it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from faults_redis_server import RedisServer

from layered_memory.errors import StoreUnavailableError
from layered_memory.sessions.stores import FileSessionStore, HybridSessionStore, RedisSessionStore
from redis_replication import follow, promote, replicated

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
PREFIX = "lm-faults:"
HYBRID_LOGGER = "layered_memory.sessions.stores.hybrid"


class Clock:
    """Wall-clock time that a test moves on by hand (the breaker's retry wait)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def call(store: Any, use_async: bool, op: str, *args: Any, **kwargs: Any) -> Any:
    if use_async:
        return await getattr(store, f"a{op}")(*args, **kwargs)
    return getattr(store, op)(*args, **kwargs)


def hybrid(server: RedisServer, folder: Path, **options: Any) -> HybridSessionStore:
    timeout = options.pop("socket_timeout", 1.0)
    l1 = RedisSessionStore.from_url(server.url, prefix=PREFIX, socket_timeout=timeout)
    return HybridSessionStore(l1, FileSessionStore(folder), **options)


def l1_value(server: RedisServer, key: str) -> Any:
    """The value the L1 envelope of ``key`` holds (None: no value there)."""
    raw = server.command("GET", PREFIX + key)
    if raw is None:
        return None
    return json.loads(raw).get("value")  # type: ignore[arg-type]


WORKER = """
import asyncio, json, logging, sys
from layered_memory.sessions.stores import FileSessionStore, HybridSessionStore, RedisSessionStore

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
url, folder, use_async = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
store = HybridSessionStore(
    RedisSessionStore.from_url(url, prefix="lm-faults:"), FileSessionStore(folder)
)
seen = []

async def work():
    for number in range(10):
        seen.append(await store.aget("k"))
        await store.aset("k", {"v": number})
    seen.append(await store.aget("k"))
    await store.aclose()

if use_async:
    asyncio.run(work())
else:
    for number in range(10):
        seen.append(store.get("k"))
        store.set("k", {"v": number})
    seen.append(store.get("k"))
    store.close()
print(json.dumps({"seen": seen, "l1": store.l1_state}))
"""


@USE_ASYNC
async def test_a_frozen_l1_costs_one_timeout_then_l2_answers(
    redis_server: RedisServer, tmp_path: Path, use_async: bool
) -> None:
    folder = tmp_path / "l2"
    store = hybrid(redis_server, folder)
    await call(store, use_async, "set", "k", {"v": "before"})
    redis_server.freeze()
    try:
        # 21 operations: 6-12 s each before the breaker (over 2 minutes), about 1 s in all now.
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                WORKER,
                redis_server.url,
                str(folder),
                "1" if use_async else "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        redis_server.thaw()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["seen"] == [{"v": "before"}, *({"v": n} for n in range(10))]
    assert report["l1"] == "open"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, "one warning per outage, not one per call"
    assert "session store L1 (RedisSessionStore) failed" in warnings[0]

    # A worker that did not see the outage: L1 still holds "before", stamped before the writes
    # L1 missed; the marker the frozen-time worker left in L2 makes it check L2 first.
    other = hybrid(redis_server, folder)
    assert await call(other, use_async, "get", "k") == {"v": 9}
    assert l1_value(redis_server, "k") == {"v": 9}, "L1 repaired in passing"
    await call(other, use_async, "close")
    await call(store, use_async, "close")


@USE_ASYNC
async def test_a_thawed_l1_is_used_again_and_never_serves_what_it_missed(
    redis_server: RedisServer, tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    store = hybrid(redis_server, tmp_path / "l2", socket_timeout=0.3, clock=clock)
    try:
        await call(store, use_async, "set", "k", {"v": 1})
        with caplog.at_level(logging.INFO, logger=HYBRID_LOGGER):
            redis_server.freeze()
            try:
                # Times out; the frozen server still applies it once thawed.
                await call(store, use_async, "set", "other", {"v": 0})
                assert store.l1_state == "open"
                await call(store, use_async, "set", "k", {"v": 2})  # L1 skipped: a missed write
                assert await call(store, use_async, "get", "k") == {"v": 2}
            finally:
                redis_server.thaw()
            assert l1_value(redis_server, "k") == {"v": 1}, "L1 missed the write"
            assert await call(store, use_async, "get", "k") == {"v": 2}, "breaker still open"
            clock.advance(6)  # past l1_retry_after: the next call tries L1
            assert await call(store, use_async, "get", "k") == {"v": 2}
        assert store.l1_state == "closed"
        assert l1_value(redis_server, "k") == {"v": 2}, "L1 repaired in passing"
        assert await call(store, use_async, "get", "k") == {"v": 2}
        assert await call(store, use_async, "get", "other") == {"v": 0}
    finally:
        await call(store, use_async, "close")
    levels = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == HYBRID_LOGGER]
    assert [level for level, _ in levels] == ["WARNING", "INFO"]
    assert "is back after" in levels[1][1]


@USE_ASYNC
async def test_an_l1_restarted_from_an_older_snapshot_never_serves_older_values(
    redis_server: RedisServer, tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = hybrid(redis_server, tmp_path / "l2")
    try:
        for key in ("changed", "deleted", "same"):
            await call(store, use_async, "set", key, {"v": "old"})
        redis_server.command("SAVE")
        await call(store, use_async, "set", "changed", {"v": "new"})
        await call(store, use_async, "delete", "deleted")
        await call(store, use_async, "set", "added", {"v": "new"})
        redis_server.kill()
        redis_server.start()  # loads dump.rdb: the values as they were at SAVE
        assert l1_value(redis_server, "changed") == {"v": "old"}
        assert l1_value(redis_server, "deleted") == {"v": "old"}

        with caplog.at_level(logging.WARNING):
            assert await call(store, use_async, "get", "changed") == {"v": "new"}
            assert await call(store, use_async, "get", "deleted") is None
            assert await call(store, use_async, "get", "same") == {"v": "old"}
            assert await call(store, use_async, "get", "added") == {"v": "new"}
        assert "has a new replication history" in caplog.text
        assert l1_value(redis_server, "changed") == {"v": "new"}, "replaced in L1 as well"
        assert l1_value(redis_server, "deleted") is None
        assert store.l1_state == "closed"
    finally:
        await call(store, use_async, "close")


@USE_ASYNC
async def test_a_failback_to_the_old_l1_primary_never_serves_older_values(
    redis_server: RedisServer, tmp_path: Path, use_async: bool
) -> None:
    """The old primary acknowledged L1 writes its replica never got; the replica is promoted;
    the old primary is demoted, resynced from it and promoted again, keeping its run_id: its
    data holds the envelope of ``{"v": 1}`` again, which no worker, old or new, may serve."""
    primary = redis_server
    (tmp_path / "replica").mkdir()
    replica = RedisServer(tmp_path / "replica")
    replica.start()
    writer, reader = hybrid(primary, tmp_path / "l2"), hybrid(primary, tmp_path / "l2")
    newcomer = None
    try:
        follow(replica.port, primary.port)
        await call(writer, use_async, "set", "k", {"v": 1})
        assert await call(reader, use_async, "get", "k") == {"v": 1}  # an L1 hit
        replicated(primary.port, replica.port)
        promote(replica.port)  # failover: the primary is cut off, not told
        await call(writer, use_async, "set", "k", {"v": 2})  # only the old primary has them
        await call(writer, use_async, "set", "k", {"v": 3})
        follow(primary.port, replica.port)  # demoted: a full resync from the new primary
        promote(primary.port)  # failback, same process, same run_id
        assert l1_value(primary, "k") == {"v": 1}  # the old envelope is back

        newcomer = hybrid(primary, tmp_path / "l2")
        workers = {"reader": reader, "newcomer": newcomer, "writer": writer}
        served = {name: [] for name in workers}
        for name, worker in workers.items():
            for _ in range(2):
                served[name].append(await call(worker, use_async, "get", "k"))
        assert served == {name: [{"v": 3}, {"v": 3}] for name in workers}
        assert l1_value(primary, "k") == {"v": 3}, "replaced in L1 as well"
        assert all(worker.l1_state == "closed" for worker in workers.values())
    finally:
        for store in (writer, reader, newcomer):
            if store is not None:
                await call(store, use_async, "close")
        replica.kill()


@USE_ASYNC
async def test_split_brain_with_min_replicas_to_write_is_a_missed_write(
    redis_server: RedisServer, tmp_path: Path, use_async: bool
) -> None:
    """A worker still writing through the old primary after a replica was promoted (split
    brain) is not seen by workers on the new one, unless the old primary refuses writes
    without a replica (``min-replicas-to-write 1``, the README's advice): then the write is
    one L1 missed, told through L2, and the others read L2 within ``l1_check_interval``."""
    primary = redis_server
    (tmp_path / "replica").mkdir()
    replica = RedisServer(tmp_path / "replica")
    replica.start()
    clock = Clock()
    writer = hybrid(primary, tmp_path / "l2", clock=clock)
    reader = hybrid(replica, tmp_path / "l2", clock=clock)
    try:
        follow(replica.port, primary.port)
        primary.command("CONFIG", "SET", "min-replicas-to-write", "1")  # a replica acked: good
        await call(writer, use_async, "set", "k", {"v": 1})
        replicated(primary.port, replica.port)
        promote(replica.port)
        primary.command("CLIENT", "KILL", "TYPE", "replica")  # the old primary sees it now
        assert await call(reader, use_async, "get", "k") == {"v": 1}  # cached on the new one
        await call(writer, use_async, "set", "k", {"v": 2})  # refused by the old primary's L1
        assert writer.l1_state == "open"
        clock.advance(reader.l1_check_interval + 1)
        assert await call(reader, use_async, "get", "k") == {"v": 2}
    finally:
        for store in (writer, reader):
            await call(store, use_async, "close")
        replica.kill()


@USE_ASYNC
async def test_an_acl_without_info_keeps_reads_working(
    redis_server: RedisServer, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Entries are read by a script that also asks for the replication id; a user the ACL
    denies INFO still reads them (no generation: one warning says detection is off)."""
    redis_server.command("ACL", "SETUSER", "app", "on", "nopass", "~*", "&*", "+@all", "-info")
    url = f"redis://app@127.0.0.1:{redis_server.port}/0"
    store = RedisSessionStore.from_url(url, prefix=PREFIX)
    try:
        with caplog.at_level(logging.WARNING):
            await call(store, use_async, "set", "k", {"v": 1}, ttl=60)
            entry = await call(store, use_async, "get_entry", "k")
            assert entry.value == {"v": 1}
            assert entry.generation is None
            assert store.generation is None
        assert caplog.text.count("refused INFO") == 1
    finally:
        await call(store, use_async, "close")


@USE_ASYNC
async def test_an_l1_killed_and_restarted_empty_is_refilled_from_l2(
    redis_server: RedisServer, tmp_path: Path, use_async: bool
) -> None:
    store = hybrid(redis_server, tmp_path / "l2")
    try:
        await call(store, use_async, "set", "k", {"v": 1}, ttl=3600)
        redis_server.kill()
        redis_server.start()
        assert redis_server.command("DBSIZE") == 0
        assert await call(store, use_async, "get", "k") == {"v": 1}
        assert l1_value(redis_server, "k") == {"v": 1}
        assert 0 < int(redis_server.command("TTL", PREFIX + "k")) <= 3600  # type: ignore[call-overload]
        assert await call(store, use_async, "get", "k") == {"v": 1}
        assert store.l1_state == "closed", "one reconnect, no outage"
    finally:
        await call(store, use_async, "close")


ALONE = """
import asyncio, sys
from layered_memory.errors import StoreUnavailableError
from layered_memory.sessions.stores import RedisSessionStore

store = RedisSessionStore.from_url(sys.argv[1], prefix="lm-faults:")
for use_async in (False, False, True):
    try:
        asyncio.run(store.aget("k")) if use_async else store.get("k")
    except StoreUnavailableError as exc:
        print(exc)
"""


def test_redis_alone_frozen_fails_fast_with_a_clear_error(redis_server: RedisServer) -> None:
    redis_server.freeze()
    try:
        # Three calls: 6 s each before (two retries after each timeout), 1 s each now.
        result = subprocess.run(
            [sys.executable, "-c", ALONE, redis_server.url],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        redis_server.thaw()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith(f"Redis at {redis_server.url} did not answer within 1 s"), line


def test_redis_alone_restarted_reconnects_once(redis_server: RedisServer) -> None:
    store = RedisSessionStore.from_url(redis_server.url, prefix=PREFIX)
    try:
        store.set("k", {"v": 1})
        first = store.generation
        redis_server.kill()
        with pytest.raises(StoreUnavailableError, match="is unreachable"):
            store.get("k")
        redis_server.start()
        assert store.get("k") is None, "the server came back empty"
        assert store.generation is not None
        assert store.generation != first
    finally:
        store.close()
