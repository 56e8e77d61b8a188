"""No lost writes across processes, and a crash mid-write never truncates MEMORY.md.

Worker processes are started with the `forkserver` context (never plain `fork` from a process
that runs threads); each one opens its own `FilesystemBackend` on the same folder.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import MemoryWriter
from layered_memory.core import files
from worker_processes import forkserver, run_processes

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it

PROCESSES = 8
INSIGHTS_PER_PROCESS = 25
DAY = dt.date(2025, 6, 1)
ENTRY = re.compile(r"^- 2025-06-01: \[(?P<entity>[^\]]+)\] (?P<text>.*)$", re.MULTILINE)


def _context() -> Any:
    return forkserver("layered_memory.writeback.insights", "deepagents.backends")


def _today() -> dt.date:
    return DAY


def _writer(root: str) -> MemoryWriter:
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    return MemoryWriter(backend, "/MEMORY.md", clock=_today)


def _worker(root: str, index: int, use_async: bool, barrier: Any) -> None:
    writer = _writer(root)
    barrier.wait()  # all processes start writing together
    entities = [(f"p{index}-i{n}", f"insight {n} of process {index}") for n in range(25)]
    if use_async:

        async def write_all() -> None:
            for entity, text in entities:
                assert await writer.aadd_insight(text, entity=entity)

        asyncio.run(write_all())
    else:
        for entity, text in entities:
            assert writer.add_insight(text, entity=entity)


@pytest.mark.parametrize("use_async", [False, True])
def test_8_processes_x_25_insights_lose_none(tmp_path: Path, use_async: bool) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n\nShared notes.\n")
    context = _context()
    barrier = context.Barrier(PROCESSES)

    exit_codes = run_processes(
        context,
        [(_worker, (str(tmp_path), index, use_async, barrier)) for index in range(PROCESSES)],
    )

    assert exit_codes == [0] * PROCESSES
    memory = (tmp_path / "MEMORY.md").read_text()
    archive = (tmp_path / "MEMORY.archive.md").read_text()
    in_memory = ENTRY.findall(memory)
    in_archive = ENTRY.findall(archive)
    assert len(in_memory) == 50  # max_insights
    everything = in_memory + in_archive
    assert len(everything) == PROCESSES * INSIGHTS_PER_PROCESS
    assert sorted(everything) == sorted(
        (f"p{i}-i{n}", f"insight {n} of process {i}")
        for i in range(PROCESSES)
        for n in range(INSIGHTS_PER_PROCESS)
    )
    assert memory.startswith("# Memory\n\nShared notes.\n\n## Recent Insights\n\n")
    # Each process's own insights stay newest first wherever they ended up.
    for index in range(PROCESSES):
        order = [int(e.split("-i")[1]) for e, _ in everything if e.startswith(f"p{index}-")]
        assert order == sorted(order, reverse=True)
    leftovers = sorted(path.name for path in tmp_path.iterdir())
    assert leftovers == [".MEMORY.md.lock", "MEMORY.archive.md", "MEMORY.md"]


def _crash_midway(root: str) -> None:
    """Write half of the new file, then die without any cleanup (as a killed process does)."""

    def half_then_die(stream: Any, data: bytes) -> None:
        stream.write(data[: len(data) // 2])
        stream.flush()
        os._exit(70)

    files._write_all = half_then_die
    _writer(root).add_insight("never lands", entity="crash")


def test_a_process_dying_mid_write_leaves_the_file_whole(tmp_path: Path) -> None:
    original = "# Memory\n\n## Recent Insights\n\n- 2025-05-01: [old] kept\n"
    (tmp_path / "MEMORY.md").write_text(original)

    [exit_code] = run_processes(_context(), [(_crash_midway, (str(tmp_path),))])

    assert exit_code == 70
    assert (tmp_path / "MEMORY.md").read_text() == original
    # The dead process held the lock; the OS released it, so the next writer proceeds.
    assert _writer(str(tmp_path)).add_insight("after the crash", entity="next")
    assert ENTRY.findall((tmp_path / "MEMORY.md").read_text()) == [("next", "after the crash")]
