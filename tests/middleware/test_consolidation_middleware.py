"""`MemoryMiddleware(consolidator=...)`: a run's lessons consolidated after it ends, never in the
way of the run."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StoreBackend
from deepagents.backends.utils import create_file_data
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from layered_memory import Layer, MemoryConsolidator, MemoryMiddleware
from layered_memory.testing import PromptRecorder, ScriptedChatModel, tool_call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
LESSON = "The user prefers metric units."
LAYERS = [Layer("project", "/AGENTS.md"), Layer("memory", "/MEMORY.md", writable=True)]


def lesson_call(text: str = LESSON) -> AIMessage:
    return tool_call("update_memory", operations=[{"op": "add", "text": text}])


def build(
    root: Path, consolidator_model: Any, agent_answers: int = 2, **kwargs: Any
) -> tuple[Any, MemoryConsolidator, ScriptedChatModel]:
    (root / "AGENTS.md").write_text("# Project\n")
    (root / "MEMORY.md").write_text("# Memory\n")
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    consolidator = MemoryConsolidator(
        consolidator_model, backend=backend, clock=lambda: dt.date(2025, 6, 1), **kwargs
    )
    memory = MemoryMiddleware(backend=backend, layers=LAYERS, consolidator=consolidator)
    agent_model = ScriptedChatModel(script=[f"answer {n}" for n in range(agent_answers)])
    agent = create_agent(agent_model, middleware=[memory], checkpointer=InMemorySaver())
    return agent, consolidator, agent_model


async def invoke(agent: Any, text: str, use_async: bool, **configurable: Any) -> Any:
    config: Any = {"configurable": {"thread_id": "t1", **configurable}}
    payload = {"messages": [{"role": "user", "content": text}]}
    if use_async:
        return await agent.ainvoke(payload, config)
    return agent.invoke(payload, config)


@USE_ASYNC
async def test_a_lesson_of_one_run_is_in_the_next_runs_prompt_without_its_provenance(
    tmp_path: Path, use_async: bool
) -> None:
    model = ScriptedChatModel(script=[lesson_call(), "nothing new"])
    agent, _, agent_model = build(tmp_path, model)

    await invoke(agent, "I prefer metric units.", use_async)
    assert LESSON in (tmp_path / "MEMORY.md").read_text()
    # The consolidating model read the run: the user's message and the agent's answer.
    assert "user: I prefer metric units.\nassistant: answer 0" in model.prompts[0][1].text

    await invoke(agent, "How far is it?", use_async)
    prompt = agent_model.system_prompts[1]
    assert f"- {LESSON}" in prompt
    assert "learned id=" not in prompt
    assert len(model.prompts) == 2  # once per run, after it: never on the model-call path


@USE_ASYNC
async def test_a_dry_run_consolidates_nothing(tmp_path: Path, use_async: bool) -> None:
    model = ScriptedChatModel(script=[])  # any call would raise: the script is empty
    agent, _, _ = build(tmp_path, model)

    await invoke(agent, "I prefer metric units.", use_async, dry_run=True)

    assert model.prompts == []
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n"


@USE_ASYNC
async def test_a_failing_model_is_logged_once_and_never_fails_the_run(
    tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_messages: list[BaseMessage]) -> str:
        msg = "provider overloaded (529)\nsecond line"
        raise RuntimeError(msg)

    agent, _, _ = build(tmp_path, ScriptedChatModel(script=[broken]))

    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        final = await invoke(agent, "I prefer metric units.", use_async)

    assert final["messages"][-1].text == "answer 0"
    failures = [record for record in caplog.records if "consolidation" in record.getMessage()]
    assert len(failures) == 1
    assert "RuntimeError: provider overloaded (529)" in failures[0].getMessage()
    assert "second line" not in failures[0].getMessage()
    assert "thread t1" in failures[0].getMessage()
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n"


@USE_ASYNC
async def test_in_the_background_the_run_returns_first_and_the_lesson_still_lands(
    tmp_path: Path, use_async: bool
) -> None:
    run_returned = threading.Event()
    seen: list[bool] = []

    def after_the_run(_messages: list[BaseMessage]) -> AIMessage:
        # Only a run that returned without waiting for this call lets it go on; a run that
        # waited would leave this call to time out (generous: it only stops a broken test).
        seen.append(run_returned.wait(timeout=120))
        return lesson_call()

    agent, consolidator, _ = build(
        tmp_path, ScriptedChatModel(script=[after_the_run]), consolidate_in_background=True
    )

    await invoke(agent, "I prefer metric units.", use_async)
    run_returned.set()
    assert consolidator.flush(timeout=120)

    assert seen == [True]
    assert LESSON in (tmp_path / "MEMORY.md").read_text()
    consolidator.close()


@dataclass
class UserContext:
    user: str


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_per_user_store_namespace_is_the_runs_own_also_on_the_worker(background: bool) -> None:
    """The worker carries the run's context: a namespace read from the run's runtime context
    names the same user there."""
    store = InMemoryStore()
    for user in ("ada", "bob"):
        store.put(("users", user), "/MEMORY.md", dict(create_file_data("# Memory\n")))
    backend = StoreBackend(namespace=lambda rt: ("users", rt.context.user), store=store)
    consolidator = MemoryConsolidator(
        ScriptedChatModel(script=[lesson_call()]),
        backend=backend,
        consolidate_in_background=background,
    )
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("memory", "/MEMORY.md", writable=True)],
        consolidator=consolidator,
    )
    agent = create_agent(
        ScriptedChatModel(script=["ok"]), middleware=[memory], context_schema=UserContext
    )

    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, context=UserContext("ada"))
    assert consolidator.flush(timeout=120)

    def text(user: str) -> str:
        item = store.get(("users", user), "/MEMORY.md")
        assert item is not None
        return str(item.value["content"])

    assert LESSON in text("ada")
    assert LESSON not in text("bob")
    consolidator.close()


CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from deepagents.backends import FilesystemBackend
    from langchain.agents import create_agent
    from layered_memory import Layer, MemoryConsolidator, MemoryMiddleware
    from layered_memory.testing import ScriptedChatModel, tool_call

    root = Path(sys.argv[1])
    returned = threading.Event()

    def after_the_run(_messages):
        print("consolidating; run returned first:", returned.wait(timeout=120), flush=True)
        return tool_call("update_memory", operations=[{"op": "add", "text": sys.argv[2]}])

    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    consolidator = MemoryConsolidator(
        ScriptedChatModel(script=[after_the_run]),
        backend=backend,
        consolidate_in_background=True,
    )
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("memory", "/MEMORY.md", writable=True)],
        consolidator=consolidator,
    )
    agent = create_agent(ScriptedChatModel(script=["done"]), middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "I prefer metric units."}]})
    print("invoke returned", flush=True)
    returned.set()
    # The script ends here: no flush(), no close().
    """
)


def test_a_process_that_exits_right_after_the_run_finishes_the_queued_consolidation(
    tmp_path: Path,
) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n")

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), LESSON],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "invoke returned",
        "consolidating; run returned first: True",
    ]
    assert LESSON in (tmp_path / "MEMORY.md").read_text()


def test_the_consolidator_is_checked_at_construction(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedChatModel(script=[])

    def middleware(consolidator: Any) -> Any:
        return MemoryMiddleware(backend=backend, layers=LAYERS, consolidator=consolidator)

    with pytest.raises(TypeError, match="consolidator must be a MemoryConsolidator"):
        middleware(object())
    with pytest.raises(ValueError, match="read-only memory"):
        middleware(MemoryConsolidator(model, backend=backend, path="/AGENTS.md"))
    with pytest.raises(ValueError, match="not a layer file"):
        middleware(MemoryConsolidator(model, backend=backend, path="/NOTES.md"))
    with pytest.raises(ValueError, match="only reviews"):
        middleware(MemoryConsolidator(None, backend=backend))
    consolidating = middleware(MemoryConsolidator(model, backend=backend))
    assert consolidating.end_of_run is not None
    assert consolidating.end_of_run.consolidator is consolidating.consolidator
    twin = consolidating.read_only()
    assert twin.consolidator is None  # a subagent's twin learns nothing
    assert twin.end_of_run is None  # and its graph has no end-of-run node


@USE_ASYNC
async def test_the_consolidation_call_is_not_part_of_the_agents_stream_or_callbacks(
    tmp_path: Path, use_async: bool
) -> None:
    """A user streaming the agent's messages never sees the consolidator's tool call."""
    model = ScriptedChatModel(script=[lesson_call()])
    agent, _, _ = build(tmp_path, model)
    recorder = PromptRecorder()
    config: Any = {"configurable": {"thread_id": "t1"}, "callbacks": [recorder]}
    payload = {"messages": [{"role": "user", "content": "hi"}]}

    if use_async:
        chunks = [
            chunk async for chunk, _ in agent.astream(payload, config, stream_mode="messages")
        ]
    else:
        chunks = [chunk for chunk, _ in agent.stream(payload, config, stream_mode="messages")]

    assert LESSON in (tmp_path / "MEMORY.md").read_text()
    assert len(model.prompts) == 1
    assert len(recorder.system_prompts) == 1  # the agent's own call only
    assert all(not getattr(chunk, "tool_calls", None) for chunk in chunks)
    assert all("update_memory" not in str(chunk.content) for chunk in chunks)
