"""Fixtures of the store tests (the harness itself is in `store_harness.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_harness import (
    ADAPTERS,
    FakeClock,
    RedisClock,
    StoreCase,
    build_case,
    make_redis,
)

from layered_memory.sessions.stores import RedisSessionStore
from postgres_schema import Schema


@pytest.fixture(params=ADAPTERS)
async def case(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreCase]:
    """Each adapter in turn, cleaned up afterwards (async, so async clients close on the loop)."""
    built = build_case(request.param, request, tmp_path)
    try:
        yield built
    finally:
        for cleanup in built.cleanups:
            result = cleanup()
            if hasattr(result, "__await__"):
                await result


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[tuple[RedisSessionStore, RedisClock]]:
    cleanups: list[Callable[[], Any]] = []
    store, redis_clock = make_redis(redis_url, cleanups)
    yield store, redis_clock
    store.close()
    redis_clock.cleanup()


@pytest.fixture
def pg_schema(postgres_schema: Schema) -> str:
    """A fresh schema's name, dropped afterwards."""
    return postgres_schema.name
