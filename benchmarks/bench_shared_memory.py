"""Benchmark shared memory on PostgreSQL: time per write-back, and concurrent writers.

Run:  python benchmarks/bench_shared_memory.py [--runs 300] [--url URL] [--processes 4]

1. Time per `add_insight` on a MEMORY.md already holding 50 entries (every call also rotates
   one entry into the archive): median and p95 over `--runs` calls, for local files
   (`FilesystemBackend`: flock + fsync + atomic replace) and for `PostgresStore` behind
   `shared_memory_backend` (one transaction under `pg_advisory_xact_lock`), sync and async.
2. `--processes` x 25 insights with distinct entities into one store-backed MEMORY.md, each
   process with its own connection: wall time and lost count, with the advisory lock and, for
   comparison, with the in-process lock forced (what `StoreBackend` had before).

Works in a schema of its own (dropped at the end). URL: --url, else $LAYERED_MEMORY_POSTGRES_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import multiprocessing
import os
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from deepagents.backends import FilesystemBackend
from langgraph.store.postgres import PostgresStore
from psycopg.conninfo import make_conninfo

from layered_memory import MemoryWriter
from layered_memory.core.files import InProcessLockStrategy
from layered_memory.core.internals import final_route
from layered_memory.core.shared_memory import PROJECT_MEMORY, shared_memory_backend

DAY = dt.date(2025, 1, 1)
ENTRY = re.compile(r"^- \d{4}-\d{2}-\d{2}: \[[^\]]+\] ", re.MULTILINE)
PER_PROCESS = 25


def _today() -> dt.date:
    return DAY


def _fill(writer: MemoryWriter) -> MemoryWriter:
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
    p95 = ordered[max(int(len(ordered) * 0.95) - 1, 0)]
    print(
        f"  {label:<46} median {statistics.median(samples) * 1e3:7.3f} ms"
        f"   p95 {p95 * 1e3:7.3f} ms   (n={len(samples)})"
    )


def bench_single(conninfo: str, folder: Path, runs: int) -> None:
    print("add_insight on a 50-entry MEMORY.md (each call rotates one entry to the archive):")
    files = _fill(
        MemoryWriter(
            FilesystemBackend(root_dir=folder, virtual_mode=True), "/MEMORY.md", clock=_today
        )
    )
    _report(
        "local files (FilesystemBackend)",
        _time_calls(lambda n: files.add_insight(f"insight {n}", entity=f"b{n}"), runs),
    )
    with PostgresStore.from_conn_string(conninfo) as store:
        writer = _fill(MemoryWriter(shared_memory_backend(store), PROJECT_MEMORY, clock=_today))
        _report(
            "PostgresStore (advisory lock), sync",
            _time_calls(lambda n: writer.add_insight(f"insight {n}", entity=f"s{n}"), runs),
        )

        async def timed_async() -> list[float]:
            samples = []
            for n in range(runs):
                start = time.perf_counter()
                await writer.aadd_insight(f"insight {n}", entity=f"a{n}")
                samples.append(time.perf_counter() - start)
            return samples

        _report("PostgresStore (advisory lock), async", asyncio.run(timed_async()))
        _report(
            "PostgresStore, duplicate (returns False)",
            _time_calls(lambda _n: writer.add_insight("again", entity="s0"), runs),
        )


def _clear(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DELETE FROM store")


def _worker(conninfo: str, index: int, force_in_process: bool, barrier: Any) -> None:
    with PostgresStore.from_conn_string(conninfo) as store:
        backend = shared_memory_backend(store)
        writer = MemoryWriter(backend, PROJECT_MEMORY)
        if force_in_process:
            paths = [writer.path, writer.archive_path]
            writer._strategy = InProcessLockStrategy(
                backend, paths, lock_key=final_route(backend, writer.path)
            )
        barrier.wait()
        for n in range(PER_PROCESS):
            writer.add_insight(f"insight {n} of process {index}", entity=f"p{index}-i{n}")


def bench_concurrency(conninfo: str, processes: int, *, force_in_process: bool) -> None:
    _clear(conninfo)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["layered_memory.core.shared_memory", "langgraph.store.postgres"]
    )
    barrier = context.Barrier(processes + 1)  # + this process, to start the clock together
    workers = [
        context.Process(target=_worker, args=(conninfo, i, force_in_process, barrier))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - start
    total = processes * PER_PROCESS
    with PostgresStore.from_conn_string(conninfo) as store:
        found = 0
        for key in ("/MEMORY.md", "/MEMORY.archive.md"):
            item = store.get(("memory", "project"), key)
            found += len(ENTRY.findall(item.value["content"])) if item else 0
    label = "in-process lock (forced)" if force_in_process else "advisory lock"
    print(
        f"  {label:<26} wall {wall:.3f} s, {total / wall:.0f} writes/s, found {found}/{total}, "
        f"lost {total - found}, exit codes {[w.exitcode for w in workers]}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "LAYERED_MEMORY_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args(argv)
    schema = f"lm_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        conninfo = make_conninfo(args.url, options=f"-csearch_path={schema}")
        with PostgresStore.from_conn_string(conninfo) as store:
            store.setup()
        with tempfile.TemporaryDirectory(prefix="bench-shared-memory-") as folder:
            bench_single(conninfo, Path(folder), args.runs)
        print(
            f"{args.processes} processes x {PER_PROCESS} insights into one PostgresStore MEMORY.md:"
        )
        bench_concurrency(conninfo, args.processes, force_in_process=False)
        bench_concurrency(conninfo, args.processes, force_in_process=True)
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
