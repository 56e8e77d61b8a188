"""Memory and the rules matched earlier survive LangChain's SummarizationMiddleware.

Summarization replaces old messages with a summary; memory does not live in the messages. The
block is rendered per model call from the graph state (the loaded texts, the paths the agent
touched, the run's context), so five compactions later the model still sees the project's
memory and the rule a long-summarised tool call matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel

COMPACTIONS = 5


@tool
def read_file(file_path: str) -> str:
    """Read a file."""
    return f"contents of {file_path}"


def test_memory_and_matched_rules_survive_five_compactions(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("PROJECT-FACT: deploys go through staging first.\n")
    (tmp_path / "MEMORY.md").write_text("- NOTE-FACT: the user signs as Kim.\n")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "python.md").write_text('---\npaths: ["**/*.py"]\n---\nPY-RULE: type hints.\n')
    (rules / "billing.md").write_text("---\nalwaysApply: false\n---\nBILLING-RULE: net 30.\n")
    memory = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/rules"],
        match_keys=("topic",),
    )
    turns = COMPACTIONS + 1
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "read_file", "args": {"file_path": "/src/app.py"}, "id": "c1"}
                ],
            ),
            *(f"answer {turn}" for turn in range(turns)),
        ]
    )
    summarizer = ScriptedChatModel(script=[], default="Summary of the conversation so far.")
    agent = create_agent(
        model,
        tools=[read_file],
        middleware=[
            SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 2)),
            memory,
        ],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "long-thread"}}
    for turn in range(turns):
        state = agent.invoke(
            {"messages": [HumanMessage(f"question {turn}")]}, config, context={"topic": "billing"}
        )

    assert len(summarizer.prompts) >= COMPACTIONS  # the conversation was compacted five times
    assert "Summary of the conversation so far." in state["messages"][0].text
    # The tool call that touched /src/app.py was summarised away long ago...
    assert not any(getattr(message, "tool_calls", None) for message in state["messages"]), (
        "the tool call should have been compacted away"
    )
    # ...yet every model call, before and after each compaction, got memory and both rules.
    assert len(model.system_prompts) == turns + 1
    for system in model.system_prompts[1:]:
        assert "PROJECT-FACT" in system
        assert "NOTE-FACT" in system
        assert "PY-RULE" in system  # matched by the path the compacted tool call named
        assert "BILLING-RULE" in system  # matched by the run's context
    assert "PY-RULE" not in model.system_prompts[0]  # before the tool call: no .py path yet
