"""A throwaway PostgreSQL schema: the one copy of "create a schema, use it, drop it".

Tests that share the PostgreSQL server never see each other's tables: each gets a schema of
its own, either by name (`PostgresSessionStore(schema=...)`) or through a connection string
whose `search_path` is that schema (LangGraph's `PostgresStore` and `PostgresSaver`, which
create their tables in the first schema of the path). The `postgres_schema` fixture
(conftest.py) gives one per test; code that needs several, or one outside a fixture, uses
`throwaway_schema`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo


@dataclass(frozen=True)
class Schema:
    """A schema made for one test.

    Attributes:
        name: The schema's name (for `PostgresSessionStore(schema=...)` and raw SQL).
        url: A connection string whose `search_path` is the schema.
    """

    name: str
    url: str


def unique_schema_name(prefix: str = "lm_test") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def drop_schema(base_url: str, name: str) -> None:
    """Drop a schema and everything in it (nothing happens when it does not exist)."""
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def throwaway_schema(base_url: str, prefix: str = "lm_test") -> Iterator[Schema]:
    """A new, empty schema on the server of `base_url`, dropped on exit."""
    name = unique_schema_name(prefix)
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield Schema(name, make_conninfo(base_url, options=f"-csearch_path={name}"))
    finally:
        drop_schema(base_url, name)
