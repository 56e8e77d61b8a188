"""Tool calls around the graph file: parallel changes of a graph kept in the agent state, a
read-only graph against the file tools and the shell, and the reloads after tools that may
have changed the file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.local_shell import LocalShellBackend
from deepagents.backends.utils import create_file_data
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from layered_memory.core.protection import ProtectedPaths, is_protected
from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware
from layered_memory.graph.middleware import GraphFile
from layered_memory.testing import ScriptedChatModel, tool_call

RUNTIME = SimpleNamespace(context=None)
ADA = '{"type":"entity","name":"Ada","entityType":"person","observations":[]}'


def _entity(name: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": []}


def _turn(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """One model turn asking for several tool calls at once."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"p{index}", "type": "tool_call"}
            for index, (name, args) in enumerate(calls)
        ],
    )


async def _invoke(agent: Any, payload: dict[str, Any], use_async: bool, **config: Any) -> Any:
    config.setdefault("configurable", {"thread_id": "t"})
    return await agent.ainvoke(payload, config) if use_async else agent.invoke(payload, config)


def _tool_results(result: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


def _state_file(result: dict[str, Any], path: str = "/memory.jsonl") -> str:
    content = result["files"][path]["content"]
    return "\n".join(content) if isinstance(content, list) else str(content)


def _names(text: str) -> list[str]:
    return [json.loads(line)["name"] for line in text.split("\n") if '"type":"entity"' in line]


# -- 1. a graph kept in the agent state: one change of the file per model turn ---------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_parallel_graph_writes_in_the_state_are_refused_not_lost(use_async: bool) -> None:
    backend = StateBackend()
    model = ScriptedChatModel(
        script=[
            _turn(
                ("create_entities", {"entities": [_entity("Ada")]}),
                ("create_entities", {"entities": [_entity("Bob")]}),
                ("search_nodes", {"query": "a"}),  # reading alongside is fine
            ),
            tool_call("create_entities", entities=[_entity("Bob")]),  # the model retries
            "done",
        ]
    )
    agent = create_agent(
        model,
        middleware=[
            FilesystemMiddleware(backend=backend),
            KnowledgeGraphMiddleware(backend=backend),
        ],
        checkpointer=InMemorySaver(),
    )

    result = await _invoke(agent, {"messages": [HumanMessage("go")]}, use_async)

    results = _tool_results(result)
    assert results["p0"].status == "success"
    assert results["p1"].status == "error"
    assert "same turn already changes the knowledge graph /memory.jsonl" in results["p1"].text
    assert "make this call again" in results["p1"].text
    assert results["p2"].status == "success"
    # Nothing reported as done was lost: Ada from the first turn, Bob from the retry.
    assert _names(_state_file(result)) == ["Ada", "Bob"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_file_tool_and_a_graph_tool_on_the_state_file_in_one_turn(
    use_async: bool,
) -> None:
    backend = CompositeBackend(default=StateBackend(), routes={})
    model = ScriptedChatModel(
        script=[
            _turn(
                ("write_file", {"file_path": "/notes.md", "content": "unrelated"}),
                ("write_file", {"file_path": "/memory.jsonl", "content": ADA}),
                ("add_observations", {"observations": [{"entityName": "Ada", "contents": ["x"]}]}),
            ),
            "done",
        ]
    )
    agent = create_agent(
        model,
        middleware=[
            FilesystemMiddleware(backend=backend),
            KnowledgeGraphMiddleware(backend=backend),
        ],
        checkpointer=InMemorySaver(),
    )

    result = await _invoke(agent, {"messages": [HumanMessage("go")]}, use_async)

    results = _tool_results(result)
    assert [results[i].status for i in ("p0", "p1", "p2")] == ["success", "success", "error"]
    assert "write_file in the same turn already changes" in results["p2"].text
    assert _state_file(result) == ADA
    assert _state_file(result, "/notes.md") == "unrelated"


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_graph_write_beside_a_subagent_in_the_state_is_refused(use_async: bool) -> None:
    # The subagent hands back every file as it found it before the turn: had the graph write
    # run, the subagent's files would have overwritten it.
    turn = _turn(
        ("create_entities", {"entities": [_entity("Ada")]}),
        ("task", {"description": "write notes", "subagent_type": "general-purpose"}),
    )
    model = ScriptedChatModel(
        script=[
            turn,
            tool_call("write_file", file_path="/notes.md", content="by the subagent"),
            "notes written",
            tool_call("create_entities", entities=[_entity("Ada")]),
            "done",
        ]
    )
    agent = create_deep_agent(
        model=model,
        middleware=[KnowledgeGraphMiddleware(backend=StateBackend())],
        checkpointer=InMemorySaver(),
    )
    payload = {
        "messages": [HumanMessage("go")],
        "files": {"/memory.jsonl": create_file_data(ADA.replace("Ada", "Bob"))},
    }

    result = await _invoke(agent, payload, use_async)

    results = _tool_results(result)
    assert results["p0"].status == "error"
    assert "subagent call (task)" in results["p0"].text
    assert results["p1"].status == "success"
    assert _names(_state_file(result)) == ["Bob", "Ada"]
    assert _state_file(result, "/notes.md") == "by the subagent"


@pytest.mark.parametrize("use_async", [False, True])
async def test_parallel_graph_writes_on_local_disk_are_all_kept(
    tmp_path: Path, use_async: bool
) -> None:
    # Outside the state every write is its own locked transaction: nothing to refuse.
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedChatModel(
        script=[
            _turn(
                ("create_entities", {"entities": [_entity("Ada")]}),
                ("create_entities", {"entities": [_entity("Bob")]}),
            ),
            "done",
        ]
    )
    agent = create_agent(model, middleware=[KnowledgeGraphMiddleware(backend=backend)])

    result = await _invoke(agent, {"messages": [HumanMessage("go")]}, use_async)

    assert [m.status for m in _tool_results(result).values()] == ["success", "success"]
    assert sorted(_names((tmp_path / "memory.jsonl").read_text(encoding="utf-8"))) == [
        "Ada",
        "Bob",
    ]


# -- 2. a read-only graph cannot be changed with the file tools or the shell -----------------


def _read_only_graph(root: Path, backend: Any = None) -> KnowledgeGraphMiddleware[Any, Any]:
    backend = backend or FilesystemBackend(root_dir=root, virtual_mode=True)
    KnowledgeGraph(backend).create_entities(
        [{"name": "Ada", "entityType": "person", "observations": ["trusted admin"]}]
    )
    (root / "sub").mkdir(exist_ok=True)
    return KnowledgeGraphMiddleware(backend=backend, read_only=True)


EVIL = '{"type":"entity","name":"Ada","entityType":"person","observations":["wire money"]}'
FILE_ATTACKS = {
    "write": ("write_file", {"file_path": "/memory.jsonl", "content": EVIL}),
    "alias": ("write_file", {"file_path": "/sub/../memory.jsonl", "content": EVIL}),
    "edit": (
        "edit_file",
        {"file_path": "/memory.jsonl", "old_string": "trusted admin", "new_string": "wire money"},
    ),
    "delete": ("delete", {"file_path": "/memory.jsonl"}),
}


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("attack", list(FILE_ATTACKS))
async def test_a_read_only_graph_refuses_the_file_tools(
    tmp_path: Path, attack: str, use_async: bool
) -> None:
    middleware = _read_only_graph(tmp_path)
    before = (tmp_path / "memory.jsonl").read_bytes()
    name, args = FILE_ATTACKS[attack]
    model = ScriptedChatModel(script=[_turn((name, args)), "done"])
    # The agent's file tools on the plain backend: the middleware's own hook refuses.
    agent = create_agent(
        model,
        middleware=[FilesystemMiddleware(backend=middleware.graph.backend), middleware],
    )

    result = await _invoke(agent, {"messages": [HumanMessage("go")]}, use_async)

    (message,) = _tool_results(result).values()
    assert message.status == "error"
    assert "read-only" in message.text
    assert (tmp_path / "memory.jsonl").read_bytes() == before


def test_the_protected_backend_refuses_every_change_of_a_read_only_graph(tmp_path: Path) -> None:
    middleware = _read_only_graph(tmp_path)
    view = middleware.protected_backend
    before = (tmp_path / "memory.jsonl").read_bytes()

    assert is_protected(view)
    assert isinstance(view, FilesystemBackend)
    assert list(middleware.protected_paths.files) == ["/memory.jsonl"]
    assert view.write("/memory.jsonl", EVIL).error is not None
    assert view.edit("/memory.jsonl", "trusted", "evil").error is not None
    assert view.delete("/memory.jsonl").error is not None
    assert view.upload_files([("/memory.jsonl", b"x")])[0].error == "permission_denied"
    assert view.write("/notes.md", "fine").error is None  # everything else stays writable
    assert (tmp_path / "memory.jsonl").read_bytes() == before
    writable = KnowledgeGraphMiddleware(backend=middleware.graph.backend)
    # Writable: nothing is refused; the graph file is a memory file (locked, redacted writes).
    assert writable.protected_paths == ProtectedPaths(redacted=frozenset({"/memory.jsonl"}))
    assert writable.protected_backend.edit("/memory.jsonl", "trusted", "changed").error is None


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_read_only_graph_survives_a_subagent_and_the_shell_on_the_protected_backend(
    tmp_path: Path, use_async: bool
) -> None:
    middleware = _read_only_graph(tmp_path, LocalShellBackend(root_dir=tmp_path))
    before = (tmp_path / "memory.jsonl").read_bytes()
    model = ScriptedChatModel(
        script=[
            tool_call("task", description="fix Ada", subagent_type="general-purpose"),
            # deepagents' general-purpose subagent has the file tools, not our middleware.
            tool_call("write_file", file_path="/memory.jsonl", content=EVIL),
            "could not",
            tool_call("execute", command=f"echo '{EVIL}' > memory.jsonl"),
            "done",
        ]
    )
    agent = create_deep_agent(
        model=model, backend=middleware.protected_backend, middleware=[middleware]
    )

    result = await _invoke(agent, {"messages": [HumanMessage("go")]}, use_async)

    assert (tmp_path / "memory.jsonl").read_bytes() == before
    shell = next(
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "execute"
    )
    assert "put back" in shell.text


# -- 3. reloads after tools that may have changed the file -----------------------------------


def _request(state: dict[str, Any], *messages: Any) -> ModelRequest[Any]:
    return ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[HumanMessage("what about ada?"), *messages],
        system_message=SystemMessage("Base."),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )


def _block(middleware: KnowledgeGraphMiddleware[Any, Any], request: ModelRequest[Any]) -> str:
    seen: list[ModelRequest[Any]] = []
    middleware.wrap_model_call(request, lambda r: seen.append(r) or AIMessage("ok"))  # type: ignore[arg-type,func-returns-value]
    system = seen[0].system_message
    assert system is not None
    return str(system.content_blocks[-1]["text"])


def _after(name: str, **args: Any) -> tuple[AIMessage, ToolMessage]:
    call = AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1"}])
    return call, ToolMessage("done", tool_call_id="c1", name=name)


@pytest.mark.parametrize(
    ("tool", "args", "reloads"),
    [
        ("write_file", {"file_path": "/memory.jsonl", "content": "..."}, True),
        ("edit_file", {"file_path": "/./memory.jsonl"}, True),
        ("delete", {"file_path": "/"}, True),  # a folder holding it
        ("execute", {"command": "sed -i ... memory.jsonl"}, True),
        ("task", {"description": "..."}, True),
        ("write_file", {"file_path": "/notes.md", "content": "..."}, False),
        ("read_file", {"file_path": "/memory.jsonl"}, False),
    ],
)
def test_the_next_model_call_reloads_after_a_tool_that_may_have_changed_the_file(
    tool: str, args: dict[str, Any], reloads: bool
) -> None:
    # A store-backed file: no stat signature, so only the tool can trigger the reload.
    backend = StoreBackend(namespace=lambda _: ("g",), store=InMemoryStore())
    KnowledgeGraph(backend).create_entities([_entity("Ada")])
    middleware = KnowledgeGraphMiddleware(backend=backend)
    state: dict[str, Any] = {"messages": []}
    state.update(middleware.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    KnowledgeGraph(backend).add_observations([{"entityName": "Ada", "contents": ["moved"]}])

    block = _block(middleware, _request(state, *_after(tool, **args)))

    assert ("moved" in block) is reloads


def test_a_local_file_changed_by_another_process_is_seen_by_the_next_model_call(
    tmp_path: Path,
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    KnowledgeGraph(backend).create_entities([_entity("Ada")])
    file = tmp_path / "memory.jsonl"
    _backdate(file, 60)
    middleware = KnowledgeGraphMiddleware(backend=backend)
    state: dict[str, Any] = {"messages": []}
    state.update(middleware.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    assert "moved" not in _block(middleware, _request(state))

    file.write_text(file.read_text(encoding="utf-8").replace("[]", '["moved"]'), encoding="utf-8")
    _backdate(file, 30)

    assert "moved" in _block(middleware, _request(state))


def _backdate(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_file_tool_writes_are_redacted_for_the_graph_file_under_any_alias_only(
    tmp_path: Path,
) -> None:
    (tmp_path / "memory.jsonl").write_text(ADA, encoding="utf-8")
    (tmp_path / "alias.jsonl").symlink_to(tmp_path / "memory.jsonl")
    graph_file = GraphFile.of(
        FilesystemBackend(root_dir=tmp_path, virtual_mode=True), "/memory.jsonl"
    )

    assert graph_file.access_of("/memory.jsonl") == ("graph", None)
    assert graph_file.access_of("/alias.jsonl") == ("graph", None)
    assert graph_file.access_of("/notes.md") == (None, None)  # other files are left alone
