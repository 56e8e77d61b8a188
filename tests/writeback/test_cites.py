"""Cites from model output (`record_insight`, the consolidator's `update_memory`): checked,
digested, shown stale to the consolidator, refreshed by an update; `review` lists, drops and
refreshes stale entries as `doctor` counts them; `expire_after_days` archives what nobody
confirmed."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import BaseMessage, HumanMessage

from layered_memory import Layer, MemoryAssembler, MemoryConsolidator
from layered_memory.testing import ScriptedChatModel, tool_call
from layered_memory.writeback.cites import checked_cites, stale_lessons
from layered_memory.writeback.hooks import HookEvent, HookRegistry
from layered_memory.writeback.insights import (
    InsightNotebook,
    MemoryWriter,
    record_insight_tool,
    register_write_back,
)

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
APP = "def retry():\n    return 3\n\ndef other():\n    pass\n"
DAY = dt.date(2026, 12, 7)
RUN = [{"role": "user", "content": "retries: see src/app.py"}]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP)
    (tmp_path / ".env").write_text("PASSWORD=hunter2\n")
    (tmp_path / "src" / "keys.py").write_text("AWS = 'AKIAIOSFODNN7EXAMPLE'\n")
    (tmp_path.parent / "outside.txt").write_text("outside the root\n")
    return tmp_path


def backend_of(root: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=True)


def loaded(root: Path) -> str:
    assembler = MemoryAssembler(
        backend=backend_of(root), layers=[Layer("notes", "/MEMORY.md", writable=True)]
    )
    return assembler.render(assembler.load())


HOSTILE = [
    "/../outside.txt",
    "/.env",
    "/src/keys.py",
    "/src/app.py#L40-41",
    "/nowhere.py",
    "src/app.py",
    "/a b",
    "/x-->y",
    42,
    "/" + "a" * 400,
]


def test_checked_cites_refuses_each_hostile_cite_with_a_reason(root: Path) -> None:
    cites, skipped = checked_cites([*HOSTILE, "/src/app.py#L1-2"], backend_of(root))
    # Well-formed and inside the root: the file's text is judged when it is digested.
    assert [cite.spec() for cite in cites] == [
        "/src/keys.py",
        "/src/app.py#L40-41",
        "/nowhere.py",
        "/src/app.py#L1-2",
    ]
    reasons = "\n".join(skipped)
    assert "'/../outside.txt'" in reasons
    assert "escapes" in reasons
    assert "'/.env': a credential file is never cited" in reasons
    assert "starting with /" in reasons
    assert "longer than 300 characters" in reasons
    assert "not int" in reasons
    assert checked_cites({"a": 1}, backend_of(root))[1] == [
        "cites \"{'a': 1}\": expected a list of file paths"
    ]
    many, skipped = checked_cites([f"/src/app.py#L{i}" for i in range(1, 20)], backend_of(root))
    assert len(many) == 8
    assert len(skipped) == 9  # 16 looked at, one line for the rest
    assert "8 cites at most" in skipped[0]
    assert skipped[-1] == "3 more cites not looked at"


# --- record_insight ----------------------------------------------------------------------------


@USE_ASYNC
async def test_record_insight_cites_are_stored_and_bad_ones_skipped(
    root: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain.agents import create_agent

    notebook = InsightNotebook()
    registry = HookRegistry()
    writer = MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)
    register_write_back(registry, writer, notebook=notebook)
    cites = ["/src/app.py#L1-2", "/.env", "/src/keys.py", "/../outside.txt", "/nowhere.py"]
    model = ScriptedChatModel(
        script=[tool_call("record_insight", note="retries are capped at 3", cites=cites), "ok"]
    )
    agent = create_agent(model, tools=[record_insight_tool(notebook)])
    config: Any = {"configurable": {"thread_id": "t1"}}
    inputs: Any = {"messages": [HumanMessage("go")]}
    _ = await agent.ainvoke(inputs, config) if use_async else agent.invoke(inputs, config)
    data = {"thread_id": "t1", "config": config}
    with caplog.at_level(logging.WARNING):
        if use_async:
            await registry.atrigger(HookEvent.PIPELINE_END, data)
        else:
            registry.trigger(HookEvent.PIPELINE_END, data)
    memory = (root / "MEMORY.md").read_text()
    [line] = [line for line in memory.splitlines() if "retries" in line]
    assert re.search(r"<!-- cites=/src/app\.py#L1-2@[0-9a-f]{12} date=2026-12-07 -->$", line)
    for refused in ("/.env", "keys.py", "outside", "nowhere"):
        assert refused not in memory
    logged = caplog.text
    assert "'/.env': a credential file is never cited" in logged
    assert "'/src/keys.py': the cited lines hold a secret" in logged
    assert "'/../outside.txt'" in logged
    assert "'/nowhere.py': no such file" in logged
    assert "hunter2" not in logged
    assert "AKIA" not in logged
    assert "[stale" not in loaded(root)
    (root / "src" / "app.py").write_text(APP.replace("return 3", "return 5"))
    assert "[stale: /src/app.py lines 1-2 changed since 2026-12-07" in loaded(root)


def test_record_insight_tells_the_model_which_cites_it_left_out() -> None:
    tool = record_insight_tool(InsightNotebook())
    answer = tool.func(  # type: ignore[misc]
        note="x", runtime=type("R", (), {"config": {}})(), cites=["/a#L9-2", "/ok.py"]
    )
    assert "Cites left out: cite '/a#L9-2'" in answer


# --- the consolidator --------------------------------------------------------------------------


def consolidator(root: Path, *steps: Any, **kwargs: Any) -> MemoryConsolidator:
    model = ScriptedChatModel(script=list(steps))
    return MemoryConsolidator(model, backend=backend_of(root), clock=lambda: DAY, **kwargs)


def entry_ids(messages: list[BaseMessage]) -> dict[str, str]:
    return {
        text: entry_id
        for entry_id, text in re.findall(r"^\[(\w+)\] (.*)$", messages[1].text, re.MULTILINE)
    }


@USE_ASYNC
async def test_update_memory_cites_stale_marker_shown_and_an_update_refreshes(
    root: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    add = {
        "op": "add",
        "text": "retries are capped at 3",
        "cites": ["/src/app.py#L1-2", "/.env", "/../outside.txt"],
    }
    seen: list[list[BaseMessage]] = []

    def update(messages: list[BaseMessage]) -> Any:
        seen.append(messages)
        [(text, entry_id)] = entry_ids(messages).items()
        assert text.startswith("retries are capped at 3 [stale: /src/app.py lines 1-2 changed")
        op = {"op": "update", "id": entry_id, "text": "retries are capped at 5"}
        return tool_call("update_memory", operations=[{**op, "cites": ["/src/app.py#L1-2"]}])

    def look(messages: list[BaseMessage]) -> Any:
        seen.append(messages)
        return "nothing to learn"

    worker = consolidator(root, tool_call("update_memory", operations=[add]), update, look)

    async def run() -> Any:
        if use_async:
            return await worker.aconsolidate(RUN, thread_id="t1")
        return worker.consolidate(RUN, thread_id="t1")

    with caplog.at_level(logging.WARNING):
        result = await run()
    assert [change.text for change in result.applied] == ["retries are capped at 3"]
    memory = (root / "MEMORY.md").read_text()
    assert re.search(r"cites=/src/app\.py#L1-2@[0-9a-f]{12} -->", memory)
    assert ".env" not in memory
    assert "outside" not in memory
    assert "'/.env': a credential file is never cited" in caplog.text
    assert "'/../outside.txt'" in caplog.text

    (root / "src" / "app.py").write_text(APP.replace("return 3", "return 5"))
    assert "[stale: /src/app.py lines 1-2 changed" in loaded(root)
    result = await run()
    assert [change.op for change in result.applied] == ["update"]
    assert "[stale" not in loaded(root)  # the update digested the span as it is now
    await run()
    assert "[stale" not in seen[-1][1].text


def test_an_update_with_fresh_cites_and_the_same_text_is_a_refresh(root: Path) -> None:
    add = {"op": "add", "text": "retries are capped at 3", "cites": ["/src/app.py#L1-2"]}

    def same(messages: list[BaseMessage]) -> Any:
        [(_text, entry_id)] = entry_ids(messages).items()
        op = {"op": "update", "id": entry_id, "text": "retries are capped at 3"}
        return tool_call("update_memory", operations=[{**op, "cites": ["/src/app.py#L1-2"]}])

    worker = consolidator(root, tool_call("update_memory", operations=[add]), same)
    worker.consolidate(RUN)
    (root / "src" / "app.py").write_text(APP.replace("retry", "retry_later"))
    assert "[stale" in loaded(root)
    assert [change.op for change in worker.consolidate(RUN).applied] == ["update"]
    assert "[stale" not in loaded(root)


def test_an_update_without_cites_keeps_them_and_a_held_change_keeps_its_cites(
    root: Path,
) -> None:
    add = {"op": "add", "text": "retries are capped at 3", "cites": ["/src/app.py#L1-2"]}

    def reword(messages: list[BaseMessage]) -> Any:
        [(_text, entry_id)] = entry_ids(messages).items()
        op = {"op": "update", "id": entry_id, "text": "retries stop after 3 tries"}
        return tool_call("update_memory", operations=[op])

    worker = consolidator(root, tool_call("update_memory", operations=[add]), reword, review=True)
    worker.consolidate(RUN)
    [held] = worker.pending()
    assert held.cites is not None
    assert held.cites.startswith("/src/app.py#L1-2@")
    worker.approve(held)
    worker.consolidate(RUN)
    worker.approve(worker.pending()[0])
    memory = (root / "MEMORY.md").read_text()
    assert "retries stop after 3 tries" in memory
    assert held.cites in memory


# --- review and doctor -------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    from layered_memory.cli import main

    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_review_lists_drops_and_refreshes_stale_entries_as_doctor_counts_them(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writer = MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)
    writer.add_insight("retries are capped at 3", cites=["/src/app.py#L1-2"])
    writer.add_insight("other() does nothing", cites=["/src/app.py#L4-5"])
    writer.add_insight("tea is good")
    where = ["--root", str(root)]
    assert cli(capsys, "review", "stale", *where) == (
        0,
        {"version": 1, "ok": True, "source": {"kind": "folder", "root": str(root)},
         "memory": "/MEMORY.md", "decisions": [], "stale": []},
    )  # fmt: skip
    (root / "src" / "app.py").write_text("def retry():\n    return 5\n")
    code, data = cli(capsys, "review", "stale", *where)
    assert code == 1
    by_cite = {lesson["cites"][0][0]: lesson for lesson in data["stale"]}
    assert by_cite["/src/app.py#L1-2"]["cites"] == [["/src/app.py#L1-2", "changed"]]
    assert by_cite["/src/app.py#L4-5"]["cites"] == [["/src/app.py#L4-5", "shorter"]]
    assert by_cite["/src/app.py#L1-2"]["since"] == "2026-12-07"
    assert by_cite["/src/app.py#L1-2"]["entry"].endswith("retries are capped at 3")
    # doctor counts the same entries, by the same ids
    _, report = cli(capsys, "doctor", *where, "--layer", "notes=/MEMORY.md:rw")
    stale = [f["message"] for f in report["findings"] if f["check"] == "stale-lesson"]
    assert sorted(re.findall(r"id (\w+)\)", " ".join(stale))) == sorted(
        lesson["id"] for lesson in data["stale"]
    )

    changed, shorter = by_cite["/src/app.py#L1-2"]["id"], by_cite["/src/app.py#L4-5"]["id"]
    code, data = cli(capsys, "review", "refresh", changed, shorter, *where)
    outcomes = {d["id"]: d["outcome"] for d in data["decisions"]}
    assert outcomes == {changed: "refreshed", shorter: "not done"}
    assert "the file has 2 lines" in data["decisions"][1]["reason"]  # its last newline ends line 2
    assert [lesson["id"] for lesson in data["stale"]] == [shorter]
    memory = (root / "MEMORY.md").read_text()
    today = dt.date.today().isoformat()
    assert re.search(
        rf"retries are capped at 3 <!-- cites=/src/app\.py#L1-2@\w+ date={today}", memory
    )
    code, data = cli(capsys, "review", "drop", shorter[:8], *where)
    assert code == 0
    assert data["decisions"][0]["outcome"] == "dropped"
    memory = (root / "MEMORY.md").read_text()
    assert "other() does nothing" not in memory
    assert "tea is good" in memory
    assert "[stale" not in loaded(root)
    code, data = cli(capsys, "review", "drop", "abcdef12", *where)
    assert code == 1
    assert data["decisions"][0]["reason"] == "no stale entry has this id"


def test_the_newline_ending_a_file_starts_no_line_to_cite(root: Path) -> None:
    """`#L6` of a 5-line file (ending in a newline) is past its end, as in an editor; a
    last line that goes is `shorter`, not `changed`."""
    writer = MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)
    with pytest.raises(ValueError, match=r"'/src/app\.py#L6-6': the file has 5 lines"):
        writer.add_insight("nothing there", cites=["/src/app.py#L6"])
    writer.add_insight("other() does nothing", cites=["/src/app.py#L5"])
    (root / "src" / "app.py").write_text(APP.replace("\n    pass\n", "\n"))
    [lesson] = stale_lessons(backend_of(root), {"/MEMORY.md": (root / "MEMORY.md").read_text()})
    assert lesson.cites == (("/src/app.py#L5-5", "shorter"),)


def test_review_names_a_missing_memory_file_and_a_too_short_id(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from layered_memory.cli import main

    code = main(["review", "stale", "--root", str(root), "--memory", "/NOTES.md"])
    assert code == 2  # not "0 stale entries in /NOTES.md"
    assert "/NOTES.md: no such memory file in " in capsys.readouterr().err
    writer = MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)
    writer.add_insight("retries are capped at 3", cites=["/src/app.py#L1-2"])
    (root / "src" / "app.py").write_text("def retry():\n    return 5\n")
    code, data = cli(capsys, "review", "drop", "abc", "--root", str(root))
    assert code == 1
    assert data["decisions"][0]["reason"] == "an id prefix needs at least 6 digits, got 'abc'"


def test_doctor_names_the_memory_file_review_stale_needs(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale entry of another file than /MEMORY.md: the hint must lead to it."""
    writer = MemoryWriter(backend_of(root), "/NOTES.md", clock=lambda: DAY)
    writer.add_insight("retries are capped at 3", cites=["/src/app.py#L1-2"])
    (root / "src" / "app.py").write_text("def retry():\n    return 5\n")
    _, report = cli(capsys, "doctor", "--root", str(root), "--layer", "notes=/NOTES.md:rw")
    [finding] = [f for f in report["findings"] if f["check"] == "stale-lesson"]
    assert "`layered-memory review stale --memory /NOTES.md`, id " in finding["message"]
    (root / "agent.py").write_text(
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory import Layer, MemoryMiddleware\n"
        f"memory = MemoryMiddleware(backend=FilesystemBackend(root_dir={str(root)!r}, "
        "virtual_mode=True), layers=[Layer('notes', '/NOTES.md', writable=True)])\n"
    )
    from layered_memory.cli import main

    assert main(["review", "stale", "--config", f"{root / 'agent.py'}:memory"]) == 2
    assert "give the file instead (--root DIR --memory /NOTES.md)" in capsys.readouterr().err


def test_stale_lessons_reads_a_marked_text_as_the_written_one(root: Path) -> None:
    writer = MemoryWriter(backend_of(root), "/MEMORY.md", clock=lambda: DAY)
    writer.add_insight("retries are capped at 3", cites=["/src/app.py#L1-2"])
    (root / "src" / "app.py").unlink()
    written = (root / "MEMORY.md").read_text()
    [raw] = stale_lessons(backend_of(root), {"/MEMORY.md": written})
    assembler = MemoryAssembler(
        backend=backend_of(root), layers=[Layer("notes", "/MEMORY.md", writable=True)]
    )
    text = assembler.load().files["/MEMORY.md"]
    assert "[stale" in text
    [marked] = stale_lessons(backend_of(root), {"/MEMORY.md": text})
    assert raw.id == marked.id
    assert raw.entry == marked.entry
    assert raw.cites == (("/src/app.py#L1-2", "moved"),)


# --- expiry ------------------------------------------------------------------------------------


def learned(entry_id: str, text: str, **fields: str) -> str:
    meta = " ".join(f"{name}={value}" for name, value in {"id": entry_id, **fields}.items())
    return f"- {text} <!-- learned {meta} -->"


@USE_ASYNC
async def test_expire_after_days_archives_what_nobody_confirmed(
    root: Path, use_async: bool
) -> None:
    from layered_memory.core.staleness import Cite, cite_comment

    digest = cite_comment([Cite("/src/app.py", 1, 2)], {"/src/app.py": APP}, "x").split("@")[1][:12]
    old, recent = "2026-10-01", "2026-12-01"
    fresh, changed = f"/src/app.py#L1-2@{digest}", "/src/app.py#L1-2@000000000000"
    lines = [
        learned("aaaa", "an old lesson", date=old),
        learned("bbbb", "an old lesson a person approved lately", date=old, reviewed=recent),
        learned("cccc", "a recent lesson", date=recent),
        learned("dddd", "an old lesson citing fresh lines", date=old, cites=fresh),
        learned("eeee", "an old lesson citing changed lines", date=old, cites=changed),
        "- a line written by hand",
    ]  # fmt: skip
    (root / "MEMORY.md").write_text("## Learned\n\n" + "\n".join(lines) + "\n")
    worker = consolidator(root, "nothing to learn", expire_after_days=30)
    result = await worker.aconsolidate(RUN) if use_async else worker.consolidate(RUN)
    assert result.expired == ["[aaaa] an old lesson", "[eeee] an old lesson citing changed lines"]
    memory = (root / "MEMORY.md").read_text()
    assert "an old lesson <!--" not in memory
    assert "citing changed lines" not in memory
    for kept in ("approved lately", "a recent lesson", "citing fresh lines", "written by hand"):
        assert kept in memory
    archive = (root / "MEMORY.archive.md").read_text()
    assert "an old lesson <!--" in archive
    assert "citing changed lines" in archive


def test_expiry_is_off_by_default_and_validated(root: Path) -> None:
    (root / "MEMORY.md").write_text(
        "## Learned\n\n" + learned("aaaa", "old", date="2000-01-01") + "\n"
    )
    result = consolidator(root, "nothing").consolidate(RUN)
    assert result.expired == []
    assert "old" in (root / "MEMORY.md").read_text()
    with pytest.raises(ValueError, match="expire_after_days must be >= 1"):
        consolidator(root, expire_after_days=0)
    with pytest.raises(TypeError, match="expire_after_days must be an int"):
        consolidator(root, expire_after_days=1.5)
