"""Consolidations in separate processes, racing each other, write-back and the agent's own edits
of one MEMORY.md, lose nothing: every write takes the file's one lock (`core.files`).

Each worker is a real process (forkserver), builds its own backend on the same folder (or
PostgreSQL schema), and writes down what it was told succeeded; the test then finds every
acknowledged lesson, insight and edit, and every line the user wrote.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StoreBackend
from deepagents.backends.utils import create_file_data
from langgraph.store.postgres import PostgresStore

from layered_memory import Layer, MemoryConsolidator, MemoryMiddleware, MemoryWriter
from layered_memory.errors import LayeredMemoryError
from layered_memory.testing import ScriptedChatModel, tool_call
from layered_memory.writeback.consolidation import learned_entries
from postgres_schema import Schema
from worker_processes import forkserver, run_processes

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it

NAMESPACE = ("memory", "consolidation-races")
USER_LINES = [f"- user note {n}: written by hand" for n in range(30)]
MARK = "<!-- agent notes go below -->"
MEMORY = "\n".join(["# Team memory", "", "## Notes", "", *USER_LINES, "", MARK, ""])
INSIGHT = re.compile(r"^- 2025-06-01: \[(?P<entity>[^\]]+)\] ", re.MULTILINE)

_OPEN: list[Any] = []


def _backend(where: str) -> Any:
    if where.startswith("postgres:"):
        opened = PostgresStore.from_conn_string(where.removeprefix("postgres:"))
        _OPEN.append(opened)  # open until the worker process ends
        return StoreBackend(namespace=lambda _: NAMESPACE, store=opened.__enter__())
    return FilesystemBackend(root_dir=where, virtual_mode=True)


def _today() -> dt.date:
    return dt.date(2025, 6, 1)


def _save(acks: str, name: str, done: list[str]) -> None:
    Path(acks, f"{name}.json").write_text(json.dumps(done))


def _consolidator(where: str, acks: str, index: int, count: int, barrier: Any) -> None:
    """`count` consolidations, each adding one lesson of its own."""
    lessons = [f"Worker {index} learned fact number {n}." for n in range(count)]
    model = ScriptedChatModel(
        script=[
            tool_call("update_memory", operations=[{"op": "add", "text": lesson}])
            for lesson in lessons
        ]
    )
    consolidator = MemoryConsolidator(
        model, backend=_backend(where), max_entries=1_000, clock=_today
    )
    done = []
    barrier.wait()
    for n in range(count):
        try:
            result = consolidator.consolidate(
                [{"role": "user", "content": f"run {n}"}], thread_id=f"w{index}"
            )
        except LayeredMemoryError:
            continue
        done.extend(change.text or "" for change in result.applied)
    _save(acks, f"consolidator-{index}", done)


def _writer(where: str, acks: str, index: int, count: int, barrier: Any) -> None:
    writer = MemoryWriter(_backend(where), "/MEMORY.md", max_insights=1_000, clock=_today)
    done = []
    barrier.wait()
    for n in range(count):
        entity = f"e{index}-{n}"
        try:
            if writer.add_insight(f"insight of {entity}", entity=entity):
                done.append(entity)
        except LayeredMemoryError:
            continue
    _save(acks, f"writer-{index}", done)


def _editor(where: str, acks: str, index: int, count: int, barrier: Any) -> None:
    """The agent's `edit_file` through the protected backend."""
    memory = MemoryMiddleware(
        backend=_backend(where), layers=[Layer("notes", "/MEMORY.md", writable=True)]
    )
    done = []
    barrier.wait()
    for n in range(count):
        line = f"- agent edit {index}-{n}"
        if memory.protected_backend.edit("/MEMORY.md", MARK, f"{MARK}\n{line}").error is None:
            done.append(line)
    _save(acks, f"editor-{index}", done)


def _race(where: str, acks: Path, *, consolidators: int, count: int) -> dict[str, list[str]]:
    acks.mkdir()
    context = forkserver("layered_memory", "deepagents", "langchain_core.messages")
    barrier = context.Barrier(consolidators + 2)
    jobs: list[Any] = [
        (_consolidator, (where, str(acks), i, count, barrier)) for i in range(consolidators)
    ]
    jobs += [(_writer, (where, str(acks), 0, count, barrier))]
    jobs += [(_editor, (where, str(acks), 0, count, barrier))]
    assert run_processes(context, jobs) == [0] * len(jobs)
    return {path.stem: json.loads(path.read_text()) for path in sorted(acks.iterdir())}


def _kept(memory: str, acked: dict[str, list[str]]) -> dict[str, int]:
    lessons = {entry["text"] for entry in learned_entries(memory)}
    insights = set(INSIGHT.findall(memory))
    lines = set(memory.splitlines())

    def acked_by(prefix: str) -> list[str]:
        return [item for name, done in acked.items() if name.startswith(prefix) for item in done]

    return {
        "user lines": sum(line in lines for line in USER_LINES),
        "lessons acknowledged": len(acked_by("consolidator")),
        "lessons kept": sum(text in lessons for text in acked_by("consolidator")),
        "lessons stored": len(learned_entries(memory)),
        "insights acknowledged": len(acked_by("writer")),
        "insights kept": sum(entity in insights for entity in acked_by("writer")),
        "edits acknowledged": len(acked_by("editor")),
        "edits kept": sum(line in lines for line in acked_by("editor")),
    }


def _everything(consolidators: int, count: int) -> dict[str, int]:
    return {
        "user lines": len(USER_LINES),
        "lessons acknowledged": consolidators * count,
        "lessons kept": consolidators * count,
        "lessons stored": consolidators * count,
        "insights acknowledged": count,
        "insights kept": count,
        "edits acknowledged": count,
        "edits kept": count,
    }


def test_consolidations_write_back_and_edits_on_local_files_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "MEMORY.md").write_text(MEMORY)

    acked = _race(str(root), tmp_path / "acks", consolidators=2, count=20)

    assert _kept((root / "MEMORY.md").read_text(), acked) == _everything(2, 20)


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose `search_path` is a fresh schema with the store's tables."""
    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
    return postgres_schema.url


def test_consolidations_on_a_postgres_store_lose_nothing(conninfo: str, tmp_path: Path) -> None:
    with PostgresStore.from_conn_string(conninfo) as store:
        store.put(NAMESPACE, "/MEMORY.md", dict(create_file_data(MEMORY)))

        acked = _race(f"postgres:{conninfo}", tmp_path / "acks", consolidators=2, count=10)

        item = store.get(NAMESPACE, "/MEMORY.md")
        assert item is not None
        assert _kept(str(item.value["content"]), acked) == _everything(2, 10)
