"""A memory file that exists but cannot be read is never offered as empty, never overwritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

NOTES = "Mes notes: café, crème brûlée.\n".encode("latin-1")


def make_unreadable(root: Path, kind: str) -> None:
    target = root / "MEMORY.md"
    if kind == "latin-1":
        target.write_bytes(NOTES)
    elif kind == "binary":
        target.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    else:
        target.mkdir()
        (target / "inside.txt").write_text("kept")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["latin-1", "binary", "directory"])
async def test_unreadable_writable_memory_is_shown_and_protected(
    tmp_path: Path, kind: str, use_async: bool
) -> None:
    make_unreadable(tmp_path, kind)
    before = snapshot(tmp_path)
    model = ScriptedChatModel(
        script=[
            tool_call("write_file", file_path="/MEMORY.md", content="# Memory\n- new fact\n"),
            "I could not save it.",
        ]
    )
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    agent = create_deep_agent(
        model=model, backend=backend, memory=[], middleware=[memory], checkpointer=InMemorySaver()
    )
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "remember X"}]}
    config = {"configurable": {"thread_id": f"unreadable-{kind}-{use_async}"}}
    result = await agent.ainvoke(payload, config) if use_async else agent.invoke(payload, config)

    first_prompt = model.system_prompts[0]
    assert "present but unreadable" in first_prompt
    assert "Do not overwrite it" in first_prompt
    assert "nothing saved yet" not in first_prompt
    refusal = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error"
    assert "write_file refused" in refusal.text
    assert snapshot(tmp_path) == before


def test_readable_writable_memory_can_still_be_rewritten(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n- old\n")
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/MEMORY.md", content="# Memory\n- new\n"), "ok"]
    )
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "rewrite"}]})
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n- new\n"


def test_unreadable_source_in_compatible_mode_is_named_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(NOTES)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    state = memory.before_agent({"messages": []}, None, {})
    assert state is not None
    assert state["memory_contents"] == {}
    assert "not valid UTF-8" in state["memory_loaded"]["unreadable"]["/AGENTS.md"]
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/AGENTS.md", content="replaced"), "ok"]
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "fix memory"}]})
    assert "/AGENTS.md\n\n(present but unreadable" in model.system_prompts[0]
    assert (tmp_path / "AGENTS.md").read_bytes() == NOTES
