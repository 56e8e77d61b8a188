"""Writers in several processes lose nothing: on local files and on a PostgresStore.

Worker processes come from the `forkserver` context (never plain `fork` from a process that
runs threads). Each adds its own entities, observations on one shared entity and relations;
afterwards every single one of them is in the file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StoreBackend
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from layered_memory.core.files import FileLockStrategy, PostgresStoreLockStrategy
from layered_memory.graph import KnowledgeGraph
from postgres_schema import Schema
from worker_processes import forkserver, run_processes

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it

PROCESSES = 4
ROUNDS = 12
NAMESPACE = ("graph", "team")


def _context() -> Any:
    return forkserver("layered_memory.graph", "langgraph.store.postgres")


def _round_args(index: int, n: int) -> tuple[list[Any], list[Any], list[Any]]:
    entities = [{"name": f"p{index}-e{n}", "entityType": "thing", "observations": [f"made {n}"]}]
    observations = [{"entityName": "Shared", "contents": [f"fact {n} of process {index}"]}]
    relations = [{"from": f"p{index}-e{n}", "to": "Shared", "relationType": "belongs_to"}]
    return entities, observations, relations


def _write(graph: KnowledgeGraph, index: int) -> None:
    for n in range(ROUNDS):
        entities, observations, relations = _round_args(index, n)
        assert graph.create_entities(entities) == entities
        graph.add_observations(observations)
        assert graph.create_relations(relations) == relations


async def _awrite(graph: KnowledgeGraph, index: int) -> None:
    for n in range(ROUNDS):
        entities, observations, relations = _round_args(index, n)
        assert await graph.acreate_entities(entities) == entities
        await graph.aadd_observations(observations)
        assert await graph.acreate_relations(relations) == relations


def _file_worker(root: str, index: int, use_async: bool, barrier: Any) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=root, virtual_mode=True))
    assert isinstance(graph._write_strategy(), FileLockStrategy)
    barrier.wait()
    if use_async:
        asyncio.run(_awrite(graph, index))
    else:
        _write(graph, index)


def _postgres_worker(conninfo: str, index: int, mode: str, barrier: Any) -> None:
    if mode == "async-store":

        async def main() -> None:
            async with AsyncPostgresStore.from_conn_string(conninfo) as store:
                graph = KnowledgeGraph(StoreBackend(namespace=lambda _: NAMESPACE, store=store))
                assert isinstance(graph._write_strategy(), PostgresStoreLockStrategy)
                await asyncio.to_thread(barrier.wait)
                await _awrite(graph, index)

        asyncio.run(main())
        return
    with PostgresStore.from_conn_string(conninfo) as store:
        graph = KnowledgeGraph(StoreBackend(namespace=lambda _: NAMESPACE, store=store))
        assert isinstance(graph._write_strategy(), PostgresStoreLockStrategy)
        barrier.wait()
        if mode == "async":
            asyncio.run(_awrite(graph, index))
        else:
            _write(graph, index)


def _assert_nothing_lost(graph: KnowledgeGraph) -> None:
    content = graph.read_graph()
    names = {entity["name"] for entity in content["entities"]}
    expected = {f"p{i}-e{n}" for i in range(PROCESSES) for n in range(ROUNDS)}
    assert names == expected | {"Shared"}
    shared = next(e for e in content["entities"] if e["name"] == "Shared")
    assert sorted(shared["observations"]) == sorted(
        f"fact {n} of process {i}" for i in range(PROCESSES) for n in range(ROUNDS)
    )
    assert len(content["relations"]) == PROCESSES * ROUNDS


def _seed(graph: KnowledgeGraph) -> None:
    graph.create_entities([{"name": "Shared", "entityType": "topic", "observations": []}])


@pytest.mark.parametrize("use_async", [False, True])
def test_processes_writing_one_local_file_lose_nothing(tmp_path: Path, use_async: bool) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    _seed(graph)
    context = _context()
    barrier = context.Barrier(PROCESSES)

    exit_codes = run_processes(
        context,
        [(_file_worker, (str(tmp_path), index, use_async, barrier)) for index in range(PROCESSES)],
    )

    assert exit_codes == [0] * PROCESSES
    _assert_nothing_lost(graph)


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose `search_path` is a fresh schema, dropped after the test."""
    return postgres_schema.url


@pytest.mark.parametrize("mode", ["sync", "async", "async-store"])
def test_processes_writing_one_postgres_store_file_lose_nothing(conninfo: str, mode: str) -> None:
    with PostgresStore.from_conn_string(conninfo) as store:
        store.setup()
        graph = KnowledgeGraph(StoreBackend(namespace=lambda _: NAMESPACE, store=store))
        _seed(graph)
        context = _context()
        barrier = context.Barrier(PROCESSES)

        exit_codes = run_processes(
            context,
            [(_postgres_worker, (conninfo, index, mode, barrier)) for index in range(PROCESSES)],
        )

        assert exit_codes == [0] * PROCESSES
        _assert_nothing_lost(graph)
