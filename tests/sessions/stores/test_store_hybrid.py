"""HybridSessionStore: read-through with backfill, write-through, and each tier failing."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from store_harness import FakeClock, call, make_postgres

from layered_memory.errors import SessionStoreError, StoreUnavailableError
from layered_memory.sessions.stores import (
    HybridSessionStore,
    InMemorySessionStore,
    RedisSessionStore,
    SessionStore,
)
from layered_memory.sessions.stores.hybrid import MARKER_KEY, RESERVED_PREFIX
from unlisted_store import UnlistedStore

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
DEAD_REDIS = "redis://:secret@127.0.0.1:1/0"  # nothing listens on port 1


class Recording(InMemorySessionStore):
    """An in-memory store that records the operations it served."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.calls: list[str] = []

    def get_entry(self, key: str) -> Any:
        self.calls.append("get")
        return super().get_entry(key)

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        self.calls.append("set")
        super().set(key, value, ttl=ttl)

    def delete(self, key: str) -> None:
        self.calls.append("delete")
        super().delete(key)


@USE_ASYNC
async def test_l1_hit_does_not_touch_l2(clock: FakeClock, use_async: bool) -> None:
    l1, l2 = Recording(clock), Recording(clock)
    store = HybridSessionStore(l1, l2)
    await call(store, use_async, "set", "k", {"v": 1})
    l2.calls.clear()
    assert await call(store, use_async, "get", "k") == {"v": 1}
    assert l2.calls == []


@USE_ASYNC
async def test_l1_miss_reads_l2_and_backfills_with_the_remaining_ttl(
    clock: FakeClock, use_async: bool
) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    l2.set("k", {"v": "durable"}, ttl=100)
    clock.advance(40)
    store = HybridSessionStore(l1, l2)

    assert await call(store, use_async, "get", "k") == {"v": "durable"}
    cached = l1.get_entry("k")
    assert cached is not None
    assert cached.value["value"] == {"v": "durable"}, "L1 holds the value in a stamped envelope"
    assert cached.ttl == pytest.approx(60)
    clock.advance(61)
    assert l1.get("k") is None, "L1 never outlives L2's expiry"


@USE_ASYNC
async def test_l1_ttl_caps_how_long_l1_keeps_an_entry(clock: FakeClock, use_async: bool) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2, l1_ttl=30)
    await call(store, use_async, "set", "k", {"v": 1}, ttl=3600)
    await call(store, use_async, "set", "forever", {"v": 2})
    clock.advance(31)
    assert l1.get("k") is None
    assert l1.get("forever") is None
    assert l2.get("k") == {"v": 1}
    assert await call(store, use_async, "get", "k") == {"v": 1}


@USE_ASYNC
async def test_writes_and_deletes_go_through_to_both(clock: FakeClock, use_async: bool) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2)
    await call(store, use_async, "set", "k", {"v": 1}, ttl=10)
    cached = l1.get("k")
    assert cached is not None
    assert cached["value"] == l2.get("k") == {"v": 1}
    await call(store, use_async, "delete", "k")
    assert l2.get("k") is None
    tombstone = l1.get("k")
    assert tombstone is not None
    assert "value" not in tombstone, "a delete leaves only a short-lived tombstone in L1"
    assert await call(store, use_async, "get", "k") is None


@USE_ASYNC
async def test_redis_l1_down_reads_and_writes_go_through_l2(
    clock: FakeClock, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    l1 = RedisSessionStore.from_url(DEAD_REDIS, retries=0)
    l2 = InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2)
    try:
        with caplog.at_level(logging.WARNING, logger="layered_memory.sessions.stores.hybrid"):
            await call(store, use_async, "set", "k", {"v": 1})
            assert await call(store, use_async, "get", "k") == {"v": 1}
            await call(store, use_async, "delete", "k")
            assert await call(store, use_async, "get", "k") is None
    finally:
        await l1.aclose()
    assert l2.get("k") is None
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(messages) == 1, "one warning per outage, not one per call"
    assert "session store L1 (RedisSessionStore) failed" in messages[0]
    assert "redis://:***@127.0.0.1:1/0" in messages[0]
    assert all("secret" not in m for m in messages)


@USE_ASYNC
async def test_l2_down_fails_writes_loudly_and_leaves_l1_alone(
    clock: FakeClock, use_async: bool
) -> None:
    l1 = InMemorySessionStore(clock=clock)
    l2 = RedisSessionStore.from_url(DEAD_REDIS, retries=0)
    store = HybridSessionStore(l1, l2)
    try:
        with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1"):
            await call(store, use_async, "set", "k", {"v": 1})
        assert "value" not in (l1.get("k") or {}), "nothing is acknowledged, not even in L1"
        with pytest.raises(StoreUnavailableError):
            await call(store, use_async, "delete", "k")
        with pytest.raises(StoreUnavailableError):
            await call(store, use_async, "get", "missing-in-l1")
    finally:
        await l2.aclose()


async def test_l2_down_still_serves_l1_hits(clock: FakeClock) -> None:
    l1 = InMemorySessionStore(clock=clock)
    HybridSessionStore(l1, InMemorySessionStore(clock=clock)).set("k", {"v": "cached"})
    l2 = RedisSessionStore.from_url(DEAD_REDIS, retries=0)
    try:
        assert await HybridSessionStore(l1, l2).aget("k") == {"v": "cached"}
    finally:
        await l2.aclose()


def test_redis_l1_down_over_real_postgres_l2(
    postgres_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cleanups: list[Any] = []
    l1 = RedisSessionStore.from_url(DEAD_REDIS, retries=0)
    try:
        l2 = make_postgres(postgres_url, clock, cleanups)
        store: SessionStore = HybridSessionStore(l1, l2)
        with caplog.at_level(logging.WARNING, logger="layered_memory.sessions.stores.hybrid"):
            store.set("entity:acme:research", {"summary": "durable"}, ttl=60)
            assert store.get("entity:acme:research") == {"summary": "durable"}
        assert l2.get("entity:acme:research") == {"summary": "durable"}
        assert any("failed" in r.getMessage() for r in caplog.records)
    finally:
        l1.close()
        for cleanup in cleanups:
            cleanup()


def test_bad_value_touches_neither_tier(clock: FakeClock) -> None:
    l1, l2 = Recording(clock), Recording(clock)
    store = HybridSessionStore(l1, l2)
    with pytest.raises(SessionStoreError, match="JSON"):
        store.set("k", {"v": object()})
    assert l1.calls == l2.calls == []


@USE_ASYNC
@pytest.mark.parametrize("op", ["get", "set", "delete"])
async def test_the_hybrids_own_l2_keys_are_not_session_keys(
    clock: FakeClock, use_async: bool, op: str
) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    l2.set(MARKER_KEY, {"l1_missed_writes_before": 1.0})
    store = HybridSessionStore(l1, l2, clock=clock)
    for key in (MARKER_KEY, RESERVED_PREFIX + "anything"):
        args: tuple[Any, ...] = (key, {"l1_missed_writes_before": 1e18}) if op == "set" else (key,)
        with pytest.raises(SessionStoreError, match="reserved") as info:
            await call(store, use_async, op, *args)
        assert info.value.key == key
        assert RESERVED_PREFIX in str(info.value)
    assert l2.get(MARKER_KEY) == {"l1_missed_writes_before": 1.0}, "the marker is untouched"


class Unreachable(InMemorySessionStore):
    """An L1 this worker cannot reach (a network partition), while others can."""

    def get_entry(self, key: str) -> Any:
        raise ConnectionError("partitioned")

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        raise ConnectionError("partitioned")


def test_a_session_key_cannot_hide_a_missed_write(clock: FakeClock) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    partitioned = HybridSessionStore(Unreachable(clock=clock), l2, clock=clock)
    worker = HybridSessionStore(l1, l2, clock=clock)
    worker.set("entity:acme:x", {"v": 1})
    clock.advance(1)
    partitioned.set("entity:acme:x", {"v": 2})  # L1 missed it: the marker goes to L2
    with pytest.raises(SessionStoreError, match="reserved"):
        worker.set(MARKER_KEY, {"note": "a thread id chosen by a user"})
    clock.advance(60)
    assert worker.get("entity:acme:x") == {"v": 2}, "never the value L1 kept from before"


@USE_ASYNC
async def test_conditional_writes_are_l2s_and_l1_follows(clock: FakeClock, use_async: bool) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    assert await call(store, use_async, "add", "k", {"v": 1})
    assert l1.get("k")["value"] == l2.get("k") == {"v": 1}  # type: ignore[index]

    assert not await call(store, use_async, "add", "k", {"v": 2})
    assert l1.get("k") is None, "the failed write took its own tombstone away, nothing else"
    assert await call(store, use_async, "get", "k") == {"v": 1}

    assert not await call(store, use_async, "replace", "k", {"v": 9}, {"v": 3})
    assert l2.get("k") == {"v": 1}
    assert await call(store, use_async, "replace", "k", {"v": 1}, {"v": 3}, ttl=60)
    assert l1.get("k")["value"] == l2.get("k") == {"v": 3}  # type: ignore[index]

    assert await call(store, use_async, "replace", "k", {"v": 3}, None)
    assert l2.get("k") is None
    assert "value" not in (l1.get("k") or {}), "a delete leaves only its tombstone in L1"
    assert await call(store, use_async, "get", "k") is None


class PlainStore:
    """A user's own L2: get/set/delete and their async twins, no add/replace."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = InMemorySessionStore(clock=clock)

    def get(self, key: str) -> Any:
        return self.inner.get(key)

    def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    async def aget(self, key: str) -> Any:
        return self.inner.get(key)

    async def aset(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    async def adelete(self, key: str) -> None:
        self.inner.delete(key)


@USE_ASYNC
async def test_conditional_writes_over_an_l2_without_them(
    clock: FakeClock, use_async: bool
) -> None:
    l2 = PlainStore(clock)
    store = HybridSessionStore(InMemorySessionStore(clock=clock), l2, clock=clock)
    assert await call(store, use_async, "add", "k", {"v": 1})
    assert not await call(store, use_async, "add", "k", {"v": 2})
    assert not await call(store, use_async, "replace", "k", {"v": True}, {"v": 3})
    assert await call(store, use_async, "replace", "k", {"v": 1}, {"v": 3})
    assert l2.get("k") == {"v": 3}
    assert await call(store, use_async, "get", "k") == {"v": 3}
    assert await call(store, use_async, "replace", "k", {"v": 3}, None)
    assert l2.get("k") is None


class FrozenL2(InMemorySessionStore):
    """An L2 whose every call times out; counts the calls, each of which would cost a timeout."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.calls = 0

    def _frozen(self, key: str) -> StoreUnavailableError:
        self.calls += 1
        return StoreUnavailableError("L2 did not answer within 5 s", key=key)

    def get_entry(self, key: str) -> Any:
        raise self._frozen(key)

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        raise self._frozen(key)

    def delete(self, key: str) -> None:
        raise self._frozen(key)

    def add(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> bool:
        raise self._frozen(key)

    def replace(self, key: str, *args: Any, **kwargs: Any) -> bool:
        raise self._frozen(key)


@USE_ASYNC
@pytest.mark.parametrize("op", ["get", "set", "delete", "add", "replace"])
async def test_a_frozen_l2_costs_one_timeout_per_operation(
    clock: FakeClock, use_async: bool, op: str
) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), FrozenL2(clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    args: dict[str, tuple[Any, ...]] = {
        "get": ("k",),
        "set": ("k", {"v": 1}),
        "delete": ("k",),
        "add": ("k", {"v": 1}),
        "replace": ("k", {"v": 0}, {"v": 1}),
    }
    for _ in range(2):  # with the marker read due (the first call), and not due
        l2.calls = 0
        with pytest.raises(StoreUnavailableError, match="did not answer") as info:
            await call(store, use_async, op, *args[op])
        assert l2.calls == 1, "one L2 call: the marker read's failure ends the operation"
        assert info.value.key == "k"
    assert "value" not in (l1.get("k") or {}), "nothing acknowledged in L1"


@USE_ASYNC
async def test_keys_come_from_l2_without_the_stores_own_entries(
    clock: FakeClock, use_async: bool
) -> None:
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2)
    await call(store, use_async, "set", "entity:a:x", {"v": 1})
    l1.set("only-in-l1", {"v": 2})  # a cache entry L2 does not hold is no session
    l2.set(MARKER_KEY, {"l1_missed_writes_before": 1.0})
    keys = [key async for key in store.akeys()] if use_async else list(store.keys())
    assert keys == ["entity:a:x"]


def test_keys_of_an_l2_that_cannot_list_say_what_to_do() -> None:
    store = HybridSessionStore(InMemorySessionStore(), UnlistedStore())  # type: ignore[arg-type]
    with pytest.raises(SessionStoreError, match="session_keys="):
        list(store.keys())
