"""Shared memory on the real PostgreSQL: langgraph's `PostgresStore` behind `StoreBackend`s.

Each test works in its own schema (`search_path` in the conninfo), dropped afterwards, so
`PostgresStore.setup()` creates fresh `store` / `store_migrations` tables every time.
Write-back workers are separate processes (`forkserver`), each with its own connection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends.utils import create_file_data
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from layered_memory import (
    HookRegistry,
    MemoryMiddleware,
    MemoryWriter,
    build_thread_config,
    register_write_back,
)
from layered_memory.core.files import PostgresStoreLockStrategy, advisory_lock_id, strategy_for
from layered_memory.core.shared_memory import (
    PROJECT_MEMORY,
    UserIdError,
    shared_memory_backend,
    shared_memory_layers,
    user_namespace,
)
from layered_memory.errors import MemoryWriteError
from layered_memory.testing import ScriptedChatModel, tool_call
from postgres_schema import Schema
from worker_processes import forkserver, run_processes

ORG = ("memory", "org")
PROJECT = ("memory", "project")
PROCESSES = 4
INSIGHTS_PER_PROCESS = 25
DAY = dt.date(2025, 6, 1)
ENTRY = re.compile(r"^- 2025-06-01: \[(?P<entity>[^\]]+)\] (?P<text>.*)$", re.MULTILINE)


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose `search_path` is a fresh schema, dropped after the test."""
    return postgres_schema.url


@pytest.fixture
def store(conninfo: str) -> Iterator[PostgresStore]:
    with PostgresStore.from_conn_string(conninfo) as pg_store:
        pg_store.setup()
        yield pg_store


def put_file(store: PostgresStore, namespace: tuple[str, ...], key: str, text: str) -> None:
    store.put(namespace, key, dict(create_file_data(text)))


def file_text(store: PostgresStore, namespace: tuple[str, ...], key: str) -> str | None:
    item = store.get(namespace, key)
    return None if item is None else str(item.value["content"])


def memory_agent(model: Any, backend: Any, **kwargs: Any) -> Any:
    middleware = MemoryMiddleware(
        backend=backend, layers=shared_memory_layers(), hooks=kwargs.pop("hooks", None)
    )
    return create_deep_agent(
        model=model, backend=backend, memory=[], middleware=[middleware], **kwargs
    )


async def invoke(agent: Any, payload: Any, use_async: bool, **kwargs: Any) -> Any:
    if use_async:
        return await agent.ainvoke(payload, **kwargs)
    return agent.invoke(payload, **kwargs)


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# --- (a) one user's layer is never visible to another user's run ---------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_users_are_isolated(store: PostgresStore, use_async: bool) -> None:
    backend = shared_memory_backend(store)
    put_file(store, ORG, "/AGENTS.md", "ORG_RULE: answer in English.")
    alice_model = ScriptedChatModel(
        script=[
            tool_call("write_file", file_path="/user/MEMORY.md", content="ALICE_SECRET_FACT\n"),
            "noted",
        ]
    )
    await invoke(
        memory_agent(alice_model, backend), ask("remember"), use_async, context={"user_id": "alice"}
    )
    # Alice's own next model call already shows her note: the prompts would reveal a leak.
    assert "ALICE_SECRET_FACT" in alice_model.system_prompts[1]

    bob_model = ScriptedChatModel(
        script=[
            tool_call("read_file", file_path="/user/MEMORY.md"),
            tool_call("ls", path="/user/"),
            tool_call("write_file", file_path="/user/MEMORY.md", content="BOB_FACT\n"),
            "done",
        ]
    )
    bob_final = await invoke(
        memory_agent(bob_model, backend), ask("hello"), use_async, context={"user_id": "bob"}
    )

    assert len(bob_model.system_prompts) == 4
    for prompt in bob_model.system_prompts:
        assert "ORG_RULE" in prompt
        assert "ALICE_SECRET_FACT" not in prompt
    assert "BOB_FACT" in bob_model.system_prompts[3]
    for message in bob_final["messages"]:
        assert "ALICE_SECRET_FACT" not in str(message.content)
    assert file_text(store, ("memory", "users", "alice"), "/MEMORY.md") == "ALICE_SECRET_FACT\n"
    assert file_text(store, ("memory", "users", "bob"), "/MEMORY.md") == "BOB_FACT\n"
    assert sorted(item.namespace for item in store.search(("memory", "users"))) == [
        ("memory", "users", "alice"),
        ("memory", "users", "bob"),
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_run_without_user_id_sees_no_user_memory(
    store: PostgresStore, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    backend = shared_memory_backend(store)
    put_file(store, ("memory", "users", "alice"), "/MEMORY.md", "ALICE_SECRET_FACT")
    model = ScriptedChatModel(script=["hi"])

    with caplog.at_level(logging.WARNING):
        await invoke(memory_agent(model, backend), ask("hello"), use_async)

    assert "ALICE_SECRET_FACT" not in model.system_prompts[0]
    assert "per-user memory needs a user id in the run's context under 'user_id'" in caplog.text


@pytest.mark.parametrize(
    ("context", "reason"),
    [
        (None, "missing"),
        ({}, "missing"),
        ({"user_id": ""}, "not a non-empty string"),
        ({"user_id": 7}, "not a non-empty string"),
        ({"user_id": "ada.x"}, "a '.' would let"),
    ],
)
def test_user_namespace_refuses_a_missing_or_unsafe_id(context: Any, reason: str) -> None:
    class Runtime:
        pass

    runtime = Runtime()
    runtime.context = context  # type: ignore[attr-defined]
    with pytest.raises(UserIdError, match=reason) as raised:
        user_namespace()(runtime)  # type: ignore[arg-type]
    assert raised.value.key == "user_id"
    runtime.context = {"uid": "ada"}  # type: ignore[attr-defined]
    assert user_namespace(key="uid", prefix=("m",))(runtime) == ("m", "ada")  # type: ignore[arg-type]


# --- (b) the organization layer is read-only to agents -------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_org_layer_is_read_only(store: PostgresStore, use_async: bool) -> None:
    backend = shared_memory_backend(store)
    put_file(store, ORG, "/AGENTS.md", "Deploy only on Tuesdays.")
    before = store.get(ORG, "/AGENTS.md")
    assert before is not None
    model = ScriptedChatModel(
        script=[
            tool_call(
                "edit_file",
                file_path="/org/AGENTS.md",
                old_string="Tuesdays",
                new_string="any day",
            ),
            "ok",
        ]
    )

    final = await invoke(
        memory_agent(model, backend), ask("deploy now"), use_async, context={"user_id": "ada"}
    )

    refusal = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error"
    assert "read-only memory layer 'organization'" in refusal.text
    after = store.get(ORG, "/AGENTS.md")
    assert after is not None
    assert after.value == before.value
    assert after.updated_at == before.updated_at


# --- (c) many processes write one store-backed MEMORY.md: none lost -------------------------


def _today() -> dt.date:
    return DAY


def _write_insights(writer: MemoryWriter, index: int, use_async: bool) -> None:
    entities = [(f"p{index}-i{n}", f"insight {n} of process {index}") for n in range(25)]
    if use_async:

        async def write_all() -> None:
            for entity, text in entities:
                assert await writer.aadd_insight(text, entity=entity)

        asyncio.run(write_all())
    else:
        for entity, text in entities:
            assert writer.add_insight(text, entity=entity)


def _worker(conninfo: str, index: int, mode: str, barrier: Any) -> None:
    if mode == "async-store":

        async def main() -> None:
            async with AsyncPostgresStore.from_conn_string(conninfo) as async_store:
                writer = MemoryWriter(
                    shared_memory_backend(async_store), PROJECT_MEMORY, clock=_today
                )
                assert isinstance(writer._strategy, PostgresStoreLockStrategy)
                await asyncio.to_thread(barrier.wait)
                for n in range(INSIGHTS_PER_PROCESS):
                    text = f"insight {n} of process {index}"
                    assert await writer.aadd_insight(text, entity=f"p{index}-i{n}")

        asyncio.run(main())
        return
    with PostgresStore.from_conn_string(conninfo) as pg_store:
        writer = MemoryWriter(shared_memory_backend(pg_store), PROJECT_MEMORY, clock=_today)
        assert isinstance(writer._strategy, PostgresStoreLockStrategy)
        barrier.wait()  # all processes start writing together
        _write_insights(writer, index, use_async=mode == "async")


def _context() -> Any:
    return forkserver(
        "layered_memory.writeback.insights",
        "layered_memory.core.shared_memory",
        "langgraph.store.postgres",
    )


@pytest.mark.parametrize("mode", ["sync", "async", "async-store"])
@pytest.mark.slow
def test_4_processes_x_25_insights_into_one_store_memory_lose_none(
    store: PostgresStore, conninfo: str, mode: str
) -> None:
    put_file(store, PROJECT, "/MEMORY.md", "# Memory\n\nShared notes.\n")
    context = _context()
    barrier = context.Barrier(PROCESSES)
    exit_codes = run_processes(
        context, [(_worker, (conninfo, index, mode, barrier)) for index in range(PROCESSES)]
    )

    assert exit_codes == [0] * PROCESSES
    memory = file_text(store, PROJECT, "/MEMORY.md") or ""
    archive = file_text(store, PROJECT, "/MEMORY.archive.md") or ""
    in_memory = ENTRY.findall(memory)
    assert len(in_memory) == 50  # max_insights
    everything = in_memory + ENTRY.findall(archive)
    assert sorted(everything) == sorted(
        (f"p{i}-i{n}", f"insight {n} of process {i}")
        for i in range(PROCESSES)
        for n in range(INSIGHTS_PER_PROCESS)
    )
    assert memory.startswith("# Memory\n\nShared notes.\n\n## Recent Insights\n\n")
    for index in range(PROCESSES):
        order = [int(e.split("-i")[1]) for e, _ in everything if e.startswith(f"p{index}-")]
        assert order == sorted(order, reverse=True)


def test_strategy_choice_and_lock_ids(store: PostgresStore) -> None:
    backend = shared_memory_backend(store)
    strategy = strategy_for(backend, [PROJECT_MEMORY, "/project/MEMORY.archive.md"])
    assert isinstance(strategy, PostgresStoreLockStrategy)
    # Paths on two different backends cannot share one transaction.
    assert not isinstance(strategy_for(backend, [PROJECT_MEMORY, "/scratch.md"]), type(strategy))
    lock_id = advisory_lock_id("memory.project", "/MEMORY.md")
    assert lock_id == advisory_lock_id("memory.project", "/MEMORY.md")
    assert -(2**63) <= lock_id < 2**63
    assert lock_id != advisory_lock_id("memory.project.x", "/MEMORY.md")


def test_a_failing_transform_writes_nothing(store: PostgresStore) -> None:
    put_file(store, PROJECT, "/MEMORY.md", "# Memory\n")
    strategy = strategy_for(shared_memory_backend(store), [PROJECT_MEMORY])

    def transform(texts: Any) -> Any:
        assert texts == {PROJECT_MEMORY: "# Memory\n"}
        msg = "boom"
        raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="boom"):
        strategy.transact(transform)
    assert file_text(store, PROJECT, "/MEMORY.md") == "# Memory\n"
    # The lock went with the rolled-back transaction: the next writer proceeds.
    assert strategy.transact(lambda texts: ({PROJECT_MEMORY: "# Memory\n- x\n"}, 1)) == 1
    assert file_text(store, PROJECT, "/MEMORY.md") == "# Memory\n- x\n"


# --- (d) checkpoints in PostgresSaver, memory changes between invocations -----------------


async def _run_two_invocations(
    store: PostgresStore, checkpointer: Any, use_async: bool
) -> tuple[ScriptedChatModel, Any]:
    backend = shared_memory_backend(store)
    registry = HookRegistry()
    register_write_back(registry, MemoryWriter(backend, PROJECT_MEMORY, clock=_today))
    model = ScriptedChatModel(
        script=["First answer.\nINSIGHT: Acme reports in EUR.", "Second answer."]
    )
    agent = memory_agent(model, backend, hooks=registry, checkpointer=checkpointer)
    config: Any = build_thread_config("acme", "support")
    config["configurable"]["entity_name"] = "acme"
    context = {"user_id": "ada"}

    await invoke(agent, ask("first"), use_async, config=config, context=context)
    put_file(store, PROJECT, "/AGENTS.md", "PROJECT_RULE_V2: cite sources.")
    final = await invoke(agent, ask("second"), use_async, config=config, context=context)
    return model, final


@pytest.mark.parametrize("use_async", [False, True])
async def test_checkpointed_thread_sees_store_changes_between_invocations(
    store: PostgresStore, conninfo: str, use_async: bool
) -> None:
    put_file(store, PROJECT, "/AGENTS.md", "PROJECT_RULE_V1: be brief.")
    if use_async:
        async with AsyncPostgresSaver.from_conn_string(conninfo) as saver:
            await saver.setup()
            model, final = await _run_two_invocations(store, saver, use_async)
            thread = await saver.aget_tuple(build_thread_config("acme", "support"))
    else:
        with PostgresSaver.from_conn_string(conninfo) as sync_saver:
            sync_saver.setup()
            model, final = await _run_two_invocations(store, sync_saver, use_async)
            thread = sync_saver.get_tuple(build_thread_config("acme", "support"))

    first, second = model.system_prompts
    assert "PROJECT_RULE_V1" in first
    assert "PROJECT_RULE_V2" in second
    assert "PROJECT_RULE_V1" not in second
    # The first run's write-back landed in the shared MEMORY.md and the second run sees it.
    assert "[acme] Acme reports in EUR." in second
    # The same checkpointed thread: the second run continued the first one's messages.
    assert [m.text for m in final["messages"] if m.type == "human"] == ["first", "second"]
    assert thread is not None
    assert thread.config["configurable"]["thread_id"] == "entity:acme:support"


async def test_async_store_refuses_a_sync_write_on_its_own_loop(conninfo: str) -> None:
    async with AsyncPostgresStore.from_conn_string(conninfo) as async_store:
        await async_store.setup()
        writer = MemoryWriter(shared_memory_backend(async_store), PROJECT_MEMORY, clock=_today)
        with pytest.raises(MemoryWriteError, match=r"use the async form \(aadd_insight"):
            writer.add_insight("blocked", entity="loop")
        # From a worker thread, the sync form runs the transaction on the store's loop.
        assert await asyncio.to_thread(writer.add_insight, "from a thread", entity="thread")
        assert await writer.aadd_insight("native", entity="native")
        item = await async_store.aget(PROJECT, "/MEMORY.md")
    assert item is not None
    assert ENTRY.findall(item.value["content"]) == [
        ("native", "native"),
        ("thread", "from a thread"),
    ]
