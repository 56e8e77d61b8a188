"""`MemoryMiddleware.permissions`: read-only memory as deepagents' own deny rules (issue 36).

With `create_deep_agent(permissions=memory.permissions)` and deepagents' own memory only (no
`MemoryMiddleware` in the agent, the plain backend), deepagents itself refuses the writes, in
the parent and in a `task` subagent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.middleware.filesystem import FilesystemPermission, _check_fs_permission

from layered_memory import Layer, MemoryConsolidator, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("Run the tests with make.\n")
    (tmp_path / "MEMORY.md").write_text("- notes\n")
    (tmp_path / ".agents" / "rules").mkdir(parents=True)
    (tmp_path / ".agents" / "rules" / "py.md").write_text("Type every function.\n")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "a.md").write_text("team memory\n")
    return tmp_path


def memory_of(root: Path, **kwargs: Any) -> MemoryMiddleware:
    return MemoryMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        layers=[
            Layer("project", "/AGENTS.md"),
            Layer("team", "/team/"),
            Layer("notes", "/MEMORY.md", writable=True),
        ],
        rules=["/.agents/rules"],
        nested=("AGENTS.md",),
        **kwargs,
    )


def decision(rules: list[FilesystemPermission], path: str) -> str:
    return _check_fs_permission(rules, "write", path)


def test_the_rules_deny_writes_of_read_only_memory_only(root: Path) -> None:
    rules = memory_of(root).permissions
    assert all(rule.mode == "deny" and rule.operations == ["write"] for rule in rules)
    for path in (
        "/AGENTS.md",
        "/team/a.md",
        "/team/new.md",
        "/team/.hidden.md",
        "/.agents/rules/py.md",
        "/.agents/rules/sub/new.md",
        "/src/deep/AGENTS.md",  # nested memory, wherever it is
    ):
        assert decision(rules, path) == "deny", path
    for path in ("/MEMORY.md", "/src/app.py", "/AGENTS.md.bak"):
        assert decision(rules, path) == "allow", path
    for operation in ("read",):
        assert _check_fs_permission(rules, operation, "/AGENTS.md") == "allow"


def test_a_file_name_with_glob_characters_is_that_name(tmp_path: Path) -> None:
    memory = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("odd", "/notes[1]*.md")],
    )
    rules = memory.permissions
    assert decision(rules, "/notes[1]*.md") == "deny"
    assert decision(rules, "/notes1x.md") == "allow"


def test_the_review_queue_is_denied(root: Path) -> None:
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    consolidator = MemoryConsolidator(
        ScriptedChatModel(script=[]), backend=backend, path="/MEMORY.md", review=True
    )
    memory = memory_of(root, consolidator=consolidator)
    assert decision(memory.permissions, consolidator.pending_path) == "deny"
    assert decision(memory.permissions, "/MEMORY.md") == "allow"


def test_all_writable_memory_gives_no_rule(tmp_path: Path) -> None:
    memory = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("notes", "/MEMORY.md", writable=True)],
    )
    assert memory.permissions == []


def test_deepagents_refuses_a_subagent_edit_of_read_only_memory(root: Path) -> None:
    """deepagents' own memory, the plain backend, no MemoryMiddleware in the agent: only the
    rules stand between a `task` subagent and the read-only layer."""
    memory = memory_of(root)
    edit = tool_call("edit_file", file_path="/AGENTS.md", old_string="make", new_string="true")
    model = ScriptedChatModel(
        script=[
            tool_call("task", description="fix the build", subagent_type="general-purpose"),
            edit,  # the subagent's turn
            "could not edit",  # the subagent's answer
            tool_call("write_file", file_path="/team/b.md", content="x"),  # the parent's turn
            "done",
        ]
    )
    agent = create_deep_agent(
        model=model,
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        memory=["/AGENTS.md"],
        permissions=memory.permissions,
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert (root / "AGENTS.md").read_text() == "Run the tests with make.\n"
    assert not (root / "team" / "b.md").exists()
    refusals = [
        message.text
        for message in result["messages"]
        if message.type == "tool" and "permission denied" in message.text
    ]
    assert len(refusals) == 1  # the parent's own write (the subagent's is inside its run)
    assert any("permission denied for write on /AGENTS.md" in prompt for prompt in _texts(model))


def _texts(model: ScriptedChatModel) -> list[str]:
    return [str(message.content) for prompt in model.prompts for message in prompt]
