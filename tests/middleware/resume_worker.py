"""One half of an interrupted run, in its own process (used by test_resume_after_interrupt.py).

`start`: the model asks for two tools at once: `read_file` of a Python file and `ask_human`,
which interrupts; the run stops with `read_file` done and checkpointed.
`resume`: a new process resumes the thread from the checkpoint; the model answers whether the
rule for `**/*.py` (matched by the path `read_file` touched before the interrupt) is in its
system prompt.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.types import Command, interrupt

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel


@tool
def ask_human(question: str) -> str:
    """Ask the user and wait for the answer."""
    return str(interrupt(question))


def checkpointer(kind: str, where: str, stack: ExitStack) -> Any:
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return stack.enter_context(SqliteSaver.from_conn_string(where))
    from langgraph.checkpoint.postgres import PostgresSaver

    saver = stack.enter_context(PostgresSaver.from_conn_string(where))
    saver.setup()
    return saver


def main(phase: str, kind: str, where: str, root: str) -> None:
    both = AIMessage(
        content="",
        tool_calls=[
            {"name": "read_file", "args": {"file_path": "/src/app.py"}, "id": "c1"},
            {"name": "ask_human", "args": {"question": "go on?"}, "id": "c2"},
        ],
    )

    def answer(messages: list[Any]) -> str:
        return "RULE_SEEN" if "PY_RULE" in messages[0].text else "RULE_MISSING"

    model = ScriptedChatModel(script=[both] if phase == "start" else [answer])
    backend = FilesystemBackend(root_dir=Path(root), virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/rules"]
    )
    with ExitStack() as stack:
        agent = create_agent(
            model,
            tools=[ask_human],
            middleware=[FilesystemMiddleware(backend=memory.protected_backend), memory],
            checkpointer=checkpointer(kind, where, stack),
        )
        config = {"configurable": {"thread_id": "resume-test"}}
        if phase == "start":
            result = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
            print(json.dumps({"interrupted": "__interrupt__" in result}))
        else:
            result = agent.invoke(Command(resume="yes"), config)
            print(json.dumps({"answer": result["messages"][-1].text}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
