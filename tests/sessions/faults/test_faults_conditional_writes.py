"""`add` and `replace`: the atomic writes HybridSessionStore relies on, on every L1 adapter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from layered_memory.sessions.stores import InMemorySessionStore, RedisSessionStore
from layered_memory.sessions.stores.base import ConditionalSessionStore, GenerationalSessionStore

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    url = request.getfixturevalue("redis_url")
    redis_store = RedisSessionStore.from_url(url, prefix=f"lm-cas:{uuid.uuid4().hex[:8]}:")
    yield redis_store
    for key in ("k", "other"):
        redis_store.delete(key)
    await redis_store.aclose()


async def call(store: Any, use_async: bool, op: str, *args: Any, **kwargs: Any) -> Any:
    if use_async:
        return await getattr(store, f"a{op}")(*args, **kwargs)
    return getattr(store, op)(*args, **kwargs)


def test_the_l1_adapters_implement_the_protocol(store: Any) -> None:
    assert isinstance(store, ConditionalSessionStore)


@USE_ASYNC
async def test_add_stores_only_when_missing(store: Any, use_async: bool) -> None:
    assert await call(store, use_async, "add", "k", {"v": 1}, ttl=60)
    assert not await call(store, use_async, "add", "k", {"v": 2})
    assert await call(store, use_async, "get", "k") == {"v": 1}
    entry = await call(store, use_async, "get_entry", "k")
    assert 0 < entry.ttl <= 60


@USE_ASYNC
async def test_replace_only_while_the_value_is_unchanged(store: Any, use_async: bool) -> None:
    value = {"a": 1, "b": [1.5, "é", None], "c": {"d": True}}
    await call(store, use_async, "set", "k", value)
    assert not await call(store, use_async, "replace", "k", {"a": 2}, {"v": "x"})
    assert await call(store, use_async, "replace", "k", value, {"v": "new"}, ttl=30)
    assert await call(store, use_async, "get", "k") == {"v": "new"}
    entry = await call(store, use_async, "get_entry", "k")
    assert 0 < entry.ttl <= 30
    assert not await call(store, use_async, "replace", "other", {"v": "new"}, {"v": "x"})
    assert await call(store, use_async, "get", "other") is None, "missing stays missing"
    assert await call(store, use_async, "replace", "k", {"v": "new"}, None)
    assert await call(store, use_async, "get", "k") is None, "None deletes"


def test_redis_store_knows_its_server_generation(redis_url: str) -> None:
    store = RedisSessionStore.from_url(redis_url, prefix="lm-cas:")
    try:
        assert isinstance(store, GenerationalSessionStore)
        assert store.generation is None, "unknown before the first connection"
        store.get("k")
        assert store.generation is not None
        assert len(store.generation) == 40
    finally:
        store.close()
