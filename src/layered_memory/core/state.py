"""What a run carries and reads, as pure functions shared by the sync and async hooks: the graph
state of `MemoryMiddleware`, the run's data, a tool call's notes, the system message.

The graph-state keys of `MemoryMiddleware` and the pure functions that compute their updates.

Everything a later step of a run needs lives here, in the checkpointed state, never in the
middleware instance: a run interrupted after a tool call and resumed in another process (a
human approval hours later, another worker) behaves as if it had not stopped.

Four keys, because every state key is a graph channel that each step of every run pays for:

- `memory_contents`: layer path -> text, the key deepagents' own class keeps (drop-in);
- `memory_loaded`: everything else one load produced (rule texts, session layer, digest,
  unreadable files, context strings, what the run-start snapshot keeps besides the texts),
  replaced as a whole;
- `memory_touched_paths`: paths the agent's tools named; parallel tool calls add to it (union);
- `memory_edits`: memory edits not yet reloaded; tool calls add 1 each, a load resets it.


Reading a run's data: the state, the runtime context and `config["configurable"]`.

`PIPELINE_END` handlers receive the final state plus `config`, `runtime_context` and
`thread_id`; the middleware reads match keys from the same places. One set of helpers, so every
reader agrees on where a value may come from and what counts as true.

What the middleware does around a tool call, as pure functions: read the call, refuse it,
or carry the call's notes back into the graph state with the tool's own result.

System-message edits shared by the middleware's sync and async halves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from layered_memory.core.assembler import MemorySnapshot
from layered_memory.core.guard import MEMORY_TOOL, Operation, refusal_message
from layered_memory.core.loading import MemoryExtras
from layered_memory.core.render import SessionEntry
from layered_memory.core.snapshot import RunStart
from layered_memory.core.validation import invalid_path_reason

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


# -- the state keys -------------------------------------------------------------------------------

RESET = -1
"""Written to `memory_edits` by a load: the edits so far are in what was loaded."""


def merge_paths(current: list[str] | None, new: list[str] | None) -> list[str]:
    """Reducer of `memory_touched_paths`: the sorted union (parallel tool calls add paths)."""
    if not new:
        return current or []
    if not current:
        return sorted(set(new))
    return sorted({*current, *new})


def count_edits(current: int | None, new: int | None) -> int:
    """Reducer of `memory_edits`: tool calls add, a load resets (`RESET`)."""
    if new is None:
        return current or 0
    return 0 if new == RESET else (current or 0) + new


class LoadedMemory(TypedDict):
    """What one load put into the state besides the layer texts."""

    rule_files: dict[str, str]
    session: dict[str, Any] | None
    digest: str
    unreadable: dict[str, str]
    """Layer files that exist but could not be read: path -> reason (never overwritten)."""
    match_context: list[str]
    """Context strings for rule matching (entity name, task tag), fixed per invocation."""
    extras: NotRequired[dict[str, Any]]
    """Nested memory and `@path` imports (`MemoryExtras.to_state`)."""
    run_start: NotRequired[dict[str, Any]]
    """What the run-start snapshot keeps besides the texts above (`run_start_of`): taken by
    `before_agent`, carried unchanged by every later load of the run."""


class LayeredMemoryState(AgentState):  # type: ignore[type-arg]
    """State keys of `MemoryMiddleware` (private: not part of the agent's input or output)."""

    memory_contents: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """Layer path -> text, as deepagents' `MemoryMiddleware` keeps it."""
    memory_loaded: NotRequired[Annotated[LoadedMemory, PrivateStateAttr]]
    memory_touched_paths: NotRequired[Annotated[list[str], PrivateStateAttr, merge_paths]]
    """Paths the agent's tools named in this thread (rule match keys); tool calls add to it."""
    memory_edits: NotRequired[Annotated[int, PrivateStateAttr, count_edits]]
    """Tool calls that changed a memory file since the last load."""


def loaded(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The `memory_loaded` part of a state (empty before the first load)."""
    return state.get("memory_loaded") or {}


def snapshot_update(
    state: Mapping[str, Any],
    snapshot: MemorySnapshot,
    context_keys: list[str],
    run_start: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The keys to write after a load: the texts when they changed, the context strings when
    they changed, and the reset of the pending edits the load has caught up with.

    `run_start` is a new run's snapshot data (`before_agent`); a mid-run load passes None and
    keeps the one its run started with.
    """
    update: dict[str, Any] = {}
    previous = loaded(state)
    start = (previous.get("run_start") if run_start is None else run_start) or None
    if (
        previous.get("digest") != snapshot.digest
        or "memory_contents" not in state
        or start != (previous.get("run_start") or None)
    ):
        update["memory_contents"] = dict(snapshot.files)
        update["memory_loaded"] = LoadedMemory(
            rule_files=dict(snapshot.rule_files),
            session=(
                {"key": snapshot.session.key, "data": dict(snapshot.session.data)}
                if snapshot.session
                else None
            ),
            digest=snapshot.digest,
            unreadable=dict(snapshot.unreadable),
            match_context=context_keys,
        )
        if snapshot.extras:
            update["memory_loaded"]["extras"] = snapshot.extras.to_state()
        if start:
            update["memory_loaded"]["run_start"] = start
    elif previous.get("match_context", []) != context_keys:
        update["memory_loaded"] = {**previous, "match_context": context_keys}
    if (state.get("memory_edits") or 0) > 0:
        update["memory_edits"] = RESET
    return update


def needs_reload(state: Mapping[str, Any]) -> bool:
    """A tool call edited memory since the last load."""
    return (state.get("memory_edits") or 0) > 0


def tool_notes(
    state: Mapping[str, Any], touched: Iterable[str], edited_memory: bool
) -> dict[str, Any]:
    """What one tool call adds to the state: the paths it named that are new to the thread,
    and one memory edit."""
    known = state.get("memory_touched_paths") or ()
    new = sorted(set(touched).difference(known))
    update: dict[str, Any] = {}
    if new:
        update["memory_touched_paths"] = new
    if edited_memory:
        update["memory_edits"] = 1
    return update


def session_of(state: Mapping[str, Any]) -> SessionEntry | None:
    """The session layer kept in state."""
    session = loaded(state).get("session")
    return SessionEntry(session["key"], session["data"]) if session else None


def match_keys_of(state: Mapping[str, Any]) -> tuple[str, ...]:
    """Rule match keys: touched paths, then context strings."""
    return (*state.get("memory_touched_paths", ()), *loaded(state).get("match_context", ()))


def extras_of(state: Mapping[str, Any]) -> MemoryExtras:
    """The nested and imported memory kept in state."""
    return MemoryExtras.from_state(loaded(state).get("extras"))


def touched_of(state: Mapping[str, Any]) -> list[str]:
    """The paths the agent's tools named in this thread."""
    return list(state.get("memory_touched_paths") or ())


def run_start_of(
    state: Mapping[str, Any],
    *,
    read_only: Collection[str],
    rule_folders: Sequence[str],
    rule_index: Callable[[str], int],
    nested: Sequence[str],
) -> RunStart:
    """The run-start snapshot kept in state: what read-only memory held when the run started.

    Args:
        state: The run's state.
        read_only: The read-only layer files (a read-only folder layer's: those the state
            holds).
        rule_folders: The read-only rule folders (empty when rules are writable).
        rule_index: A rule file's folder precedence (as the load's listing gives it).
        nested: The names of read-only nested memory files (empty when they are writable).
    """
    memory = loaded(state)
    data = memory.get("run_start") or {}
    extras = extras_of(state)
    contents = state.get("memory_contents") or {}
    unreadable = memory.get("unreadable") or {}
    texts = {path: text for path, text in contents.items() if path in read_only}
    for kind in (extras.nested, extras.imports):
        texts.update((p, t) for p, t in kind.items() if extras.access.get(p) == "read-only")
    left_out = {path: why for path, why in unreadable.items() if path in read_only}
    left_out.update(data.get("left_out") or {})
    listing: tuple[tuple[int, str], ...] | None = None
    if rule_folders:
        rules = memory.get("rule_files") or {}
        texts.update(rules)
        unread = data.get("unread_rules") or {}
        left_out.update(unread)
        listing = tuple(sorted((rule_index(path), path) for path in [*rules, *unread]))
    # Read-only files looked for and not found: layer files, and what read-only files import.
    absent = {path for path in read_only if path not in contents and path not in left_out}
    for importer, targets in extras.edges.items():
        if importer in read_only or extras.access.get(importer) == "read-only":
            absent.update(t for t in targets if t not in texts and t not in extras.imports)
    others = data.get("others")
    return RunStart(
        texts=texts,
        absent=frozenset(absent - left_out.keys()),
        left_out=left_out,
        digests=data.get("digests") or {},
        rules=listing,
        rule_folders=tuple(rule_folders),
        others=None if others is None else frozenset(others),
        folders=(data.get("folders") or {}) if rule_folders else {},
        complete=bool(data.get("complete")),
        nested=tuple(nested),
        unlisted=frozenset(data.get("unlisted") or ()),
        layer_folders=frozenset(data.get("layer_folders") or ()),
        modes={
            **(data.get("modes") or {}),
            **((data.get("rule_modes") or {}) if rule_folders else {}),
        },
    )


# -- run data -------------------------------------------------------------------------------------

MatchKeySource = str | Callable[[Mapping[str, Any], Any], Iterable[str]]
"""A context name read from runtime.context / state / config, or a callable(state, runtime)."""

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def context_value(context: Any, key: str) -> Any:
    """`key` of a runtime context that may be a mapping, a dataclass/object, or None."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def configurable(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data["config"]["configurable"]`, or an empty mapping."""
    config = data.get("config")
    found = config.get("configurable") if isinstance(config, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def run_value(data: Mapping[str, Any], key: str) -> Any:
    """`key` from the runtime context, then the state, then `config["configurable"]`.

    The one lookup order of the package (match keys, write-back entity, dry run): what the
    caller passed for this run wins over what the thread accumulated.
    """
    value = context_value(data.get("runtime_context"), key)
    if value is None:
        value = data.get(key)
    if value is None:
        value = configurable(data).get(key)
    return value


def run_data(
    state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
) -> dict[str, Any]:
    """The state with the run's `config`, `runtime_context` and `thread_id` beside it: what
    hooks receive and what `run_value` reads."""
    return {
        **state,
        "config": config or {},
        "runtime_context": getattr(runtime, "context", None),
        "thread_id": thread_id(config),
    }


def context_strings(
    sources: Sequence[str | Callable[[Mapping[str, Any], Any], Iterable[str]]],
    state: Mapping[str, Any],
    runtime: Any,
    config: RunnableConfig | None,
) -> list[str]:
    """The strings named by `match_keys` for this run (names looked up with `run_value`, or
    callables `(state, runtime)`), sorted and unique."""
    data = run_data(state, runtime, config)
    found: set[str] = set()
    for source in sources:
        values = source(state, runtime) if callable(source) else run_value(data, source)
        if isinstance(values, str):
            found.add(values)
        elif isinstance(values, Iterable):
            found.update(value for value in values if isinstance(value, str))
    return sorted(value for value in found if value)


def current_config(config: RunnableConfig | None = None) -> RunnableConfig | None:
    """The config LangGraph (or a direct caller) passed, else the running graph's own."""
    if config is not None:
        return config
    try:
        return get_config()
    except RuntimeError:  # called outside a graph (a hook invoked directly in a test)
        return None


def thread_id(config: RunnableConfig | None) -> str | None:
    """The run's `thread_id` from its config."""
    found = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(found) if found is not None else None


def truthy(value: Any) -> bool:
    """A flag's value, accepting the strings a config file or CLI would give."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_WORDS
    return bool(value)


def is_dry_run(data: Mapping[str, Any]) -> bool:
    """Whether `dry_run` is true, looked up as every run value is (`run_value`: the runtime
    context, then the state, then the config)."""
    return truthy(run_value(data, "dry_run"))


def thread_id_of(data: Mapping[str, Any]) -> str | None:
    """The run's thread id (also its session key): `thread_id`, else the config's."""
    value = data.get("thread_id") or configurable(data).get("thread_id")
    return None if value is None else str(value)


# -- tool calls -----------------------------------------------------------------------------------

MUTATING_TOOLS: Mapping[str, Operation] = {
    "write_file": "write",
    "edit_file": "edit",
    "delete": "delete",
}
"""deepagents' file tools that change a file, and the backend operation each one is."""

MEMORY_TOOL_CHANGES: Mapping[str, tuple[tuple[str, Operation], ...]] = {
    "create": (("path", "write"),),
    "str_replace": (("path", "edit"),),
    "insert": (("path", "edit"),),
    "delete": (("path", "delete"),),
    # A rename removes its source (Anthropic's API names it `old_path`, langchain's tool
    # `path`) and writes its target.
    "rename": (("old_path", "delete"), ("path", "delete"), ("new_path", "write")),
}
"""Anthropic's `memory` tool (langchain-anthropic's `FilesystemClaudeMemoryMiddleware` and
`StateClaudeMemoryMiddleware`): per command that changes files, the arguments naming them and
the backend operation each is (`view` changes nothing)."""

PATH_ARGUMENTS = ("file_path", "path", "old_path", "new_path")
"""Arguments of file tools that name a path (rule match keys): deepagents' and the memory
tool's."""


def named_paths(call: Mapping[str, Any]) -> set[str]:
    """The paths a tool call names in its arguments."""
    args = call.get("args") or {}
    return {args[name] for name in PATH_ARGUMENTS if isinstance(args.get(name), str)}


def changed_paths(call: Mapping[str, Any]) -> list[tuple[str, Operation]]:
    """The paths a tool call would change, each with the backend operation it is (empty for a
    call that changes no file)."""
    name = call.get("name", "")
    if name in MUTATING_TOOLS:
        return [(path, MUTATING_TOOLS[name]) for path in sorted(named_paths(call))]
    if name != MEMORY_TOOL:
        return []
    args = call.get("args") or {}
    command = args.get("command")
    changes = MEMORY_TOOL_CHANGES.get(command, ()) if isinstance(command, str) else ()
    return [(args[key], operation) for key, operation in changes if isinstance(args.get(key), str)]


def error_message(call: Mapping[str, Any], text: str) -> ToolMessage:
    """The tool's answer when the middleware refuses the call (the tool never runs)."""
    name = call.get("name", "")
    return ToolMessage(
        content=text,
        tool_call_id=call.get("id") or "",
        name=name,
        # The memory tool answers its own errors as plain text (its handlers return
        # `str(error)`): a refusal comes in the shape the model knows from it.
        status="success" if name == MEMORY_TOOL else "error",
    )


def refused(call: Mapping[str, Any], reason: str) -> ToolMessage:
    """A refusal to change read-only memory."""
    return error_message(call, refusal_message(call.get("name", ""), reason))


def invalid_path_refused(call: Mapping[str, Any], paths: Iterable[str]) -> ToolMessage | None:
    """An error for a path no file can have (a NUL byte, a lone surrogate, past 4096
    characters): file tools raise on such a path, which would end the run."""
    for path in sorted(paths):
        reason = invalid_path_reason(path)
        if reason is not None:
            text = f"Error: {call.get('name', '')} refused: the path {reason}. Nothing was done."
            return error_message(call, text)
    return None


def with_state_update(
    result: ToolMessage | Command[Any], update: Mapping[str, Any]
) -> ToolMessage | Command[Any]:
    """The tool's result with `update` applied to the graph state in the same step.

    Returned as a `Command` beside the tool's message, the notes are checkpointed with the
    tool's result: a run interrupted right after this call keeps them.
    """
    if not update:
        return result
    if isinstance(result, ToolMessage):
        return Command(update={"messages": [result], **update})
    if isinstance(result, Command) and result.graph is None:
        if isinstance(result.update, Mapping):
            merged: Any = {**result.update, **update}
        elif result.update is None:
            merged = dict(update)
        else:  # a sequence of (key, value) pairs
            merged = [*result.update, *update.items()]
        return Command(update=merged, goto=result.goto, resume=result.resume)
    return result  # a command for another graph: leave it as the tool made it


def with_note(result: ToolMessage | Command[Any], note: str) -> ToolMessage | Command[Any]:
    """The tool's result with a note for the model appended (once): to its message, or to the
    tool message a `Command` carries (a `task` subagent answers with one)."""
    if isinstance(result, ToolMessage):
        if note in result.text:
            return result
        return result.model_copy(update={"content": f"{result.text}{note}"})
    if isinstance(result, Command) and result.graph is None and isinstance(result.update, Mapping):
        messages = list(result.update.get("messages") or ())
        for index in range(len(messages) - 1, -1, -1):
            if isinstance(messages[index], ToolMessage):
                messages[index] = with_note(messages[index], note)
                update = {**result.update, "messages": messages}
                return Command(update=update, goto=result.goto, resume=result.resume)
    return result


def without_files(result: ToolMessage | Command[Any], paths: Iterable[str]) -> Command[Any]:
    """A tool's `Command` without these paths in its `files` state update."""
    assert isinstance(result, Command)
    assert isinstance(result.update, Mapping)
    gone = set(paths)
    files = {path: data for path, data in result.update["files"].items() if path not in gone}
    return Command(update={**result.update, "files": files}, goto=result.goto, resume=result.resume)


def state_files(result: ToolMessage | Command[Any]) -> Mapping[str, Any]:
    """The `files` state update a tool's `Command` carries (deepagents' `StateBackend`)."""
    if isinstance(result, Command) and result.graph is None and isinstance(result.update, Mapping):
        files = result.update.get("files")
        if isinstance(files, Mapping):
            return files
    return {}


# -- the system message ---------------------------------------------------------------------------


def append_block(system_message: SystemMessage | None, text: str) -> SystemMessage:
    """A new system message: the old content blocks, then `text` as one more text block.

    A separate block (not string concatenation) keeps the base prompt's bytes, and any cache
    breakpoint tagged on them, exactly as they were.
    """
    blocks = _text_blocks(system_message)
    if blocks:
        text = f"\n\n{text}"
    blocks.append({"type": "text", "text": text})
    return SystemMessage(content_blocks=blocks)


def _text_blocks(system_message: SystemMessage | None) -> list[Any]:
    """The message's content blocks; plain text is converted directly (the hot path).

    `content_blocks` is correct for every shape but costs a full conversion per model call;
    a string or a list of plain text blocks needs none.
    """
    if system_message is None:
        return []
    content = system_message.content
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if all(isinstance(block, dict) and block.keys() == {"type", "text"} for block in content):
        return list(content)
    return list(system_message.content_blocks)


def tag_last_block_for_cache(system_message: SystemMessage) -> SystemMessage:
    """The same message with an Anthropic `cache_control` breakpoint on its last block."""
    blocks: list[Any] = list(system_message.content_blocks)
    last = blocks[-1]
    blocks[-1] = {
        **(last if isinstance(last, dict) else {}),
        "cache_control": {"type": "ephemeral"},
    }
    return SystemMessage(content_blocks=blocks)


def is_anthropic_model(model: object) -> bool:
    """Whether `model` is a `ChatAnthropic` (without importing the Anthropic SDK)."""
    module = sys.modules.get("langchain_anthropic.chat_models")
    return module is not None and isinstance(model, module.ChatAnthropic)
