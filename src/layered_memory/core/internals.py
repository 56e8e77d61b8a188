"""The one place that reads private internals of deepagents, langgraph and langsmith.

Neither library has a public API for these. Each is used by name here only, so an upgrade that
renames one breaks this module and `tests/core/test_internals_contract.py` (which names the versions
below), not the features built on it.

- deepagents: how a `CompositeBackend` routes a path, how a `FilesystemBackend` resolves one,
  the store and namespace of a `StoreBackend`.
- langgraph-checkpoint-postgres: the `store` table of `PostgresStore` / `AsyncPostgresStore`
  (read and written in one transaction under an advisory lock by the write-back) and the
  store's own connection and lock. Imported lazily: the `postgres` extra stays optional.
- deepagents' backend factory form, `backend=lambda runtime: ...`, resolved per hook call (a
  `ToolRuntime` built the way deepagents builds it for its factories).
- langgraph's stream writer: whether anyone streams `stream_mode="custom"` from a node (the
  writer LangGraph hands a node otherwise does nothing); langsmith's open span, read from the
  context variable `get_current_run_tree` reads.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from deepagents.backends.composite import CompositeBackend
    from deepagents.backends.filesystem import FilesystemBackend
    from deepagents.backends.store import StoreBackend
    from langchain_core.runnables import RunnableConfig
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore


# -- deepagents' and langgraph's private API ------------------------------------------------------

WRITTEN_FOR = {
    "deepagents": "0.7.32",
    "langgraph-checkpoint-postgres": "3.2.0",
    "langgraph": "1.2.24",
    "langsmith": "0.15.1",
}
"""The versions these adapters were written and tested against."""

# -- deepagents -------------------------------------------------------------------------------

_BACKEND_HOMES = {
    "BackendProtocol": "deepagents.backends.protocol",
    "CompositeBackend": "deepagents.backends.composite",
    "FilesystemBackend": "deepagents.backends.filesystem",
    "StoreBackend": "deepagents.backends.store",
}


def is_backend_class(
    value: object,
    name: Literal["BackendProtocol", "CompositeBackend", "FilesystemBackend", "StoreBackend"],
) -> bool:
    """`isinstance(value, <that deepagents class>)`, without importing deepagents.

    An instance of a class means its module was imported: when it was not, the answer is no.
    Importing deepagents costs about 2 s (its package imports LangChain and LangGraph), which
    `layered-memory lint` of a rule folder and `--version` never pay
    (`tests/cli/test_cli_startup.py`).
    """
    module = sys.modules.get(_BACKEND_HOMES[name])
    return module is not None and isinstance(value, getattr(module, name))


def route(backend: CompositeBackend, path: str) -> tuple[Any, str, str | None]:
    """Where a `CompositeBackend` sends `path`: `(backend, path there, route prefix or None)`.

    The function deepagents routes with, so our code and the backend never disagree.
    """
    from deepagents.backends.composite import _route_for_path

    return _route_for_path(default=backend.default, sorted_routes=backend.sorted_routes, path=path)


def final_route(backend: Any, path: str) -> tuple[Any, str]:
    """Follow composite routes (also nested ones) to the backend that stores `path`."""
    while is_backend_class(backend, "CompositeBackend"):
        backend, path, _prefix = route(backend, path)
    return backend, path


def filesystem_path(backend: FilesystemBackend, key: str) -> Path:
    """The file a `FilesystemBackend` itself would open for `key`, by its own rules.

    Raises:
        ValueError: The key would leave a virtual-mode root (`..`, `~`, a symlink out).
        OSError: A symlink loop.
    """
    return backend._resolve_path(key)


def store_of(backend: StoreBackend) -> Any:
    """The `BaseStore` a `StoreBackend` was built with (None: it takes one from the runtime)."""
    return backend._store


def namespace_of(backend: StoreBackend) -> tuple[str, ...]:
    """The namespace the `StoreBackend` uses for this run (from the run's runtime)."""
    return tuple(backend._get_namespace())


# -- langgraph's PostgreSQL store -------------------------------------------------------------

STORE_SELECT_SQL = (
    "SELECT key, value FROM store WHERE prefix = %s AND key = ANY(%s::text[]){expiry}"
)
STORE_UPSERT_SQL = """
    INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
    VALUES (%s, %s, %s, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP,
            NOW() + make_interval(secs => %s::float8 * 60), %s)
    ON CONFLICT (prefix, key) DO UPDATE
    SET value = EXCLUDED.value,
        updated_at = CURRENT_TIMESTAMP,
        expires_at = EXCLUDED.expires_at,
        ttl_minutes = EXCLUDED.ttl_minutes
"""
"""Rows as `PostgresStore.put` writes them (prefix = namespace joined with `.`)."""


def store_prefix(namespace: tuple[str, ...]) -> str:
    """The `prefix` column of a namespace, as `PostgresStore` stores it."""
    return ".".join(namespace)


def store_select_sql(store: PostgresStore | AsyncPostgresStore) -> str:
    """The SELECT of current rows, leaving out expired ones when the store does."""
    omit_expired = bool(store.ttl_config and store.ttl_config.get("omit_expired"))
    expiry = " AND (expires_at IS NULL OR expires_at > NOW())" if omit_expired else ""
    return STORE_SELECT_SQL.format(expiry=expiry)


def store_default_ttl(store: PostgresStore | AsyncPostgresStore) -> float | None:
    """The store's default TTL in minutes (None: rows do not expire)."""
    return store.ttl_config.get("default_ttl") if store.ttl_config else None


@contextlib.contextmanager
def sync_store_connection(store: PostgresStore) -> Iterator[Any]:
    """The store's own connection: one from its pool, or its single connection under the lock
    its own `batch` takes (a pipelined connection is shared without that lock)."""
    from psycopg_pool import ConnectionPool

    conn = store.conn
    if isinstance(conn, ConnectionPool):
        with conn.connection() as pooled:
            yield pooled
    else:
        with store.lock:
            yield conn


@contextlib.asynccontextmanager
async def async_store_connection(store: AsyncPostgresStore) -> AsyncIterator[Any]:
    """Async twin of `sync_store_connection` (used on the store's own event loop)."""
    from psycopg_pool import AsyncConnectionPool

    conn = store.conn
    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as pooled:
            yield pooled
    else:
        async with store.lock:
            yield conn


# -- deepagents' backend factory form -------------------------------------------------------------

BackendFactory = Callable[[Any], Any]
"""`callable(runtime) -> backend`, resolved at each hook."""


def resolve(
    factory: BackendFactory, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
) -> Any:
    """The backend a factory gives for this run (called with a `ToolRuntime`, as deepagents
    called its factories)."""
    from langchain.tools import ToolRuntime  # imported when a factory is used (lazy imports)

    tool_runtime = ToolRuntime(
        state=state,
        context=getattr(runtime, "context", None),
        config=config or getattr(runtime, "config", None) or {},  # type: ignore[arg-type]
        stream_writer=getattr(runtime, "stream_writer", None) or _no_stream,
        tool_call_id=None,
        store=getattr(runtime, "store", None),
    )
    return factory(tool_runtime)


def _no_stream(_chunk: Any) -> None:
    """Stream writer for a factory called outside a streaming run."""


# -- langgraph's stream writer --------------------------------------------------------------------


def _quiet(_chunk: Any) -> None:
    pass


def _quiet_documented(_chunk: Any) -> None:
    """A writer that does nothing, with a docstring (its constant sits at another index)."""


_DOES_NOTHING = frozenset(f.__code__.co_code for f in (_quiet, _quiet_documented))
"""The bytecode of a function that returns a constant and does nothing else: a writer with it
has no effect, whatever its name or home."""


class Listeners(NamedTuple):
    """Who receives a model call's memory report.

    Attributes:
        writer: The run's stream writer, when someone streams `stream_mode="custom"`.
        span: The open LangSmith span (a `RunTree`), when the call is traced.
    """

    writer: Callable[[Any], None] | None
    span: Any | None


def report_listeners(runtime: Any) -> Listeners | None:
    """Who would receive the memory report of a model call: None when nobody would.

    LangGraph has no public "is custom mode streamed?". When the caller of `invoke`, `stream`
    or `astream` does not stream custom mode (and, in a subgraph, no parent streams it with
    `subgraphs=True`), `Pregel.stream` hands every node a local `def stream_writer(c): pass`
    (`Runtime`'s default is `_no_op_stream_writer`, also empty). A writer whose code does
    nothing is taken for that; anything else (a wrapped writer, a callable object, a builtin)
    counts as someone listening.

    The open span is what `langsmith.run_helpers.get_current_run_tree()` returns, read from
    the context variable it reads (`_context._PARENT_RUN_TREE_REF`, a weak reference): every
    model call asks, and this costs one C call where that costs three Python calls.

    Args:
        runtime: The model call's LangGraph runtime (`request.runtime`), or None.

    Returns:
        The writer and the span (either may be None), or None when both are.
    """
    # Imported here (no Python call once imported): the CLI's commands never pay for it.
    import langsmith._internal._context as langsmith_context

    ref = langsmith_context._PARENT_RUN_TREE_REF.get()
    span = ref() if ref is not None else None
    # Attribute reads only (no Python call): every model call asks.
    writer: Callable[[Any], None] | None
    try:
        writer = runtime.stream_writer
    except AttributeError:  # outside a graph (no runtime), or a runtime without a writer
        writer = None
    else:
        try:
            if writer.__code__.co_code in _DOES_NOTHING:  # type: ignore[union-attr]
                writer = None
        except AttributeError:  # a builtin or a callable object: it may do anything
            pass
    if writer is None and span is None:
        return None
    return Listeners(writer, span)
