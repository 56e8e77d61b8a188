"""The agent's edit of its memory file is seen on the very next model call, under any name of
the file: a hard link to MEMORY.md is MEMORY.md (compared by disk identity, not spelling)."""

from __future__ import annotations

import os
from pathlib import Path

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call


def test_an_edit_through_a_hard_link_is_seen_on_the_next_model_call(
    tmp_path: Path, settled_files: None
) -> None:
    (tmp_path / "AGENTS.md").write_text("PROJECT")
    (tmp_path / "MEMORY.md").write_text("# Memory\n- OLD_NOTE\n")
    os.link(tmp_path / "MEMORY.md", tmp_path / "notes.md")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
    )
    edit = tool_call("edit_file", file_path="/notes.md", old_string="OLD_NOTE", new_string="NEW")
    model = ScriptedChatModel(script=[edit, "done"])
    agent = create_deep_agent(
        model=model,
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )
    agent.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "t"}}
    )
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n- NEW\n"
    assert "OLD_NOTE" in model.system_prompts[0]
    assert "- NEW" in model.system_prompts[1]
