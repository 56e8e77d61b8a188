"""Quickstart: a deep agent with layered memory, on local files, with no API key.

What it shows, in its printed output:
1. the agent answers from the project's AGENTS.md layer;
2. it saves a user preference into its writable MEMORY.md with `edit_file`;
3. its very next model call already sees that edit;
4. AGENTS.md is changed on disk between two invocations of the same checkpointed thread, and
   the second invocation sees the change (deepagents' built-in memory keeps the stale copy).

Run:  python examples/quickstart.py                      (scripted model, no key needed)
      python examples/quickstart.py --model anthropic:claude-sonnet-4-5   (a real model)
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryMiddleware, build_thread_config
from layered_memory.core.render import DEFAULT_MAX_CHARS
from layered_memory.testing import PromptRecorder, ScriptedChatModel, system_text, tool_call

AGENTS_MD = """# Project: billing-service

- Test command: `make test`
- Code style: black, line length 100.
<!-- authoring note: HTML comments like this one are never shown to the model -->
"""

MEMORY_MD = "# Memory\n"
PREFERENCE = "- The user prefers short answers."


def _test_command(messages: list[BaseMessage]) -> str:
    match = re.search(r"Test command: `([^`]+)`", system_text(messages))
    return match.group(1) if match else "(not in memory)"


def scripted_model() -> ScriptedChatModel:
    """What a good model would do, written down: every answer is read from the prompt."""
    return ScriptedChatModel(
        script=[
            # Invocation 1, call 1: save the preference in the writable memory file.
            tool_call(
                "edit_file",
                file_path="/MEMORY.md",
                old_string="# Memory\n",
                new_string=f"# Memory\n{PREFERENCE}\n",
            ),
            # Invocation 1, call 2: answer from AGENTS.md.
            lambda messages: f"Run `{_test_command(messages)}`. Noted: you like short answers.",
            # Invocation 2: answer again, from AGENTS.md as it is now on disk.
            lambda messages: f"Run `{_test_command(messages)}`.",
        ]
    )


def build_agent(model: Any, root: Path) -> Any:
    """A deep agent whose memory is two layers: the project's AGENTS.md and its own MEMORY.md."""
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[
            Layer("project", "/AGENTS.md"),  # read-only: the agent cannot edit it
            Layer("agent-notes", "/MEMORY.md", writable=True),
        ],
    )
    # `memory=[]` opens deepagents' memory slot and our middleware (same name) takes it, which
    # puts the memory block after the prompt-caching breakpoint on the static system prompt.
    return create_deep_agent(
        model=model,
        # The same files, but every change to read-only memory is refused, for the agent's
        # tools, its subagents and its shell alike.
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
        checkpointer=InMemorySaver(),
        system_prompt="You are the billing-service team's coding assistant.",
    )


def run(model: Any, root: Path) -> dict[str, Any]:
    """Run the two invocations; return what a test needs to check."""
    (root / "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    agent = build_agent(model, root)
    recorder = PromptRecorder()
    config = {**build_thread_config("billing_service", "quickstart"), "callbacks": [recorder]}

    print(f"Memory files in {root}:  AGENTS.md (read-only layer), MEMORY.md (writable layer)\n")
    question = "Remember that I prefer short answers. How do I run the tests?"
    print(f"[invocation 1] user: {question}")
    first = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
    edits = [
        call
        for message in first["messages"]
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] in ("edit_file", "write_file")
    ]
    for call in edits:
        print(f"  agent called {call['name']} on {call['args'].get('file_path')}")
    print(f"  agent: {first['messages'][-1].text}")
    calls_in_first = len(recorder.system_prompts)
    seen_edit = [PREFERENCE in prompt for prompt in recorder.system_prompts]
    for index, seen in enumerate(seen_edit, start=1):
        print(
            f"  model call {index}: MEMORY.md edit in its system prompt: {'yes' if seen else 'no'}"
        )
    print(f"  MEMORY.md on disk now: {(root / 'MEMORY.md').read_text(encoding='utf-8')!r}\n")

    new_agents_md = AGENTS_MD.replace("make test", "make check")
    (root / "AGENTS.md").write_text(new_agents_md, encoding="utf-8")
    print("[between invocations] AGENTS.md edited on disk: test command is now `make check`")
    question = "Which command runs the tests now?"
    print(f"[invocation 2, same thread] user: {question}")
    second = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
    second_prompt = recorder.system_prompts[calls_in_first]
    sees_new = "make check" in second_prompt
    print(f"  model's system prompt has the new AGENTS.md: {'yes' if sees_new else 'no'}")
    print(f"  agent: {second['messages'][-1].text}")

    block = second_prompt[second_prompt.index("<agent_memory>") :]
    print(f"\nInjected memory block: {len(block)} chars (budget {DEFAULT_MAX_CHARS})")
    return {
        "edit_calls": edits,
        "edit_seen_per_call": seen_edit,
        "first_answer": first["messages"][-1].text,
        "second_answer": second["messages"][-1].text,
        "second_prompt_has_new_agents_md": sees_new,
        "memory_md": (root / "MEMORY.md").read_text(encoding="utf-8"),
        "block_chars": len(block),
    }


def main(argv: list[str] | None = None, *, root: Path | None = None) -> dict[str, Any]:
    """Parse the command line and run the quickstart in a fresh temporary folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    args = parser.parse_args(argv)
    if args.model:
        from langchain.chat_models import init_chat_model

        model: Any = init_chat_model(args.model)
    else:
        model = scripted_model()
    if root is not None:
        return run(model, root)
    with tempfile.TemporaryDirectory(prefix="layered-memory-quickstart-") as folder:
        return run(model, Path(folder))


if __name__ == "__main__":
    outcome = main()
    sys.exit(0 if outcome["second_prompt_has_new_agents_md"] else 1)
