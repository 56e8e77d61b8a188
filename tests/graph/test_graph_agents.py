"""Real agents with the scripted model: `create_agent` and `create_deep_agent`, beside
`MemoryMiddleware`, on a local file and in the agent state, with a read-only subagent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, StateBackend
from deepagents.backends.utils import create_file_data
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware, build_thread_config
from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware
from layered_memory.testing import ScriptedChatModel, system_text, tool_call

SEED = [
    {"name": "acme_corp", "entityType": "organization", "observations": ["Customer since 2021"]},
    {"name": "Jane_Doe", "entityType": "person", "observations": ["Head of IT at Acme"]},
]


def _answer_from_prompt(messages: list[BaseMessage]) -> str:
    prompt = system_text(messages)
    return "renewal known" if "Renewal due in March" in prompt else "renewal unknown"


async def _invoke(
    agent: Any, payload: dict[str, Any], config: dict[str, Any], use_async: bool
) -> Any:
    return await agent.ainvoke(payload, config) if use_async else agent.invoke(payload, config)


@pytest.mark.parametrize("use_async", [False, True])
async def test_create_agent_with_memory_and_graph_middleware(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "AGENTS.md").write_text("Project fact: QUOKKA\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    graph = KnowledgeGraph(backend)
    graph.create_entities(SEED)
    graph.create_relations([{"from": "Jane_Doe", "to": "acme_corp", "relationType": "works_at"}])
    model = ScriptedChatModel(
        script=[
            tool_call("search_nodes", query="acme"),
            tool_call(
                "add_observations",
                observations=[{"entityName": "acme_corp", "contents": ["Renewal due in March"]}],
            ),
            _answer_from_prompt,
        ]
    )
    agent = create_agent(
        model,
        middleware=[
            MemoryMiddleware(backend=backend, layers=[Layer("project", "/AGENTS.md")]),
            KnowledgeGraphMiddleware(backend=backend),
        ],
        checkpointer=InMemorySaver(),
    )

    result = await _invoke(
        agent,
        {"messages": [{"role": "user", "content": "When does the contract renew?"}]},
        build_thread_config("acme_corp", "support"),
        use_async,
    )

    first, second, third = model.system_prompts
    assert "Project fact: QUOKKA" in first  # MemoryMiddleware's block is there too
    assert '"name":"acme_corp"' in first  # the session key's entity is in focus
    assert '{"from":"Jane_Doe","to":"acme_corp","relationType":"works_at"}' in first
    assert 'Jane_Doe","entityType"' not in first  # a neighbour's own facts are not shown
    assert "Renewal due in March" not in second
    assert "Renewal due in March" in third  # seen by the very next model call
    assert result["messages"][-1].content == "renewal known"
    search = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert json.loads(str(search.content))["entities"][0]["name"] == "acme_corp"
    assert "Renewal due in March" in (tmp_path / "memory.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("use_async", [False, True])
async def test_deep_agent_keeps_the_graph_in_state_and_a_read_only_subagent(
    use_async: bool,
) -> None:
    initial = "\n".join(
        json.dumps({"type": "entity", **entity}, ensure_ascii=False, separators=(",", ":"))
        for entity in SEED
    )
    graph_middleware = KnowledgeGraphMiddleware(backend=StateBackend())
    model = ScriptedChatModel(
        script=[
            tool_call("task", description="Find out about Jane Doe", subagent_type="researcher"),
            # The subagent: it may read, but its attempt to delete is refused.
            tool_call("open_nodes", names=["Jane_Doe"]),
            tool_call("delete_entities", entityNames=["Jane_Doe"]),
            "Jane Doe heads IT at Acme.",
            # Back in the main agent.
            tool_call(
                "add_observations",
                observations=[{"entityName": "Jane_Doe", "contents": ["Renewal due in March"]}],
            ),
            _answer_from_prompt,
        ]
    )
    agent = create_deep_agent(
        model=model,
        memory=[],
        middleware=[
            MemoryMiddleware(backend=StateBackend(), layers=[Layer("project", "/AGENTS.md")]),
            graph_middleware,
        ],
        subagents=[
            {
                "name": "researcher",
                "description": "Researches people.",
                "system_prompt": "You research.",
                "middleware": [graph_middleware.read_only()],
            }
        ],
        checkpointer=InMemorySaver(),
    )

    result = await _invoke(
        agent,
        {
            "messages": [{"role": "user", "content": "What do we know about Jane Doe?"}],
            "files": {
                "/memory.jsonl": create_file_data(initial),
                "/AGENTS.md": create_file_data("Project fact: QUOKKA\n"),
            },
        },
        {"configurable": {"thread_id": f"deep-{use_async}"}},
        use_async,
    )

    prompts = model.system_prompts
    assert '"name":"Jane_Doe"' in prompts[0]  # named in the user message
    assert "Project fact: QUOKKA" in prompts[0]  # beside MemoryMiddleware
    assert "read-only" in prompts[1]  # the subagent's block
    assert result["messages"][-1].content == "renewal known"
    text = result["files"]["/memory.jsonl"]["content"]
    text = "\n".join(text) if isinstance(text, list) else text
    assert '"name":"Jane_Doe"' in text  # the subagent's delete never happened
    assert "Renewal due in March" in text
    assert text.startswith('{"type":"entity","name":"acme_corp"')


# Built from pieces so secret scanners do not flag this file.
GITHUB_TOKEN = "ghp_" + "x7Kq" * 9
PASSWORD = "hunter2" + "secret"


def _file_text(result: Any, backend: Any, root: Path) -> str:
    if isinstance(backend, StateBackend):
        text = result["files"]["/memory.jsonl"]["content"]
        return "\n".join(text) if isinstance(text, list) else str(text)
    return (root / "memory.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["disk", "state"])
@pytest.mark.parametrize("tool", ["edit_file", "write_file"])
async def test_the_agents_file_tools_cannot_write_a_secret_into_the_graph_file(
    tmp_path: Path, use_async: bool, kind: str, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend: Any = (
        FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
        if kind == "disk"
        else StateBackend()
    )
    entity = {"type": "entity", "name": "Ops", "entityType": "team", "observations": ["TBD"]}
    initial = json.dumps(entity, separators=(",", ":"))
    if tool == "edit_file":
        call = tool_call(
            "edit_file",
            file_path="/memory.jsonl",
            old_string="TBD",
            new_string=f"deploy key {GITHUB_TOKEN}",
        )
    else:  # a new graph file, written whole
        initial = ""
        entity["observations"] = [f"password={PASSWORD}"]
        call = tool_call("write_file", file_path="/memory.jsonl", content=json.dumps(entity) + "\n")
    if initial and kind == "disk":
        (tmp_path / "memory.jsonl").write_text(initial, encoding="utf-8")
    model = ScriptedChatModel(script=[call, "done"])
    agent = create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[KnowledgeGraphMiddleware(backend=backend)],
        checkpointer=InMemorySaver(),
    )
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "Note the Ops key."}]}
    if initial and kind == "state":
        payload["files"] = {"/memory.jsonl": create_file_data(initial)}

    result = await _invoke(
        agent, payload, {"configurable": {"thread_id": f"{tool}-{kind}-{use_async}"}}, use_async
    )

    text = _file_text(result, backend, tmp_path)
    reply = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert reply.status != "error", reply.content
    assert GITHUB_TOKEN not in text
    assert PASSWORD not in text
    assert "[REDACTED:" in text
    assert "redacted before saving" in str(reply.content)
    assert '"name":"Ops"' in model.system_prompts[1]  # the file still parses: Ops is in focus
    assert "[REDACTED:" in model.system_prompts[1]
    assert GITHUB_TOKEN not in caplog.text
    assert PASSWORD not in caplog.text
