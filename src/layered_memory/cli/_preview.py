"""The preview: what a configured agent's model would get, computed by its own middleware.

`before_agent` loads memory and notes the run's context strings; `wrap_model_call` renders
the block from the state. Here the same steps run on a state built from the command line
(`--message`, `--path`, `--context`, `--thread`) with the middleware's own objects: its
assembler's `load`, its backend (a backend factory is called as the middleware calls it), its
`match_keys`, its block renderer. No hook fires (a `PIPELINE_START` handler could do anything),
no model is called, no graph node runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from layered_memory.cli._config import error_detail
from layered_memory.core.assembler import MemorySnapshot
from layered_memory.core.render import (
    RenderedMemory,
)
from layered_memory.core.run_data import context_strings
from layered_memory.core.state import match_keys_of, merge_paths, snapshot_update, touched_of
from layered_memory.errors import (
    PreviewError,
)
from layered_memory.middleware import MemoryMiddleware


class RunContext(dict[str, Any]):
    """`--context key=value` pairs as the runtime context: a mapping (what `match_keys` names
    are looked up in) that also answers attribute access (`runtime.context.user_id`), as a
    dataclass `context_schema` would."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True, slots=True)
class AgentInput:
    """One model call's input, as the command line describes it.

    Attributes:
        message: The user's message (the state's `messages`), if given.
        paths: Files the agent's tools touched in the thread (rule match keys).
        context: The run's context (`context=` of `invoke`), by name.
        thread_id: The thread (`config["configurable"]["thread_id"]`): the session layer's key.
    """

    message: str | None = None
    paths: tuple[str, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    thread_id: str | None = None

    def as_data(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "message": self.message,
            "paths": list(self.paths),
            "context": dict(self.context),
            "thread_id": self.thread_id,
        }


@dataclass(frozen=True, slots=True)
class Preview:
    """What the model's system message would carry.

    Attributes:
        snapshot: What the middleware's load read.
        keys: The rule match keys of the call (touched paths, then context strings).
        block: The text appended to the system message ("" when `system_prompt=None`).
        rendered: The same block with the renderer's account of each part (`render_report`).
        backend: The backend the load read through (a factory's product, or the fixed one).
        injected: Whether the middleware injects a block at all (`system_prompt` not None).
    """

    snapshot: MemorySnapshot
    keys: tuple[str, ...]
    block: str
    rendered: RenderedMemory
    backend: Any
    injected: bool


def parse_context(pairs: Sequence[str]) -> dict[str, str]:
    """`key=value` options -> a mapping (a later pair with the same key wins).

    Raises:
        ValueError: A pair without `=` or with an empty key.
    """
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            msg = f"--context {pair!r}: expected KEY=VALUE, e.g. --context entity_name=acme_corp"
            raise ValueError(msg)
        context[key.strip()] = value
    return context


def preview(memory: MemoryMiddleware[Any, Any], given: AgentInput, *, store: Any = None) -> Preview:
    """Load and render memory as `memory` would for one model call of a run with this input.

    Args:
        memory: The middleware the agent runs.
        given: The run's input.
        store: The agent's `BaseStore` (`create_agent(store=...)`), handed to a backend factory
            through the runtime as LangGraph would.

    Raises:
        PreviewError: A backend factory or a `match_keys` callable raised.
    """
    state: dict[str, Any] = {"messages": [HumanMessage(given.message)] if given.message else []}
    if given.paths:
        state["memory_touched_paths"] = merge_paths(None, list(given.paths))
    runtime = Runtime(context=RunContext(given.context), store=store)
    config: dict[str, Any] = {"configurable": {}}
    if given.thread_id is not None:
        config["configurable"]["thread_id"] = given.thread_id
    failure: PreviewError | None = None
    try:
        backend = memory._backend(state, runtime, config)  # type: ignore[arg-type]
    except (Exception, SystemExit) as exc:  # the user's factory: a sys.exit is no clean check
        failure = PreviewError(f"the backend factory raised {error_detail(exc)}")
    if failure is not None:
        raise failure
    # As `before_agent` loads at the start of a run in a thread whose tools touched those paths
    # (nested memory is looked up in their folders).
    snapshot = memory.assembler.load(
        session_key=given.thread_id, backend=backend, touched=touched_of(state)
    )
    try:
        context_keys = context_strings(memory.match_keys, state, runtime, config)  # type: ignore[arg-type]
    except (Exception, SystemExit) as exc:
        failure = PreviewError(f"a match_keys callable raised {error_detail(exc)}")
    if failure is not None:
        raise failure
    after = {**state, **snapshot_update(state, snapshot, context_keys)}
    keys = tuple(match_keys_of(after))
    injected = memory.system_prompt is not None
    rendered = memory.assembler.render_report(snapshot, keys=keys)
    # The very function `wrap_model_call` renders with; `rendered` is the same text with the
    # account of each part.
    block = memory._memory_block(after) if injected else ""
    return Preview(
        snapshot=snapshot,
        keys=keys,
        block=block,
        rendered=rendered,
        backend=backend if backend is not None else memory.assembler.backend,
        injected=injected,
    )


def describe_backend(backend: Any) -> str:
    """A backend in words: its class (not the guard's generated one) and where it reads."""
    from deepagents.backends.composite import CompositeBackend
    from deepagents.backends.filesystem import FilesystemBackend

    kind = next(
        (k for k in type(backend).__mro__ if not k.__module__.startswith("layered_memory.")),
        type(backend),
    )
    if isinstance(backend, FilesystemBackend):
        paths = "virtual paths" if backend.virtual_mode else "host paths"
        return f"{kind.__name__} at {backend.cwd} ({paths})"
    if isinstance(backend, CompositeBackend):
        return f"{kind.__name__} (default: {describe_backend(backend.default)})"
    return kind.__name__
