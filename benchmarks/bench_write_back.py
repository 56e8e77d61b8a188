"""Benchmark the write-back: time per `add_insight` on a full file, and 8 x 25 concurrent writers.

Run:  python benchmarks/bench_write_back.py [--runs 300] [--dir /some/folder]

1. Time per `add_insight` on a MEMORY.md that already holds 50 entries (the default
   `max_insights`), so every call also rotates one entry into the archive: median and p95 over
   `--runs` calls, for FilesystemBackend (flock + fsync + atomic replace) and StoreBackend over
   an InMemoryStore (in-process lock + download/upload). Also a rejected duplicate.
2. 8 processes x 25 insights with distinct entities into one file: wall time and lost count.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend, StoreBackend
from langgraph.store.memory import InMemoryStore

from layered_memory import MemoryWriter

DAY = dt.date(2025, 1, 1)
ENTRY = re.compile(r"^- \d{4}-\d{2}-\d{2}: \[[^\]]+\] ", re.MULTILINE)


def _today() -> dt.date:
    return DAY


def _full_writer(backend: Any) -> MemoryWriter:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=_today)
    for n in range(50):
        writer.add_insight(f"warm-up insight number {n} about a client preference", entity=f"w{n}")
    return writer


def _time_calls(call: Callable[[int], object], runs: int) -> list[float]:
    samples = []
    for n in range(runs):
        start = time.perf_counter()
        call(n)
        samples.append(time.perf_counter() - start)
    return samples


def _report(label: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    print(
        f"  {label:<44} median {statistics.median(samples) * 1e3:7.3f} ms"
        f"   p95 {p95 * 1e3:7.3f} ms   (n={len(samples)})"
    )


def bench_single(folder: Path, runs: int) -> None:
    print("add_insight on a 50-entry MEMORY.md (each call rotates one entry to the archive):")
    fs_root = folder / "single"
    fs_root.mkdir()
    writer = _full_writer(FilesystemBackend(root_dir=fs_root, virtual_mode=True))
    samples = _time_calls(
        lambda n: writer.add_insight(f"benchmark insight {n} about reports", entity=f"b{n}"),
        runs,
    )
    _report("FilesystemBackend (flock+fsync+replace)", samples)
    dup = _time_calls(lambda _n: writer.add_insight("again", entity="b0"), runs)
    _report("FilesystemBackend, duplicate (returns False)", dup)

    store = StoreBackend(namespace=lambda _rt: ("memory",), store=InMemoryStore())
    store_writer = _full_writer(store)
    samples = _time_calls(
        lambda n: store_writer.add_insight(f"benchmark insight {n} about reports", entity=f"b{n}"),
        runs,
    )
    _report("StoreBackend(InMemoryStore) (in-process lock)", samples)


def _worker(root: str, index: int, barrier: Any) -> None:
    writer = MemoryWriter(FilesystemBackend(root_dir=root, virtual_mode=True), "/MEMORY.md")
    barrier.wait()
    for n in range(25):
        writer.add_insight(f"insight {n} of process {index}", entity=f"p{index}-i{n}")


def bench_concurrency(folder: Path) -> None:
    root = folder / "concurrent"
    root.mkdir()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["layered_memory.writeback.insights", "deepagents.backends"])
    barrier = context.Barrier(9)  # 8 workers + this process, to start the clock together
    processes = [context.Process(target=_worker, args=(str(root), i, barrier)) for i in range(8)]
    for process in processes:
        process.start()
    barrier.wait()
    start = time.perf_counter()
    for process in processes:
        process.join()
    wall = time.perf_counter() - start
    found = len(ENTRY.findall((root / "MEMORY.md").read_text()))
    archive = root / "MEMORY.archive.md"
    found += len(ENTRY.findall(archive.read_text())) if archive.exists() else 0
    codes = [process.exitcode for process in processes]
    print("8 processes x 25 insights, distinct entities, one FilesystemBackend MEMORY.md:")
    print(
        f"  wall {wall:.3f} s (from the common start), {200 / wall:.0f} writes/s, "
        f"found {found}/200, lost {200 - found}, exit codes {codes}"
    )


def main(argv: list[str] | None = None) -> None:
    """Run both benchmarks in a temporary folder (or `--dir`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None, help="folder to write in (default: tmp)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-write-back-") as folder:
        print(f"folder: {folder}")
        bench_single(Path(folder), args.runs)
        bench_concurrency(Path(folder))


if __name__ == "__main__":
    main()
