"""Fixtures of the fault tests: a redis-server of the test's own, stopped by its PID."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_redis_server import RedisServer

from postgres_schema import Schema


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, killed (never left frozen) at the end."""
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def pg_schema(postgres_schema: Schema) -> str:
    """A fresh PostgreSQL schema's name, dropped afterwards."""
    return postgres_schema.name
