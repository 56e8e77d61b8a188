"""MemoryWriter and the memory_write_back handler (issue 4 points 2-5 and 7's write side)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.protocol import BackendProtocol
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from layered_memory import (
    HookEvent,
    HookRegistry,
    MemoryWriteError,
    MemoryWriter,
    register_write_back,
)
from layered_memory.core import files
from layered_memory.writeback.insights import (
    InsightNotebook,
    default_formatter,
    record_insight_tool,
)

DAY = dt.date(2025, 3, 14)
ENTRY = re.compile(r"^- \d{4}-\d{2}-\d{2}: (?:\[[^\]]*\] )?.*$", re.MULTILINE)


class Clock:
    """A settable clock: tests move days forward by hand."""

    def __init__(self, today: dt.date = DAY) -> None:
        self.today = today

    def __call__(self) -> dt.date:
        return self.today

    def next_day(self) -> None:
        self.today += dt.timedelta(days=1)


@pytest.fixture(params=["filesystem", "store"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendProtocol:
    if request.param == "filesystem":
        return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    return StoreBackend(namespace=lambda rt: ("memory",), store=InMemoryStore())


def read(backend: BackendProtocol, path: str) -> str | None:
    [response] = backend.download_files([path])
    if response.error == "file_not_found":
        return None
    assert response.error is None, response.error
    assert response.content is not None
    return response.content.decode("utf-8")


def seed(backend: BackendProtocol, path: str, text: str) -> None:
    [response] = backend.upload_files([(path, text.encode("utf-8"))])
    assert response.error is None


async def add(writer: MemoryWriter, text: str, entity: str | None, *, use_async: bool) -> bool:
    if use_async:
        return await writer.aadd_insight(text, entity=entity)
    return writer.add_insight(text, entity=entity)


def entries(text: str | None) -> list[str]:
    return ENTRY.findall(text or "")


# --- MemoryWriter: format, placement, byte-for-byte preservation --------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_creates_file_and_section_when_missing(
    backend: BackendProtocol, use_async: bool
) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    assert await add(writer, "Acme wants weekly reports", "acme", use_async=use_async) is True
    assert read(backend, "/MEMORY.md") == (
        "## Recent Insights\n\n- 2025-03-14: [acme] Acme wants weekly reports\n"
    )
    assert read(backend, "/MEMORY.archive.md") is None


@pytest.mark.parametrize("use_async", [False, True])
async def test_adds_the_section_near_the_top_and_keeps_the_file_byte_for_byte(
    backend: BackendProtocol, use_async: bool
) -> None:
    # Near the top, because only a MEMORY.md's first 200 lines reach the prompt.
    head = "# Memory\n\n- The user prefers short answers.\n\n"
    tail = "## Tools\nUse `make test`"
    seed(backend, "/MEMORY.md", head + tail)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    await add(writer, "first lesson", "acme", use_async=use_async)
    text = read(backend, "/MEMORY.md")
    assert text == head + "## Recent Insights\n\n- 2025-03-14: [acme] first lesson\n\n" + tail


@pytest.mark.parametrize("use_async", [False, True])
async def test_section_goes_after_the_title_of_a_long_file_without_headings(
    backend: BackendProtocol, use_async: bool
) -> None:
    body = "".join(f"- note {i}\n" for i in range(300))
    seed(backend, "/MEMORY.md", "# Memory\n" + body)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    await add(writer, "lesson", "acme", use_async=use_async)
    text = read(backend, "/MEMORY.md")
    assert text == "# Memory\n\n## Recent Insights\n\n- 2025-03-14: [acme] lesson\n\n" + body


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_first_heading_past_the_shown_lines_puts_the_section_after_the_title(
    backend: BackendProtocol, use_async: bool
) -> None:
    # The reviewer's file: the first `##` heading is line 253, past the 200 lines shown.
    body = "".join(f"- fact {i}\n" for i in range(250))
    tail = "\n## Other\n- x\n"
    seed(backend, "/MEMORY.md", "# Memory\n" + body + tail)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    await add(writer, "lesson", "acme", use_async=use_async)
    text = read(backend, "/MEMORY.md")
    assert text == (
        "# Memory\n\n## Recent Insights\n\n- 2025-03-14: [acme] lesson\n\n" + body + tail
    )


@pytest.mark.parametrize(
    ("facts", "entry_line"),
    [(196, 199), (197, 4)],  # the entry at index 199 is the 200th line, still shown
)
def test_the_section_goes_before_the_first_heading_only_while_its_entry_is_shown(
    tmp_path: Path, facts: int, entry_line: int
) -> None:
    lines = ["# Memory\n"] + [f"- fact {i}\n" for i in range(facts - 1)] + ["## Other\n"]
    (tmp_path / "MEMORY.md").write_text("".join(lines))
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    MemoryWriter(backend, "/MEMORY.md", clock=Clock()).add_insight("lesson", entity="acme")
    written = (tmp_path / "MEMORY.md").read_text().split("\n")
    assert written.index("- 2025-03-14: [acme] lesson") == entry_line


def test_the_new_section_after_a_long_first_section_reaches_the_next_prompt(
    tmp_path: Path,
) -> None:
    from deepagents import create_deep_agent

    from layered_memory import Layer, MemoryMiddleware
    from layered_memory.testing import ScriptedChatModel

    body = "".join(f"- fact {i}\n" for i in range(250))
    (tmp_path / "MEMORY.md").write_text("# Memory\n" + body + "\n## Other\n- x\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    MemoryWriter(backend, "/MEMORY.md", clock=Clock()).add_insight("NEW-INSIGHT", entity="acme")

    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    model = ScriptedChatModel(script=["ok"], default="done")
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert "[acme] NEW-INSIGHT" in model.system_prompts[0]


@pytest.mark.parametrize("use_async", [False, True])
async def test_inserts_at_the_top_of_the_existing_section_only(
    backend: BackendProtocol, use_async: bool
) -> None:
    before = "# Memory\n\nIntro line.\n\n## Recent Insights\n\nWhat past runs learned:\n\n"
    old_entries = "- 2025-03-01: [beta] older\n- 2025-02-01: [gamma] oldest\n"
    after = "\n## Conventions\n\n- Tabs, not spaces.\n```md\n## Recent Insights\n```\n"
    seed(backend, "/MEMORY.md", before + old_entries + after)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())

    await add(writer, "newest", "acme", use_async=use_async)

    assert read(backend, "/MEMORY.md") == (
        before + "- 2025-03-14: [acme] newest\n" + old_entries + after
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_an_empty_section_gets_its_first_entry_before_the_next_heading(
    backend: BackendProtocol, use_async: bool
) -> None:
    seed(backend, "/MEMORY.md", "## Recent Insights\n## Next\nbody\n")
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    await add(writer, "lesson", None, use_async=use_async)
    assert read(backend, "/MEMORY.md") == (
        "## Recent Insights\n\n- 2025-03-14: lesson\n\n## Next\nbody\n"
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_crlf_files_stay_crlf(backend: BackendProtocol, use_async: bool) -> None:
    original = "# Memory\r\n\r\n## Recent Insights\r\n\r\n- 2025-03-01: [beta] old\r\n"
    seed(backend, "/MEMORY.md", original)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    await add(writer, "new", "acme", use_async=use_async)
    assert read(backend, "/MEMORY.md") == (
        "# Memory\r\n\r\n## Recent Insights\r\n\r\n- 2025-03-14: [acme] new\r\n"
        "- 2025-03-01: [beta] old\r\n"
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_text_and_entity_are_normalized_to_one_line(
    backend: BackendProtocol, use_async: bool
) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock(), max_insight_chars=40)
    await add(
        writer, "  line one\n\n## not a heading\n" + "x" * 50, " [odd]\nname ", use_async=use_async
    )
    [line] = entries(read(backend, "/MEMORY.md"))
    assert line.startswith("- 2025-03-14: [(odd) name] line one ## not a heading")
    assert line.endswith("…")
    assert len(line.split("] ", 1)[1]) == 40


@pytest.mark.parametrize("use_async", [False, True])
async def test_empty_text_is_refused(backend: BackendProtocol, use_async: bool) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    with pytest.raises(ValueError, match="empty"):
        await add(writer, " \n\t", "acme", use_async=use_async)
    assert read(backend, "/MEMORY.md") is None


def test_a_datetime_clock_is_accepted(backend: BackendProtocol) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.datetime(2024, 1, 2, 23, 59))
    writer.add_insight("late", entity="acme")
    assert entries(read(backend, "/MEMORY.md")) == ["- 2024-01-02: [acme] late"]


def test_constructor_validates(backend: BackendProtocol) -> None:
    with pytest.raises(ValueError, match="max_insights"):
        MemoryWriter(backend, "/MEMORY.md", max_insights=0)
    with pytest.raises(ValueError, match="archive_path"):
        MemoryWriter(backend, "/MEMORY.md", archive_path="/MEMORY.md")
    with pytest.raises(ValueError, match="path"):
        MemoryWriter(backend, "")
    writer = MemoryWriter(backend, "/notes/team/MEMORY.md")
    assert writer.archive_path == "/notes/team/MEMORY.archive.md"


# --- Dedup ----------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_one_entry_per_entity_per_day(backend: BackendProtocol, use_async: bool) -> None:
    clock = Clock()
    writer = MemoryWriter(backend, "/MEMORY.md", clock=clock)
    assert await add(writer, "first", "acme", use_async=use_async) is True
    snapshot = read(backend, "/MEMORY.md")

    assert await add(writer, "second", "acme", use_async=use_async) is False
    assert await add(writer, "third", "ACME", use_async=use_async) is False
    assert read(backend, "/MEMORY.md") == snapshot  # nothing written at all

    assert await add(writer, "other entity", "beta", use_async=use_async) is True
    clock.next_day()
    assert await add(writer, "next day", "acme", use_async=use_async) is True
    assert entries(read(backend, "/MEMORY.md")) == [
        "- 2025-03-15: [acme] next day",
        "- 2025-03-14: [beta] other entity",
        "- 2025-03-14: [acme] first",
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_without_entity_the_same_text_on_the_same_day_is_a_duplicate(
    backend: BackendProtocol, use_async: bool
) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    assert await add(writer, "general lesson", None, use_async=use_async) is True
    assert await add(writer, "general lesson", None, use_async=use_async) is False
    assert await add(writer, "another lesson", None, use_async=use_async) is True
    assert await add(writer, "general lesson", "acme", use_async=use_async) is True


# --- Rotation and archive ---------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_rotation_moves_the_oldest_to_the_archive_and_loses_nothing(
    backend: BackendProtocol, use_async: bool
) -> None:
    seed(backend, "/MEMORY.md", "# Memory\n\nKeep me.\n")
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=3, clock=Clock())
    for n in range(7):
        assert await add(writer, f"lesson {n}", f"entity{n}", use_async=use_async)

    memory = read(backend, "/MEMORY.md")
    archive = read(backend, "/MEMORY.archive.md")
    assert memory is not None
    assert memory.startswith("# Memory\n\nKeep me.\n\n## Recent Insights\n\n")
    assert [line.split("] ")[1] for line in entries(memory)] == ["lesson 6", "lesson 5", "lesson 4"]
    assert archive is not None
    assert archive.startswith("# Archived insights\n")
    assert "## Archived Insights" in archive
    # newest first in the archive too, each entry exactly once
    assert [line.split("] ")[1] for line in entries(archive)] == [
        "lesson 3",
        "lesson 2",
        "lesson 1",
        "lesson 0",
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_custom_archive_path_and_existing_archive_content_kept(
    backend: BackendProtocol, use_async: bool
) -> None:
    seed(backend, "/archive/old.md", "# My archive\n\nhand-written notes\n")
    writer = MemoryWriter(
        backend, "/MEMORY.md", max_insights=1, archive_path="/archive/old.md", clock=Clock()
    )
    await add(writer, "one", "a", use_async=use_async)
    await add(writer, "two", "b", use_async=use_async)
    archive = read(backend, "/archive/old.md")
    assert archive == (
        "# My archive\n\nhand-written notes\n\n## Archived Insights\n\n- 2025-03-14: [a] one\n"
    )
    assert read(backend, "/MEMORY.archive.md") is None


@pytest.mark.parametrize("use_async", [False, True])
async def test_multi_line_entries_rotate_as_a_unit(
    backend: BackendProtocol, use_async: bool
) -> None:
    seed(
        backend,
        "/MEMORY.md",
        "## Recent Insights\n\n- 2025-01-01: [old] hand-written\n  with a second line\n",
    )
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=1, clock=Clock())
    await add(writer, "new", "acme", use_async=use_async)
    assert read(backend, "/MEMORY.md") == "## Recent Insights\n\n- 2025-03-14: [acme] new\n"
    archive = read(backend, "/MEMORY.archive.md")
    assert archive is not None
    assert archive.endswith("- 2025-01-01: [old] hand-written\n  with a second line\n")


def test_a_retry_after_a_crash_between_the_two_writes_does_not_archive_twice(
    backend: BackendProtocol,
) -> None:
    # State left by a crash after the archive write and before the memory write: the entry
    # is in both files. The next rotation must not archive it a second time.
    seed(backend, "/MEMORY.md", "## Recent Insights\n\n- 2025-01-01: [old] x\n")
    seed(backend, "/MEMORY.archive.md", "## Archived Insights\n\n- 2025-01-01: [old] x\n")
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=1, clock=Clock())
    writer.add_insight("y", entity="new")
    assert entries(read(backend, "/MEMORY.archive.md")) == ["- 2025-01-01: [old] x"]
    assert entries(read(backend, "/MEMORY.md")) == ["- 2025-03-14: [new] y"]


# --- Redaction on the write path -----------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_secrets_are_redacted_before_writing_and_only_kinds_are_logged(
    backend: BackendProtocol, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-" + "ant-api03-" + "S3cr3t" * 5
    password = "pw" + "-9xQ7"
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    with caplog.at_level(logging.DEBUG):
        await add(writer, f"deploy used {key} and password={password}", "acme", use_async=use_async)
    text = read(backend, "/MEMORY.md")
    assert text is not None
    assert key not in text
    assert password not in text
    assert "[REDACTED:anthropic_api_key]" in text
    assert "password=[REDACTED:password]" in text
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "anthropic_api_key" in logged
    assert key not in logged
    assert password not in logged


# --- Errors leave the file as it was --------------------------------------------------------


def test_an_undecodable_memory_file_is_never_overwritten(backend: BackendProtocol) -> None:
    backend.upload_files([("/MEMORY.md", b"\xff\xfe binary")])
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    with pytest.raises(MemoryWriteError) as excinfo:
        writer.add_insight("x", entity="acme")
    assert excinfo.value.path == "/MEMORY.md"
    [response] = backend.download_files(["/MEMORY.md"])
    assert response.content == b"\xff\xfe binary"


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_failed_temp_write_leaves_the_original_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    original = "# Memory\n\n## Recent Insights\n\n- 2025-03-01: [beta] old\n"
    (tmp_path / "MEMORY.md").write_text(original)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())

    def half_then_fail(stream: Any, data: bytes) -> None:
        stream.write(data[: len(data) // 2])
        stream.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "_write_all", half_then_fail)
    with pytest.raises(MemoryWriteError, match="No space left"):
        await add(writer, "lost?", "acme", use_async=use_async)

    assert (tmp_path / "MEMORY.md").read_text() == original
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == [".MEMORY.md.lock", "MEMORY.md"]  # no temp file left behind

    monkeypatch.undo()  # the lock was released: the next write goes through
    assert await add(writer, "retry", "acme", use_async=use_async) is True
    assert entries((tmp_path / "MEMORY.md").read_text())[0] == "- 2025-03-14: [acme] retry"


def test_filesystem_paths_resolve_like_the_backend(tmp_path: Path) -> None:
    virtual = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    MemoryWriter(virtual, "/sub/MEMORY.md", clock=Clock()).add_insight("v", entity="a")
    assert (tmp_path / "sub" / "MEMORY.md").is_file()
    assert (tmp_path / "sub" / ".MEMORY.md.lock").is_file()
    with pytest.raises(MemoryWriteError, match="traversal"):
        MemoryWriter(virtual, "/../escape.md")

    real = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    MemoryWriter(real, "relative/MEMORY.md", clock=Clock()).add_insight("r", entity="a")
    assert (tmp_path / "relative" / "MEMORY.md").is_file()
    absolute = tmp_path / "abs" / "MEMORY.md"
    MemoryWriter(real, str(absolute), clock=Clock()).add_insight("a", entity="a")
    assert absolute.is_file()


def test_composite_routes_pick_the_strategy_of_the_backend_behind_them(tmp_path: Path) -> None:
    disk = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    store = StoreBackend(namespace=lambda rt: ("memory",), store=InMemoryStore())
    composite = CompositeBackend(default=store, routes={"/disk/": disk})

    on_disk = MemoryWriter(composite, "/disk/MEMORY.md", clock=Clock())
    in_store = MemoryWriter(composite, "/MEMORY.md", clock=Clock())
    assert isinstance(on_disk._strategy, files.FileLockStrategy)
    assert isinstance(in_store._strategy, files.InProcessLockStrategy)

    on_disk.add_insight("disk", entity="a")
    in_store.add_insight("store", entity="a")
    assert entries((tmp_path / "MEMORY.md").read_text()) == ["- 2025-03-14: [a] disk"]
    assert (tmp_path / ".MEMORY.md.lock").is_file()
    assert entries(read(store, "/MEMORY.md")) == ["- 2025-03-14: [a] store"]


# --- In-process concurrency (threads and coroutines) ------------------------------------------


def test_threads_writing_through_one_store_lose_nothing(tmp_path: Path) -> None:
    store = StoreBackend(namespace=lambda rt: ("memory",), store=InMemoryStore())
    writers = [MemoryWriter(store, "/MEMORY.md", max_insights=10, clock=Clock()) for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(index: int) -> None:
        barrier.wait()
        for n in range(15):
            writers[index].add_insight(f"note {n}", entity=f"t{index}-{n}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = entries(read(store, "/MEMORY.md")) + entries(read(store, "/MEMORY.archive.md"))
    assert len(found) == 60
    assert len(set(found)) == 60
    assert len(entries(read(store, "/MEMORY.md"))) == 10


async def test_coroutines_writing_at_once_lose_nothing(backend: BackendProtocol) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=5, clock=Clock())
    results = await asyncio.gather(
        *(writer.aadd_insight(f"note {n}", entity=f"c{n}") for n in range(30))
    )
    assert all(results)
    found = entries(read(backend, "/MEMORY.md")) + entries(read(backend, "/MEMORY.archive.md"))
    assert sorted(found) == sorted(f"- 2025-03-14: [c{n}] note {n}" for n in range(30))


# --- StateBackend, inside a graph --------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_state_backend_inside_a_graph(use_async: bool) -> None:
    from deepagents.middleware.filesystem import FilesystemState
    from langgraph.graph import END, START, StateGraph

    writer = MemoryWriter(StateBackend(), "/MEMORY.md", max_insights=1, clock=Clock())

    def sync_node(state: Any) -> dict[str, Any]:
        writer.add_insight("one", entity="a")
        writer.add_insight("two", entity="b")
        return {}

    async def async_node(state: Any) -> dict[str, Any]:
        await writer.aadd_insight("one", entity="a")
        await writer.aadd_insight("two", entity="b")
        return {}

    graph = StateGraph(FilesystemState)
    graph.add_node("write", async_node if use_async else sync_node)
    graph.add_edge(START, "write")
    graph.add_edge("write", END)
    compiled = graph.compile()
    inputs: Any = {"messages": [], "files": {}}
    final = await compiled.ainvoke(inputs) if use_async else compiled.invoke(inputs)

    files = final["files"]
    assert entries(files["/MEMORY.md"]["content"]) == ["- 2025-03-14: [b] two"]
    assert entries(files["/MEMORY.archive.md"]["content"]) == ["- 2025-03-14: [a] one"]


# --- The PIPELINE_END handler --------------------------------------------------------------


@dataclasses.dataclass
class RunContext:
    entity_name: str | None = None
    dry_run: bool = False


def make_loop(
    backend: BackendProtocol, **kwargs: Any
) -> tuple[HookRegistry, MemoryWriter, list[Any]]:
    registry = HookRegistry()
    writer = MemoryWriter(backend, "/MEMORY.md", clock=Clock())
    register_write_back(registry, writer, **kwargs)
    written: list[Any] = []
    registry.register(HookEvent.MEMORY_WRITTEN, lambda e, d: written.append(d), name="spy")
    return registry, writer, written


async def end(registry: HookRegistry, data: dict[str, Any], *, use_async: bool) -> None:
    if use_async:
        await registry.atrigger(HookEvent.PIPELINE_END, data)
    else:
        registry.trigger(HookEvent.PIPELINE_END, data)


def test_the_handler_is_registered_by_name_and_priority(backend: BackendProtocol) -> None:
    registry = HookRegistry()
    registry.register(HookEvent.PIPELINE_END, lambda e, d: None, name="before", priority=90)
    registry.register(HookEvent.PIPELINE_END, lambda e, d: None, name="after", priority=80)
    register_write_back(registry, MemoryWriter(backend, "/MEMORY.md"))
    assert registry.names(HookEvent.PIPELINE_END) == ["before", "memory_write_back", "after"]
    with pytest.raises(ValueError, match="memory_write_back"):
        register_write_back(registry, MemoryWriter(backend, "/MEMORY.md"))


@pytest.mark.parametrize("use_async", [False, True])
async def test_hand_built_graph_final_state_is_written_and_memory_written_fires(
    backend: BackendProtocol, use_async: bool
) -> None:
    registry, _, written = make_loop(backend)
    final_state = {"entity_name": "acme", "insight": "Acme wants weekly reports", "messages": []}
    await end(registry, final_state, use_async=use_async)

    assert entries(read(backend, "/MEMORY.md")) == [
        "- 2025-03-14: [acme] Acme wants weekly reports"
    ]
    assert written == [
        {
            "path": "/MEMORY.md",
            "archive_path": "/MEMORY.archive.md",
            "entity": "acme",
            "text": "Acme wants weekly reports",
            "date": "2025-03-14",
            "archived": 0,
            "redacted": [],
            "thread_id": None,
        }
    ]
    # Same entity again today: nothing written, no MEMORY_WRITTEN event.
    await end(registry, final_state, use_async=use_async)
    assert len(written) == 1


@pytest.mark.parametrize(
    ("data", "entity"),
    [
        ({"entity_name": "state"}, "state"),
        ({"runtime_context": {"entity_name": "ctx-dict"}}, "ctx-dict"),
        ({"runtime_context": RunContext(entity_name="ctx-dc")}, "ctx-dc"),
        ({"config": {"configurable": {"entity_name": "cfg"}}}, "cfg"),
        (
            {
                "entity_name": "state",
                "runtime_context": {"entity_name": "ctx"},
                "config": {"configurable": {"entity_name": "cfg"}},
            },
            "ctx",
        ),
        (
            {"entity_name": "state", "config": {"configurable": {"entity_name": "cfg"}}},
            "state",
        ),
        (
            {
                "runtime_context": {"entity_name": "ctx"},
                "config": {"configurable": {"entity_name": "cfg"}},
            },
            "ctx",
        ),
    ],
)
@pytest.mark.parametrize("use_async", [False, True])
async def test_entity_lookup_order(
    backend: BackendProtocol, data: dict[str, Any], entity: str, use_async: bool
) -> None:
    registry, _, written = make_loop(backend)
    await end(registry, {**data, "summary": "learned"}, use_async=use_async)
    assert entries(read(backend, "/MEMORY.md")) == [f"- 2025-03-14: [{entity}] learned"]
    assert written[0]["entity"] == entity


@pytest.mark.parametrize(
    "dry",
    [
        {"dry_run": True},
        {"runtime_context": {"entity_name": "acme", "dry_run": True}},
        {"runtime_context": RunContext(entity_name="acme", dry_run=True)},
        {"config": {"configurable": {"dry_run": "true"}}},
    ],
)
@pytest.mark.parametrize("use_async", [False, True])
async def test_dry_run_writes_nothing(
    backend: BackendProtocol, dry: dict[str, Any], use_async: bool
) -> None:
    registry, _, written = make_loop(backend)
    await end(registry, {"entity_name": "acme", "insight": "x", **dry}, use_async=use_async)
    assert read(backend, "/MEMORY.md") is None
    assert written == []


@pytest.mark.parametrize("use_async", [False, True])
async def test_incomplete_data_writes_no_placeholder(
    backend: BackendProtocol, use_async: bool
) -> None:
    registry, _, written = make_loop(backend)
    await end(registry, {"entity_name": "acme"}, use_async=use_async)
    await end(registry, {"entity_name": "acme", "insight": "   "}, use_async=use_async)
    await end(
        registry, {"entity_name": "acme", "messages": [AIMessage("All done.")]}, use_async=use_async
    )
    assert read(backend, "/MEMORY.md") is None
    assert written == []


@pytest.mark.parametrize("use_async", [False, True])
async def test_an_insight_without_entity_is_written_untagged_like_a_note(
    backend: BackendProtocol, use_async: bool
) -> None:
    # The `INSIGHT:` line of a run without an entity and a `record_insight` note without one
    # take the same route: one untagged line, deduplicated by its text that day.
    notebook = InsightNotebook()
    registry, _, written = make_loop(backend, notebook=notebook)
    final_answer = {"messages": [AIMessage("Done.\nINSIGHT: Builds need Python 3.12")]}
    await end(registry, final_answer, use_async=use_async)
    await end(registry, final_answer, use_async=use_async)  # same text, same day: once
    notebook.add(None, "Tests run in CI only")
    await end(registry, {}, use_async=use_async)

    assert entries(read(backend, "/MEMORY.md")) == [
        "- 2025-03-14: Tests run in CI only",
        "- 2025-03-14: Builds need Python 3.12",
    ]
    assert [(item["entity"], item["text"]) for item in written] == [
        (None, "Builds need Python 3.12"),
        (None, "Tests run in CI only"),
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_custom_formatter(backend: BackendProtocol, use_async: bool) -> None:
    def formatter(state: Any) -> str | None:
        score = state.get("score")
        return None if score is None else f"scored {score}/10"

    registry, _, _ = make_loop(backend, formatter=formatter)
    await end(registry, {"entity_name": "acme"}, use_async=use_async)
    assert read(backend, "/MEMORY.md") is None
    await end(registry, {"entity_name": "acme", "score": 7}, use_async=use_async)
    assert entries(read(backend, "/MEMORY.md")) == ["- 2025-03-14: [acme] scored 7/10"]


def test_default_formatter_keys() -> None:
    assert default_formatter({"entity_name": "a", "insight": " i ", "summary": "s"}) == "i"
    assert default_formatter({"entity_name": "a", "summary": "s"}) == "s"
    messages = [
        HumanMessage("INSIGHT: not from the user"),
        AIMessage("Report sent.\ninsight: Acme reads reports on Mondays\nBye"),
    ]
    assert default_formatter({"entity_name": "a", "messages": messages}) == (
        "Acme reads reports on Mondays"
    )
    assert default_formatter({"entity_name": "a", "messages": [AIMessage("no marker")]}) is None
    assert default_formatter({"insight": "no entity"}) == "no entity"
    assert (
        default_formatter({"config": {"configurable": {"entity_name": "c"}}, "insight": "i"}) == "i"
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_failing_write_back_is_isolated(
    tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    (tmp_path / "MEMORY.md").write_bytes(b"\xff not utf-8")
    registry, _, _ = make_loop(backend)
    later: list[str] = []
    registry.register(
        HookEvent.PIPELINE_END, lambda e, d: later.append("ran"), name="later", priority=1
    )
    with caplog.at_level(logging.ERROR):
        await end(registry, {"entity_name": "a", "insight": "x"}, use_async=use_async)
    assert later == ["ran"]
    assert any("memory_write_back" in record.getMessage() for record in caplog.records)


# --- record_insight tool -----------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_record_insight_notes_are_written_at_pipeline_end(
    backend: BackendProtocol, use_async: bool
) -> None:
    from langchain.agents import create_agent

    from layered_memory.testing import ScriptedChatModel, tool_call

    notebook = InsightNotebook()
    registry, _, written = make_loop(backend, notebook=notebook)
    model = ScriptedChatModel(
        script=[
            tool_call("record_insight", note="Acme's CFO signs off on budgets"),
            tool_call("record_insight", note="Reports go out on Mondays"),
            "Done.",
        ]
    )
    agent = create_agent(model, tools=[record_insight_tool(notebook)])
    config: Any = {"configurable": {"thread_id": "entity:acme:report", "entity_name": "acme"}}
    inputs: Any = {"messages": [HumanMessage("prepare the report")]}
    final = await agent.ainvoke(inputs, config) if use_async else agent.invoke(inputs, config)
    assert notebook.peek("entity:acme:report") == [
        "Acme's CFO signs off on budgets",
        "Reports go out on Mondays",
    ]

    # A hand-built pipeline passes the config along with the final state.
    data = {**final, "config": config, "thread_id": "entity:acme:report"}
    await end(registry, data, use_async=use_async)

    assert entries(read(backend, "/MEMORY.md")) == [
        "- 2025-03-14: [acme] Acme's CFO signs off on budgets; Reports go out on Mondays"
    ]
    assert written[0]["thread_id"] == "entity:acme:report"
    assert notebook.peek("entity:acme:report") == []


def test_record_insight_names_its_argument_to_the_model() -> None:
    # A model sees only the tool's name, description and argument schema: both name `note`.
    tool = record_insight_tool(InsightNotebook())
    assert "`note`" in tool.description
    schema = tool.tool_call_schema.model_json_schema()
    assert list(schema["properties"]) == ["note", "cites"]
    assert "stale" in schema["properties"]["cites"]["description"]
    assert schema["properties"]["note"]["description"] == "The lesson, one short sentence."
    assert "`note`" in (record_insight_tool.__doc__ or "")


def test_dry_run_discards_recorded_notes(backend: BackendProtocol) -> None:
    notebook = InsightNotebook()
    notebook.add("t1", "note")
    registry, _, _ = make_loop(backend, notebook=notebook)
    registry.trigger(
        HookEvent.PIPELINE_END, {"entity_name": "a", "thread_id": "t1", "dry_run": True}
    )
    assert notebook.peek("t1") == []
    assert read(backend, "/MEMORY.md") is None
