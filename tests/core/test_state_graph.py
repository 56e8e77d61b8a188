"""A hand-built LangGraph graph using the loading and rendering functions directly."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from layered_memory import Layer
from layered_memory.core.assembler import MemoryAssembler
from layered_memory.core.render import SessionEntry
from layered_memory.testing import ScriptedChatModel


class GraphState(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    memory_prompt: str
    touched: list[str]


def build_graph(assembler: MemoryAssembler, model: ScriptedChatModel, use_async: bool) -> Any:
    def load_memory(state: GraphState) -> dict[str, Any]:
        snapshot = assembler.load()
        return {"memory_prompt": assembler.render(snapshot, keys=state.get("touched", []))}

    async def aload_memory(state: GraphState) -> dict[str, Any]:
        snapshot = await assembler.aload()
        return {"memory_prompt": assembler.render(snapshot, keys=state.get("touched", []))}

    def call_model(state: GraphState) -> dict[str, Any]:
        system = SystemMessage(f"You are a graph.\n\n{state['memory_prompt']}")
        return {"messages": [model.invoke([system, *state["messages"]])]}

    graph = StateGraph(GraphState)
    graph.add_node("load_memory", aload_memory if use_async else load_memory)
    graph.add_node("call_model", call_model)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "call_model")
    graph.add_edge("call_model", END)
    return graph.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("use_async", [False, True])
async def test_graph_node_loads_and_renders_memory(tmp_path: Path, use_async: bool) -> None:
    (tmp_path / "AGENTS.md").write_text("GRAPH_FACT one")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "py.md").write_text('---\npaths: ["**/*.py"]\n---\nPY_RULE')
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/rules"],
    )
    model = ScriptedChatModel(script=["first", "second"])
    graph = build_graph(assembler, model, use_async)
    config = {"configurable": {"thread_id": "graph"}}
    payload = {"messages": [HumanMessage("hi")], "touched": ["/src/app.py"]}
    await graph.ainvoke(payload, config) if use_async else graph.invoke(payload, config)
    (tmp_path / "AGENTS.md").write_text("GRAPH_FACT two")
    payload = {"messages": [HumanMessage("again")], "touched": []}
    await graph.ainvoke(payload, config) if use_async else graph.invoke(payload, config)

    first, second = model.system_prompts
    assert "GRAPH_FACT one" in first
    assert "PY_RULE" in first
    assert "write it to /MEMORY.md" in first
    assert "GRAPH_FACT two" in second
    assert "PY_RULE" not in second


def test_render_is_cached_and_byte_identical(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x")
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md")],
    )
    first = assembler.render(assembler.load())
    second = assembler.render(assembler.load())
    assert first is second  # same object: not re-rendered


def test_render_parts_without_digest_sees_a_session_data_change(tmp_path: Path) -> None:
    """A public method never serves a stale block: only the session's data changed here."""
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assembler = MemoryAssembler(backend=backend, layers=[Layer("project", "/AGENTS.md")])
    files = {"/AGENTS.md": "Project."}
    first = assembler.render_parts(files, {}, SessionEntry("entity:a:b", {"step": 1}), ())
    second = assembler.render_parts(files, {}, SessionEntry("entity:a:b", {"step": 2}), ())
    assert '"step": 1' in first
    assert '"step": 2' in second
