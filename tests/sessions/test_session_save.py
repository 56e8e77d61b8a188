"""The PIPELINE_END handler that saves a run's results into the session store."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import (
    FileSessionStore,
    HookEvent,
    HookRegistry,
    InMemorySessionStore,
    Layer,
    MemoryMiddleware,
    PostgresSessionStore,
    build_thread_config,
)
from layered_memory.errors import SessionStoreError
from layered_memory.sessions.session_save import (
    SESSION_SAVE_HANDLER_NAME,
    default_session_formatter,
    register_session_save,
)
from layered_memory.sessions.stores import ConditionalSessionStore
from layered_memory.testing import ScriptedChatModel
from postgres_schema import drop_schema, unique_schema_name

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


MERGING_WORKER = """
import asyncio, sys
from layered_memory import HookEvent, HookRegistry
from layered_memory.sessions.session_save import register_session_save
from layered_memory.sessions.stores import (
    FileSessionStore, HybridSessionStore, PostgresSessionStore, RedisSessionStore,
)

kind, where, tag, use_async = sys.argv[1], sys.argv[2].split("|"), sys.argv[3], sys.argv[4] == "1"
if kind == "file":
    store = FileSessionStore(where[0], fsync=False)
elif kind == "postgres":
    store = PostgresSessionStore.from_conn_string(where[0], schema=where[1])
else:
    store = HybridSessionStore(
        RedisSessionStore.from_url(where[2], prefix=where[3]),
        PostgresSessionStore.from_conn_string(where[0], schema=where[1]),
    )
hooks = HookRegistry()
register_session_save(hooks, store, formatter=lambda data: {data["field"]: 1}, strict=True)
events = [{"thread_id": "entity:acme:research", "field": f"{tag}{n}"} for n in range(200)]
print("ready", flush=True)
sys.stdin.readline()  # both workers start together

async def main():
    for data in events:
        await hooks.atrigger(HookEvent.PIPELINE_END, data)
    if kind != "file":
        await store.aclose()

if use_async:
    asyncio.run(main())
else:
    for data in events:
        hooks.trigger(HookEvent.PIPELINE_END, data)
    if kind != "file":
        store.close()
"""


def _merging_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[str]:
    """Where the workers' store lives (``MERGING_WORKER``'s second argument, split on ``|``)."""
    if kind == "file":
        return [str(tmp_path / "sessions")]
    postgres_url = request.getfixturevalue("postgres_url")
    schema = unique_schema_name("lm_merge")
    with PostgresSessionStore.from_conn_string(postgres_url, schema=schema) as store:
        store.setup()
    request.addfinalizer(lambda: drop_schema(postgres_url, schema))
    if kind == "postgres":
        return [postgres_url, schema]
    prefix = f"lm-merge:{uuid.uuid4().hex[:10]}:"
    redis_url = request.getfixturevalue("redis_url")
    request.addfinalizer(lambda: _drop_redis_keys(redis_url, prefix))
    return [postgres_url, schema, redis_url, prefix]


def _drop_redis_keys(url: str, prefix: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        for name in client.scan_iter(match=f"{prefix}*"):
            client.delete(name)


@pytest.mark.parametrize(
    ("kind", "use_async"),
    [("file", False), ("file", True), ("postgres", False), ("hybrid", True)],
    ids=["file-sync", "file-async", "postgres-sync", "hybrid_redis_postgres-async"],
)
@pytest.mark.slow
def test_merges_from_two_processes_lose_no_update(
    kind: str, use_async: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = _merging_store(kind, tmp_path, request)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", MERGING_WORKER, kind, "|".join(where), tag, str(int(use_async))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline() == "ready\n", worker.communicate(timeout=60)[1]
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            _, stderr = worker.communicate(timeout=300)
            assert worker.returncode == 0, stderr
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    if kind == "file":
        saved = FileSessionStore(where[0]).get(KEY)
    else:
        with PostgresSessionStore.from_conn_string(where[0], schema=where[1]) as store:
            saved = store.get(KEY)
    expected = {f"{tag}{n}": 1 for tag in "ab" for n in range(200)}
    assert saved is not None
    assert len(saved) == len(expected), "every run's fields are kept"
    assert saved == expected


class PlainStore:
    """A user's own store: get/set/delete and their async twins, no add/replace."""

    def __init__(self) -> None:
        self.inner = InMemorySessionStore()

    def get(self, key: str) -> Any:
        return self.inner.get(key)

    def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    async def aget(self, key: str) -> Any:
        return self.inner.get(key)

    async def aset(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl=ttl)

    async def adelete(self, key: str) -> None:
        self.inner.delete(key)


@USE_ASYNC
async def test_merges_into_a_store_without_compare_and_set(use_async: bool) -> None:
    store = PlainStore()
    assert not isinstance(store, ConditionalSessionStore)
    store.set(KEY, {"earlier": 1})
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)  # type: ignore[arg-type]
    await fire(registry, {"summary": "s", "thread_id": KEY}, use_async)
    assert store.get(KEY) == {"earlier": 1, "summary": "s"}


class AlwaysChanged(InMemorySessionStore):
    """Every compare-and-set finds the entry changed, as if other writers never stopped."""

    def replace(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def add(self, *args: Any, **kwargs: Any) -> bool:
        return False


@USE_ASYNC
async def test_a_merge_that_never_wins_fails_loudly(
    use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[int] = []
    monkeypatch.setattr(
        "layered_memory.sessions.session_save._backoff", lambda attempt: waits.append(attempt) or 0
    )
    store = AlwaysChanged()
    store.set(KEY, {"earlier": 1})
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    with pytest.raises(SessionStoreError, match="gave up after 100 attempts") as info:
        await fire(registry, {"summary": "s", "thread_id": KEY}, use_async)
    assert info.value.key == KEY
    assert store.get(KEY) == {"earlier": 1}
    assert waits == list(range(1, 100)), "a random wait before each new round"


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
