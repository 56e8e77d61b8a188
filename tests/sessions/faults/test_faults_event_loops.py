"""Stores used from several event loops: one ``asyncio.run`` after another, or side by side.

A store is often built once at import time and used from each request's ``asyncio.run``;
before, the Redis store's async client stayed bound to the first loop and the second run
failed with ``RuntimeError: Event loop is closed``.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from faults_redis_server import RedisServer

from layered_memory.errors import SessionStoreError
from layered_memory.sessions.stores import (
    HybridSessionStore,
    PostgresSessionStore,
    RedisSessionStore,
)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


@pytest.fixture
def postgres_store(postgres_url: str, postgres_schema: Any) -> Iterator[PostgresSessionStore]:
    store = PostgresSessionStore.from_conn_string(postgres_url, schema=postgres_schema.name)
    store.setup()
    yield store
    store.close()


def run_in_turn(store: Any) -> None:
    """Three event loops, one after the other, each writing and reading."""

    async def write(value: int) -> Any:
        await store.aset("k", {"v": value})
        return await store.aget("k")

    assert asyncio.run(write(1)) == {"v": 1}
    assert asyncio.run(write(2)) == {"v": 2}
    asyncio.run(store.adelete("k"))
    assert store.get("k") is None, "the sync half still works"


def run_side_by_side(store: Any) -> None:
    """Two event loops at once, in two threads."""
    results: dict[str, Any] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    async def work(name: str) -> None:
        for number in range(20):
            await store.aset(name, {"v": number})
        results[name] = await store.aget(name)

    def thread(name: str) -> None:
        start.wait()
        try:
            asyncio.run(work(name))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=thread, args=(name,)) for name in ("a", "b")]
    for each in threads:
        each.start()
    for each in threads:
        each.join(timeout=60)
    assert errors == []
    assert results == {"a": {"v": 19}, "b": {"v": 19}}


SCENARIOS: list[Callable[[Any], None]] = [run_in_turn, run_side_by_side]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_redis_store_works_on_every_event_loop(
    redis_url: str, scenario: Callable[..., None]
) -> None:
    store = RedisSessionStore.from_url(redis_url, prefix=unique("lm-loops:"))
    try:
        scenario(store)
    finally:
        for key in ("k", "a", "b"):
            store.delete(key)
        asyncio.run(store.aclose())
    gc.collect()  # an unclosed socket would warn here, and warnings are errors


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_postgres_store_works_on_every_event_loop(
    postgres_store: PostgresSessionStore, scenario: Callable[..., None]
) -> None:
    scenario(postgres_store)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hybrid_store_works_on_every_event_loop(
    redis_url: str, postgres_store: PostgresSessionStore, scenario: Callable[..., None]
) -> None:
    l1 = RedisSessionStore.from_url(redis_url, prefix=unique("lm-loops:"))
    store = HybridSessionStore(l1, postgres_store)
    try:
        scenario(store)
        assert store.l1_state == "closed", "no L1 failure along the way"
    finally:
        for key in ("k", "a", "b"):
            l1.delete(key)
        asyncio.run(l1.aclose())
    gc.collect()


def connected_clients(server: RedisServer) -> int:
    info = server.command("INFO", "clients")
    assert isinstance(info, dict)
    return int(info["connected_clients"]) - 1  # not the connection asking


def test_each_loops_connections_close_with_the_loop(redis_server: RedisServer) -> None:
    store = RedisSessionStore.from_url(redis_server.url, prefix="lm-loops:")
    for number in range(3):
        asyncio.run(store.aset("k", {"v": number}))
        assert connected_clients(redis_server) == 0, "closed when asyncio.run ended"
    assert store.get("k") == {"v": 2}
    assert connected_clients(redis_server) == 1, "the sync client's connection"
    store.close()
    assert connected_clients(redis_server) == 0


def test_a_given_async_client_serves_its_own_loop_only(redis_server: RedisServer) -> None:
    import redis
    import redis.asyncio

    async def first() -> Any:
        aclient = redis.asyncio.Redis.from_url(redis_server.url)
        store = RedisSessionStore(redis.Redis.from_url(redis_server.url), aclient=aclient)
        await store.aset("k", {"v": 1})
        return store

    store = asyncio.run(first())
    with pytest.raises(SessionStoreError, match="no URL to open a client for this event loop"):
        asyncio.run(store.aget("k"))
    store.close()

    async def with_url() -> Any:
        aclient = redis.asyncio.Redis.from_url(redis_server.url)
        store = RedisSessionStore(
            redis.Redis.from_url(redis_server.url), aclient=aclient, url=redis_server.url
        )
        await store.aset("k", {"v": 2})
        return store

    store = asyncio.run(with_url())
    assert asyncio.run(store.aget("k")) == {"v": 2}
    store.close()
    gc.collect()
