"""Scenario 5: write-back with `MemoryWriter.add_insight`.

1. One `add_insight` on a MEMORY.md already holding 50 entries (the default `max_insights`),
   so every call also rotates one entry into the archive; FilesystemBackend (file lock, fsync,
   atomic replace). A duplicate (refused) call is timed too.
2. N processes writing at once into one file: wall time and entries lost (target: none).

deepagents has no write-back, so there is no baseline column.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import re
import time
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Samples, fmt_ns

DAY = dt.date(2025, 1, 1)
ENTRY = re.compile(r"^- \d{4}-\d{2}-\d{2}: \[[^\]]+\] ", re.MULTILINE)


def _today() -> dt.date:
    return DAY


def _writer(root: Path) -> Any:
    """A `MemoryWriter` on `root/MEMORY.md` (imported late: the module may be unfinished)."""
    from layered_memory.writeback.insights import MemoryWriter

    return MemoryWriter(
        FilesystemBackend(root_dir=root, virtual_mode=True), "/MEMORY.md", clock=_today
    )


def _worker(root: str, index: int, count: int, barrier: Any) -> None:
    """One writer process: wait for the others, then add `count` insights."""
    writer = _writer(Path(root))
    barrier.wait()
    for n in range(count):
        writer.add_insight(f"insight {n} of process {index}", entity=f"p{index}-i{n}")


def _entries(root: Path) -> int:
    found = 0
    for name in ("MEMORY.md", "MEMORY.archive.md"):
        path = root / name
        if path.exists():
            found += len(ENTRY.findall(path.read_text(encoding="utf-8")))
    return found


def _concurrent(root: Path, processes: int, per_process: int) -> tuple[float, int, list[Any]]:
    """Wall seconds from a common start, entries found, exit codes."""
    root.mkdir()
    # forkserver: no fork of this (threaded) process; preloading makes workers start fast.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["layered_memory.writeback.insights", "deepagents.backends"])
    barrier = context.Barrier(processes + 1)
    workers = [
        context.Process(target=_worker, args=(str(root), i, per_process, barrier))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=120)
    start = time.perf_counter()
    for worker in workers:
        worker.join(timeout=300)
    wall = time.perf_counter() - start
    return wall, _entries(root), [worker.exitcode for worker in workers]


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time single writes, then run the concurrent writers."""
    try:
        (workdir / "single").mkdir()
        writer = _writer(workdir / "single")
        for n in range(50):
            writer.add_insight(f"warm-up insight {n} about a client preference", entity=f"w{n}")
    except (ImportError, NotImplementedError, AttributeError) as exc:
        reason = f"MemoryWriter not usable yet: {type(exc).__name__}: {exc}"
        row = Row("5. write-back", None, None, "runs", "unavailable", ours_text="unavailable")
        return ScenarioResult("write_back", "5. Write-back", [row], [reason])
    single, duplicate = Samples(), Samples()
    for n in range(plan.write_runs):
        start = time.perf_counter_ns()
        writer.add_insight(f"benchmark insight {n} about reports", entity=f"b{n}")
        single.ns.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        writer.add_insight("the same entity again today", entity=f"b{n}")
        duplicate.ns.append(time.perf_counter_ns() - start)
    kept = _entries(workdir / "single")

    processes, per_process = plan.write_processes, plan.write_per_process
    wall, found, codes = _concurrent(workdir / "concurrent", processes, per_process)
    expected = processes * per_process
    lost = expected - found
    rows = [
        Row(
            "5. add_insight on a 50-entry MEMORY.md (rotates 1)",
            single.median,
            None,
            "info",
            "info",
            base_text="n/a (no write-back)",
        ),
        Row(
            "5. add_insight, duplicate refused",
            duplicate.median,
            None,
            "info",
            "info",
            base_text="n/a",
        ),
        Row(
            f"5. {processes} processes x {per_process} insights, one file",
            wall * 1e9,
            None,
            "0 lost",
            verdict(lost == 0 and all(code == 0 for code in codes)),
            base_text="n/a",
            facts={"lost": lost, "found": found, "expected": expected, "exit_codes": codes},
        ),
    ]
    notes = [
        f"Single writer, FilesystemBackend: median {fmt_ns(single.median)} "
        f"(p90 {fmt_ns(single.p90)}) over {plan.write_runs} calls; a refused duplicate "
        f"{fmt_ns(duplicate.median)}. {kept} entries in MEMORY.md + archive after "
        f"{50 + plan.write_runs} writes (none lost to rotation).",
        f"{processes} processes x {per_process} distinct insights at once: "
        f"{wall:.2f} s wall from a common start ({expected / wall:.0f} writes/s), "
        f"{found}/{expected} found, {lost} lost, exit codes {codes}.",
    ]
    return ScenarioResult("write_back", "5. Write-back", rows, notes)
