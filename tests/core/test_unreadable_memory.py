"""A memory file that exists but cannot be read is never offered as empty, never overwritten."""

from __future__ import annotations

import os
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


# -- every route, not only the parent's tool hook ----------------------------------------------


def _fresh_write_result(result: dict[str, Any], name: str) -> ToolMessage:
    return next(m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == name)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["latin-1", "binary", "directory"])
async def test_a_subagent_cannot_overwrite_unreadable_writable_memory(
    tmp_path: Path, kind: str, use_async: bool
) -> None:
    """deepagents' general-purpose subagent has no memory middleware: the protected backend
    itself refuses the whole-file write, with the tool hook's wording."""
    make_unreadable(tmp_path, kind)
    before = snapshot(tmp_path)
    model = ScriptedChatModel(
        script=[
            tool_call("task", description="start afresh", subagent_type="general-purpose"),
            tool_call("write_file", file_path="/MEMORY.md", content="# fresh\n"),
            "subagent finished",
            "done",
        ]
    )
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "start over"}]}
    await agent.ainvoke(payload) if use_async else agent.invoke(payload)

    assert snapshot(tmp_path) == before
    assert (tmp_path / "MEMORY.md").is_dir() == (kind == "directory")
    # The subagent's own tool result (in its private conversation) went to the model.
    subagent_results = [
        m.content
        for prompt in model.prompts
        for m in prompt
        if isinstance(m, ToolMessage) and m.name == "write_file"
    ]
    assert subagent_results
    assert "is a memory file that exists but could not be read" in str(subagent_results[0])


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("alias", ["/MEMORY.md", "/./MEMORY.md", "/link.md", "/hard.md"])
async def test_the_protected_backend_refuses_a_whole_file_write_over_unreadable_memory(
    tmp_path: Path, alias: str, use_async: bool
) -> None:
    (tmp_path / "MEMORY.md").write_bytes(NOTES)
    (tmp_path / "link.md").symlink_to("MEMORY.md")
    os.link(tmp_path / "MEMORY.md", tmp_path / "hard.md")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    view = memory.protected_backend

    if use_async:
        written = await view.awrite(alias, "# fresh\n")
        (uploaded,) = await view.aupload_files([(alias, b"# fresh\n")])
    else:
        written = view.write(alias, "# fresh\n")
        (uploaded,) = view.upload_files([(alias, b"# fresh\n")])

    assert written.error is not None
    assert written.error.startswith(f"Error: write refused: {alias} is a memory file that exists")
    assert "not valid UTF-8" in written.error
    assert uploaded.error == "permission_denied"
    assert (tmp_path / "MEMORY.md").read_bytes() == NOTES


@pytest.mark.parametrize("use_async", [False, True])
async def test_readable_or_missing_memory_and_other_files_are_still_written_whole(
    tmp_path: Path, use_async: bool
) -> None:
    """Control: the check refuses only content nobody could read."""
    (tmp_path / "MEMORY.md").write_text("# Memory\n- old\n")
    (tmp_path / "other.md").write_bytes(NOTES)  # not memory: the agent's own business
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    layers = [
        Layer("notes", "/MEMORY.md", writable=True),
        Layer("team", "/TEAM.md", writable=True),  # missing: writing creates it
    ]
    view = MemoryMiddleware(backend=backend, layers=layers).protected_backend
    for path in ("/MEMORY.md", "/TEAM.md", "/other.md"):
        written = await view.awrite(path, "# new\n") if use_async else view.write(path, "# new\n")
        assert written.error is None
        assert (tmp_path / path.lstrip("/")).read_text() == "# new\n"


def test_the_tool_hook_refuses_a_hard_link_to_unreadable_memory_on_the_plain_backend(
    tmp_path: Path,
) -> None:
    """A hard link shares no spelling with the memory file: the hook compares disk identities."""
    (tmp_path / "MEMORY.md").write_bytes(NOTES)
    os.link(tmp_path / "MEMORY.md", tmp_path / "hard.md")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/hard.md", content="# fresh\n"), "ok"]
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    result = agent.invoke({"messages": [{"role": "user", "content": "start over"}]})

    refusal = _fresh_write_result(result, "write_file")
    assert refusal.status == "error"
    assert refusal.text.startswith("Error: write_file refused: /hard.md is a memory file")
    assert (tmp_path / "MEMORY.md").read_bytes() == NOTES
