"""The PIPELINE_END handler that saves a run's results into the session store."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import (
    HookEvent,
    HookRegistry,
    InMemorySessionStore,
    Layer,
    MemoryMiddleware,
    build_thread_config,
)
from layered_memory.sessions.session_save import (
    SESSION_SAVE_HANDLER_NAME,
    default_session_formatter,
    register_session_save,
)
from layered_memory.testing import ScriptedChatModel

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
KEY = "entity:acme:research"


async def fire(registry: HookRegistry, data: dict[str, Any], use_async: bool) -> None:
    if use_async:
        await registry.atrigger(HookEvent.PIPELINE_END, data)
    else:
        registry.trigger(HookEvent.PIPELINE_END, data)


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def registry(store: InMemorySessionStore) -> HookRegistry:
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    return registry


def test_registers_one_named_handler(store: InMemorySessionStore) -> None:
    registry = HookRegistry()
    register_session_save(registry, store)
    assert registry.names(HookEvent.PIPELINE_END) == [SESSION_SAVE_HANDLER_NAME]
    with pytest.raises(ValueError, match="already registered"):
        register_session_save(registry, store)
    with pytest.raises(ValueError, match="ttl"):
        register_session_save(HookRegistry(), store, ttl=0)


@USE_ASYNC
async def test_saves_under_the_thread_id(
    registry: HookRegistry, store: InMemorySessionStore, use_async: bool
) -> None:
    data = {"messages": [HumanMessage("q"), AIMessage("Acme wants weekly reports.")]}
    await fire(registry, {**data, "thread_id": KEY}, use_async)
    assert store.get(KEY) == {"last_message": "Acme wants weekly reports."}


@USE_ASYNC
async def test_falls_back_to_the_configs_thread_id(
    registry: HookRegistry, store: InMemorySessionStore, use_async: bool
) -> None:
    data = {"summary": "done", "config": build_thread_config("acme", "research"), "thread_id": None}
    await fire(registry, data, use_async)
    assert store.get(KEY) == {"summary": "done"}


@USE_ASYNC
@pytest.mark.parametrize(
    "dry_run_at", ["state", "runtime_context_dict", "runtime_context_object", "configurable"]
)
async def test_dry_run_saves_nothing(
    registry: HookRegistry, store: InMemorySessionStore, use_async: bool, dry_run_at: str
) -> None:
    data: dict[str, Any] = {"summary": "done", "thread_id": KEY, "config": {"configurable": {}}}
    if dry_run_at == "state":
        data["dry_run"] = True
    elif dry_run_at == "runtime_context_dict":
        data["runtime_context"] = {"dry_run": "true"}
    elif dry_run_at == "runtime_context_object":
        data["runtime_context"] = SimpleNamespace(dry_run=True)
    else:
        data["config"]["configurable"]["dry_run"] = 1
    await fire(registry, data, use_async)
    assert store.get(KEY) is None


@USE_ASYNC
async def test_no_thread_or_no_results_saves_nothing(
    registry: HookRegistry, store: InMemorySessionStore, use_async: bool
) -> None:
    await fire(registry, {"summary": "done"}, use_async)
    await fire(
        registry, {"thread_id": KEY, "messages": [HumanMessage("only a question")]}, use_async
    )
    assert len(store) == 0


@USE_ASYNC
async def test_merges_into_the_stored_entry_with_ttl(use_async: bool) -> None:
    store = InMemorySessionStore()
    store.set(KEY, {"earlier": 1, "summary": "old"})
    registry = HookRegistry()
    register_session_save(
        registry, store, ttl=60, formatter=lambda state: {"summary": state["answer"]}, strict=True
    )
    await fire(registry, {"answer": "new", "thread_id": KEY}, use_async)
    entry = store.get_entry(KEY)
    assert entry is not None
    assert entry.value == {"earlier": 1, "summary": "new"}
    assert entry.ttl == pytest.approx(60, abs=1)


@USE_ASYNC
async def test_replace_mode(use_async: bool) -> None:
    store = InMemorySessionStore()
    store.set(KEY, {"earlier": 1})
    registry = HookRegistry()
    register_session_save(registry, store, merge=False, strict=True)
    await fire(registry, {"summary": "s", "thread_id": KEY}, use_async)
    assert store.get(KEY) == {"summary": "s"}


def test_default_formatter() -> None:
    assert default_session_formatter(
        {"messages": [AIMessage("first"), HumanMessage("q"), AIMessage(" final ")]}
    ) == {"last_message": "final"}
    state = {
        "summary": "s",
        "scores": [1, 2],
        "config": {"configurable": {}},
        "runtime_context": None,
        "thread_id": KEY,
        "memory_contents": {"/AGENTS.md": "x"},
        "files": {},
        "_private": 1,
        "unserializable": object(),
    }
    assert default_session_formatter(state) == {"summary": "s", "scores": [1, 2]}
    assert default_session_formatter({"thread_id": KEY}) is None


@USE_ASYNC
async def test_next_run_of_the_thread_sees_the_saved_results(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "AGENTS.md").write_text("Project rules.", encoding="utf-8")
    store = InMemorySessionStore()
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    model = ScriptedChatModel(script=["Acme prefers weekly reports.", "Noted."])
    agent = create_agent(
        model,
        tools=[],
        middleware=[
            MemoryMiddleware(
                backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
                layers=[Layer("project", "/AGENTS.md")],
                session_store=store,
                hooks=registry,
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config = build_thread_config("acme", "research")
    for question in ("What does Acme want?", "And now?"):
        payload = {"messages": [HumanMessage(question)]}
        if use_async:
            await agent.ainvoke(payload, config)
        else:
            agent.invoke(payload, config)

    assert store.get(KEY) == {"last_message": "Noted."}
    first, second = model.system_prompts
    assert "Acme prefers weekly reports." not in first
    assert '<layer name="session"' in second
    assert "Acme prefers weekly reports." in second
