"""Flooding never pushes read-only memory out of the prompt (issue 35, class 1).

One shell command writing 800 one-line files into a read-only folder layer, or 800 files
written into a writable folder layer, used to leave "Never push to main" out of every later
prompt ("[203 memory files left out by the budget: /AGENTS.md, ...]"). Now: the put-back takes
planted files out of a read-only folder layer; agent-writable memory gives way to the budget
before any read-only memory; a folder layer shows at most `max_files` files and names the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.backends.local_shell import LocalShellBackend
from langchain_core.messages import ToolMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.core.layers import DEFAULT_MAX_FOLDER_FILES
from layered_memory.core.render import render_memory
from layered_memory.testing import ScriptedChatModel, tool_call

RULE = "Never push to main."


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "team").mkdir(parents=True)
    (root / "memories").mkdir()
    (root / "AGENTS.md").write_text(f"PROJECT: {RULE}\n" + "Use make test.\n" * 40)
    (root / "team" / "review.md").write_text("TEAM: every change is reviewed.\n")
    return root


def _memory(backend: Any) -> MemoryMiddleware:
    return MemoryMiddleware(
        backend=backend,
        layers=[
            Layer("project", "/AGENTS.md"),
            Layer("team", "/team/"),
            Layer("agent", "/memories/", writable=True),
        ],
        max_chars=6_000,
    )


def _run(memory: MemoryMiddleware, script: list[Any]) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel(script=script, default="done")
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    return agent.invoke({"messages": [{"role": "user", "content": "go"}]}), model


def test_files_planted_in_a_read_only_folder_layer_are_taken_back(tmp_path: Path) -> None:
    root = _project(tmp_path)
    memory = _memory(LocalShellBackend(root_dir=root, virtual_mode=True))
    flood = 'cd team && for i in $(seq 1 800); do echo "obey file $i" > "f$i.md"; done'
    result, _model = _run(memory, [tool_call("execute", command=flood), "done"])

    assert sorted(p.name for p in (root / "team").iterdir()) == ["review.md"]
    told = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    assert any("put back" in text and "/team/f1.md" in text for text in told)
    _result, model = _run(memory, ["done"])
    later = str(model.system_prompts[0])
    assert RULE in later
    assert "TEAM: every change is reviewed." in later
    assert "obey file" not in later


def test_a_flood_of_writable_memory_never_evicts_read_only_memory(tmp_path: Path) -> None:
    root = _project(tmp_path)
    for i in range(800):  # what 800 `write_file` calls into /memories/ leave on disk
        (root / "memories" / f"note{i:03d}.md").write_text(f"note {i}: " + "x" * 60 + "\n")
    memory = _memory(FilesystemBackend(root_dir=root, virtual_mode=True))
    _result, model = _run(memory, ["done"])
    prompt = str(model.system_prompts[0])
    assert RULE in prompt
    assert "TEAM: every change is reviewed." in prompt
    # The cut names what it cut: the files past the folder cap, then those past the budget.
    cap = "700 more files in /memories/ left out (a folder layer shows at most "
    cap += f"{DEFAULT_MAX_FOLDER_FILES} files"
    assert cap in prompt
    assert "/memories/note100.md" in prompt
    assert "left out by the budget: /memories/note" in prompt


def test_read_only_layers_give_way_last_whatever_their_precedence() -> None:
    layers = [Layer("org", "/ORG.md"), Layer("notes", "/NOTES.md", writable=True)]
    files = {"/ORG.md": "ORG: " + "keep " * 100, "/NOTES.md": "NOTE: " + "y" * 20_000}
    block = render_memory(layers, files, max_chars=3_500)
    assert "ORG: " + "keep " * 99 in block  # whole: the writable file gave way
    assert "NOTE: yyy" in block  # cut, with the rest of the budget
    assert len(block) <= 3_500


def test_a_huge_read_only_file_never_pushes_the_agents_notes_out() -> None:
    """The writable share works both ways: within it, writable memory gives way last."""
    layers = [Layer("org", "/ORG.md"), Layer("notes", "/NOTES.md", writable=True)]
    files = {"/ORG.md": "ORG: " + "keep " * 5_000, "/NOTES.md": "NOTE: mine"}
    block = render_memory(layers, files, max_chars=3_500)
    assert "NOTE: mine" in block
    assert "of /ORG.md not shown" in block


def test_a_folder_layer_caps_its_files_and_names_the_rest() -> None:
    layer = Layer("agent", "/memories/", writable=True, max_files=3)
    files = {f"/memories/{name}.md": name for name in "abcde"}
    block = render_memory([layer], files)
    assert 'path="/memories/c.md"' in block
    assert 'path="/memories/d.md"' not in block
    assert "2 more files in /memories/ left out" in block
    assert "/memories/d.md, /memories/e.md; read_file them" in block
    assert Layer("all", "/memories/", max_files=None).left_out_of(files) == {}
