"""The graph-state keys of `MemoryMiddleware` and the pure functions that compute their updates.

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

The run's data is read by `core.run_data`, a tool call's notes by `core.tool_calls`, the system
message edited by `core.system_message`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

from layered_memory.core.assembler import MemorySnapshot
from layered_memory.core.loading import MemoryExtras
from layered_memory.core.render import SessionEntry
from layered_memory.core.snapshot import RunStart

if TYPE_CHECKING:
    pass


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


MAX_RECALL_QUERY_CHARS = 4000
"""Characters of the latest user message a recall layer's choice reads (a pasted log must not
make every model call score megabytes)."""


def latest_user_text(state: Mapping[str, Any]) -> str:
    """The latest user message's text (up to `MAX_RECALL_QUERY_CHARS`): what a `recall=True`
    layer chooses its entries by, with the paths touched. On every model call of a run with a
    recall layer: a scan back to the last human message, nothing else."""
    for item in reversed(state.get("messages") or ()):
        if getattr(item, "type", None) == "human":
            content = item.content
            text = content if isinstance(content, str) else getattr(item, "text", "")
            return text[:MAX_RECALL_QUERY_CHARS] if isinstance(text, str) else ""
    return ""


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
