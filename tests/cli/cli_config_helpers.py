"""A user's project for `--config`: memory files, rule files and the Python module configuring
the agent, written into a folder of the test's own.

The module's agents would fail if they ran: the model raises when called, a middleware raises
in `before_agent` and around the model call, and one memory middleware's hooks raise on
`PIPELINE_START`. `inspect`, `doctor` and `lint` must show their memory all the same.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

PROJECT = {
    "AGENTS.md": "# Billing service\n\n- Run `make test`.\n- Money is Decimal.\n",
    "MEMORY.md": "# Memory\n- The user prefers short answers.\n",
    ".claude/rules/python.md": "---\npaths: ['src/**/*.py']\n---\nUse ruff and mypy --strict.\n",
    ".claude/rules/acme.md": "---\npaths: ['*acme*']\n---\nAcme is billed in EUR.\n",
    "src/app.py": "print('hello')\n",
}

CONFIG_MODULE = '''
"""The user's agent configuration (what `--config MODULE:agent` points at)."""

from pathlib import Path

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage

from layered_memory import (
    HookEvent,
    HookRegistry,
    InMemorySessionStore,
    Layer,
    MemoryMiddleware,
)
from layered_memory.testing import ScriptedChatModel

HERE = Path(__file__).resolve().parent
print("configuring the agent")  # a module that prints: --json output must stay parseable


def explode(messages):
    raise RuntimeError("the model was called")


class Tripwire(AgentMiddleware):
    """Fails the run before anything else can happen."""

    def before_agent(self, state, runtime):
        raise RuntimeError("the agent was run")

    def wrap_model_call(self, request, handler):
        raise RuntimeError("the model was called")


def entity_in_message(state, runtime):
    """A match_keys callable: an entity named in the user's last message."""
    for message in reversed(state.get("messages", [])):
        if isinstance(message, HumanMessage):
            return ["acme_corp"] if "acme" in message.text.lower() else []
    return []


sessions = InMemorySessionStore()
sessions.set("t1", {"ticket": "T-42", "customer": "acme_corp"})

memory = MemoryMiddleware(
    backend=FilesystemBackend(root_dir=HERE, virtual_mode=True),
    layers=[
        Layer("project", "/AGENTS.md"),
        Layer("notes", "/MEMORY.md", writable=True),
    ],
    rules=["/.claude/rules"],
    match_keys=("entity_name", entity_in_message),
    session_store=sessions,
)

agent = create_deep_agent(
    model=ScriptedChatModel(script=[explode]),
    backend=memory.protected_backend,
    memory=[],
    middleware=[Tripwire(), memory],
)

plain_agent = create_agent(ScriptedChatModel(script=[explode]), middleware=[Tripwire(), memory])
middleware = [Tripwire(), memory]


def make_agent():
    return agent


def fail_hook(event, data):
    raise RuntimeError("a hook fired")


hooks = HookRegistry()
hooks.register(HookEvent.PIPELINE_START, fail_hook, name="tripwire", strict=True)
hooked = MemoryMiddleware(
    backend=FilesystemBackend(root_dir=HERE, virtual_mode=True),
    layers=[Layer("project", "/AGENTS.md")],
    hooks=hooks,
)

drop_in = MemoryMiddleware(
    backend=FilesystemBackend(root_dir=HERE, virtual_mode=True),
    sources=["/AGENTS.md", "/MEMORY.md"],
)

not_memory = Tripwire()
'''


def write(root: Path, files: dict[str, str | bytes]) -> None:
    """Write `files` (relative path -> text or bytes) below `root`."""
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def write_project(root: Path, *, module: str | None = None) -> str:
    """The project and its configuration module in `root`; returns the module's name (unique
    per call, so in-process tests never find an earlier test's module in `sys.modules`)."""
    name = module or f"agent_setup_{uuid.uuid4().hex[:10]}"
    write(root, {**PROJECT, f"{name}.py": textwrap.dedent(CONFIG_MODULE)})
    return name
