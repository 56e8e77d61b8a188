"""Cross-process write transactions on a `StoreBackend` over langgraph's PostgreSQL store.

Why an advisory lock and not a compare-and-swap: a write-back changes two rows (the archive,
then MEMORY.md), and the first insight creates rows that do not exist yet, so there is no old
value to compare against. One SQL transaction that first takes `pg_advisory_xact_lock(<64-bit
hash of namespace + key>)` serializes every writer of that file across processes and hosts, lets
the memory file and its archive commit together (a crash leaves both old or both new: no
duplicated entry either), needs no retry loop, and the lock is released by COMMIT, ROLLBACK or a
dropped connection, so a dead worker never leaves it behind.

The transaction runs on the store's own connection: a connection borrowed from its pool, or its
single connection while holding the store's own lock (the one `PostgresStore.batch` takes), so
it never interleaves with the store's other statements. Rows are read and written in the format
`StoreBackend` uses (`{"content", "encoding", "created_at", "modified_at"}`, keyed by path in the
backend's namespace, resolved from the run's runtime at each transaction) and with the store's
default TTL, so the agent's file tools and the middleware see the same files.

Limits: a store built with `index=` (semantic search) does not get the two rows re-embedded; an
agent's own `edit_file` on the same file is not serialized (as with every strategy).

Only imported once `langgraph.store.postgres` is, so the `postgres` extra stays optional.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from deepagents.backends.store import StoreBackend
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from layered_memory.core._internals import (
    STORE_UPSERT_SQL,
    async_store_connection,
    namespace_of,
    store_default_ttl,
    store_of,
    store_prefix,
    store_select_sql,
    sync_store_connection,
)
from layered_memory.errors import MemoryWriteError
from layered_memory.writeback._transactions import KeyedLock, T, Transform, lock_for_backend

_LOCK_DOMAIN = b"layered-memory/write-back\x00"

_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"


def is_postgres_store(store: object) -> bool:
    """Whether `store` is langgraph's sync or async PostgreSQL store."""
    return isinstance(store, PostgresStore | AsyncPostgresStore)


def advisory_lock_id(prefix: str, key: str) -> int:
    """A stable signed 64-bit lock id for one store row (same in every process and host)."""
    digest = hashlib.blake2b(
        _LOCK_DOMAIN + prefix.encode() + b"\x00" + key.encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresStoreLockStrategy:
    """Read-modify-write of `StoreBackend` files in one PostgreSQL transaction, under an
    advisory lock on the first file.

    Args:
        backend: The `StoreBackend` (its store a `PostgresStore` or `AsyncPostgresStore`).
        keys: The backend's own paths of the files (after any `CompositeBackend` route).
        display_paths: The same files as the caller names them (transform keys, errors).
    """

    def __init__(
        self, backend: StoreBackend, keys: Sequence[str], *, display_paths: Sequence[str]
    ) -> None:
        store = store_of(backend)
        if not is_postgres_store(store):
            msg = "PostgresStoreLockStrategy needs a StoreBackend over a PostgresStore"
            raise TypeError(msg)
        self._backend = backend
        self._store: PostgresStore | AsyncPostgresStore = store  # type: ignore[assignment]
        self._keys = dict(zip(display_paths, keys, strict=True))
        self._display = list(display_paths)

    def transact(self, transform: Transform[T]) -> T:
        prefix = self._prefix()
        store = self._store
        if isinstance(store, AsyncPostgresStore):
            if _running_loop() is store.loop:
                msg = "a sync write on the AsyncPostgresStore's own event loop would deadlock"
                raise MemoryWriteError(self._display[0], f"{msg}; use aadd_insight")
            # The async store's connection belongs to its event loop (as in its own `batch`).
            future = asyncio.run_coroutine_threadsafe(
                self._async_transaction(store, prefix, transform), store.loop
            )
            return future.result()
        with self._local_lock(prefix).hold():
            return self._sync_transaction(store, prefix, transform)

    async def atransact(self, transform: Transform[T]) -> T:
        prefix = self._prefix()
        store = self._store
        if isinstance(store, AsyncPostgresStore):
            transaction = self._async_transaction(store, prefix, transform)
            if asyncio.get_running_loop() is store.loop:
                return await transaction
            # Another loop: the store's connection still has to be used on its own loop.
            return await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(transaction, store.loop)
            )
        # A sync store blocks, so it runs in a worker thread. Writers of this process queue
        # here first (one waiting thread per loop at most), so waiting for the row's lock
        # neither pins the default executor nor holds pool connections.
        async with self._local_lock(prefix).ahold():
            return await asyncio.to_thread(self._sync_transaction, store, prefix, transform)

    # --- the two shells: only the connection handling differs ----------------------------

    def _sync_transaction(self, store: PostgresStore, prefix: str, transform: Transform[T]) -> T:
        try:
            with sync_store_connection(store) as conn, conn.transaction():
                with conn.cursor(row_factory=dict_row) as cur:
                    cur.execute(_LOCK_SQL, (self._lock_id(prefix),))
                    cur.execute(store_select_sql(store), (prefix, list(self._keys.values())))
                    rows = {row["key"]: row["value"] for row in cur.fetchall()}
                    changes, result = transform(self._texts(rows))
                    for params in self._upserts(store, prefix, rows, changes):
                        cur.execute(STORE_UPSERT_SQL, params)
                return result
        except psycopg.Error as exc:
            raise MemoryWriteError(self._display[0], f"PostgreSQL error: {exc}") from exc

    async def _async_transaction(
        self, store: AsyncPostgresStore, prefix: str, transform: Transform[T]
    ) -> T:
        try:
            async with async_store_connection(store) as conn, conn.transaction():
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(_LOCK_SQL, (self._lock_id(prefix),))
                    await cur.execute(store_select_sql(store), (prefix, list(self._keys.values())))
                    rows = {row["key"]: row["value"] for row in await cur.fetchall()}
                    changes, result = transform(self._texts(rows))
                    for params in self._upserts(store, prefix, rows, changes):
                        await cur.execute(STORE_UPSERT_SQL, params)
                return result
        except psycopg.Error as exc:
            raise MemoryWriteError(self._display[0], f"PostgreSQL error: {exc}") from exc

    # --- pure helpers ----------------------------------------------------------------------

    def _prefix(self) -> str:
        # Resolved per transaction: a per-user namespace comes from the run's runtime context.
        return store_prefix(namespace_of(self._backend))

    def _local_lock(self, prefix: str) -> KeyedLock:
        return lock_for_backend(self._store, f"{prefix}\x00{self._keys[self._display[0]]}")

    def _lock_id(self, prefix: str) -> int:
        return advisory_lock_id(prefix, self._keys[self._display[0]])

    def _texts(self, rows: Mapping[str, Any]) -> dict[str, str | None]:
        texts: dict[str, str | None] = {}
        for path in self._display:
            value = rows.get(self._keys[path])
            texts[path] = None if value is None else _row_text(path, value)
        return texts

    def _upserts(
        self,
        store: PostgresStore | AsyncPostgresStore,
        prefix: str,
        rows: Mapping[str, Any],
        changes: Mapping[str, str],
    ) -> Iterator[tuple[Any, ...]]:
        ttl = store_default_ttl(store)
        now = datetime.now(UTC).isoformat()
        for path, text in changes.items():
            key = self._keys[path]
            old = rows.get(key)
            created = old.get("created_at") if isinstance(old, Mapping) else None
            value = {
                "content": text,
                "encoding": "utf-8",
                "created_at": created if isinstance(created, str) else now,
                "modified_at": now,
            }
            yield (prefix, key, Jsonb(value), ttl, ttl)


def _row_text(path: str, value: Any) -> str:
    """The file text of a `StoreBackend` row (current or legacy list-of-lines content)."""
    content = value.get("content") if isinstance(value, Mapping) else None
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        content = "\n".join(content)
    if not isinstance(content, str):
        raise MemoryWriteError(path, "store item has no text content")
    if value.get("encoding") == "base64":
        try:
            return base64.standard_b64decode(content).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as exc:
            # Rewriting a file we cannot decode would destroy it.
            raise MemoryWriteError(path, "not UTF-8 text") from exc
    return content


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
