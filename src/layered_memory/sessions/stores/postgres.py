"""PostgreSQL session store (the ``postgres`` extra): one row per session, psycopg 3 pool.

The durable tier, usually the L2 of a `HybridSessionStore`. Like LangGraph's ``PostgresSaver``
it is built with `PostgresSessionStore.from_conn_string` and its tables are created by an
explicit `PostgresSessionStore.setup`, which applies the versioned `MIGRATIONS` not yet applied.
Expiry is checked against the server's clock by default, so workers with skewed clocks agree.

Faults: every call takes at most the store's ``timeout`` (5 s by default; `setup` and
`purge_expired`: `MAINTENANCE_TIMEOUT`), waiting for a pooled connection included. A query the
server does not answer in time (a frozen server) has its connection cut
(`resilience.SocketDeadline`) and raises `StoreUnavailableError`; the pool then discards that
connection and opens a new one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, LiteralString, Self, TypeVar

from layered_memory.core.validation import check_seconds, check_ttl
from layered_memory.errors import SessionStoreError, StoreUnavailableError, StoreURLError
from layered_memory.sessions.stores.base import (
    KEY_PAGE_SIZE,
    Clock,
    JsonDict,
    PagedKeys,
    StoredSession,
    ThreadedAsyncTwins,
    check_key,
    compact_json,
    decode_value,
    encode_value,
)
from layered_memory.sessions.stores.resilience import SocketDeadline
from layered_memory.sessions.stores.urls import driver_detail, password_hint, redact_url, scrub

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["MAINTENANCE_TIMEOUT", "MIGRATIONS", "PostgresSessionStore"]

_T = TypeVar("_T")

_INSTALL_HINT = (
    "PostgresSessionStore needs psycopg 3 and psycopg-pool: pip install 'layered-memory[postgres]'"
)

MIGRATIONS: list[LiteralString] = [
    # v0 records which migrations ran; it must stay first and never change.
    "CREATE TABLE IF NOT EXISTS {schema}.layered_memory_session_migrations (v INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS {schema}.layered_memory_sessions ("
    " key TEXT PRIMARY KEY,"
    " value JSONB NOT NULL,"
    " expires_at TIMESTAMPTZ,"
    " updated_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE INDEX IF NOT EXISTS layered_memory_sessions_expires_at_idx "
    "ON {schema}.layered_memory_sessions (expires_at) WHERE expires_at IS NOT NULL",
    # `json` keeps the text as written, so values come back exactly as from every other store:
    # `jsonb` refuses "\u0000" and lone surrogate escapes, and returns 1e308 as an integer.
    "ALTER TABLE {schema}.layered_memory_sessions ALTER COLUMN value TYPE json USING value::json",
]
"""Schema migrations, applied in order by `PostgresSessionStore.setup`; append, never edit."""

MAINTENANCE_TIMEOUT = 300.0
"""Seconds `PostgresSessionStore.setup` and `purge_expired` may take by default.

Longer than a call's ``timeout``: cut at 5 s, a migration rewriting a large table, or a purge
of a large backlog, would be rolled back on every attempt and never finish.
"""

# `now` is NULL unless a clock was injected; NULL means "the server's now()".
_NOW: LiteralString = "COALESCE(%(now)s::timestamptz, now())"
_GET: LiteralString = (
    "SELECT value::text, EXTRACT(EPOCH FROM (expires_at - " + _NOW + "))::float8 "
    "FROM {schema}.layered_memory_sessions "
    "WHERE key = %(key)s AND (expires_at IS NULL OR expires_at > " + _NOW + ")"
)
_SET: LiteralString = (
    "INSERT INTO {schema}.layered_memory_sessions (key, value, expires_at, updated_at) "
    "VALUES (%(key)s, %(value)s::json, "
    + _NOW
    + " + %(ttl)s::float8 * interval '1 second', "
    + _NOW
    + ") ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
    "expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at"
)
_ADD: LiteralString = (
    "INSERT INTO {schema}.layered_memory_sessions AS s (key, value, expires_at, updated_at) "
    "VALUES (%(key)s, %(value)s::json, "
    + _NOW
    + " + %(ttl)s::float8 * interval '1 second', "
    + _NOW
    + ") ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, "
    "expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at "
    "WHERE s.expires_at IS NOT NULL AND s.expires_at <= " + _NOW
)
# `replace` compares in Python, under the row lock: a row converted from jsonb keeps jsonb's
# spacing, so its text may differ from the compact text of the very same value.
_LOCK_ROW: LiteralString = (
    "SELECT value::text FROM {schema}.layered_memory_sessions "
    "WHERE key = %(key)s AND (expires_at IS NULL OR expires_at > " + _NOW + ") FOR UPDATE"
)
_UPDATE: LiteralString = (
    "UPDATE {schema}.layered_memory_sessions SET value = %(value)s::json, "
    "expires_at = " + _NOW + " + %(ttl)s::float8 * interval '1 second', "
    "updated_at = " + _NOW + " WHERE key = %(key)s"
)
_DELETE: LiteralString = "DELETE FROM {schema}.layered_memory_sessions WHERE key = %(key)s"
# Keyset paging in the primary key's order: each page starts after the last key of the one
# before, so no page costs more than its own rows, whatever the table holds. `starts_with`
# takes the prefix as a value (a LIKE pattern would read `%` and `_` in keys as wildcards).
_KEYS: LiteralString = (
    "SELECT key FROM {schema}.layered_memory_sessions "
    "WHERE starts_with(key, %(prefix)s) AND (%(after)s::text IS NULL OR key > %(after)s) "
    "AND (expires_at IS NULL OR expires_at > " + _NOW + ") ORDER BY key LIMIT %(limit)s"
)
_PURGE: LiteralString = "DELETE FROM {schema}.layered_memory_sessions WHERE expires_at <= " + _NOW


def _import_psycopg() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - the dev extra installs them
        raise ImportError(_INSTALL_HINT) from exc
    return psycopg, psycopg_pool


class PostgresSessionStore(PagedKeys, ThreadedAsyncTwins):
    """Sessions as rows of ``<schema>.layered_memory_sessions`` (JSON text, expiry column).

    Expired rows are never returned and are deleted by `purge_expired`. The async methods run
    the sync ones in a worker thread over the same thread-safe pool.

    Args:
        pool: An open ``psycopg_pool.ConnectionPool`` whose connections are in autocommit mode.
        schema: The schema holding the tables (created by `setup`); one per app or per test.
        clock: When given, wall-clock seconds used for expiry instead of the server's ``now()``
            (tests inject one to move time without sleeping).
        url: The connection URL, used in error messages with its password removed.
        timeout: Most seconds one call may take, waiting for a pooled connection included;
            a query still unanswered then has its connection cut and raises
            `StoreUnavailableError` (a frozen server).

    Example:
        >>> store = PostgresSessionStore.from_conn_string("postgresql://db/app")  # doctest: +SKIP
        >>> store.setup()  # doctest: +SKIP
        >>> store.set("entity:acme:research", {"summary": "..."}, ttl=86400)  # doctest: +SKIP
    """

    def __init__(
        self,
        pool: ConnectionPool[Connection[Any]],
        *,
        schema: str = "public",
        clock: Clock | None = None,
        url: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        self._psycopg, self._psycopg_pool = _import_psycopg()
        if not schema:
            msg = "schema must be a non-empty name"
            raise ValueError(msg)
        self._pool = pool
        self.schema = schema
        self._clock = clock
        self._url = url
        self.timeout = check_seconds(timeout, parameter="timeout")
        sql = self._psycopg.sql
        self._queries = {
            name: sql.SQL(text).format(schema=sql.Identifier(schema))
            for name, text in (
                ("get", _GET),
                ("set", _SET),
                ("add", _ADD),
                ("lock_row", _LOCK_ROW),
                ("update", _UPDATE),
                ("delete", _DELETE),
                ("purge", _PURGE),
                ("keys", _KEYS),
            )
        }

    @classmethod
    def from_conn_string(
        cls,
        url: str,
        *,
        schema: str = "public",
        clock: Clock | None = None,
        max_size: int = 4,
        connect_timeout: float = 5.0,
        timeout: float = 5.0,
    ) -> PostgresSessionStore:
        """Open a connection pool to ``url`` and return a store using it.

        Args:
            url: A libpq URL or ``key=value`` string.
            schema: See the class.
            clock: See the class.
            max_size: Most connections the pool opens.
            connect_timeout: Seconds to wait for the server.
            timeout: Most seconds one call may take (see the class).

        Returns:
            The store (call `setup` once per database before first use; `close` when done).

        Raises:
            StoreURLError: ``url`` is malformed (a `ValueError`); the message names it without
                its password.
            StoreUnavailableError: The server cannot be reached; the message names the URL
                without its password.
        """
        psycopg, psycopg_pool = _import_psycopg()
        check_seconds(timeout, parameter="timeout")
        wait = max(1, round(connect_timeout))
        failure: SessionStoreError | None = None
        hint = password_hint(url)
        if hint is not None:
            where = redact_url(url)
            failure = StoreURLError(f"invalid PostgreSQL URL {where}: {hint}", url=where)
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            failure = failure or _malformed(url, exc)
        if failure is None:
            # Probe once so an unreachable server fails here, with the driver's reason, instead
            # of as a pool timeout on the first query.
            try:
                psycopg.connect(url, connect_timeout=wait).close()
            except psycopg.Error as exc:
                failure = _unavailable(url, exc)
        if failure is not None:
            # Raised outside the `except` so the driver's exception, whose text may hold the
            # whole URL, is not even attached as `__context__`.
            raise failure
        pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": wait},
            open=True,
            name="layered-memory-sessions",
        )
        return cls(pool, schema=schema, clock=clock, url=url, timeout=timeout)

    def setup(self, *, timeout: float = MAINTENANCE_TIMEOUT) -> None:
        """Create the schema and apply the migrations not yet applied (safe to run every start).

        Concurrent callers are serialized by an advisory lock, so several workers may call it.

        Args:
            timeout: Most seconds it may take, waiting for another worker's migrations
                included (migration 3 rewrites the table once: minutes for millions of rows).
        """
        self._run(self._migrate, None, timeout=check_seconds(timeout, parameter="timeout"))

    def _migrate(self, conn: Connection[Any]) -> None:
        sql = self._psycopg.sql
        schema = sql.Identifier(self.schema)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lm:{self.schema}",))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            conn.execute(sql.SQL(MIGRATIONS[0]).format(schema=schema))
            row = conn.execute(
                sql.SQL("SELECT max(v) FROM {}.layered_memory_session_migrations").format(schema)
            ).fetchone()
            done = -1 if row is None or row[0] is None else int(row[0])
            for version in range(done + 1, len(MIGRATIONS)):
                conn.execute(sql.SQL(MIGRATIONS[version]).format(schema=schema))
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.layered_memory_session_migrations (v) VALUES (%s)"
                    ).format(schema),
                    (version,),
                )

    def _now(self) -> datetime | None:
        return None if self._clock is None else datetime.fromtimestamp(self._clock(), tz=UTC)

    def _error(self, exc: Exception, key: str | None) -> SessionStoreError:
        psycopg, psycopg_pool = self._psycopg, self._psycopg_pool
        url = self._url or ""
        where = redact_url(url) if url else "PostgreSQL"
        if isinstance(exc, psycopg_pool.PoolClosed):
            msg = f"PostgreSQL session store for {where} is closed"
            return StoreUnavailableError(msg, key=key)
        sqlstate = str(getattr(exc, "sqlstate", None) or "")
        if sqlstate.startswith("54"):
            # Class 54, "program limit exceeded", is an OperationalError in psycopg, but the
            # server is fine: this key or value is too large for it. Retrying will not help.
            detail = _first_line(scrub(str(exc), url))
            msg = f"PostgreSQL at {where} refused the data (SQLSTATE {sqlstate}): {detail}"
            return SessionStoreError(msg, key=key)
        if isinstance(exc, psycopg.OperationalError):  # includes the pool's timeout
            return _unavailable(url, exc, key=key)
        if isinstance(exc, psycopg.errors.UndefinedTable):
            msg = (
                f"session table missing in schema {self.schema!r} of {where}: "
                "call PostgresSessionStore.setup() first"
            )
            return SessionStoreError(msg, key=key)
        msg = f"PostgreSQL at {where} failed: {_first_line(scrub(str(exc), url))}"
        return SessionStoreError(msg, key=key)

    def _run(
        self,
        work: Callable[[Connection[Any]], _T],
        key: str | None,
        *,
        timeout: float | None = None,
    ) -> _T:
        """Run ``work`` on a pooled connection within ``timeout`` (default: the store's).

        Errors become the package's own. The deadline covers the wait for a connection and the
        work: when it passes, the connection's socket is shut down (`SocketDeadline`), the
        blocked call fails at once, and the connection, now closed, is discarded by the pool
        instead of being handed out again.
        """
        seconds = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + seconds
        watch: SocketDeadline | None = None
        try:
            with self._pool.connection(timeout=seconds) as conn:
                watch = SocketDeadline(conn.pgconn.socket, deadline)
                try:
                    return work(conn)
                finally:
                    if watch.finish():
                        conn.close()  # cut, maybe just after the answer: never reuse it
        except self._psycopg.Error as exc:
            cut = watch is not None and watch.fired
            failure = self._timed_out(key, seconds) if cut else self._error(exc, key)
        # Raised outside the `except`: the driver's exception may quote the whole URL.
        raise failure

    def _timed_out(self, key: str | None, seconds: float) -> StoreUnavailableError:
        where = redact_url(self._url) if self._url else "PostgreSQL"
        msg = (
            f"PostgreSQL at {where} did not answer within {seconds:g} s (frozen, "
            "overloaded or cut off?): its connection was closed"
        )
        return StoreUnavailableError(msg, key=key)

    def _execute(
        self, name: str, params: dict[str, Any], key: str | None, *, timeout: float | None = None
    ) -> Any:
        def work(conn: Connection[Any]) -> Any:
            cursor = conn.execute(self._queries[name], params)
            return cursor.fetchone() if name == "get" else cursor.rowcount

        return self._run(work, key, timeout=timeout)

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None when missing or expired."""
        check_key(key)
        row = self._execute("get", {"key": key, "now": self._now()}, key)
        if row is None:
            return None
        text, remaining = row
        return StoredSession(decode_value(key, text), None if remaining is None else remaining)

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        entry = self.get_entry(key)
        return None if entry is None else entry.value

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Upsert ``value`` under ``key``, expiring after ``ttl`` seconds (None: never)."""
        check_key(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        params = {"key": key, "value": text, "ttl": seconds, "now": self._now()}
        self._execute("set", params, key)

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired (one statement); True if stored."""
        check_key(key)
        seconds = check_ttl(ttl)
        text = encode_value(key, value)
        params = {"key": key, "value": text, "ttl": seconds, "now": self._now()}
        return bool(self._execute("add", params, key))

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected`` (None: delete); True if done.

        Atomic: the row is locked (``SELECT ... FOR UPDATE``) while it is compared and written.
        """
        check_key(key)
        seconds = check_ttl(ttl)
        expected_text = compact_json(key, expected)
        text = None if value is None else encode_value(key, value)
        params = {"key": key, "value": text, "ttl": seconds, "now": self._now()}

        def work(conn: Connection[Any]) -> bool:
            with conn.transaction():
                row = conn.execute(self._queries["lock_row"], params).fetchone()
                if row is None or compact_json(key, decode_value(key, row[0])) != expected_text:
                    return False
                if text is None:
                    conn.execute(self._queries["delete"], params)
                else:
                    conn.execute(self._queries["update"], params)
                return True

        return self._run(work, key)

    def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        check_key(key)
        self._execute("delete", {"key": key}, key)

    def _key_pages(self, prefix: str) -> Generator[list[str]]:
        after: str | None = None
        while True:
            params = {"prefix": prefix, "after": after, "limit": KEY_PAGE_SIZE, "now": self._now()}

            def work(conn: Connection[Any], params: dict[str, Any] = params) -> list[str]:
                return [row[0] for row in conn.execute(self._queries["keys"], params)]

            page = self._run(work, None)
            if page:
                yield page
            if len(page) < KEY_PAGE_SIZE:
                return
            after = page[-1]

    def purge_expired(self, *, timeout: float = MAINTENANCE_TIMEOUT) -> int:
        """Delete every expired row now; returns how many were deleted.

        Args:
            timeout: Most seconds it may take (a large backlog takes longer than one call).
        """
        seconds = check_seconds(timeout, parameter="timeout")
        return int(self._execute("purge", {"now": self._now()}, None, timeout=seconds))

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()

    def __repr__(self) -> str:
        where = redact_url(self._url) if self._url else "<pool>"
        return f"PostgresSessionStore(url={where!r}, schema={self.schema!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def apurge_expired(self, *, timeout: float = MAINTENANCE_TIMEOUT) -> int:
        """Async twin of `purge_expired`."""
        return await asyncio.to_thread(self.purge_expired, timeout=timeout)

    async def aclose(self) -> None:
        """Async twin of `close`."""
        await asyncio.to_thread(self.close)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def _malformed(url: str, exc: Exception) -> StoreURLError:
    where = redact_url(url)
    detail = _first_line(driver_detail(str(exc), url)) if str(exc) else type(exc).__name__
    return StoreURLError(f"invalid PostgreSQL URL {where}: {detail}", url=where)


def _unavailable(url: str, exc: Exception, *, key: str | None = None) -> StoreUnavailableError:
    where = redact_url(url) if url else "PostgreSQL"
    detail = _first_line(driver_detail(str(exc), url)) if str(exc) else type(exc).__name__
    return StoreUnavailableError(f"PostgreSQL at {where} is unreachable: {detail}", key=key)
