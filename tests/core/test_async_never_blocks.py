"""Async never blocks: an async agent turn does no file-system work on the event loop.

The async hooks (`abefore_agent`, `awrap_model_call`, `awrap_tool_call`) and the assembler's
async loads reach the disk through the backend's async methods or `asyncio.to_thread`. The test
runs a real turn in asyncio's debug mode (`slow_callback_duration = 0.05`) and records every
`stat`, `lstat`, `scandir`, `listdir` and `open` this package makes on the event loop's thread
(asyncio's debug mode itself stats source files for its tracebacks, which is not ours). Any
such call is a block on a slow or network disk; the test fails naming where it was made.
Recording the calls rather than timing callbacks keeps the verdict deterministic on a loaded
machine; asyncio's own "Executing ... took ..." warnings are shown with a failure.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import io
import linecache
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langgraph.checkpoint.memory import InMemorySaver

import layered_memory
from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

PACKAGE = str(Path(layered_memory.__file__).parent)
TRACEBACKS = (linecache.__file__, traceback.__file__)
"""asyncio's debug mode records where each task and future was made (`linecache` stats the
source files): not the package's own file-system work."""


SEEN: set[str] = set()
"""Where the package touched the disk on the loop: its outermost and innermost frames."""


def _called_by_the_package() -> bool:
    frame: FrameType | None = sys._getframe(2)
    ours: list[str] = []
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in TRACEBACKS:
            return False
        if filename.startswith(PACKAGE):
            where = filename.removeprefix(PACKAGE)
            ours.append(f"{where}:{frame.f_lineno} ({frame.f_code.co_name})")
        frame = frame.f_back
    if ours:
        SEEN.add(f"{ours[-1]} -> {ours[0]}")
    return bool(ours)


@contextmanager
def disk_watched_on(thread_id: int) -> Iterator[None]:
    """Record (in `SEEN`) the file-system calls this package makes on thread `thread_id`."""
    originals: list[tuple[Any, str, Callable[..., Any]]] = []

    def watched(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == thread_id:
                _called_by_the_package()
            return function(*args, **kwargs)

        return call

    for owner, name in [
        (os, "stat"),
        (os, "lstat"),
        (os, "scandir"),
        (os, "listdir"),
        (os, "open"),
        (builtins, "open"),
        (io, "open"),
    ]:
        originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, watched(getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def project(root: Path) -> None:
    files = {
        "AGENTS.md": "Org rules: be brief.",
        "MEMORY.md": "- the user likes tea\n",
        ".agents/rules/python.md": "---\nglobs: ['**/*.py']\n---\nUse type hints.\n",
        "src/AGENTS.md": "Nested: src rules. See @../docs/style.md",
        "docs/style.md": "Imported: style guide.",
        "src/app.py": "print('hi')\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_an_async_turn_does_no_file_system_work_on_the_event_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project(tmp_path)
    memory = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("org", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/.agents/rules"],
        nested=("AGENTS.md",),
    )
    script = [
        tool_call("read_file", file_path="/src/app.py"),  # nested memory and an import
        tool_call("edit_file", file_path="/MEMORY.md", old_string="tea", new_string="green tea"),
        tool_call("write_file", file_path="/AGENTS.md", content="overwritten"),  # refused
        "done",
    ]

    def agent() -> Any:
        return create_deep_agent(
            model=ScriptedChatModel(script=list(script)),
            backend=memory.protected_backend,
            memory=[],
            middleware=[memory],
            checkpointer=InMemorySaver(),
        )

    payload = {"messages": [{"role": "user", "content": "go"}]}

    async def turn(graph: Any, thread: str, watched: bool) -> Any:
        asyncio.get_running_loop().slow_callback_duration = 0.05
        config = {"configurable": {"thread_id": thread}}
        if not watched:
            return await graph.ainvoke(payload, config)
        with disk_watched_on(threading.get_ident()):
            return await graph.ainvoke(payload, config)

    # One turn first, unwatched: what a process does once (imports, compiled globs) is
    # not what this test is about.
    asyncio.run(turn(agent(), "warm-up", watched=False), debug=True)
    (tmp_path / "MEMORY.md").write_text("- the user likes tea\n")
    caplog.set_level(logging.WARNING, logger="asyncio")
    SEEN.clear()
    graph = agent()  # built off the loop: only the turn is measured
    result = asyncio.run(turn(graph, "measured", watched=True), debug=True)

    blocked = [
        record.getMessage()
        for record in caplog.records
        if record.name == "asyncio" and "Executing" in record.getMessage()
    ]
    assert not SEEN, "\n".join([*sorted(SEEN), *blocked])
    # The turn did what it was scripted to do (so the hooks really ran).
    assert "green tea" in (tmp_path / "MEMORY.md").read_text()
    assert (tmp_path / "AGENTS.md").read_text() == "Org rules: be brief."
    messages = [str(message.content) for message in result["messages"]]
    assert any("read-only" in text for text in messages), messages


def test_a_tool_call_that_changes_no_file_stays_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads, searches and other tools are decided from their arguments and the state: the
    middleware sends no work to a thread for them (issue 34: 2-4 hops per call before); a
    write of memory is checked in one hop."""
    project(tmp_path)
    memory = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("org", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/.agents/rules"],
        nested=("AGENTS.md",),
    )
    hops: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        if caller.f_code.co_filename == sys.modules[MemoryMiddleware.__module__].__file__:
            hops.append(getattr(func, "__name__", repr(func)))
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    reads = [
        tool_call("read_file", file_path="/src/app.py"),
        tool_call("ls", path="/"),
        tool_call("grep", pattern="tea"),
        tool_call("glob", pattern="**/*.md"),
        tool_call("write_todos", todos=[]),
    ]
    graph = create_deep_agent(
        model=ScriptedChatModel(script=[*reads, "done"]),
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
    )
    asyncio.run(graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    assert hops == []
    edit = tool_call("edit_file", file_path="/MEMORY.md", old_string="tea", new_string="coffee")
    graph = create_deep_agent(
        model=ScriptedChatModel(script=[edit, "done"]),
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
    )
    asyncio.run(graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    assert hops == ["_checked"]


def test_listing_the_review_queue_reads_the_state_folder_off_the_event_loop(
    tmp_path: Path,
) -> None:
    """`apending` checks each change's seal with the key and the queue's generation record,
    both files of the user's state folder: never read on the event loop."""
    from layered_memory import MemoryConsolidator
    from layered_memory.testing import tool_call as call

    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedChatModel(
        script=[call("update_memory", operations=[{"op": "add", "text": "Builds use uv."}])]
    )
    queued = MemoryConsolidator(model, backend=backend, review=True)
    queued.consolidate([{"role": "user", "content": "a run"}], thread_id="t1")
    fresh = MemoryConsolidator(ScriptedChatModel(script=[]), backend=backend, review=True)

    async def listed() -> list[Any]:
        with disk_watched_on(threading.get_ident()):
            return await fresh.apending()

    SEEN.clear()
    assert [change.text for change in asyncio.run(listed())] == ["Builds use uv."]
    assert not SEEN, sorted(SEEN)


def test_aforget_reads_and_writes_every_store_off_the_event_loop(tmp_path: Path) -> None:
    """`aforget` over memory files, their review queue, read-only files, a graph, tiered
    memory and a file session store (listed, read and replaced): no disk work on the loop."""
    from langgraph.store.memory import InMemoryStore

    from layered_memory import FileSessionStore, aforget
    from layered_memory.graph import KnowledgeGraph
    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    project(tmp_path)
    (tmp_path / "MEMORY.md").write_text("- Acme Corp pays late\n- the user likes tea\n")
    (tmp_path / "AGENTS.md").write_text("Our client is Acme Corp.\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    graph = KnowledgeGraph(backend, "/memory.jsonl")
    graph.create_entities([{"name": "Acme Corp", "entityType": "company", "observations": []}])
    sessions = FileSessionStore(tmp_path / "sessions", fsync=False)
    for index in range(3):
        sessions.set(f"entity:e{index}:x", {"client": "Acme Corp", "step": index})
    tiers = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings())
    tiers.add_page("u1", "I work at Acme Corp", "Noted.")

    async def forgotten() -> Any:
        asyncio.get_running_loop().slow_callback_duration = 0.05
        with disk_watched_on(threading.get_ident()):
            for dry_run in (True, False):  # a dry run reads the same stores, and writes none
                report = await aforget(
                    "Acme Corp",
                    backend=backend,
                    files=["/MEMORY.md"],
                    read_only=["/AGENTS.md"],
                    graphs=[graph],
                    tiers=tiers,
                    session_store=sessions,
                    dry_run=dry_run,
                )
            return report

    SEEN.clear()
    report = asyncio.run(forgotten(), debug=True)
    assert not SEEN, sorted(SEEN)
    assert (tmp_path / "MEMORY.md").read_text() == "- the user likes tea\n"
    assert report.read_only == ("/AGENTS.md",)
    assert graph.read_graph()["entities"] == []
    assert [t.user_id for t in report.tiers] == ["u1"]
    assert len(report.sessions) == 3
    assert sessions.get("entity:e0:x") == {"step": 0}
