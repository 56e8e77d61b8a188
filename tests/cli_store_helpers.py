"""A PostgreSQL schema of its own for each CLI test, and memory files written the backend's way.

Each test gets a fresh schema (the store's tables live there through `search_path`), so tests
never see each other's items, and the schema is dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import psycopg
from deepagents.backends import StoreBackend
from langgraph.store.postgres import PostgresStore
from psycopg import sql
from psycopg.conninfo import make_conninfo


@contextmanager
def schema_url(base_url: str) -> Iterator[str]:
    """A connection string whose `search_path` is a new, empty schema (dropped on exit)."""
    schema = f"lm_cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield make_conninfo(base_url, options=f"-csearch_path={schema}")
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def upload(url: str, namespace: tuple[str, ...], files: Mapping[str, bytes]) -> None:
    """Write files through deepagents' own `StoreBackend` (tables created if needed)."""
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        backend = StoreBackend(namespace=lambda _rt: namespace, store=store)
        assert all(r.error is None for r in backend.upload_files(list(files.items())))


def download(url: str, namespace: tuple[str, ...], paths: list[str]) -> dict[str, bytes | None]:
    """Read files back through `StoreBackend` (None: no such item)."""
    with PostgresStore.from_conn_string(url) as store:
        backend = StoreBackend(namespace=lambda _rt: namespace, store=store)
        return {r.path: r.content for r in backend.download_files(paths)}


def raw_items(url: str, namespace: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Every item stored exactly in `namespace`: key -> value."""
    with PostgresStore.from_conn_string(url) as store:
        items = store.search(namespace, limit=1000)
        return {i.key: dict(i.value) for i in items if tuple(i.namespace) == namespace}
