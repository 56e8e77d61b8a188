"""The agent's writes of a memory file through the protected backend (`core.files`): the
write-back's lock, an atomic replace, and whole-file writes that never drop an insight
silently. The races themselves run in processes in `tests/writeback/test_memory_write_races.py`.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from filelock import FileLock
from langgraph.store.memory import InMemoryStore

from layered_memory import Layer, MemoryMiddleware, MemoryWriter
from layered_memory.core import files
from layered_memory.core.guard import _file_tools
from worker_processes import forkserver, run_processes

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
MEMORY = "# Memory\n\nThe user's own notes.\n"
INSIGHT = "- 2025-06-01: [acme] Acme wants weekly summaries"


def _view(backend: Any, path: str = "/MEMORY.md") -> Any:
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", path, writable=True)])
    return memory.protected_backend


def _today() -> dt.date:
    return dt.date(2025, 6, 1)


async def _write(view: Any, path: str, content: str, use_async: bool) -> Any:
    return await view.awrite(path, content) if use_async else view.write(path, content)


async def _edit(view: Any, path: str, old: str, new: str, use_async: bool) -> Any:
    return await view.aedit(path, old, new) if use_async else view.edit(path, old, new)


@USE_ASYNC
async def test_a_whole_file_write_that_would_drop_an_insight_is_refused(
    tmp_path: Path, use_async: bool
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    view = _view(backend)
    # Write-back adds an insight after the agent read the file ...
    assert MemoryWriter(backend, "/MEMORY.md", clock=_today).add_insight(
        "Acme wants weekly summaries", entity="acme"
    )
    with_insight = (tmp_path / "MEMORY.md").read_text()

    # ... so the agent's whole-file write from its stale copy would erase it: refused.
    stale = await _write(view, "/MEMORY.md", MEMORY + "\nA note of the agent.\n", use_async)

    assert stale.error is not None
    assert "would remove 1 insight entry" in stale.error
    assert INSIGHT in stale.error
    assert "edit_file" in stale.error
    assert (tmp_path / "MEMORY.md").read_text() == with_insight

    # Keeping the entry is a normal whole-file write; removing it on purpose is an edit.
    kept = with_insight + "\nA note of the agent.\n"
    assert (await _write(view, "/MEMORY.md", kept, use_async)).error is None
    assert (tmp_path / "MEMORY.md").read_text() == kept
    assert (await _edit(view, "/MEMORY.md", INSIGHT + "\n", "", use_async)).error is None
    assert INSIGHT not in (tmp_path / "MEMORY.md").read_text()


@USE_ASYNC
async def test_a_whole_file_write_that_would_drop_a_learned_entry_is_refused(
    tmp_path: Path, use_async: bool
) -> None:
    from layered_memory import MemoryConsolidator
    from layered_memory.testing import ScriptedChatModel, tool_call

    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    view = _view(backend)
    lesson = "The user prefers metric units."
    model = ScriptedChatModel(
        script=[tool_call("update_memory", operations=[{"op": "add", "text": lesson}])]
    )
    # A consolidation adds a lesson after the agent read the file ...
    MemoryConsolidator(model, backend=backend).consolidate([])
    learned = (tmp_path / "MEMORY.md").read_text()

    # ... so the agent's whole-file write from its stale copy would erase it: refused.
    stale = await _write(view, "/MEMORY.md", MEMORY + "\nA note of the agent.\n", use_async)

    assert stale.error is not None
    assert "would remove 1 learned entry" in stale.error
    assert lesson in stale.error
    assert (tmp_path / "MEMORY.md").read_text() == learned
    kept = learned + "\nA note of the agent.\n"
    assert (await _write(view, "/MEMORY.md", kept, use_async)).error is None


def test_a_learned_entry_is_read_from_the_end_of_its_line() -> None:
    assert files.learned_entry("- text <!-- learned id=abcd date=2025-06-01 -->") == (
        "text",
        "id=abcd date=2025-06-01",
    )
    assert files.learned_entry("* a <!-- x --> b <!-- learned id=abcd -->  ") == (
        "a <!-- x --> b",
        "id=abcd",
    )
    assert files.learned_entry("- text <!-- learned id=<b> -->") is None
    assert files.learned_entry("  - indented <!-- learned id=abcd -->") is None
    assert files.learned_entry("- text <!-- note -->") is None


@USE_ASYNC
async def test_write_back_after_a_whole_file_write_keeps_both(
    tmp_path: Path, use_async: bool
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    view = _view(backend)
    writer = MemoryWriter(backend, "/MEMORY.md", clock=_today)

    assert (
        await _write(view, "/MEMORY.md", "# Rewritten\n\nBy the agent.\n", use_async)
    ).error is None
    added = (
        await writer.aadd_insight("late lesson", entity="acme")
        if use_async
        else (writer.add_insight("late lesson", entity="acme"))
    )

    assert added
    text = (tmp_path / "MEMORY.md").read_text()
    assert text.startswith("# Rewritten\n\nBy the agent.\n")
    assert "- 2025-06-01: [acme] late lesson" in text


@USE_ASYNC
async def test_an_edit_replaces_the_file_whole_under_the_write_back_lock(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    view = _view(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    inode = (tmp_path / "MEMORY.md").stat().st_ino

    result = await _edit(view, "/MEMORY.md", "own notes", "own notes, edited", use_async)

    assert result.error is None
    assert result.occurrences == 1
    assert (tmp_path / "MEMORY.md").read_text() == MEMORY.replace("own notes", "own notes, edited")
    # A new file renamed into place (never truncated in place), beside the write-back's lock.
    assert (tmp_path / "MEMORY.md").stat().st_ino != inode
    assert (tmp_path / ".MEMORY.md.lock").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == [".MEMORY.md.lock", "MEMORY.md"]


EDITS = [
    ("one\r\n", "uno\r\n"),  # deepagents reads in text mode: CRLF in, `\n` out
    ("nowhere", "x"),
    ("b", "x"),  # twice in the file
    ("two\n", "dos\n"),
    ("x", "y"),
]


@USE_ASYNC
async def test_edits_answer_and_write_as_deepagents_own_edit(
    tmp_path: Path, use_async: bool
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for root in (ours, theirs):
        root.mkdir()
        (root / "MEMORY.md").write_bytes(b"one\r\ntwo\r\nb b\r\n")
    view = _view(FilesystemBackend(root_dir=ours, virtual_mode=True))
    plain = FilesystemBackend(root_dir=theirs, virtual_mode=True)

    for old, new in EDITS:
        expected = plain.edit("/MEMORY.md", old, new)
        assert await _edit(view, "/MEMORY.md", old, new, use_async) == expected
        assert (ours / "MEMORY.md").read_bytes() == (theirs / "MEMORY.md").read_bytes()
    for root in (ours, theirs):
        (root / "MEMORY.md").unlink()
    expected = plain.edit("/MEMORY.md", "one", "x")
    assert await _edit(view, "/MEMORY.md", "one", "x", use_async) == expected


def test_an_upload_of_a_memory_file_is_a_locked_whole_file_write(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(MEMORY + "\n" + INSIGHT + "\n")
    view = _view(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    answers = view.upload_files(
        [("/other.md", b"other"), ("/MEMORY.md", b"# Fresh\n"), ("/MEMORY.md", b"\xff\xfe")]
    )

    assert [answer.error for answer in answers] == [None, "permission_denied", "permission_denied"]
    assert INSIGHT in (tmp_path / "MEMORY.md").read_text()
    assert (tmp_path / "other.md").read_text() == "other"
    kept = MEMORY + "\n" + INSIGHT + "\nmore\n"
    assert view.upload_files([("/MEMORY.md", kept.encode())])[0].error is None
    assert (tmp_path / "MEMORY.md").read_text() == kept


def test_a_stuck_lock_holder_fails_the_edit_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "LOCK_TIMEOUT_SECONDS", 0.05)
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    view = _view(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    writer = MemoryWriter(FilesystemBackend(root_dir=tmp_path, virtual_mode=True), "/MEMORY.md")

    with FileLock(str(tmp_path / ".MEMORY.md.lock"), thread_local=False):
        result = view.edit("/MEMORY.md", "own notes", "changed")
        with pytest.raises(files.MemoryWriteError, match="still held"):
            writer.add_insight("blocked", entity="acme")

    assert result.error is not None
    assert ".MEMORY.md.lock" in result.error
    assert "still held" in result.error
    assert (tmp_path / "MEMORY.md").read_text() == MEMORY


def _edit_and_die(root: str) -> None:
    """Write half of the edited file, then die without any cleanup (as a killed process)."""

    def half_then_die(stream: Any, data: bytes) -> None:
        stream.write(data[: len(data) // 2])
        stream.flush()
        os._exit(70)

    files._write_all = half_then_die
    _view(FilesystemBackend(root_dir=root, virtual_mode=True)).edit("/MEMORY.md", "own", "new")


def test_an_editor_dying_mid_write_leaves_the_file_whole(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    [exit_code] = run_processes(forkserver(), [(_edit_and_die, (str(tmp_path),))])

    assert exit_code == 70
    assert (tmp_path / "MEMORY.md").read_text() == MEMORY


@USE_ASYNC
async def test_store_and_state_backends_keep_their_own_edit(use_async: bool) -> None:
    """A store route is edited under the in-process lock; a state route by deepagents' own
    method (its files change through the graph's `files` reducer, see `core.files`)."""
    store = InMemoryStore()
    store_backend = StoreBackend(namespace=lambda _: ("m",), store=store)
    composite = CompositeBackend(default=StateBackend(), routes={"/mem/": store_backend})
    view = _view(composite, "/mem/MEMORY.md")
    assert store_backend.upload_files([("/MEMORY.md", MEMORY.encode())])[0].error is None
    strategy = files.strategy_for(view, ["/mem/MEMORY.md"])
    assert isinstance(strategy, files.InProcessLockStrategy)

    result = await _edit(view, "/mem/MEMORY.md", "own notes", "store notes", use_async)

    assert result.error is None
    [answer] = store_backend.download_files(["/MEMORY.md"])
    assert answer.content == MEMORY.replace("own notes", "store notes").encode()
    assert _file_tools._agent_strategy(_view(StateBackend()), "/MEMORY.md") is None
