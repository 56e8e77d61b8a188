"""Every model call reports the memory it was given: the custom stream, the trace, inspect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("Project conventions: use uv.\n")
    (tmp_path / "MEMORY.md").write_text("- the user prefers short answers\n" * 400)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "always.md").write_text("Answer in English.\n")
    (rules / "python.md").write_text('---\npaths: ["**/*.py"]\n---\nType every function.\n')
    (rules / "billing.md").write_text(
        "---\nalwaysApply: false\ndescription: billing terms\n---\nNet 30.\n"
    )
    return tmp_path


def _middleware(root: Path, **kwargs: Any) -> MemoryMiddleware[Any, Any]:
    return MemoryMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        layers=[
            Layer("project", "/AGENTS.md"),
            Layer("notes", "/MEMORY.md", writable=True, max_chars=2_000),
        ],
        rules=["/rules"],
        match_keys=("topic",),
        **kwargs,
    )


def _agent(root: Path, model: ScriptedChatModel) -> Any:
    return create_agent(
        model, tools=[], middleware=[_middleware(root)], checkpointer=InMemorySaver()
    )


def _memory_chunks(chunks: list[Any]) -> list[dict[str, Any]]:
    return [chunk["memory"] for chunk in chunks if isinstance(chunk, dict) and "memory" in chunk]


def test_each_model_call_streams_the_files_rules_and_budget_it_was_given(root: Path) -> None:
    model = ScriptedChatModel(script=["done"])
    agent = _agent(root, model)
    config = {"configurable": {"thread_id": "t1"}}
    chunks = list(
        agent.stream(
            {"messages": [HumanMessage("hi")]},
            config,
            context={"topic": "billing"},
            stream_mode="custom",
        )
    )
    [report] = _memory_chunks(chunks)
    json.dumps(report)  # plain data a stream consumer can serialise
    files = {entry["path"]: entry for entry in report["files"]}
    assert files["/AGENTS.md"] == {
        "path": "/AGENTS.md",
        "layer": "project",
        "kind": "layer",
        "access": "read-only",
        "chars": files["/AGENTS.md"]["chars"],
        "source_chars": len("Project conventions: use uv."),
        "cut": False,
        "outcome": "whole",
        "why": [],
        "unit": "chars",
    }
    notes = files["/MEMORY.md"]
    assert notes["access"] == "writable"
    assert notes["cut"] is True
    assert notes["outcome"] == "truncated"
    assert any("max_chars=2000" in why for why in notes["why"])
    assert notes["unit"] == "chars"  # a character cap bound the cut: its marker counts chars
    assert 0 < notes["chars"] <= 2_000 + 200  # the layer cap, plus the element's tags
    rules = {rule["name"]: rule for rule in report["rules"]}
    assert rules["always"]["why"] == "always"
    assert rules["billing"] == {
        "name": "billing",
        "path": "/rules/billing.md",
        "why": "key",
        "key": "billing",
        "glob": None,
    }
    assert "python" not in rules  # no .py path touched yet
    assert report["rules_part"]["cut"] is False
    system = model.system_prompts[-1]
    assert report["unit"] == "chars"
    assert report["budget"] == 48_000
    assert report["total"] == len(system) - system.index("<agent_memory>")


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the records built: every reference to the builder in the package is wrapped."""
    import sys

    from layered_memory.core import report as report_module

    real = report_module.build_memory_report
    built: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return real(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if (
            name.startswith("layered_memory")
            and getattr(module, "build_memory_report", None) is real
        ):
            monkeypatch.setattr(module, "build_memory_report", counting)
    return built


def test_no_record_is_built_when_nobody_streams_custom_mode(root: Path, builds: list[int]) -> None:
    model = ScriptedChatModel(script=["one", "two", "three"])
    agent = _agent(root, model)
    config = {"configurable": {"thread_id": "quiet"}}
    agent.invoke({"messages": [HumanMessage("hi")]}, config, context={"topic": "billing"})
    updates = list(
        agent.stream(
            {"messages": [HumanMessage("again")]},
            config,
            context={"topic": "billing"},
            stream_mode="updates",
        )
    )
    assert updates
    assert builds == []
    chunks = list(
        agent.stream(
            {"messages": [HumanMessage("and now?")]},
            config,
            context={"topic": "billing"},
            stream_mode="custom",
        )
    )
    [report] = _memory_chunks(chunks)
    assert [rule["name"] for rule in report["rules"]] == ["always", "billing"]
    assert builds == [1]  # built when first asked for, then shared by the calls reusing it


def test_a_record_is_built_for_an_open_trace_span_alone(root: Path, builds: list[int]) -> None:
    from langsmith.run_helpers import set_tracing_parent
    from langsmith.run_trees import RunTree

    mw = _middleware(root)
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    mw.wrap_model_call(_request(state, _Runtime()), lambda request: request)
    assert builds == []
    span = RunTree(name="MemoryMiddleware.wrap_model_call", run_type="chain")
    with set_tracing_parent(span):
        mw.wrap_model_call(_request(state, _Runtime()), lambda request: request)
    assert builds == [1]
    assert span.metadata["memory"]["files"][0]["path"] == "/AGENTS.md"


def test_a_rule_matched_by_a_path_reports_the_key_and_the_glob(root: Path) -> None:
    mw = _middleware(root)
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    state["memory_touched_paths"] = ["/src/app.py"]
    seen: list[Any] = []
    runtime = _Runtime(seen.append)
    mw.wrap_model_call(_request(state, runtime), lambda request: request)
    [chunk] = seen
    [python] = [rule for rule in chunk["memory"]["rules"] if rule["name"] == "python"]
    assert python["why"] == "path"
    assert python["key"] == "/src/app.py"
    assert python["glob"] == "**/*.py"


def test_a_reused_block_reports_the_same_record_each_call(root: Path) -> None:
    mw = _middleware(root)
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    seen: list[Any] = []
    runtime = _Runtime(seen.append)
    for _ in range(3):
        mw.wrap_model_call(_request(state, runtime), lambda request: request)
    assert len(seen) == 3
    assert seen[0] == seen[1] == seen[2]


def test_no_report_when_the_middleware_injects_nothing(root: Path) -> None:
    mw = _middleware(root, system_prompt=None)
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    seen: list[Any] = []
    mw.wrap_model_call(_request(state, _Runtime(seen.append)), lambda request: request)
    assert seen == []


def test_the_record_goes_into_an_open_trace_span(root: Path) -> None:
    from langsmith.run_helpers import set_tracing_parent
    from langsmith.run_trees import RunTree

    mw = _middleware(root)
    state = dict(mw.before_agent({"messages": []}, _Runtime()) or {})
    # The span LangChain opens around a middleware's `wrap_model_call` when tracing is on.
    span = RunTree(name="MemoryMiddleware.wrap_model_call", run_type="chain")
    with set_tracing_parent(span):
        mw.wrap_model_call(_request(state, _Runtime()), lambda request: request)
    assert span.metadata["memory"]["files"][0]["path"] == "/AGENTS.md"
    assert span.metadata["memory"]["rules"][0]["name"] == "always"


def test_inspect_prints_the_record_for_a_config(root: Path, capsys: Any) -> None:
    from layered_memory.cli import main

    (root / "agent.py").write_text(
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory import Layer, MemoryMiddleware\n"
        "memory = MemoryMiddleware(\n"
        f"    backend=FilesystemBackend(root_dir={str(root)!r}, virtual_mode=True),\n"
        "    layers=[Layer('project', '/AGENTS.md'),\n"
        "            Layer('notes', '/MEMORY.md', writable=True, max_chars=2000)],\n"
        "    rules=['/rules'], match_keys=('topic',))\n"
    )
    code = main(
        [
            "inspect",
            "--config",
            f"{root / 'agent.py'}:memory",
            "--context",
            "topic=billing",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    report = data["memory_report"]
    assert [rule["name"] for rule in report["rules"]] == ["always", "billing"]
    assert report["total"] == len(data["block"])
    code = main(
        ["inspect", "--config", f"{root / 'agent.py'}:memory", "--context", "topic=billing"]
    )
    text = capsys.readouterr().out
    assert "WHAT A MODEL CALL REPORTS" in text
    assert "rule billing: a match key named it ('billing')" in text
    assert "/MEMORY.md" in text


def test_inspect_says_chars_for_each_file_under_a_token_budget(root: Path, capsys: Any) -> None:
    """A file's `chars` is characters whatever the block's unit: never printed as tokens."""
    from layered_memory.cli import main

    (root / "agent.py").write_text(
        "from deepagents.backends import FilesystemBackend\n"
        "from layered_memory import Layer, MemoryMiddleware\n"
        "memory = MemoryMiddleware(\n"
        f"    backend=FilesystemBackend(root_dir={str(root)!r}, virtual_mode=True),\n"
        "    layers=[Layer('project', '/AGENTS.md')], max_tokens=5_000)\n"
    )
    assert main(["inspect", "--config", f"{root / 'agent.py'}:memory", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    record = data["memory_report"]
    assert record["unit"] == "tokens"
    assert data["budget"]["max_tokens"] == 5_000  # the header no longer ignores it
    chars = record["files"][0]["chars"]
    assert main(["inspect", "--config", f"{root / 'agent.py'}:memory"]) == 0
    text = capsys.readouterr().out
    assert f"/AGENTS.md (project, read-only): {chars:,} chars shown, whole" in text
    assert f"{record['total']:,} of 5,000 tokens (the budget)" in text
    assert f"token budget: {record['total']:,} of max_tokens=5,000, counted by " in text


# -- helpers ------------------------------------------------------------------------------------


class _Runtime:
    """A LangGraph runtime as a model call sees it: context and a stream writer."""

    def __init__(self, writer: Any = None) -> None:
        self.context = {"topic": "billing"}
        self.stream_writer = writer or (lambda _chunk: None)


def _request(state: dict[str, Any], runtime: Any) -> Any:
    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import SystemMessage

    return ModelRequest(
        model=ScriptedChatModel(script=[AIMessage("x")]),
        messages=[HumanMessage("hi")],
        system_message=SystemMessage("base"),
        state=state,  # type: ignore[arg-type]
        runtime=runtime,
    )
