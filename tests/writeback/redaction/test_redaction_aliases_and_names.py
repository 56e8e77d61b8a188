"""The agent's memory edits are redacted under any name of the file, and a secret in the name
itself is refused, never saved or logged."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage

from layered_memory import Layer, MemoryMiddleware, MemoryOptions
from layered_memory.testing import ScriptedChatModel, tool_call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
# Assembled at run time so that secret scanners never flag this file.
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
LAYERS = [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("Project rules.\n")
    (tmp_path / "MEMORY.md").write_text("# Memory\n- note\n")
    (tmp_path / "rules").mkdir()
    return tmp_path


async def _run(
    memory: MemoryMiddleware, backend: Any, script: list[Any], use_async: bool
) -> list[ToolMessage]:
    model = ScriptedChatModel(script=[*script, "done"], default="done")
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    payload = {"messages": [{"role": "user", "content": "remember the token"}]}
    result = await agent.ainvoke(payload) if use_async else agent.invoke(payload)
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


@USE_ASYNC
@pytest.mark.parametrize("alias", ["/hard.md", "/link.md", "/./MEMORY.md"])
async def test_an_edit_through_another_name_of_memory_is_redacted_on_the_plain_backend(
    project: Path, alias: str, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A hard link shares no spelling with `/MEMORY.md`: only its disk identity tells."""
    os.link(project / "MEMORY.md", project / "hard.md")
    (project / "link.md").symlink_to("MEMORY.md")
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=LAYERS)
    edit = tool_call(
        "edit_file", file_path=alias, old_string="- note", new_string=f"- token {GITHUB}"
    )
    with caplog.at_level(logging.WARNING):
        (result,) = await _run(memory, backend, [edit], use_async)

    saved = (project / "MEMORY.md").read_text()
    assert GITHUB not in saved
    assert "- token [REDACTED:github_token]\n" in saved
    assert "1 secret was redacted before saving (github_token)" in result.text
    assert GITHUB not in caplog.text


@USE_ASYNC
@pytest.mark.parametrize("protected", [False, True], ids=["plain", "protected"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_a_secret_in_a_rule_file_name_is_refused_and_never_shown(
    project: Path,
    tool: str,
    protected: bool,
    use_async: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = f"/rules/{GITHUB}.md"
    if tool == "edit_file":  # a file already there under that name: the edit is refused too
        (project / "rules" / f"{GITHUB}.md").write_text("old\n")
    before = sorted(p.name for p in (project / "rules").iterdir())
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=LAYERS, rules=["/rules"], options=WRITABLE_RULES
    )
    call = (
        tool_call("write_file", file_path=name, content="Use the vault.\n")
        if tool == "write_file"
        else tool_call("edit_file", file_path=name, old_string="old", new_string="new")
    )
    with caplog.at_level(logging.WARNING):
        (result,) = await _run(
            memory, memory.protected_backend if protected else backend, [call], use_async
        )

    assert result.status == "error"
    assert result.text.startswith(f"Error: {tool} refused: the path /rules/[REDACTED:")
    assert "(github_token)" in result.text
    assert GITHUB not in result.text
    assert GITHUB not in caplog.text
    assert sorted(p.name for p in (project / "rules").iterdir()) == before
    if tool == "edit_file":
        assert (project / "rules" / f"{GITHUB}.md").read_text() == "old\n"


WRITABLE_RULES = MemoryOptions(rules_writable=True)


def test_a_secret_named_file_outside_memory_is_the_agents_business(project: Path) -> None:
    """Control: only memory and rule files are the middleware's to refuse."""
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=LAYERS, rules=["/rules"], options=WRITABLE_RULES
    )
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path=f"/notes/{GITHUB}.md", content="x\n"), "ok"]
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "scratch"}]})
    assert (project / "notes" / f"{GITHUB}.md").read_text() == "x\n"


def test_the_protected_backend_never_logs_a_secret_in_a_memory_alias_name(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A subagent writes through the backend, which logs what it redacted and where."""
    os.link(project / "MEMORY.md", project / f"{GITHUB}.md")
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    view = MemoryMiddleware(backend=backend, layers=LAYERS).protected_backend
    with caplog.at_level(logging.WARNING):
        edited = view.edit(f"/{GITHUB}.md", "- note", f"- token {GITHUB}")
    assert edited.error is None
    assert "- token [REDACTED:github_token]\n" in (project / "MEMORY.md").read_text()
    assert "written into memory file /[REDACTED:github_token].md" in caplog.text
    assert GITHUB not in caplog.text
