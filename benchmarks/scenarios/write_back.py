"""Scenario 5: write-back with `MemoryWriter.add_insight`.

1. One `add_insight` on a MEMORY.md already holding 50 entries (the default `max_insights`),
   so every call also rotates one entry into the archive; FilesystemBackend (file lock, fsync,
   atomic replace). A duplicate (refused) call is timed too.
2. N processes writing at once into one file: wall time and entries lost (target: none).
3. The agent's `edit_file` of MEMORY.md through `memory.protected_backend`: since issue 22 it
   takes the write-back's lock and replaces the file atomically (`core.files`). Timed against
   the edit it replaced, in the same run and interleaved: the guard's checks, then deepagents'
   own `FilesystemBackend.edit` (truncate and rewrite in place, no lock, no fsync).

deepagents has no write-back, so the write-back rows have no baseline column.
"""

from __future__ import annotations

import cProfile
import datetime as dt
import multiprocessing
import pstats
import re
import time
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, Samples, fmt_ns, interleaved, paired_ratio

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


MARKS = ("<!-- agent notes: even -->", "<!-- agent notes: odd -->")


def _memory_text() -> str:
    """A MEMORY.md of 50 user lines and 50 insights (~6 KB), holding the first mark."""
    user = [f"- note {n}: a line the user wrote about the project" for n in range(50)]
    insights = [
        f"- 2025-01-01: [w{n}] warm-up insight number {n} about a client" for n in range(50)
    ]
    return "\n".join(
        [
            "# Memory",
            "",
            "## Recent Insights",
            "",
            *insights,
            "",
            "## Notes",
            "",
            *user,
            "",
            MARKS[0],
            "",
        ]
    )


def _protected_view(root: Path) -> Any:
    from layered_memory import Layer, MemoryMiddleware

    root.mkdir()
    (root / "MEMORY.md").write_text(_memory_text(), encoding="utf-8")
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    return memory.protected_backend


def _toggling(edit: Any) -> Any:
    """A timed call that swaps the two marks back and forth (the file keeps its size)."""
    count = [0]

    def run(_prepared: object) -> None:
        old, new = MARKS if count[0] % 2 == 0 else MARKS[::-1]
        count[0] += 1
        result = edit("/MEMORY.md", old, new)
        assert result.error is None, result.error

    return run


def python_calls(call: Any) -> int:
    """Python function calls of one call: a noise-free measure of CPU work (fsync waits on a
    shared disk make wall times of a write swing tenfold between runs)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        call(None)
    finally:
        profiler.disable()
    return int(pstats.Stats(profiler).total_calls)  # type: ignore[attr-defined]


def _edits(plan: Plan, workdir: Path) -> tuple[dict[str, Samples], dict[str, int]]:
    """The protected edit now (locked, atomic) and as it was (the guard, then deepagents'):
    interleaved wall and CPU samples, and Python calls per edit."""
    from layered_memory.core.guard import _view

    now, before = _protected_view(workdir / "edit-now"), _protected_view(workdir / "edit-before")

    def edit_before(path: str, old: str, new: str) -> Any:
        # The body of the view's `edit` before issue 22.
        assert _view._refused(before, "edit", path) is None
        new = _view._redacted(before, path, new)
        return _view._Own(before).edit(path, old, new, False)

    cases = [Case("now", _toggling(now.edit)), Case("before", _toggling(edit_before))]
    samples = interleaved(cases, rounds=plan.write_runs, warmup=2, cpu=True)
    return samples, {case.name: python_calls(case.run) for case in cases}


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
    edits, edit_calls = _edits(plan, workdir)
    edit_now, edit_before = edits["now"], edits["before"]
    edit_ratio = paired_ratio(edit_now, edit_before)
    cpu_ratio = paired_ratio(edit_now, edit_before, cpu=True)
    insight_calls = python_calls(
        lambda _: writer.add_insight("one more insight, counted", entity="counted")
    )

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
            "5. protected edit_file of MEMORY.md: locked + atomic (vs the unlocked in-place edit)",
            edit_now.median,
            edit_before.median,
            "info",
            "info",
            ratio=edit_ratio,
            facts={"cpu_ratio": cpu_ratio, "python_calls": edit_calls},
        ),
        Row(
            "5. Python calls: add_insight / protected edit_file (before: in-place edit)",
            None,
            None,
            "info",
            "info",
            ours_text=f"{insight_calls:,} / {edit_calls['now']:,}",
            base_text=f"— / {edit_calls['before']:,}",
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
        f"Protected edit_file of a 6 KB MEMORY.md: median {fmt_ns(edit_now.median)} "
        f"(p90 {fmt_ns(edit_now.p90)}) locked + atomic + fsync, against "
        f"{fmt_ns(edit_before.median)} (p90 {fmt_ns(edit_before.p90)}) for the edit it "
        f"replaced (guard + deepagents' in-place edit); paired ratio {edit_ratio:.2f} wall, "
        f"{cpu_ratio:.2f} CPU time; Python calls per edit {edit_calls['now']:,} vs "
        f"{edit_calls['before']:,}, per add_insight {insight_calls:,}.",
        f"{processes} processes x {per_process} distinct insights at once: "
        f"{wall:.2f} s wall from a common start ({expected / wall:.0f} writes/s), "
        f"{found}/{expected} found, {lost} lost, exit codes {codes}.",
    ]
    return ScenarioResult("write_back", "5. Write-back", rows, notes)
