"""LangGraph's official conformance suite (`langgraph-checkpoint-conformance`) on the wrapper.

The wrapper runs around `AsyncPostgresSaver` on the real PostgreSQL (in a schema of its own),
`InMemorySaver` and `AsyncSqliteSaver`. Every base capability and every extended capability of
the wrapped saver must pass, and the wrapper must claim exactly the wrapped saver's
capabilities (the suite detects them by overridden methods).

The "hot" variant reads every latest checkpoint three ways per call: twice through one wrapper
(the second read snapshots and stores the signed payload) and once through a sibling wrapper
that shares Redis (a second worker): the suite then checks what the cache tiers serve.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from checkpoint_harness import ExtendedInMemorySaver, drop_prefix
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from layered_memory.checkpoint import CachedCheckpointSaver

KEY = "conformance-signing-key-0123456789"


def _hot(saver: CachedCheckpointSaver, sibling: CachedCheckpointSaver) -> None:
    """Route the wrapper's latest-checkpoint reads through both cache tiers."""
    single = saver._reads.aget

    async def three_reads(config: Any) -> Any:
        await single(config)
        await single(config)  # second read of this version: snapshot + signed payload
        from_sibling = await sibling._reads.aget(config)  # another worker: payload or miss
        from_local = await single(config)  # this worker: snapshot hit
        assert (from_sibling is None) == (from_local is None)
        return from_local

    saver._reads.aget = three_reads  # type: ignore[method-assign]


def _assert_conforms(report: CapabilityReport, inner: BaseCheckpointSaver[Any]) -> None:
    summary = report.to_dict()
    assert report.passed_all_base(), summary
    assert report.passed_all(), summary
    detected = {name for name, result in report.results.items() if result.detected}
    expected = {cap.value for cap in DetectedCapabilities.from_instance(inner).detected}
    assert detected == expected, summary


async def _run(
    name: str,
    make_inner: Callable[[], Any],
    redis_url: str,
    *,
    hot: bool = False,
) -> tuple[CapabilityReport, BaseCheckpointSaver[Any]]:
    prefix = f"lm_test:conformance:{uuid.uuid4().hex[:12]}:"
    seen: list[BaseCheckpointSaver[Any]] = []

    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with make_inner() as inner:
            seen.append(inner)
            options: dict[str, Any] = {"redis_url": redis_url, "prefix": prefix}
            if hot:
                options["signing_key"] = KEY
            async with (
                CachedCheckpointSaver(inner, **options) as saver,
                CachedCheckpointSaver(inner, **options) as sibling,
            ):
                if hot:
                    _hot(saver, sibling)
                yield saver

    try:
        report = await validate(factory)
    finally:
        drop_prefix(redis_url, prefix)
    return report, seen[0]


class _Postgres:
    """An `AsyncPostgresSaver` on one connection to the test schema, set up on entry."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.conn: AsyncConnection[Any] | None = None

    async def __aenter__(self) -> AsyncPostgresSaver:
        self.conn = await AsyncConnection.connect(
            self.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        saver = AsyncPostgresSaver(self.conn)
        await saver.setup()
        return saver

    async def __aexit__(self, *exc: object) -> None:
        assert self.conn is not None
        await self.conn.close()


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("hot", [False, True], ids=["default", "hot"])
async def test_conformance_around_async_postgres(
    pg_conninfo: str, redis_url: str, hot: bool
) -> None:
    report, inner = await _run(
        "Cached(AsyncPostgresSaver)", lambda: _Postgres(pg_conninfo), redis_url, hot=hot
    )
    _assert_conforms(report, inner)
    assert report.results["prune"].passed is True  # PostgresSaver's extended capability


@pytest.mark.redis
@pytest.mark.parametrize("hot", [False, True], ids=["default", "hot"])
async def test_conformance_around_in_memory(redis_url: str, hot: bool) -> None:
    report, inner = await _run("Cached(InMemorySaver)", InMemorySaver, redis_url, hot=hot)
    _assert_conforms(report, inner)


@pytest.mark.redis
@pytest.mark.parametrize("hot", [False, True], ids=["default", "hot"])
async def test_conformance_of_extended_capabilities(redis_url: str, hot: bool) -> None:
    """copy_thread, delete_for_runs and prune through the wrapper (the test saver's own
    implementations pass the suite unwrapped first)."""
    bare = await validate(checkpointer_test(name="ExtendedInMemorySaver")(_bare))
    assert bare.passed_all(), bare.to_dict()
    report, inner = await _run("Cached(Extended)", ExtendedInMemorySaver, redis_url, hot=hot)
    _assert_conforms(report, inner)
    for capability in ("copy_thread", "delete_for_runs", "prune"):
        assert report.results[capability].passed is True, capability


async def _bare() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    yield ExtendedInMemorySaver()


@pytest.mark.redis
async def test_conformance_around_async_sqlite(redis_url: str, tmp_path: Path) -> None:
    path = str(tmp_path / "checkpoints.sqlite")
    report, inner = await _run(
        "Cached(AsyncSqliteSaver)",
        lambda: AsyncSqliteSaver.from_conn_string(path),
        redis_url,
        hot=True,
    )
    _assert_conforms(report, inner)


@pytest.mark.parametrize(
    "saver_type",
    [InMemorySaver, PostgresSaver, AsyncPostgresSaver, SqliteSaver, AsyncSqliteSaver],
)
def test_wrapper_claims_exactly_the_wrapped_capabilities(saver_type: type) -> None:
    """Detection reads the class, so no connection is needed: an uninitialised instance will do."""
    inner = object.__new__(saver_type)
    inner.serde = InMemorySaver().serde
    wrapper = CachedCheckpointSaver(inner, redis_url="redis://127.0.0.1:1/0")
    assert DetectedCapabilities.from_instance(wrapper) == DetectedCapabilities.from_instance(inner)
    for name in ("get_tuple", "list", "put", "put_writes", "delete_thread", "prune"):
        for method in (name, "a" + name):
            wrapped_has = getattr(saver_type, method) is not getattr(BaseCheckpointSaver, method)
            assert (type(wrapper).__dict__.get(method) is not None) == wrapped_has, method
    wrapper.close()
