"""The agent's memory edits are redacted under any name of the file."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
# Assembled at run time so that secret scanners never flag this file.
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
LAYERS = [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("Project rules.\n")
    (tmp_path / "MEMORY.md").write_text("# Memory\n- note\n")
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
