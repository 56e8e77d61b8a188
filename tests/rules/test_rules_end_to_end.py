"""Rule files in a real deep agent: matched by touched paths and by run context."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware, MemoryOptions
from layered_memory.testing import ScriptedChatModel, tool_call

RULES = {
    "python.md": '---\nname: python-style\npaths: ["**/*.py"]\n---\nPYTHON_RULE: use type hints.',
    "docs.md": '---\nname: docs-style\npaths: ["docs/**"]\n---\nDOCS_RULE: short sentences.',
    "acme.md": '---\nname: acme\npaths: ["*acme*"]\n---\nACME_RULE: acme wants invoices in EUR.',
    "always.md": "ALWAYS_RULE: be kind.",
}


class EntityContext(TypedDict, total=False):
    entity_name: str


@pytest.fixture
def backend(tmp_path: Path) -> FilesystemBackend:
    (tmp_path / "AGENTS.md").write_text("project memory")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    rules = tmp_path / "rules"
    (rules / "nested").mkdir(parents=True)
    for name, text in RULES.items():
        (rules / ("nested" if name == "docs.md" else "") / name).write_text(text)
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


def agent_for(backend: FilesystemBackend, model: ScriptedChatModel) -> Any:
    middleware = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md")],
        rules=["/rules"],
        match_keys=("entity_name",),
    )
    return create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        context_schema=EntityContext,
    )


async def run(agent: Any, text: str, use_async: bool, **kwargs: Any) -> Any:
    payload = {"messages": [{"role": "user", "content": text}]}
    if use_async:
        return await agent.ainvoke(payload, **kwargs)
    return agent.invoke(payload, **kwargs)


@pytest.mark.parametrize("use_async", [False, True])
async def test_reading_a_python_file_brings_in_the_python_rule(
    backend: FilesystemBackend, use_async: bool
) -> None:
    model = ScriptedChatModel(
        script=[tool_call("read_file", file_path="/src/app.py"), "read it", "second turn"]
    )
    agent = agent_for(backend, model)
    config = {"configurable": {"thread_id": f"py-{use_async}"}}
    await run(agent, "look at app.py", use_async, config=config)
    before, after = model.system_prompts
    assert "ALWAYS_RULE" in before
    assert "PYTHON_RULE" not in before
    assert "PYTHON_RULE" in after
    assert "DOCS_RULE" not in after
    assert "ACME_RULE" not in after
    # Touched paths are kept in the checkpointed thread: the next invocation still has the rule.
    await run(agent, "anything else?", use_async, config=config)
    assert "PYTHON_RULE" in model.system_prompts[2]


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("channel", ["config", "context"])
async def test_entity_name_selects_the_acme_rule(
    backend: FilesystemBackend, use_async: bool, channel: str
) -> None:
    for entity, expected in (("acme_corp", True), ("globex", False)):
        model = ScriptedChatModel(script=["answer"])
        agent = agent_for(backend, model)
        config: dict[str, Any] = {"configurable": {"thread_id": f"{entity}-{use_async}"}}
        kwargs: dict[str, Any] = {"config": config}
        if channel == "config":
            config["configurable"]["entity_name"] = entity
        else:
            kwargs["context"] = {"entity_name": entity}
        await run(agent, "hello", use_async, **kwargs)
        assert ("ACME_RULE" in model.system_prompts[0]) is expected, entity
        assert "PYTHON_RULE" not in model.system_prompts[0]


def test_broken_rule_file_is_skipped_and_the_run_goes_on(
    backend: FilesystemBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rules" / "broken.md").write_text("---\npaths: [unclosed\n---\nBROKEN_RULE")
    model = ScriptedChatModel(script=["fine"])
    agent = agent_for(backend, model)
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]},
        {"configurable": {"thread_id": "broken"}},
    )
    assert "BROKEN_RULE" not in model.system_prompts[0]
    assert "ALWAYS_RULE" in model.system_prompts[0]
    assert any("/rules/broken.md" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("use_async", [False, True])
async def test_middleware_fires_every_event_in_order(
    backend: FilesystemBackend, use_async: bool
) -> None:
    from layered_memory import HookEvent, HookRegistry

    seen: list[tuple[str, Any]] = []
    registry = HookRegistry()
    for event in HookEvent:
        registry.register(
            event,
            lambda event, data: seen.append((str(event), data)),
            name=f"record-{event}",
        )
    model = ScriptedChatModel(script=[tool_call("read_file", file_path="/src/app.py"), "done"])
    middleware = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/rules"], hooks=registry
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[middleware])
    await run(agent, "go", use_async)
    names = [name for name, _ in seen]
    assert names == [
        HookEvent.PIPELINE_START,
        HookEvent.MEMORY_LOADED,
        HookEvent.RULES_MATCHED,
        HookEvent.RULES_MATCHED,
        HookEvent.PIPELINE_END,
    ]
    loaded = seen[1][1]
    assert loaded["paths"] == ["/AGENTS.md"]
    assert len(loaded["rule_files"]) == 4
    first_match, second_match = seen[2][1], seen[3][1]
    assert "python-style" not in first_match["applied"]
    assert "python-style" in second_match["applied"]
    assert "/src/app.py" in second_match["keys"]
    end = seen[4][1]
    assert end["messages"][-1].text == "done"
    assert "config" in end
    assert "thread_id" in end


def test_list_unmatched_rules_lists_scoped_rules_for_the_agent(backend: FilesystemBackend) -> None:
    seen = {}
    for listed in (False, True):
        middleware = MemoryMiddleware(
            backend=backend,
            layers=[Layer("project", "/AGENTS.md")],
            rules=["/rules"],
            options=MemoryOptions(list_unmatched_rules=listed),
        )
        model = ScriptedChatModel(script=["done"])
        agent = create_deep_agent(
            model=model, backend=backend, memory=[], middleware=[middleware.read_only()]
        )
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
        seen[listed] = model.system_prompts[-1]
    assert "PYTHON_RULE" not in seen[True]  # listed, not injected
    assert "python-style" not in seen[False]
    assert "- python-style (path: /rules/python.md)" in seen[True]
