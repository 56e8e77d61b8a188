"""Clean-context helpers in real LangGraph graphs with parallel branches."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from layered_memory import build_thread_config
from layered_memory.sessions.fanout import (
    MemoryContextError,
    current_memory,
    fan_out,
    memory_context,
)

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])

PROMPT = "<agent_memory>Always cite sources.</agent_memory>"


# -- the context variable -------------------------------------------------------------------


def test_current_memory_outside_a_context_raises() -> None:
    with pytest.raises(MemoryContextError, match="memory_context"):
        current_memory()
    assert isinstance(MemoryContextError("x"), LookupError)
    assert current_memory(default=None) is None


def test_memory_contexts_nest_and_restore_even_on_error() -> None:
    with memory_context("outer") as bound:
        assert bound == "outer"
        seen: list[object] = []

        def fail_inside() -> None:
            with memory_context("inner"):
                seen.append(current_memory())
                raise RuntimeError

        with pytest.raises(RuntimeError):
            fail_inside()
        assert seen == ["inner"]
        assert current_memory() == "outer"
    assert current_memory(default="unbound") == "unbound"


# -- parallel branches reading the memory with a plain (state) -> dict signature ------------


class ParallelState(TypedDict):
    topic: str
    seen: Annotated[list[tuple[str, str]], operator.add]


def _reader(name: str) -> Any:
    def node(state: ParallelState) -> dict[str, Any]:
        return {"seen": [(name, current_memory())]}

    return node


def _areader(name: str) -> Any:
    async def node(state: ParallelState) -> dict[str, Any]:
        return {"seen": [(name, current_memory())]}

    return node


def _parallel_graph(*, async_nodes: bool) -> Any:
    make = _areader if async_nodes else _reader
    builder = StateGraph(ParallelState)
    for name in ("left", "right", "join"):
        builder.add_node(name, make(name))
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_edge("join", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize(
    ("use_async", "async_nodes"),
    [(False, False), (True, False), (True, True)],
    ids=["invoke", "ainvoke-sync_nodes", "ainvoke-async_nodes"],
)
async def test_parallel_branches_see_the_bound_memory(use_async: bool, async_nodes: bool) -> None:
    graph = _parallel_graph(async_nodes=async_nodes)
    config = build_thread_config("acme", "research")
    with memory_context(PROMPT):
        if use_async:
            result = await graph.ainvoke({"topic": "t", "seen": []}, config)
        else:
            result = graph.invoke({"topic": "t", "seen": []}, config)
    assert sorted(result["seen"]) == [
        ("join", PROMPT),
        ("left", PROMPT),
        ("right", PROMPT),
    ]
    assert current_memory(default=None) is None, "the binding ends with the block"


def test_stream_sees_the_bound_memory() -> None:
    graph = _parallel_graph(async_nodes=False)
    with memory_context(PROMPT):
        chunks = list(
            graph.stream({"topic": "t", "seen": []}, build_thread_config("acme", "research"))
        )
    memories = {
        memory for chunk in chunks for update in chunk.values() for _, memory in update["seen"]
    }
    assert memories == {PROMPT}


async def test_concurrent_runs_each_see_their_own_memory() -> None:
    graph = _parallel_graph(async_nodes=True)

    async def run(entity: str) -> set[str]:
        with memory_context(f"memory of {entity}"):
            result = await graph.ainvoke(
                {"topic": entity, "seen": []}, build_thread_config(entity, "research")
            )
        return {memory for _, memory in result["seen"]}

    first, second = await asyncio.gather(run("acme"), run("globex"))
    assert first == {"memory of acme"}
    assert second == {"memory of globex"}


def test_node_run_without_a_binding_fails_clearly() -> None:
    graph = _parallel_graph(async_nodes=False)
    with pytest.raises(MemoryContextError):
        graph.invoke({"topic": "t", "seen": []}, build_thread_config("acme", "research"))


# -- clean-context fan-out with Send --------------------------------------------------------


class MapState(TypedDict):
    items: list[str]
    results: Annotated[list[dict[str, Any]], operator.add]


def _map_graph() -> Any:
    def seed(state: MapState) -> dict[str, Any]:
        return {"results": [{"item": "seed", "keys": []}]}

    def route(state: MapState) -> list[Send]:
        return fan_out(
            "worker",
            state["items"],
            memory=current_memory(),
            extra={"session_key": "entity:acme:research"},
        )

    def worker(state: dict[str, Any]) -> dict[str, Any]:
        memory = state["memory"]
        memory["notes"].append(state["item"])  # must not leak into sibling branches
        return {
            "results": [
                {
                    "item": state["item"],
                    "keys": sorted(state),
                    "notes": list(memory["notes"]),
                    "session_key": state["session_key"],
                }
            ]
        }

    builder = StateGraph(MapState)
    builder.add_node("seed", seed)
    builder.add_node("worker", worker)
    builder.add_edge(START, "seed")
    builder.add_conditional_edges("seed", route, ["worker"])
    builder.add_edge("worker", END)
    return builder.compile(checkpointer=InMemorySaver())


@USE_ASYNC
async def test_fan_out_branches_get_only_their_item_and_the_memory(use_async: bool) -> None:
    memory = {"prompt": PROMPT, "notes": ["base"]}
    graph = _map_graph()
    config = build_thread_config("acme", "research")
    with memory_context(memory):
        if use_async:
            result = await graph.ainvoke({"items": ["a", "b", "c"], "results": []}, config)
        else:
            result = graph.invoke({"items": ["a", "b", "c"], "results": []}, config)

    branches = sorted(
        (r for r in result["results"] if r["item"] != "seed"), key=lambda r: r["item"]
    )
    assert [b["item"] for b in branches] == ["a", "b", "c"]
    for branch in branches:
        assert branch["keys"] == ["item", "memory", "session_key"], "no parent state, no results"
        assert branch["notes"] == ["base", branch["item"]], "each branch has a private copy"
        assert branch["session_key"] == "entity:acme:research"
    assert memory == {"prompt": PROMPT, "notes": ["base"]}, "the caller's memory is untouched"


def test_fan_out_payloads() -> None:
    sends = fan_out("worker", ["x", "y"], memory=PROMPT, item_key="doc", memory_key="ctx")
    assert [(s.node, s.arg) for s in sends] == [
        ("worker", {"ctx": PROMPT, "doc": "x"}),
        ("worker", {"ctx": PROMPT, "doc": "y"}),
    ]
    assert sends[0].arg["ctx"] is PROMPT, "immutable memory is shared, not copied"
    assert fan_out("worker", [], memory=PROMPT) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"item_key": "k", "memory_key": "k"}, "must differ"),
        ({"extra": {"memory": 1}}, "must not contain"),
        ({"extra": {"item": 1}}, "must not contain"),
    ],
)
def test_fan_out_rejects_colliding_keys(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fan_out("worker", ["x"], memory=PROMPT, **kwargs)
