"""The private internals of deepagents and langgraph that `internals.py` relies on still behave
as they did in the versions it names. A failure here after an upgrade points at the adapter to
fix, before any feature misbehaves."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.utils import create_file_data
from langgraph.store.memory import InMemoryStore

from layered_memory.core import internals
from postgres_schema import Schema


def test_the_versions_are_named() -> None:
    assert set(internals.WRITTEN_FOR) == {
        "deepagents",
        "langgraph-checkpoint-postgres",
        "langgraph",
        "langsmith",
    }
    installed = importlib.metadata.version("deepagents")
    major_minor = ".".join(internals.WRITTEN_FOR["deepagents"].split(".")[:2])
    assert installed.startswith(major_minor), (
        f"deepagents {installed} is installed; internals.py was written for "
        f"{internals.WRITTEN_FOR['deepagents']}: re-check every adapter, then update it"
    )


def test_composite_routing_matches_the_backend(tmp_path: Path) -> None:
    disk = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    inner = CompositeBackend(default=StateBackend(), routes={"/deep/": disk})
    outer = CompositeBackend(default=StateBackend(), routes={"/mem/": inner})
    assert internals.route(outer, "/mem/deep/x.md")[:2] == (inner, "/deep/x.md")
    assert internals.route(outer, "/mem")[:2] == (inner, "/")
    assert internals.route(outer, "/other.md")[:2] == (outer.default, "/other.md")
    assert internals.final_route(outer, "/mem/deep/x.md") == (disk, "/x.md")
    # The backend itself writes where the route says.
    outer.upload_files([("/mem/deep/x.md", b"routed")])
    assert (tmp_path / "x.md").read_bytes() == b"routed"


def test_filesystem_path_resolves_as_the_backend_does(tmp_path: Path) -> None:
    virtual = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assert internals.filesystem_path(virtual, "/a/b.md") == (tmp_path / "a" / "b.md").resolve()
    with pytest.raises(ValueError, match="traversal"):
        internals.filesystem_path(virtual, "/../etc/passwd")
    host = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    assert internals.filesystem_path(host, "/etc/hosts") == Path("/etc/hosts")


def test_store_backend_store_and_namespace() -> None:
    store = InMemoryStore()
    backend = StoreBackend(namespace=lambda _runtime: ("memory", "org"), store=store)
    assert internals.store_of(backend) is store
    assert internals.namespace_of(backend) == ("memory", "org")
    backend.upload_files([("/AGENTS.md", b"org")])
    item = store.get(("memory", "org"), "/AGENTS.md")
    assert item is not None
    assert item.value["content"] == "org"


@pytest.fixture
def postgres_store(postgres_schema: Schema) -> Iterator[object]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
        yield store


def test_store_table_sql_reads_and_writes_what_the_store_does(postgres_store: object) -> None:
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg.types.json import Jsonb

    assert isinstance(postgres_store, PostgresStore)
    namespace = ("memory", "project")
    postgres_store.put(namespace, "/AGENTS.md", dict(create_file_data("from the store")))
    prefix = internals.store_prefix(namespace)
    with (
        internals.sync_store_connection(postgres_store) as conn,
        conn.cursor(row_factory=dict_row) as cur,
    ):
        cur.execute(internals.store_select_sql(postgres_store), (prefix, ["/AGENTS.md"]))
        (row,) = cur.fetchall()
        assert row["key"] == "/AGENTS.md"
        assert row["value"]["content"] == "from the store"
        ttl = internals.store_default_ttl(postgres_store)
        new = {"content": "from our SQL", "encoding": "utf-8"}
        cur.execute(internals.STORE_UPSERT_SQL, (prefix, "/NEW.md", Jsonb(new), ttl, ttl))
        conn.commit()
    item = postgres_store.get(namespace, "/NEW.md")
    assert item is not None
    assert item.value["content"] == "from our SQL"


# -- langgraph's stream writer ------------------------------------------------------------------


def _writers_seen(run: object) -> list[object]:
    """The writer `internals.report_listeners` finds inside a node, for each way of running."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        n: int

    seen: list[object] = []

    def node(state: State, runtime: Runtime) -> State:
        listeners = internals.report_listeners(runtime)
        seen.append(None if listeners is None else listeners.writer)
        return {"n": 1}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    inner = builder.compile()
    parent = StateGraph(State)
    parent.add_node("inner", inner)
    parent.add_edge(START, "inner")
    parent.add_edge("inner", END)
    run(inner, parent.compile())  # type: ignore[operator]
    return seen


def test_the_writer_of_a_run_nobody_streams_custom_mode_from_does_nothing() -> None:
    import asyncio

    def quiet(graph: object, parent: object) -> None:
        graph.invoke({})  # type: ignore[attr-defined]
        list(graph.stream({}, stream_mode="updates"))  # type: ignore[attr-defined]
        asyncio.run(graph.ainvoke({}))  # type: ignore[attr-defined]
        parent.invoke({})  # type: ignore[attr-defined]
        list(parent.stream({}, stream_mode="updates", subgraphs=True))  # type: ignore[attr-defined]
        list(parent.stream({}, stream_mode="custom"))  # type: ignore[attr-defined]  # no subgraphs

    assert _writers_seen(quiet) == [None] * 6


def test_the_writer_of_a_run_streamed_in_custom_mode_is_handed_out() -> None:
    import asyncio

    async def astream(graph: object) -> None:
        async for _chunk in graph.astream({}, stream_mode="custom"):  # type: ignore[attr-defined]
            pass

    def streamed(graph: object, parent: object) -> None:
        list(graph.stream({}, stream_mode="custom"))  # type: ignore[attr-defined]
        list(graph.stream({}, stream_mode=["updates", "custom"]))  # type: ignore[attr-defined]
        asyncio.run(astream(graph))
        list(parent.stream({}, stream_mode="custom", subgraphs=True))  # type: ignore[attr-defined]

    seen = _writers_seen(streamed)
    assert len(seen) == 4
    assert all(callable(writer) for writer in seen)


def test_a_writer_that_is_not_a_plain_function_counts_as_listening() -> None:
    chunks: list[object] = []

    class Runtime:
        stream_writer = chunks.append

    listeners = internals.report_listeners(Runtime())
    assert listeners is not None
    assert listeners.writer == chunks.append
    assert listeners.span is None
    assert internals.report_listeners(None) is None


def test_the_open_span_is_the_one_langsmith_reports() -> None:
    from langsmith.run_helpers import get_current_run_tree, set_tracing_parent
    from langsmith.run_trees import RunTree

    assert internals.report_listeners(None) is None
    span = RunTree(name="wrap_model_call", run_type="chain")
    with set_tracing_parent(span):
        listeners = internals.report_listeners(None)
        assert listeners is not None
        assert listeners.span is get_current_run_tree() is span
        assert listeners.writer is None
    assert internals.report_listeners(None) is None
