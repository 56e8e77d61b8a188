"""`layered-memory demo`: the quickstart, shipped in the package (no API key, no clone needed).

A real `create_deep_agent` on files in a temporary folder, with a scripted model, shows:

1. the agent answers from the project's AGENTS.md layer;
2. it saves a user preference into its writable MEMORY.md with `edit_file`;
3. its very next model call already sees that edit;
4. AGENTS.md is changed on disk between two invocations of the same checkpointed thread, and
   the second invocation sees the change (deepagents' built-in memory keeps the stale copy).

`examples/quickstart.py` (`make demo` in a clone) runs this module.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from layered_memory.cli._output import dumps_json, printable

__all__ = [
    "build_agent",
    "main",
    "make_model",
    "model_failure",
    "run",
    "run_demo",
    "scripted_model",
    "succeeded",
]

AGENTS_MD = """# Project: billing-service

- Test command: `make test`
- Code style: black, line length 100.
<!-- authoring note: HTML comments like this one are never shown to the model -->
"""

MEMORY_MD = "# Memory\n"
PREFERENCE = "- The user prefers short answers."

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

Say = Callable[[str], None]


def _test_command(messages: list[Any]) -> str:
    from layered_memory.testing import system_text

    match = re.search(r"Test command: `([^`]+)`", system_text(messages))
    return match.group(1) if match else "(not in memory)"


def scripted_model() -> Any:
    """What a good model would do, written down: every answer is read from the prompt."""
    from layered_memory.testing import ScriptedChatModel, tool_call

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
    from deepagents import create_deep_agent
    from deepagents.backends import FilesystemBackend
    from langgraph.checkpoint.memory import InMemorySaver

    from layered_memory import Layer, MemoryMiddleware

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


def run(model: Any, root: Path, *, say: Say = print) -> dict[str, Any]:
    """Run the two invocations in `root`, narrating through `say`; return what was seen."""
    from langchain_core.messages import AIMessage

    from layered_memory import build_thread_config
    from layered_memory.core.render import DEFAULT_MAX_CHARS
    from layered_memory.testing import PromptRecorder

    (root / "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    agent = build_agent(model, root)
    recorder = PromptRecorder()
    config = {**build_thread_config("billing_service", "quickstart"), "callbacks": [recorder]}

    shown_root = printable(root)
    say(f"Memory files in {shown_root}:  AGENTS.md (read-only layer), MEMORY.md (writable layer)\n")
    question = "Remember that I prefer short answers. How do I run the tests?"
    say(f"[invocation 1] user: {question}")
    first = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
    edits = [
        call
        for message in first["messages"]
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] in ("edit_file", "write_file")
    ]
    for call in edits:
        say(f"  agent called {call['name']} on {printable(call['args'].get('file_path'))}")
    say(f"  agent: {printable(first['messages'][-1].text)}")
    calls_in_first = len(recorder.system_prompts)
    seen_edit = [PREFERENCE in prompt for prompt in recorder.system_prompts]
    for index, seen in enumerate(seen_edit, start=1):
        say(f"  model call {index}: MEMORY.md edit in its system prompt: {'yes' if seen else 'no'}")
    memory_md = (root / "MEMORY.md").read_text(encoding="utf-8")
    say(f"  MEMORY.md on disk now: {printable(repr(memory_md))}\n")

    new_agents_md = AGENTS_MD.replace("make test", "make check")
    (root / "AGENTS.md").write_text(new_agents_md, encoding="utf-8")
    say("[between invocations] AGENTS.md edited on disk: test command is now `make check`")
    question = "Which command runs the tests now?"
    say(f"[invocation 2, same thread] user: {question}")
    second = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
    second_prompt = recorder.system_prompts[calls_in_first]
    sees_new = "make check" in second_prompt
    say(f"  model's system prompt has the new AGENTS.md: {'yes' if sees_new else 'no'}")
    say(f"  agent: {printable(second['messages'][-1].text)}")

    start = second_prompt.find("<agent_memory>")
    block = second_prompt[start:] if start != -1 else ""
    say(f"\nInjected memory block: {len(block)} chars (budget {DEFAULT_MAX_CHARS})")
    return {
        "edit_calls": edits,
        "edit_seen_per_call": seen_edit,
        "first_answer": first["messages"][-1].text,
        "second_answer": second["messages"][-1].text,
        "second_prompt_has_new_agents_md": sees_new,
        "memory_md": (root / "MEMORY.md").read_text(encoding="utf-8"),
        "block_chars": len(block),
    }


def succeeded(outcome: dict[str, Any]) -> bool:
    """Whether the run showed what the demo promises (edit seen next call, disk change seen)."""
    seen = outcome["edit_seen_per_call"]
    return bool(outcome["second_prompt_has_new_agents_md"] and seen and seen[-1])


def make_model(name: str | None) -> Any:
    """The scripted model, or a real one named `provider:name` (needs its package and key)."""
    if not name:
        return scripted_model()
    from langchain.chat_models import init_chat_model

    return init_chat_model(name)


def main(argv: list[str] | None = None, *, root: Path | None = None) -> dict[str, Any]:
    """Parse the command line and run the quickstart in a fresh temporary folder."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    args = parser.parse_args(argv)
    model = make_model(args.model)
    if root is not None:
        return run(model, root)
    with tempfile.TemporaryDirectory(prefix="layered-memory-quickstart-") as folder:
        return run(model, Path(folder))


# Environment variables whose values are credentials (`ANTHROPIC_API_KEY`, `*_TOKEN`...).
_SECRET_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_SHORTEST_SECRET = 8  # shorter values ("1", "true") would mask ordinary words


def model_failure(program: str, argv: Sequence[str], exc: Exception) -> str | None:
    """`PROGRAM: --model NAME: Type: first line`, secrets masked, when `argv` names a real
    model (`--model`); None for the scripted model, whose failure is a bug that keeps its
    traceback. The examples end with it, so they fail as `layered-memory demo` does."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--model")
    name = parser.parse_known_args(list(argv))[0].model
    return _model_failure(name, exc, program=program) if name else None


def _model_failure(name: str, exc: Exception, *, program: str = "layered-memory demo") -> str:
    """`--model NAME: Type: first line` without a secret: a provider's error may quote the API
    key or a proxy URL's password, and the chained traceback is noise to someone who mistyped
    a key."""
    from layered_memory.safety.redaction import redact
    from layered_memory.sessions.stores.urls import MASK, scrub

    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    detail, _kinds = redact(scrub(detail, None))
    # Keys the vendor patterns do not know (a made-up or old-format key) are still the
    # user's: hide the value of every credential variable the message quotes.
    for variable, value in os.environ.items():
        if len(value) >= _SHORTEST_SECRET and _SECRET_VARIABLE.search(variable):
            detail = detail.replace(value, MASK)
    return f"{program}: --model {printable(name)}: {printable(detail)}"


def run_demo(args: argparse.Namespace) -> int:
    """`layered-memory demo`: exit 0 when every promised behaviour was seen, 1 when not, 2 on a
    usage error (a `--root` that is not an empty folder, a `--model` that cannot be created or
    whose calls fail)."""
    root = Path(args.root).expanduser() if args.root else None
    if root is not None and root.exists() and (not root.is_dir() or any(root.iterdir())):
        # The demo writes AGENTS.md and MEMORY.md: never over a user's own files.
        print(
            f"layered-memory demo: --root {printable(args.root)}: not an empty folder "
            "(the demo writes AGENTS.md and MEMORY.md there)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        model = make_model(args.model)
    except Exception as exc:  # a missing provider package or API key: say which, exit 2
        print(_model_failure(args.model, exc), file=sys.stderr)
        return EXIT_USAGE
    say: Say = (lambda _line: None) if args.json else print
    failure: str | None = None
    try:
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
            outcome = run(model, root.resolve(), say=say)
        else:
            with tempfile.TemporaryDirectory(prefix="layered-memory-quickstart-") as folder:
                outcome = run(model, Path(folder), say=say)
    except Exception as exc:
        if not args.model:
            raise  # the scripted model cannot fail: a bug of ours, keep its traceback
        # A real model failed at call time (a refused key, no network, a quota).
        failure = _model_failure(args.model, exc)
    if failure is not None:
        print(failure, file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        data = {
            "version": 1,
            "ok": succeeded(outcome),
            "root": str(root.resolve()) if root is not None else None,
            **{key: value for key, value in outcome.items() if key != "edit_calls"},
            "edit_calls": [
                {"name": call["name"], "file_path": call["args"].get("file_path")}
                for call in outcome["edit_calls"]
            ],
        }
        print(dumps_json(data))
    return EXIT_OK if succeeded(outcome) else EXIT_FAILED
