"""A user layer in the home folder: loaded and guarded on a host-path backend; on a virtual one,
refused with a warning that names the `CompositeBackend` route (which then works)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend
from langchain_core.messages import ToolMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    (folder / ".deepagents").mkdir(parents=True)
    (folder / ".deepagents" / "AGENTS.md").write_text("User prefers tabs.\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "AGENTS.md").write_text("Project uses make.\n")
    return folder


def test_home_layer_on_a_host_path_backend_loads_and_is_read_only(
    home: Path, project: Path
) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=False)
    user_file = home / ".deepagents" / "AGENTS.md"
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path=str(user_file), content="hacked"), "done"]
    )
    memory = MemoryMiddleware(
        backend=backend,
        layers=[
            Layer("user", "~/.deepagents/AGENTS.md"),
            Layer("project", str(project / "AGENTS.md")),
        ],
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    result = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})

    assert "User prefers tabs." in model.system_prompts[0]
    assert "Project uses make." in model.system_prompts[0]
    refusal = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "read-only memory layer 'user'" in refusal.text
    assert user_file.read_text() == "User prefers tabs.\n"


def test_deepagents_style_sources_with_tilde_load(home: Path, project: Path) -> None:
    backend = FilesystemBackend(root_dir="/", virtual_mode=False)
    memory = MemoryMiddleware(backend=backend, sources=["~/.deepagents/AGENTS.md"])
    state = memory.before_agent({}, None, {})
    assert state is not None
    assert state["memory_contents"] == {"~/.deepagents/AGENTS.md": "User prefers tabs.\n"}


def test_home_layer_on_a_virtual_backend_warns_with_the_fix(
    home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("user", "~/.deepagents/AGENTS.md"), Layer("project", "/AGENTS.md")],
    )
    with caplog.at_level(logging.WARNING):
        memory.before_agent({}, None, {})
    assert "~/.deepagents/AGENTS.md" in caplog.text
    assert "CompositeBackend" in caplog.text


def test_home_layer_through_a_composite_route(home: Path, project: Path) -> None:
    """The README's recipe: route `/home/` to the user's `~/.deepagents` folder."""
    backend = CompositeBackend(
        default=FilesystemBackend(root_dir=project, virtual_mode=True),
        routes={"/home/": FilesystemBackend(root_dir=home / ".deepagents", virtual_mode=True)},
    )
    model = ScriptedChatModel(
        script=[
            tool_call(
                "edit_file", file_path="/home/AGENTS.md", old_string="tabs", new_string="spaces"
            ),
            "done",
        ]
    )
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("user", "/home/AGENTS.md"), Layer("project", "/AGENTS.md")],
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    result = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "User prefers tabs." in model.system_prompts[0]
    assert any(
        isinstance(m, ToolMessage) and "read-only memory layer 'user'" in m.text
        for m in result["messages"]
    )
    assert (home / ".deepagents" / "AGENTS.md").read_text() == "User prefers tabs.\n"
