"""How the middleware sits in a deep agent: the prompt-caching slot and read-only subagents."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call


class RecordingAnthropic(ChatAnthropic):
    """A real `ChatAnthropic` (so caching middleware engages) that answers from a script."""

    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self._seen.append(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="ok"))])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        return self._generate(messages)


def system_blocks(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    system = next(m for m in messages if isinstance(m, SystemMessage))
    assert isinstance(system.content, list)
    return [block for block in system.content if isinstance(block, dict)]


@pytest.fixture
def backend(tmp_path: Path) -> FilesystemBackend:
    (tmp_path / "AGENTS.md").write_text("Project fact: QUOKKA")
    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


def layered(backend: FilesystemBackend, **kwargs: Any) -> MemoryMiddleware:
    return MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        **kwargs,
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_memory_slot_puts_memory_after_the_cache_breakpoint(
    backend: FilesystemBackend, use_async: bool
) -> None:
    model = RecordingAnthropic(model_name="claude-sonnet-4-5", api_key="sk-ant-test")  # type: ignore[call-arg,arg-type]
    agent = create_deep_agent(
        model=model,
        backend=backend,
        system_prompt="STATIC BASE PROMPT",
        memory=[],  # opens deepagents' memory slot; ours takes it by name
        middleware=[layered(backend, add_cache_control=True)],
    )
    payload = {"messages": [{"role": "user", "content": "hi"}]}
    await agent.ainvoke(payload) if use_async else agent.invoke(payload)
    blocks = system_blocks(model._seen[0])
    memory_index = next(i for i, b in enumerate(blocks) if "<agent_memory>" in b.get("text", ""))
    base_index = next(i for i, b in enumerate(blocks) if "STATIC BASE PROMPT" in b.get("text", ""))
    # The static prompt keeps its own breakpoint, and memory comes after it, so editing
    # memory never invalidates the cached static prefix.
    assert base_index < memory_index
    assert blocks[memory_index - 1].get("cache_control") is not None
    assert "QUOKKA" not in "".join(b.get("text", "") for b in blocks[:memory_index])
    assert blocks[memory_index].get("cache_control") == {"type": "ephemeral"}


def test_without_the_slot_memory_lands_before_the_breakpoint(backend: FilesystemBackend) -> None:
    """What the docs warn against: as plain user middleware, the breakpoint moves onto the
    memory block, so the static prompt has no breakpoint of its own."""
    model = RecordingAnthropic(model_name="claude-sonnet-4-5", api_key="sk-ant-test")  # type: ignore[call-arg,arg-type]
    agent = create_deep_agent(
        model=model,
        backend=backend,
        system_prompt="STATIC BASE PROMPT",
        middleware=[layered(backend)],
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    blocks = system_blocks(model._seen[0])
    base = next(b for b in blocks if "STATIC BASE PROMPT" in b.get("text", ""))
    assert "cache_control" not in base
    assert "cache_control" in blocks[-1]
    assert "<agent_memory>" in blocks[-1]["text"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_subagents_get_the_same_memory_read_only(
    backend: FilesystemBackend, tmp_path: Path, use_async: bool
) -> None:
    parent_memory = layered(backend)
    model = ScriptedChatModel(
        script=[
            tool_call("task", description="look around", subagent_type="researcher"),
            # the subagent's turns:
            tool_call("edit_file", file_path="/MEMORY.md", old_string="# Memory\n", new_string="x"),
            "subagent done",
            # back in the parent:
            "parent done",
        ]
    )
    agent = create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[parent_memory],
        subagents=[
            {
                "name": "researcher",
                "description": "Researches things.",
                "system_prompt": "You research.",
                "middleware": [parent_memory.read_only()],
            }
        ],
        checkpointer=InMemorySaver(),
    )
    payload = {"messages": [{"role": "user", "content": "go"}]}
    config = {"configurable": {"thread_id": f"sub-{use_async}"}}
    await agent.ainvoke(payload, config) if use_async else agent.invoke(payload, config)
    parent_prompt, subagent_prompt, subagent_second, _ = model.system_prompts
    assert '<layer name="notes" path="/MEMORY.md" access="writable">' in parent_prompt
    assert "Project fact: QUOKKA" in subagent_prompt
    assert '<layer name="notes" path="/MEMORY.md" access="read-only">' in subagent_prompt
    refusal = next(
        m for m in model.prompts[2] if isinstance(m, ToolMessage) and m.name == "edit_file"
    )
    assert refusal.status == "error"
    assert "read-only memory layer 'notes'" in refusal.text
    assert "QUOKKA" in subagent_second
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n"


def end_of_run_nodes(agent: Any) -> list[str]:
    """The end-of-run nodes of memory (deepagents adds its own for other middleware)."""
    return sorted(
        node
        for node in agent.get_graph().nodes
        if node in ("MemoryMiddleware.after_agent", "Custom.after_agent", "EndOfRun.after_agent")
    )


@pytest.mark.parametrize("build", ["create_agent", "create_deep_agent"])
def test_the_graph_has_an_end_of_run_node_only_with_write_back(
    backend: FilesystemBackend, build: str
) -> None:
    """Without hooks or a consolidator the end-of-run node would do nothing at every run."""
    from langchain.agents import create_agent

    from layered_memory import HookEvent, HookRegistry, MemoryConsolidator

    def agent(memory: MemoryMiddleware) -> Any:
        model = ScriptedChatModel(script=["done"])
        if build == "create_agent":
            return create_agent(model=model, middleware=[memory])
        return create_deep_agent(model=model, backend=backend, middleware=[memory])

    class Custom(MemoryMiddleware):  # type: ignore[type-arg]
        pass

    drop_in = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    assert end_of_run_nodes(agent(drop_in)) == []
    assert end_of_run_nodes(agent(layered(backend))) == []
    custom = Custom(backend=backend, sources=["/AGENTS.md"])
    assert end_of_run_nodes(agent(custom)) == []
    assert (type(custom), custom.name) == (Custom, "Custom")

    class OwnEnd(MemoryMiddleware):  # type: ignore[type-arg]
        def after_agent(self, *args: Any, **kwargs: Any) -> None:
            return None

    own_end = OwnEnd(backend=backend, sources=["/AGENTS.md"])
    assert "OwnEnd.after_agent" in agent(own_end).get_graph().nodes  # a user's hook is kept

    ended: list[str] = []
    hooks = HookRegistry()
    hooks.register(
        HookEvent.PIPELINE_END, lambda _event, data: ended.append(data["thread_id"]), name="end"
    )
    hooked = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], hooks=hooks)
    assert isinstance(hooked, MemoryMiddleware)
    assert type(hooked) is hooked.__class__  # chosen at construction, never re-classed
    graph = agent(hooked)
    assert end_of_run_nodes(graph) == ["MemoryMiddleware.after_agent"]
    graph.invoke(
        {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t1"}}
    )
    assert ended == ["t1"]  # write-back still happens
    assert end_of_run_nodes(agent(hooked.read_only())) == []  # a subagent's twin fires nothing

    consolidator = MemoryConsolidator(ScriptedChatModel(script=[]), backend=backend)
    consolidating = layered(backend, consolidator=consolidator)
    assert end_of_run_nodes(agent(consolidating)) == ["MemoryMiddleware.after_agent"]


def test_end_of_run_is_a_middleware_of_its_own(backend: FilesystemBackend) -> None:
    """Beside a memory middleware that has no hooks (or any other), `EndOfRun` is the node."""
    from langchain.agents import create_agent

    from layered_memory import HookEvent, HookRegistry
    from layered_memory.writeback.hooks import EndOfRun

    ended: list[str] = []
    hooks = HookRegistry()
    hooks.register(
        HookEvent.PIPELINE_END, lambda _event, data: ended.append(data["thread_id"]), name="end"
    )
    agent = create_agent(
        model=ScriptedChatModel(script=["done"]),
        middleware=[layered(backend), EndOfRun(hooks=hooks)],
    )
    assert end_of_run_nodes(agent) == ["EndOfRun.after_agent"]
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t2"}}
    )
    assert ended == ["t2"]


def unreachable_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "protected_backend" in record.getMessage()
    ]


def tool_texts(result: dict[str, Any]) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("use_async", [False, True])
async def test_memory_out_of_the_tools_reach_is_named_once(
    backend: FilesystemBackend, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 26: without `backend=`, deepagents gives the tools a `StateBackend`, which answers
    the agent's edit of the MEMORY.md the middleware loaded with "File not found"; nothing
    said why. Now one warning per file names the fix, and the model is told."""
    memory = layered(backend)
    edit = {"file_path": "/MEMORY.md", "old_string": "# Memory", "new_string": "# Mine"}
    model = ScriptedChatModel(
        script=[
            tool_call("edit_file", **edit),
            tool_call("read_file", file_path="/MEMORY.md"),
            tool_call("edit_file", **edit),
            "done",
            tool_call("edit_file", **edit),  # the second run
            "done",
        ]
    )
    agent = create_deep_agent(model=model, memory=[], middleware=[memory])  # no backend=
    payload = {"messages": [{"role": "user", "content": "remember"}]}
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        result = await agent.ainvoke(payload) if use_async else agent.invoke(payload)
        again = await agent.ainvoke(payload) if use_async else agent.invoke(payload)
    warnings = unreachable_warnings(caplog)
    assert len(warnings) == 1, warnings  # one per file and middleware, not one per call or run
    assert "/MEMORY.md" in warnings[0]
    assert "create_deep_agent(..., backend=memory.protected_backend)" in warnings[0]
    texts = tool_texts(result)
    assert len(texts) == 3
    for text in texts:
        assert text.startswith("Error: File '/MEMORY.md' not found")  # deepagents' own answer
        assert "/MEMORY.md is memory loaded for this agent from another backend" in text
    assert tool_texts(again) == texts[:1]
    assert (Path(backend.cwd) / "MEMORY.md").read_text() == "# Memory\n"


def test_memory_in_the_tools_reach_warns_nothing(
    backend: FilesystemBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The same backend (the fix): the edit lands; a text not in the file ("String not
    found") and a memory file deleted mid-run ("not found" is the truth) warn nothing."""
    memory = layered(backend)

    def delete_then_read(messages: list[BaseMessage]) -> AIMessage:
        (Path(backend.cwd) / "MEMORY.md").unlink()
        return tool_call("read_file", file_path="/MEMORY.md")

    edit = {"file_path": "/MEMORY.md", "old_string": "# Memory", "new_string": "# Mine"}
    model = ScriptedChatModel(
        script=[
            tool_call("edit_file", **edit),
            tool_call("edit_file", **edit),  # "# Memory" is gone: String not found
            delete_then_read,
            "done",
        ]
    )
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        result = agent.invoke({"messages": [{"role": "user", "content": "remember"}]})
    texts = tool_texts(result)
    assert texts[0].startswith("Successfully replaced")
    assert texts[1].startswith("Error: String not found")
    assert texts[2] == "Error: File '/MEMORY.md' not found"
    assert unreachable_warnings(caplog) == []


def test_a_memory_file_that_says_not_found_warns_nothing(
    backend: FilesystemBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """Only deepagents' whole error answer counts: a memory file read back whose text says
    "not found" is content, not a miss (the model must not be told its edits go nowhere)."""
    (Path(backend.cwd) / "MEMORY.md").write_text("# Memory\nThe API answers 404 not found.\n")
    memory = layered(backend)
    model = ScriptedChatModel(script=[tool_call("read_file", file_path="/MEMORY.md"), "done"])
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        result = agent.invoke({"messages": [{"role": "user", "content": "read"}]})
    (text,) = tool_texts(result)
    assert "404 not found" in text
    assert "another backend" not in text
    assert unreachable_warnings(caplog) == []


def test_hooks_set_after_construction_are_refused(backend: FilesystemBackend) -> None:
    """`memory.hooks = registry` could not give an agent its end-of-run node: an error naming
    the fix, never a registry that silently never fires (issue 34)."""
    from layered_memory import HookRegistry, MemoryConsolidator

    memory = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    with pytest.raises(AttributeError, match=r"pass it as MemoryMiddleware\(\.\.\., hooks="):
        memory.hooks = HookRegistry()  # type: ignore[misc]
    consolidator = MemoryConsolidator(ScriptedChatModel(script=[]), backend=backend)
    with pytest.raises(AttributeError, match="consolidator is fixed at construction"):
        memory.consolidator = consolidator  # type: ignore[misc]
    assert (memory.hooks, memory.consolidator) == (None, None)
