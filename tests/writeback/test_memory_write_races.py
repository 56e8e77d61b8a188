"""Every route that writes a memory file takes one lock and replaces the file atomically, so
writers and editors in separate processes lose nothing (issue 22, class 1).

The reproduction: one process runs write-back (`MemoryWriter.add_insight`) while another's
agent edits the same MEMORY.md through `memory.protected_backend.edit`. deepagents' own
`edit` truncates the file and writes it again in place, without the writer's lock: the writer
read the half-written file and replaced it atomically, keeping 50 of 100 insights and none of
the user's 50 lines. Now both take the same lock (`core.files`) and the edit replaces the file
atomically too.

Worker processes come from the `forkserver` context (never plain `fork` from a process that
runs threads); each builds its own backend on the same folder (or PostgreSQL schema) and
writes down what it was told succeeded ("acknowledged"); the test then checks that every
acknowledged write, and every line the user wrote, is in the files.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StoreBackend
from deepagents.backends.utils import create_file_data
from langgraph.store.postgres import PostgresStore

from layered_memory import Layer, MemoryMiddleware, MemoryWriter
from layered_memory.errors import LayeredMemoryError
from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware
from postgres_schema import Schema
from worker_processes import forkserver, run_processes

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it

DAY = dt.date(2025, 6, 1)
NAMESPACE = ("memory", "races")

TITLE = "# Team memory"
USER_LINES = [f"- user note {n}: the user wrote this line by hand" for n in range(50)]
MARK = "<!-- agent notes go below -->"
MEMORY = "\n".join(
    [TITLE, "", "What the team keeps.", "", "## Notes", "", *USER_LINES, "", "## Agent", "", MARK]
)
INSIGHT = re.compile(r"^- 2025-06-01: \[(?P<entity>[^\]]+)\] ", re.MULTILINE)


def _context() -> Any:
    return forkserver("layered_memory", "layered_memory.graph", "deepagents")


def _today() -> dt.date:
    return DAY


_OPEN: list[Any] = []


def _backend(where: str) -> Any:
    if where.startswith("postgres:"):
        # Each worker's own connection, open until the worker process ends.
        opened = PostgresStore.from_conn_string(where.removeprefix("postgres:"))
        _OPEN.append(opened)
        return StoreBackend(namespace=lambda _: NAMESPACE, store=opened.__enter__())
    return FilesystemBackend(root_dir=where, virtual_mode=True)


def _save_acks(acks: str, name: str, done: list[str]) -> None:
    Path(acks, f"{name}.json").write_text(json.dumps(done))


def _writer(where: str, acks: str, index: int, count: int, use_async: bool, barrier: Any) -> None:
    """Write-back: `count` insights, each for its own entity."""
    writer = MemoryWriter(_backend(where), "/MEMORY.md", clock=_today)
    entities = [f"w{index}-i{n}" for n in range(count)]

    async def write(entity: str) -> bool:
        return await writer.aadd_insight(f"lesson of {entity}", entity=entity)

    done = []
    barrier.wait()
    for entity in entities:
        try:
            ok = (
                asyncio.run(write(entity))
                if use_async
                else writer.add_insight(f"lesson of {entity}", entity=entity)
            )
        except LayeredMemoryError:
            ok = False
        if ok:
            done.append(entity)
    _save_acks(acks, f"writer-{index}", done)


def _editor(where: str, acks: str, index: int, count: int, use_async: bool, barrier: Any) -> None:
    """The agent's `edit_file` on the protected backend: `count` edits, each adding a line."""
    memory = MemoryMiddleware(
        backend=_backend(where), layers=[Layer("notes", "/MEMORY.md", writable=True)]
    )
    view = memory.protected_backend
    done = []
    barrier.wait()
    for n in range(count):
        line = f"- agent edit {index}-{n}"
        if use_async:
            result = asyncio.run(view.aedit("/MEMORY.md", MARK, f"{MARK}\n{line}"))
        else:
            result = view.edit("/MEMORY.md", MARK, f"{MARK}\n{line}")
        if result.error is None:
            done.append(line)
    _save_acks(acks, f"editor-{index}", done)


def _race(
    where: str, acks: Path, *, writers: int, editors: int, count: int, use_async: bool
) -> dict[str, list[str]]:
    """Run the writers and editors together; what each was told succeeded."""
    acks.mkdir()
    context = _context()
    barrier = context.Barrier(writers + editors)
    jobs = [(_writer, (where, str(acks), i, count, use_async, barrier)) for i in range(writers)]
    jobs += [(_editor, (where, str(acks), i, count, use_async, barrier)) for i in range(editors)]

    assert run_processes(context, jobs) == [0] * len(jobs)
    return {path.stem: json.loads(path.read_text()) for path in sorted(acks.iterdir())}


def _kept(memory: str, archive: str, acked: dict[str, list[str]]) -> dict[str, int]:
    """How many of each kind of line survived, and how many writes were acknowledged."""
    insights = set(INSIGHT.findall(memory)) | set(INSIGHT.findall(archive))
    lines = set(memory.splitlines())
    written = [
        entity for name, done in acked.items() if name.startswith("writer") for entity in done
    ]
    edits = [line for name, done in acked.items() if name.startswith("editor") for line in done]
    return {
        "title": int(TITLE in lines),
        "user lines": sum(line in lines for line in USER_LINES),
        "insights acknowledged": len(written),
        "insights kept": sum(entity in insights for entity in written),
        "edits acknowledged": len(edits),
        "edits kept": sum(line in lines for line in edits),
    }


def _everything(writers: int, editors: int, count: int) -> dict[str, int]:
    return {
        "title": 1,
        "user lines": len(USER_LINES),
        "insights acknowledged": writers * count,
        "insights kept": writers * count,
        "edits acknowledged": editors * count,
        "edits kept": editors * count,
    }


@pytest.mark.parametrize(
    ("writers", "editors", "count", "use_async"),
    [(1, 1, 100, False), (2, 2, 30, True)],
    ids=["1_writer_x_1_editor-sync", "2_writers_x_2_editors-async"],
)
def test_writers_and_editors_on_local_files_lose_nothing(
    tmp_path: Path, writers: int, editors: int, count: int, use_async: bool
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "MEMORY.md").write_text(MEMORY + "\n")

    acked = _race(
        str(root),
        tmp_path / "acks",
        writers=writers,
        editors=editors,
        count=count,
        use_async=use_async,
    )

    archive = root / "MEMORY.archive.md"
    kept = _kept(
        (root / "MEMORY.md").read_text(), archive.read_text() if archive.exists() else "", acked
    )
    assert kept == _everything(writers, editors, count)


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose `search_path` is a fresh schema with the store's tables."""
    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
    return postgres_schema.url


def test_writers_and_editors_on_a_postgres_store_lose_nothing(
    conninfo: str, tmp_path: Path
) -> None:
    with PostgresStore.from_conn_string(conninfo) as store:
        store.put(NAMESPACE, "/MEMORY.md", dict(create_file_data(MEMORY + "\n")))

        acked = _race(
            f"postgres:{conninfo}",
            tmp_path / "acks",
            writers=1,
            editors=1,
            count=40,
            use_async=False,
        )

        def text(key: str) -> str:
            item = store.get(NAMESPACE, key)
            return "" if item is None else str(item.value["content"])

        kept = _kept(text("/MEMORY.md"), text("/MEMORY.archive.md"), acked)
    assert kept == _everything(1, 1, 40)


# --- the knowledge-graph file: the graph's own operations and the agent's file tools -------


def _graph_writer(root: str, acks: str, index: int, count: int, barrier: Any) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=root, virtual_mode=True))
    done = []
    barrier.wait()
    for n in range(count):
        name = f"g{index}-e{n}"
        try:
            graph.create_entities([{"name": name, "entityType": "thing", "observations": []}])
        except LayeredMemoryError:
            continue
        done.append(name)
    _save_acks(acks, f"writer-{index}", done)


def _graph_editor(root: str, acks: str, index: int, count: int, barrier: Any) -> None:
    """The agent's `edit_file` of the graph file, on the graph middleware's backend."""
    middleware = KnowledgeGraphMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True)
    )
    view = middleware.protected_backend
    seed = _entity_line("Seed")
    done = []
    barrier.wait()
    for n in range(count):
        name = f"a{index}-e{n}"
        result = view.edit("/memory.jsonl", seed, f"{seed}\n{_entity_line(name)}")
        if result.error is None:
            done.append(name)
    _save_acks(acks, f"editor-{index}", done)


def _entity_line(name: str) -> str:
    return json.dumps(
        {"type": "entity", "name": name, "entityType": "thing", "observations": []},
        separators=(",", ":"),
    )


def test_graph_writers_and_file_tool_editors_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "memory.jsonl").write_text(_entity_line("Seed"))
    acks = tmp_path / "acks"
    acks.mkdir()
    context = _context()
    barrier = context.Barrier(3)
    jobs = [
        (_graph_writer, (str(root), str(acks), 0, 40, barrier)),
        (_graph_writer, (str(root), str(acks), 1, 40, barrier)),
        (_graph_editor, (str(root), str(acks), 0, 40, barrier)),
    ]

    assert run_processes(context, jobs) == [0] * len(jobs)

    acked = [name for path in sorted(acks.iterdir()) for name in json.loads(path.read_text())]
    graph = KnowledgeGraph(FilesystemBackend(root_dir=root, virtual_mode=True))
    names = {entity["name"] for entity in graph.read_graph()["entities"]}
    assert len(acked) == 120
    assert sorted(name for name in acked if name not in names) == []
    assert "Seed" in names
