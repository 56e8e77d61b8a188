"""Memory files written and read the backend's way, in a PostgreSQL store (each test's store
lives in a throwaway schema: tests/postgres_schema.py)."""

from __future__ import annotations

from collections.abc import Mapping

from deepagents.backends import StoreBackend
from langgraph.store.postgres import PostgresStore


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
