"""How many of the package's modules one agent turn enters (issue 23's "modules per turn").

One turn of a deep agent with the quickstart's memory (a read-only AGENTS.md layer, a writable
MEMORY.md): the model reads a file, edits MEMORY.md, answers. A profile hook records every
function entered during the turn (the agent is built and warmed up first, so imports and
construction are not counted); the figure is the number of distinct `layered_memory` modules.

Run: .venv/bin/python benchmarks/modules_per_turn.py [--list]
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langgraph.checkpoint.memory import InMemorySaver

import layered_memory
from layered_memory import Layer, MemoryMiddleware, build_thread_config
from layered_memory.testing import ScriptedChatModel, tool_call

PACKAGE = str(Path(layered_memory.__file__).parent)


def script() -> list[Any]:
    return [
        tool_call("read_file", file_path="/notes.txt"),
        tool_call(
            "edit_file",
            file_path="/MEMORY.md",
            old_string="# Memory\n",
            new_string="# Memory\n- x\n",
        ),
        "Done.",
    ]


def one_turn(root: Path) -> set[str]:
    (root / "AGENTS.md").write_text("# Project\n\n- Be brief.\n", encoding="utf-8")
    (root / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("agent", "/MEMORY.md", writable=True)],
    )
    model = ScriptedChatModel(script=[*script(), *script()])
    agent = create_deep_agent(
        model=model,
        memory=[],
        middleware=[memory],
        backend=memory.protected_backend,
        checkpointer=InMemorySaver(),
    )
    config = build_thread_config("bench", "modules")
    agent.invoke({"messages": [{"role": "user", "content": "warm up"}]}, config)
    (root / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    entered: set[str] = set()

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            entered.add(frame.f_code.co_filename)

    # Tools run in LangGraph's worker threads: profile every thread, not only this one.
    set_all = getattr(threading, "setprofile_all_threads", None)
    sys.setprofile(profile)
    threading.setprofile(profile)
    if set_all is not None:
        set_all(profile)
    try:
        agent.invoke({"messages": [{"role": "user", "content": "note it"}]}, config)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        if set_all is not None:
            set_all(None)
    entered.discard(str(Path(PACKAGE) / "testing.py"))  # the scripted model, not the memory
    return {str(Path(name).relative_to(PACKAGE)) for name in entered}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        modules = one_turn(Path(folder))
    total = sum(1 for _ in Path(PACKAGE).rglob("*.py"))
    print(f"modules entered in one turn: {len(modules)} of {total}")
    if "--list" in sys.argv:
        print("\n".join(sorted(modules)))


if __name__ == "__main__":
    main()
