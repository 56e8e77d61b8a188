"""Every path that persists memory redacts: the agent's own edits of memory files, write-back
and session save, each run end to end with real agents and backends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, StoreBackend
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from layered_memory import (
    HookRegistry,
    Layer,
    MemoryMiddleware,
    MemoryWriter,
    build_thread_config,
    register_write_back,
)
from layered_memory.core.guard import note_redaction
from layered_memory.safety.redaction import Redaction
from layered_memory.sessions.session_save import register_session_save
from layered_memory.sessions.stores import StoredSession
from layered_memory.testing import ScriptedChatModel, tool_call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
# Assembled at run time so that secret scanners never flag this file.
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GITHUB = "ghp_" + "a1B2c3D4" * 5
PASSWORD = "Tr0ub" + "4dor&3x"


def _layers() -> list[Layer]:
    return [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]


def _script() -> list[Any]:
    return [
        tool_call(
            "write_file",
            file_path="/MEMORY.md",
            content=f"# Memory\n- Billing uses {STRIPE}\n- DB_PASSWORD={PASSWORD}\n",
        ),
        tool_call(
            "edit_file",
            file_path="/MEMORY.md",
            old_string="# Memory\n",
            new_string=f"# Memory\n- CI token: {GITHUB[:20]}\n  {GITHUB[20:]}\n",
        ),
        tool_call("write_file", file_path="/notes/scratch.md", content=f"scratch {STRIPE}"),
        "done",
    ]


def _tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


@USE_ASYNC
async def test_deep_agent_memory_edits_are_redacted_before_saving(
    tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "AGENTS.md").write_text("Project rules.\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedChatModel(script=_script())
    agent = create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[MemoryMiddleware(backend=backend, layers=_layers())],
    )
    payload = {"messages": [{"role": "user", "content": "remember the billing setup"}]}
    with caplog.at_level(logging.WARNING, logger="layered_memory.core.guard"):
        result = await agent.ainvoke(payload) if use_async else agent.invoke(payload)

    memory = (tmp_path / "MEMORY.md").read_text()
    for secret in (STRIPE, PASSWORD, GITHUB[:20], GITHUB[20:]):
        assert secret not in memory
    assert "- Billing uses [REDACTED:stripe_key]\n" in memory
    assert "- DB_PASSWORD=[REDACTED:password]\n" in memory
    assert "- CI token: [REDACTED:github_token]\n" in memory

    write, edit, scratch = _tool_messages(result)
    assert write.status == "success"
    assert "2 secrets were redacted before saving (password, stripe_key)" in write.text
    assert "1 secret was redacted before saving (github_token)" in edit.text
    # Only memory files are the middleware's to redact; another file is the agent's business.
    assert "redacted" not in scratch.text
    assert STRIPE in (tmp_path / "notes" / "scratch.md").read_text()
    # The next model call sees the redacted memory, and the log names kinds, not secrets.
    assert "[REDACTED:stripe_key]" in model.system_prompts[-1]
    assert all(STRIPE not in prompt for prompt in model.system_prompts)
    assert "stripe_key" in caplog.text
    assert STRIPE not in caplog.text
    assert PASSWORD not in caplog.text


def test_memory_on_a_store_backend_is_redacted_too() -> None:
    store = InMemoryStore()
    backend = StoreBackend(store=store, namespace=lambda _runtime: ("memory",))
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/MEMORY.md", content=f"key {STRIPE}"), "ok"]
    )
    agent = create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[MemoryMiddleware(backend=backend, layers=_layers())],
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    stored = [item.value for item in store.search(("memory",))]
    assert stored
    assert STRIPE not in repr(stored)
    assert "[REDACTED:stripe_key]" in repr(stored)


def test_a_read_only_layer_is_still_refused_not_redacted(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Project rules.\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/AGENTS.md", content=f"key {STRIPE}"), "ok"]
    )
    agent = create_agent(model, middleware=[MemoryMiddleware(backend=backend, layers=_layers())])
    result = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    (refusal,) = _tool_messages(result)
    assert refusal.status == "error"
    assert "redacted" not in refusal.text
    assert (tmp_path / "AGENTS.md").read_text() == "Project rules.\n"


class RecordingStore:
    """A user's own session store: it redacts nothing, so the handler must."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.values.get(key)

    def get_entry(self, key: str) -> StoredSession | None:
        value = self.values.get(key)
        return None if value is None else StoredSession(value, None)

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)

    async def aget(self, key: str) -> dict[str, Any] | None:
        return self.get(key)

    async def aset(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        self.set(key, value)

    async def adelete(self, key: str) -> None:
        self.delete(key)


@USE_ASYNC
async def test_session_save_and_write_back_redact_before_saving(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    store = RecordingStore()
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    register_write_back(registry, MemoryWriter(backend, "/MEMORY.md"))
    model = ScriptedChatModel(
        script=[f"Deployed.\nINSIGHT: the new key is {STRIPE} and DB_PASSWORD={PASSWORD}"]
    )
    agent = create_agent(
        model,
        middleware=[
            MemoryMiddleware(
                backend=backend,
                layers=[Layer("notes", "/MEMORY.md", writable=True)],
                hooks=registry,
            )
        ],
    )
    config = build_thread_config("acme", "deploy")
    config["configurable"]["entity_name"] = "acme"
    payload = {"messages": [{"role": "user", "content": "deploy"}]}
    await agent.ainvoke(payload, config) if use_async else agent.invoke(payload, config)

    (saved,) = store.values.values()
    assert saved == {
        "last_message": "Deployed.\nINSIGHT: the new key is [REDACTED:stripe_key] and "
        "DB_PASSWORD=[REDACTED:password]"
    }
    memory = (tmp_path / "MEMORY.md").read_text()
    assert "[REDACTED:stripe_key]" in memory
    assert STRIPE not in memory
    assert PASSWORD not in memory


def test_the_note_goes_into_a_command_result_and_skips_errors() -> None:
    found = Redaction("", ("stripe_key",), 1)
    ok = ToolMessage(content="Updated file /MEMORY.md", tool_call_id="c1", name="write_file")
    failed = ToolMessage(content="Error: no such string", tool_call_id="c2", status="error")
    command = Command(update={"files": {}, "messages": [ok]})

    noted = note_redaction(command, found)
    assert isinstance(noted, Command)
    (message,) = noted.update["messages"]
    assert message.text.startswith("Updated file /MEMORY.md\n1 secret was redacted before saving")
    assert noted.update["files"] == {}
    assert note_redaction(failed, found) is failed
    assert note_redaction(ok, None) is ok


@USE_ASYNC
async def test_tiered_memory_pages_are_redacted_before_storing(use_async: bool) -> None:
    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    store = InMemoryStore()
    memory = TieredMemory(store, embeddings=LexicalEmbeddings())
    query, response = f"deploy with DB_PASSWORD={PASSWORD}", f"done; key {STRIPE}"
    if use_async:
        await memory.aadd_page("alice", query, response)
        (page,) = await memory.ashort_term("alice")
    else:
        memory.add_page("alice", query, response)
        (page,) = memory.short_term("alice")
    assert page.query == "deploy with DB_PASSWORD=[REDACTED:password]"
    assert page.response == "done; key [REDACTED:stripe_key]"
    stored = repr([item.value for item in store.search(())])
    assert PASSWORD not in stored
    assert STRIPE not in stored
