"""End to end: real agents, a scripted model, every backend, sync and async.

One scenario per (integration, backend, sync/async):
  invocation 1: the agent tries to edit the read-only AGENTS.md (refused, file untouched),
                edits its writable MEMORY.md, and answers;
  between:      AGENTS.md changes outside the agent;
  invocation 2: the same checkpointed thread answers again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.utils import create_file_data
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

AGENTS = "/AGENTS.md"
MEMORY = "/memories/MEMORY.md"


def memory_block(system_prompt: str) -> str:
    start = system_prompt.index("<agent_memory>")
    return system_prompt[start : system_prompt.index("</memory_guidelines>", start)]


@dataclass
class Files:
    """Seeds, changes and reads memory files wherever a backend keeps them."""

    kind: str
    tmp_path: Path
    store: InMemoryStore = field(default_factory=InMemoryStore)
    backend: Any = None

    def __post_init__(self) -> None:
        store_backend = StoreBackend(namespace=lambda _rt: ("memory",), store=self.store)
        self.backend = {
            "filesystem": lambda: FilesystemBackend(root_dir=self.tmp_path, virtual_mode=True),
            "state": StateBackend,
            "store": lambda: store_backend,
            "composite": lambda: CompositeBackend(
                default=StateBackend(), routes={"/memories/": store_backend}
            ),
        }[self.kind]()

    def _home(self, path: str) -> str:
        if self.kind == "filesystem":
            return "disk"
        if self.kind == "store" or (self.kind == "composite" and path.startswith("/memories/")):
            return "store"
        return "state"

    def _store_key(self, path: str) -> str:
        return path.removeprefix("/memories") if self.kind == "composite" else path

    def write(self, path: str, text: str) -> dict[str, Any]:
        """Write `path`; returns what to add to the next invoke input (state-kept files)."""
        home = self._home(path)
        if home == "disk":
            target = self.tmp_path / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        elif home == "store":
            self.store.put(("memory",), self._store_key(path), dict(create_file_data(text)))
        else:
            return {path: create_file_data(text)}
        return {}

    def read(self, path: str, final_state: dict[str, Any]) -> str:
        home = self._home(path)
        if home == "disk":
            return (self.tmp_path / path.lstrip("/")).read_text(encoding="utf-8")
        if home == "store":
            item = self.store.get(("memory",), self._store_key(path))
            assert item is not None
            return str(item.value["content"])
        return str(final_state["files"][path]["content"])


def build(integration: str, model: Any, middleware: MemoryMiddleware, backend: Any) -> Any:
    if integration == "deep_agent":
        return create_deep_agent(
            model=model,
            backend=backend,
            memory=[],
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
    return create_agent(
        model,
        tools=[],
        middleware=[FilesystemMiddleware(backend=backend), middleware],
        checkpointer=InMemorySaver(),
    )


async def invoke(agent: Any, payload: dict[str, Any], config: Any, use_async: bool) -> Any:
    if use_async:
        return await agent.ainvoke(payload, config)
    return agent.invoke(payload, config)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["filesystem", "state", "store", "composite"])
@pytest.mark.parametrize("integration", ["deep_agent", "create_agent"])
async def test_layered_memory_end_to_end(
    tmp_path: Path, integration: str, kind: str, use_async: bool
) -> None:
    files = Files(kind, tmp_path)
    seeded = {
        **files.write(AGENTS, "Test command: `make test`"),
        **files.write(MEMORY, "# Memory\n"),
    }
    model = ScriptedChatModel(
        script=[
            tool_call("edit_file", file_path=AGENTS, old_string="make test", new_string="rm -rf"),
            tool_call(
                "edit_file",
                file_path=MEMORY,
                old_string="# Memory\n",
                new_string="# Memory\n- FACT_A\n",
            ),
            "done",
            "second run",
        ]
    )
    middleware = MemoryMiddleware(
        backend=files.backend,
        layers=[Layer("project", AGENTS), Layer("notes", MEMORY, writable=True)],
    )
    agent = build(integration, model, middleware, files.backend)
    config = {"configurable": {"thread_id": f"t-{integration}-{kind}-{use_async}"}}
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    if seeded:
        payload["files"] = seeded
    first = await invoke(agent, payload, config, use_async)

    prompts = model.system_prompts
    assert len(prompts) == 3
    assert "Test command: `make test`" in prompts[0]
    assert f'<layer name="project" path="{AGENTS}" access="read-only">' in prompts[0]
    assert f'<layer name="notes" path="{MEMORY}" access="writable">' in prompts[0]
    # The refused edit changed nothing: same memory, byte for byte (prompt cache friendly).
    assert memory_block(prompts[0]) == memory_block(prompts[1])
    refusal = next(m for m in first["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error"
    assert "read-only memory layer 'project'" in refusal.text
    assert files.read(AGENTS, first) == "Test command: `make test`"
    # The agent's own edit is in the very next model call.
    assert "FACT_A" not in memory_block(prompts[1])
    assert "# Memory\n- FACT_A" in memory_block(prompts[2])
    assert files.read(MEMORY, first) == "# Memory\n- FACT_A\n"

    changed = files.write(AGENTS, "Test command: `make check`")
    payload = {"messages": [{"role": "user", "content": "again"}]}
    if changed:
        payload["files"] = changed
    await invoke(agent, payload, config, use_async)
    assert "Test command: `make check`" in model.system_prompts[3]
    assert "make test" not in memory_block(model.system_prompts[3])
