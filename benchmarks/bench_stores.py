"""Median get/set latency of each session store adapter, and hybrid L1-hit vs L2-miss reads.

Not a test: run it by hand against the local servers.

    .venv/bin/python benchmarks/bench_stores.py [--rounds 500] [--value-bytes 1024]

Redis and PostgreSQL URLs come from LAYERED_MEMORY_REDIS_URL / LAYERED_MEMORY_POSTGRES_URL
(defaults: the local development servers); an unreachable server's rows are skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from layered_memory.errors import StoreUnavailableError
from layered_memory.sessions.stores import (
    FileSessionStore,
    HybridSessionStore,
    InMemorySessionStore,
    PostgresSessionStore,
    RedisSessionStore,
)

REDIS_URL = os.environ.get("LAYERED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "LAYERED_MEMORY_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
KEY = "entity:acme_corp:evaluation:quality_evaluator"


def median_us(operation: Callable[[], Any], rounds: int, before: Callable[[], Any] | None) -> float:
    """Median wall time of `operation` in microseconds; `before` runs untimed each round."""
    samples = []
    for _ in range(rounds):
        if before is not None:
            before()
        start = time.perf_counter_ns()
        operation()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


@contextmanager
def redis_store() -> Iterator[RedisSessionStore]:
    prefix = f"lm-bench:{uuid.uuid4().hex[:8]}:"
    store = RedisSessionStore.from_url(REDIS_URL, prefix=prefix)
    try:
        yield store
    finally:
        store.delete(KEY)
        store.close()


@contextmanager
def postgres_store() -> Iterator[PostgresSessionStore]:
    schema = f"lm_bench_{uuid.uuid4().hex[:8]}"
    store = PostgresSessionStore.from_conn_string(POSTGRES_URL, schema=schema)
    try:
        store.setup()
        yield store
    finally:
        store.close()
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--value-bytes", type=int, default=1024)
    args = parser.parse_args()
    value = {"summary": "x" * args.value_bytes, "scores": [1, 2, 3]}
    rows: list[tuple[str, str, str]] = []

    def measure(name: str, store: Any) -> None:
        set_us = median_us(lambda: store.set(KEY, value, ttl=3600), args.rounds, None)
        get_us = median_us(lambda: store.get(KEY), args.rounds, None)
        rows.append((name, f"{get_us:,.1f}", f"{set_us:,.1f}"))

    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        measure("in-memory", InMemorySessionStore())
        measure("file (fsync)", FileSessionStore(os.path.join(folder, "fsync")))
        measure("file (no fsync)", FileSessionStore(os.path.join(folder, "plain"), fsync=False))
        redis = postgres = None
        try:
            redis = stack.enter_context(redis_store())
            redis.get(KEY)  # connect outside the timing
            measure("redis", redis)
        except StoreUnavailableError as exc:
            print(f"skipping Redis: {exc}")
        try:
            postgres = stack.enter_context(postgres_store())
            measure("postgres", postgres)
        except StoreUnavailableError as exc:
            print(f"skipping PostgreSQL: {exc}")
        if redis is not None and postgres is not None:
            hybrid = HybridSessionStore(redis, postgres)
            measure("hybrid redis+postgres", hybrid)
            hybrid.set(KEY, value, ttl=3600)
            hit = median_us(lambda: hybrid.get(KEY), args.rounds, None)
            miss = median_us(lambda: hybrid.get(KEY), args.rounds, lambda: redis.delete(KEY))
            rows.append(("hybrid get, L1 hit", f"{hit:,.1f}", "-"))
            rows.append(("hybrid get, L1 miss -> L2 + backfill", f"{miss:,.1f}", "-"))

    print(f"\nmedian latency in µs, {args.rounds} rounds, value ≈ {args.value_bytes} bytes\n")
    width = max(len(name) for name, _, _ in rows)
    print(f"| {'adapter':<{width}} | {'get µs':>9} | {'set µs':>9} |")
    print(f"|{'-' * (width + 2)}|{'-' * 11}|{'-' * 11}|")
    for name, get_us, set_us in rows:
        print(f"| {name:<{width}} | {get_us:>9} | {set_us:>9} |")


if __name__ == "__main__":
    main()
