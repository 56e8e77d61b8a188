"""Learning loop: what one run learns is written to MEMORY.md, and the next run starts with it.

Three runs of one deep agent, each for a different client (entity), then a dry run:

1. `acme_corp`: the agent calls the `record_insight` tool during the run; the note is written
   to MEMORY.md when the run ends (PIPELINE_END -> the `memory_write_back` handler).
2. `globex`: the agent ends its answer with an `INSIGHT: ...` line, which the default
   formatter picks up.
3. `initech`: the model's system prompt now holds both earlier insights (MemoryMiddleware
   reloads MEMORY.md on every invocation).
4. `umbrella` with `dry_run`: the run states an insight, but nothing is written.

MEMORY.md is printed after each run.

Run:  python examples/learning_loop.py                                (scripted model, no key)
      python examples/learning_loop.py --async                        (ainvoke: async hooks)
      python examples/learning_loop.py --model anthropic:claude-sonnet-4-5   (a real model)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import (
    HookEvent,
    HookRegistry,
    InsightNotebook,
    Layer,
    MemoryMiddleware,
    MemoryWriter,
    build_thread_config,
    record_insight_tool,
    register_write_back,
)
from layered_memory.cli.demo import model_failure
from layered_memory.testing import PromptRecorder, ScriptedChatModel, system_text, tool_call

AGENTS_MD = "# Reporting team\n\n- Reports are one page, with a summary first.\n"
MEMORY_MD = "# Memory\n\nWhat this agent has learned about our clients.\n"

SYSTEM_PROMPT = (
    "You write client reports. When you learn something durable about the client (a "
    "preference, a deadline, a pitfall), call `record_insight` with one short sentence, or end "
    "your final answer with a line `INSIGHT: <one short sentence>`."
)

ACME_INSIGHT = "Acme Corp wants every figure in EUR."
GLOBEX_INSIGHT = "Globex needs reports before Monday 9:00 CET."
UMBRELLA_INSIGHT = "Umbrella must never appear in memory (dry run)."

RUNS: list[tuple[str, str, bool]] = [
    # entity, user request, dry_run
    ("acme_corp", "Prepare Acme's quarterly report.", False),
    ("globex", "Prepare Globex's monthly report.", False),
    ("initech", "Prepare Initech's report. What do you know about our other clients?", False),
    ("umbrella", "Draft a trial report for Umbrella.", True),
]


def _what_i_know(messages: list[BaseMessage]) -> str:
    prompt = system_text(messages)
    known = [insight for insight in (ACME_INSIGHT, GLOBEX_INSIGHT) if insight in prompt]
    return "Initech report drafted. From memory: " + (" ".join(known) or "nothing yet.")


def scripted_model() -> ScriptedChatModel:
    """What a good model would do, written down; run 3 answers from its actual prompt."""
    return ScriptedChatModel(
        script=[
            # run 1 (acme_corp): record a note with the tool, then answer
            tool_call("record_insight", note=ACME_INSIGHT),
            "Acme's quarterly report is ready, all figures in EUR.",
            # run 2 (globex): state the insight in the final answer
            f"Globex's monthly report is ready.\nINSIGHT: {GLOBEX_INSIGHT}",
            # run 3 (initech): read what memory says about the other clients
            _what_i_know,
            # run 4 (umbrella, dry run): an insight that must not be written
            f"Trial report drafted.\nINSIGHT: {UMBRELLA_INSIGHT}",
        ]
    )


def build_agent(model: Any, root: Path) -> tuple[Any, MemoryWriter, list[dict[str, Any]]]:
    """A deep agent with project + writable memory layers and the write-back hook."""
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    registry = HookRegistry()
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=50)
    notebook = InsightNotebook()
    register_write_back(registry, writer, notebook=notebook)
    written: list[dict[str, Any]] = []
    registry.register(
        HookEvent.MEMORY_WRITTEN, lambda _event, data: written.append(dict(data)), name="report"
    )
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("memory", "/MEMORY.md", writable=True)],
        hooks=registry,
    )
    agent = create_deep_agent(
        model=model,
        tools=[record_insight_tool(notebook)],
        backend=memory.protected_backend,
        memory=[],  # our middleware takes deepagents' memory slot
        middleware=[memory],
        checkpointer=InMemorySaver(),
        system_prompt=SYSTEM_PROMPT,
    )
    return agent, writer, written


def run(model: Any, root: Path, *, use_async: bool = False) -> dict[str, Any]:
    """Play the four runs (with `ainvoke` when `use_async`); return what a test checks."""
    (root / "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    agent, writer, written = build_agent(model, root)
    recorder = PromptRecorder()
    memory_after: list[str] = []
    first_prompt_of_run: list[str] = []

    for number, (entity, request, dry_run) in enumerate(RUNS, start=1):
        config: Any = build_thread_config(entity, "report")
        config["configurable"].update({"entity_name": entity, "dry_run": dry_run})
        config["callbacks"] = [recorder]
        calls_before = len(recorder.system_prompts)
        label = f"run {number}: {entity}" + (" (dry run)" if dry_run else "")
        print(f"=== {label} ===\nuser:  {request}")
        inputs = {"messages": [{"role": "user", "content": request}]}
        if use_async:
            final = asyncio.run(agent.ainvoke(inputs, config))
        else:
            final = agent.invoke(inputs, config)
        print(f"agent: {final['messages'][-1].text}")
        first_prompt_of_run.append(recorder.system_prompts[calls_before])
        memory_after.append((root / "MEMORY.md").read_text(encoding="utf-8"))
        print(f"--- MEMORY.md after {label} ---\n{memory_after[-1]}")

    third_prompt = first_prompt_of_run[2]
    outcome = {
        "memory_after_run": memory_after,
        "written": written,
        "third_prompt_has_first_two": ACME_INSIGHT in third_prompt
        and GLOBEX_INSIGHT in third_prompt,
        "dry_run_wrote_nothing": memory_after[3] == memory_after[2],
        "archive_exists": (root / Path(writer.archive_path).name).exists(),
    }
    print(
        "third run's system prompt holds the first two insights: "
        f"{'yes' if outcome['third_prompt_has_first_two'] else 'no'}\n"
        f"dry run left MEMORY.md unchanged: {'yes' if outcome['dry_run_wrote_nothing'] else 'no'}"
    )
    return outcome


def main(argv: list[str] | None = None, *, root: Path | None = None) -> dict[str, Any]:
    """Parse the command line and run the loop (in `root`, or a fresh temporary folder)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    parser.add_argument("--async", dest="use_async", action="store_true", help="use ainvoke")
    args = parser.parse_args(argv)
    if args.model:
        from langchain.chat_models import init_chat_model

        model: Any = init_chat_model(args.model)
    else:
        model = scripted_model()
    if root is not None:
        return run(model, root, use_async=args.use_async)
    with tempfile.TemporaryDirectory(prefix="layered-memory-learning-loop-") as folder:
        return run(model, Path(folder), use_async=args.use_async)


if __name__ == "__main__":
    try:
        result = main()
    except Exception as exc:
        line = model_failure("learning_loop.py", sys.argv[1:], exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if result["third_prompt_has_first_two"] and result["dry_run_wrote_nothing"] else 1)
