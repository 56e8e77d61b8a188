"""Fixtures of the checkpoint cache tests (helpers live in `checkpoint_harness.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from checkpoint_harness import RedisServer, drop_prefix, unique

from postgres_schema import Schema


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A Redis key prefix of this test alone, deleted afterwards."""
    name = unique("lm_test:ckpt:") + ":"
    yield name
    drop_prefix(redis_url, name)


@pytest.fixture
def pg_conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose search_path is a fresh schema, dropped afterwards."""
    return postgres_schema.url


@pytest.fixture
def own_redis(tmp_path: Path, redis_url: str) -> Iterator[RedisServer]:
    """A redis-server this test may kill, freeze and restart (needs redis-server on PATH)."""
    server = RedisServer(tmp_path, snapshots=True)
    try:
        server.start()
    except FileNotFoundError:
        pytest.skip("redis-server is not installed")
    yield server
    server.stop()
