"""Store test harness: every adapter behind one `StoreCase`, so one conformance suite runs them all.

Time never passes by sleeping: clock-driven stores get a `FakeClock`, and Redis (whose server
owns expiry) is "advanced" by shortening each key's server-side TTL with `PEXPIRE`, so the
server itself expires the key.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from layered_memory.sessions.stores import (
    FileSessionStore,
    HybridSessionStore,
    InMemorySessionStore,
    PostgresSessionStore,
    RedisSessionStore,
    SessionStore,
)
from postgres_schema import drop_schema, unique_schema_name


@dataclass
class FakeClock:
    """A clock tests move by hand."""

    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class StoreCase:
    """One adapter under test and a way to let time pass for it."""

    name: str
    store: Any
    advance: Callable[[float], None]
    cleanups: list[Callable[[], Any]] = field(default_factory=list)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


class RedisClock:
    """Advances time for keys under one prefix by shortening their server-side TTLs."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.prefix = prefix

    def advance(self, seconds: float) -> None:
        for name in self.client.scan_iter(match=f"{self.prefix}*"):
            remaining = self.client.pttl(name)
            if remaining > 0:
                # PEXPIRE with a non-positive time deletes the key at once, as expiry would.
                self.client.pexpire(name, int(remaining - seconds * 1000))

    def cleanup(self) -> None:
        for name in self.client.scan_iter(match=f"{self.prefix}*"):
            self.client.delete(name)
        self.client.close()


def make_redis(url: str, cleanups: list[Callable[[], Any]]) -> tuple[RedisSessionStore, RedisClock]:
    prefix = unique("lm-test:")
    store = RedisSessionStore.from_url(url, prefix=prefix)
    clock = RedisClock(url, prefix)
    cleanups.append(store.aclose)
    cleanups.append(clock.cleanup)
    return store, clock


def make_postgres(
    url: str, clock: FakeClock | None, cleanups: list[Callable[[], Any]]
) -> PostgresSessionStore:
    schema = unique_schema_name()
    store = PostgresSessionStore.from_conn_string(url, schema=schema, clock=clock)
    cleanups.append(store.close)
    cleanups.append(lambda: drop_schema(url, schema))
    store.setup()
    return store


ADAPTERS = ["memory", "file", "redis", "postgres", "hybrid_memory_file", "hybrid_redis_postgres"]


def build_case(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreCase:
    clock = FakeClock()
    cleanups: list[Callable[[], Any]] = []
    if name == "memory":
        return StoreCase(name, InMemorySessionStore(clock=clock), clock.advance)
    if name == "file":
        return StoreCase(name, FileSessionStore(tmp_path / "sessions", clock=clock), clock.advance)
    if name == "redis":
        store, redis_clock = make_redis(request.getfixturevalue("redis_url"), cleanups)
        return StoreCase(name, store, redis_clock.advance, cleanups)
    if name == "postgres":
        store = make_postgres(request.getfixturevalue("postgres_url"), clock, cleanups)
        return StoreCase(name, store, clock.advance, cleanups)
    if name == "hybrid_memory_file":
        hybrid = HybridSessionStore(
            InMemorySessionStore(clock=clock), FileSessionStore(tmp_path / "l2", clock=clock)
        )
        return StoreCase(name, hybrid, clock.advance)
    if name == "hybrid_redis_postgres":
        redis_store, redis_clock = make_redis(request.getfixturevalue("redis_url"), cleanups)
        pg_store = make_postgres(request.getfixturevalue("postgres_url"), clock, cleanups)

        def advance(seconds: float) -> None:
            redis_clock.advance(seconds)
            clock.advance(seconds)

        return StoreCase(name, HybridSessionStore(redis_store, pg_store), advance, cleanups)
    raise AssertionError(name)


async def call(store: SessionStore, use_async: bool, op: str, *args: Any, **kwargs: Any) -> Any:
    """Run `store.<op>(...)` or its async twin `store.a<op>(...)`."""
    if use_async:
        return await getattr(store, f"a{op}")(*args, **kwargs)
    return getattr(store, op)(*args, **kwargs)
