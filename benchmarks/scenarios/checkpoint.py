"""Scenario 8: `CachedCheckpointSaver` (Redis L1) against `AsyncPostgresSaver` alone.

One thread holds a checkpoint of 200 messages on the real PostgreSQL (a schema of its own).
Both savers read it alternately, in one process and one event loop, so a busy machine slows
both alike. Measured: the hot read (this worker read the version before), the cold read (a
miss: Redis knows nothing of the thread), the second read of a version (where the snapshot is
taken), another worker's first read (the signed payload in Redis), and one whole agent turn.
Reports `unavailable` when PostgreSQL or Redis does not answer.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import fmt_ns

HOT_TARGET = 0.5
COLD_TARGET = 1.1
TITLE = "11. Checkpoint cache"
# Sizes by plan name (kept here rather than in Plan: other scenarios own that file).
SIZES = {
    "full": {"messages": 200, "hot": 300, "cold": 60, "turns": 30},
    "quick": {"messages": 200, "hot": 100, "cold": 40, "turns": 10},
    "tiny": {"messages": 20, "hot": 5, "cold": 3, "turns": 2},
}
POSTGRES_URL = os.environ.get(
    "LAYERED_MEMORY_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("LAYERED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
SIGNING_KEY = "benchmark-signing-key-0123456789abcdef"


def _messages(n: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    out: list[Any] = []
    for i in range(n):
        if i % 2 == 0:
            text = f"question {i}: " + "how should I sort this kind of recycling? " * 6
            out.append(HumanMessage(text, id=f"h{i}"))
        else:
            text = f"answer {i}: " + "rinse the bottle, remove the label, crush it. " * 8
            out.append(AIMessage(text, id=f"a{i}", response_metadata={"finish_reason": "stop"}))
    return out


async def _interleaved(
    cases: dict[str, Callable[[], Awaitable[object]]],
    *,
    rounds: int,
    setup: Callable[[str], Awaitable[None]] | None = None,
    warmup: int = 2,
) -> dict[str, list[int]]:
    """Alternate the cases every round (order flipped each round); untimed setup first."""
    samples: dict[str, list[int]] = {name: [] for name in cases}
    names = list(cases)
    for index in range(warmup + rounds):
        for name in names if index % 2 == 0 else reversed(names):
            if setup is not None:
                await setup(name)
            gc.collect()
            start = time.perf_counter_ns()
            await cases[name]()
            elapsed = time.perf_counter_ns() - start
            if index >= warmup:
                samples[name].append(elapsed)
    return samples


def _paired(ours: list[int], base: list[int]) -> float:
    return float(statistics.median(a / b for a, b in zip(ours, base, strict=True)))


def _row(label: str, ours: list[int], base: list[int], target: float | None) -> Row:
    paired = _paired(ours, base)
    if target is None:
        return Row(label, statistics.median(ours), statistics.median(base), "info", "info",
                   ratio=paired)  # fmt: skip
    return Row(
        label,
        statistics.median(ours),
        statistics.median(base),
        f"median ratio <= {target}",
        verdict(paired <= target),
        ratio=paired,
        facts={"ratio_of_medians": statistics.median(ours) / statistics.median(base)},
    )


def run(plan: Plan, workdir: Path) -> ScenarioResult:  # noqa: ARG001 - all state is in servers
    """Time the cached and the plain PostgreSQL saver, interleaved."""
    try:
        return asyncio.run(_run(SIZES.get(plan.name, SIZES["quick"])))
    except _UnavailableError as exc:
        row = Row(TITLE, None, None, "servers", "unavailable", ours_text="unavailable")
        return ScenarioResult("checkpoint", TITLE, [row], [f"Not measured: {exc}"])


class _UnavailableError(Exception):
    pass


async def _connect() -> tuple[Any, str]:
    try:
        import psycopg
        import redis
    except ImportError as exc:
        raise _UnavailableError(f"{exc.name} is not installed") from None
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise _UnavailableError(f"Redis: {exc}") from None
    finally:
        client.close()
    schema = f"lm_bench_{uuid.uuid4().hex[:10]}"
    try:
        admin = await psycopg.AsyncConnection.connect(
            POSTGRES_URL, autocommit=True, connect_timeout=3
        )
    except psycopg.Error as exc:
        raise _UnavailableError(f"PostgreSQL: {str(exc).splitlines()[0]}") from None
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    return admin, schema


async def _run(size: dict[str, int]) -> ScenarioResult:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.conninfo import make_conninfo
    from psycopg.rows import dict_row

    admin, schema = await _connect()
    prefix = f"lm_bench:{uuid.uuid4().hex[:10]}:"
    conninfo = make_conninfo(POSTGRES_URL, options=f"-csearch_path={schema}")
    try:
        async with await AsyncConnection.connect(
            conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            postgres = AsyncPostgresSaver(conn)
            await postgres.setup()
            return await _measure(postgres, prefix, size)
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()
        _drop_prefix(prefix)


def _drop_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


async def _measure(postgres: Any, prefix: str, size: dict[str, int]) -> ScenarioResult:
    from langgraph.checkpoint.base import empty_checkpoint

    from layered_memory.checkpoint import CachedCheckpointSaver
    from layered_memory.checkpoint._redis_side import Keys

    options: dict[str, Any] = {"redis_url": REDIS_URL, "prefix": prefix}
    cached = CachedCheckpointSaver(postgres, **options)  # the default: tokens only in Redis
    signed = {**options, "signing_key": SIGNING_KEY}
    signer = CachedCheckpointSaver(postgres, **signed)  # with payloads in Redis
    other = CachedCheckpointSaver(postgres, **signed)  # a second worker with the same key
    n = size["messages"]
    checkpoint = empty_checkpoint()
    version = postgres.get_next_version(None, None)
    checkpoint["channel_values"] = {"messages": _messages(n)}
    checkpoint["channel_versions"] = {"messages": version}
    config = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    await cached.aput(config, checkpoint, {"source": "loop", "step": n}, {"messages": version})
    latest = {"configurable": {"thread_id": "bench"}}
    keys = Keys.of(prefix, "bench")

    async def plain() -> object:
        return await postgres.aget_tuple(latest)

    async def through_cache() -> object:
        return await cached.aget_tuple(latest)

    async def through_signer() -> object:
        return await signer.aget_tuple(latest)

    async def forget(name: str) -> None:
        # A cold read: Redis and the workers know nothing of the thread.
        if name != "postgres":
            await _delete(keys)
            for saver in (cached, signer, other):
                saver._reads._local.clear()

    async def second_read_setup(name: str) -> None:
        await forget(name)
        if name != "postgres":
            for _ in range(2):  # async reads without a key keep a version on its third read
                await cached.aget_tuple(latest)

    async def other_setup(name: str) -> None:
        await forget(name)
        if name != "postgres":
            for _ in range(2):
                await other.aget_tuple(latest)  # the other worker keeps it and signs a payload

    for _ in range(3):
        await cached.aget_tuple(latest)
    hot = await _interleaved({"cached": through_cache, "postgres": plain}, rounds=size["hot"])
    local = cached._reads._local
    blob = local.get("bench", "", next(iter(local._threads["bench"].values())).version)
    copy_ns = _copy_cost(blob)
    cold = await _interleaved(
        {"cached": through_cache, "postgres": plain}, rounds=size["cold"], setup=forget
    )
    second = await _interleaved(
        {"cached": through_cache, "postgres": plain}, rounds=size["cold"], setup=second_read_setup
    )
    signed_cold = await _interleaved(
        {"signed": through_signer, "postgres": plain}, rounds=size["cold"], setup=forget
    )
    payload = await _interleaved(
        {"signed": through_signer, "postgres": plain}, rounds=size["cold"], setup=other_setup
    )
    turn = await _turns(postgres, cached, n, size["turns"])
    for saver in (cached, signer, other):
        await saver.aclose()

    rows = [
        _row(f"11. checkpoint: hot aget_tuple, {n} messages", hot["cached"], hot["postgres"],
             HOT_TARGET),
        _row("11. checkpoint: cold aget_tuple (miss)", cold["cached"], cold["postgres"],
             COLD_TARGET),
        _row("11. checkpoint: the read that keeps a snapshot", second["cached"],
             second["postgres"], None),
        _row("11. checkpoint: cold read, signing_key set (no overlap)", signed_cold["signed"],
             signed_cold["postgres"], None),
        _row("11. checkpoint: other worker's 1st read (signed payload)", payload["signed"],
             payload["postgres"], None),
        _row("11. checkpoint: agent turn (create_agent)", turn["cached"], turn["postgres"], None),
    ]  # fmt: skip
    hot_median = statistics.median(hot["cached"])
    notes = [
        f"Baseline: `AsyncPostgresSaver` alone on the same PostgreSQL, same thread of {n} "
        "messages; medians of interleaved rounds; ratio = median of per-round ratios. "
        f"Rounds: hot {size['hot']}, cold {size['cold']}, turns {size['turns']}.",
        f"Copy protection on a hit (restoring a private copy of the {n}-message tuple): "
        f"{fmt_ns(copy_ns)} of the hot read's {fmt_ns(hot_median)}; the rest is one Redis "
        "round trip.",
        "Cold = a read after the thread's Redis entry and the workers' snapshots are gone, "
        "default settings (no signing key): the Redis script and the PostgreSQL read overlap. "
        "With a signing key they run one after the other (the Redis answer may carry the "
        "payload that makes the database read unnecessary). The snapshot is taken on a "
        "version's second read in a worker (third for async reads without a key), so a thread "
        "read once per version (a chat turn) never pays for it.",
        "Agent turn = one `ainvoke` of a `create_agent` agent (scripted model, no tools) on a "
        f"thread that starts with {n} messages: one read, then the turn's writes. The read "
        "is a miss by design: the cache fills from the wrapped saver's own answers, never from "
        "what `put` was given, so each turn's first read follows the previous turn's writes.",
    ]
    return ScenarioResult("checkpoint", TITLE, rows, notes)


async def _delete(keys: Any) -> None:
    import redis.asyncio as redis_async

    client = redis_async.Redis.from_url(REDIS_URL)
    try:
        await client.delete(keys.thread, keys.pending)
    finally:
        await client.aclose()


def _copy_cost(blob: bytes | None) -> float:
    from layered_memory.checkpoint._reads import restore

    if blob is None:
        return float("nan")
    samples = []
    for _ in range(20):
        start = time.perf_counter_ns()
        restore(blob)
        samples.append(time.perf_counter_ns() - start)
    return float(statistics.median(samples))


async def _turns(postgres: Any, cached: Any, n: int, rounds: int) -> dict[str, list[int]]:
    from langchain.agents import create_agent

    from layered_memory.testing import ScriptedChatModel

    agents = {
        name: create_agent(
            ScriptedChatModel(script=[], default="Noted."), tools=[], checkpointer=saver
        )
        for name, saver in (("cached", cached), ("postgres", postgres))
    }
    configs = {name: {"configurable": {"thread_id": f"turn-{name}"}} for name in agents}
    for name, graph in agents.items():
        await graph.aupdate_state(configs[name], {"messages": _messages(n)})

    def turn(name: str) -> Callable[[], Awaitable[object]]:
        async def call() -> object:
            message = {"role": "user", "content": "And the cap?"}
            return await agents[name].ainvoke({"messages": [message]}, configs[name])

        return call

    return await _interleaved({name: turn(name) for name in agents}, rounds=rounds)
