"""Gemini CLI's GEMINI.md, read as Gemini CLI reads it: a memory file found like AGENTS.md
(the root's, then each folder's down to the files the agent works on) with its `@file` imports
(relative to the importing file, outside code, at most 5 hops; Gemini CLI's
`memoryImportProcessor.ts`). The existing `nested=` and `Layer` names configure it."""

from __future__ import annotations

from pathlib import Path

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

GEMINI_PROJECT = {
    "GEMINI.md": "# Project\n\nROOT_CONTEXT\n\n@./docs/style.md\n\n`@./docs/secret.md` is code.\n",
    "docs/style.md": "STYLE_IMPORTED\n",
    "docs/secret.md": "NEVER_IMPORTED\n",
    "pkg/GEMINI.md": "PKG_CONTEXT\n",
    "pkg/mod.py": "x = 1\n",
    "other/GEMINI.md": "OTHER_CONTEXT\n",
}


def test_gemini_md_is_hierarchical_with_its_imports(tmp_path: Path) -> None:
    for name, text in GEMINI_PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/GEMINI.md")], nested=("GEMINI.md",)
    )
    model = ScriptedChatModel(script=[tool_call("read_file", file_path="/pkg/mod.py"), "done"])
    graph = create_deep_agent(
        model=model, backend=backend, memory=[], middleware=[memory], checkpointer=InMemorySaver()
    )
    graph.invoke(
        {"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "g"}}
    )
    first, last = model.system_prompts[0], model.system_prompts[-1]
    assert "ROOT_CONTEXT" in first
    assert "STYLE_IMPORTED" in first  # `@./docs/style.md`, relative to GEMINI.md
    assert "NEVER_IMPORTED" not in last  # inside inline code: text, as Gemini CLI reads it
    assert "PKG_CONTEXT" not in first
    assert "PKG_CONTEXT" in last  # the folder of a file the agent read
    assert "OTHER_CONTEXT" not in last
    assert last.index("ROOT_CONTEXT") < last.index("PKG_CONTEXT")  # shallow to deep
