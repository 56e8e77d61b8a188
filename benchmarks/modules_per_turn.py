"""How many of the package's modules one agent turn enters (issue 23's "modules per turn").

One turn of a deep agent with the quickstart's memory (a read-only AGENTS.md layer, a writable
MEMORY.md): the model reads a file, edits MEMORY.md, answers. A profile hook records every
function entered during the turn (the agent is built and warmed up first, so imports and
construction are not counted); the figure is the number of distinct `layered_memory` modules.

The second figure follows one model call: the call right after the agent edited MEMORY.md
(the middleware reloads memory, renders it and hands the request on). It counts the distinct
modules that call enters and how often it comes back to a module it had already left (the
modules of the call in the order entered, a run of calls in one module counted once: A B A is
one return). Fewer returns: a reader follows the call down, not back and forth.

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
from langchain.agents.middleware import AgentMiddleware
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


class _AfterEdit(AgentMiddleware):  # type: ignore[type-arg]
    """The outermost middleware: records the modules entered by the model call it is told to."""

    def __init__(self, call_number: int) -> None:
        super().__init__()
        self.call_number = call_number
        self.calls = 0
        self.armed = False
        self.sequence: list[str] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.calls += 1
        if not (self.armed and self.calls == self.call_number):
            return handler(request)
        sequence = self.sequence

        def profile(frame: Any, event: str, _arg: Any) -> None:
            name = frame.f_code.co_filename
            ours = name.startswith(PACKAGE) and not name.endswith("testing.py")
            if event == "call" and ours and (not sequence or sequence[-1] != name):
                sequence.append(name)

        sys.setprofile(profile)
        try:
            return handler(request)
        finally:
            sys.setprofile(None)


def one_turn(root: Path, after_edit: _AfterEdit | None = None) -> set[str]:
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
        middleware=[after_edit, memory] if after_edit is not None else [memory],
        backend=memory.protected_backend,
        checkpointer=InMemorySaver(),
    )
    config = build_thread_config("bench", "modules")
    agent.invoke({"messages": [{"role": "user", "content": "warm up"}]}, config)
    (root / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    entered: set[str] = set()
    if after_edit is not None:
        after_edit.calls = 0
        after_edit.armed = True

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


def after_edit_call() -> tuple[list[str], int]:
    """The modules the model call after the memory edit enters, in order, and its returns."""
    watcher = _AfterEdit(call_number=3)  # read_file, edit_file, then the call after the edit
    with tempfile.TemporaryDirectory() as folder:
        one_turn(Path(folder), watcher)
    order = [str(Path(name).relative_to(PACKAGE)) for name in watcher.sequence]
    returns = len(order) - len(set(order))
    return order, returns


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        modules = one_turn(Path(folder))
    total = sum(1 for _ in Path(PACKAGE).rglob("*.py"))
    print(f"modules entered in one turn: {len(modules)} of {total}")
    if "--list" in sys.argv:
        print("\n".join(sorted(modules)))
    order, returns = after_edit_call()
    print(
        f"the model call after a memory edit: {len(set(order))} modules, "
        f"{returns} returns to a module already left"
    )
    if "--list" in sys.argv:
        print(" -> ".join(order))


if __name__ == "__main__":
    main()
