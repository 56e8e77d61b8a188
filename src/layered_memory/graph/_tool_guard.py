"""What `KnowledgeGraphMiddleware` decides around a tool call, as pure functions of the call,
the conversation and where the graph file lives.

- Read-only: the six mutating graph tools are refused, and so are deepagents' file tools
  (`write_file`, `edit_file`, `delete`) on the graph file under any alias, with the same
  `guard.refusal` the protected backend view asks.
- A graph kept in the agent state (`StateBackend`, also behind a `CompositeBackend` route):
  each tool call of one model turn runs as its own task on the state as it was before the turn,
  and the `files` channel keeps the last write of a file. Two calls that both change the graph
  file in one turn would silently lose one change, so the later one is refused with a message
  telling the model to repeat it (as deepagents refuses parallel `write_file`s of one path).
- After which tool results the next model call reloads the file: the graph's own mutations,
  a subagent (`task`), a shell command (`execute`) and a file tool that wrote the graph file.
- A writable graph: a `write_file` / `edit_file` of the graph file has its text redacted before
  the tool runs, as `MemoryMiddleware` does for memory files (`redact_memory_edit`): the
  graph's own tools redact what they store, and the file tools must not be a way around that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepagents.backends import StateBackend
from langchain_core.messages import AIMessage, ToolMessage

from layered_memory.core._internals import final_route
from layered_memory.core._tool_calls import MUTATING_TOOLS as FILE_MUTATING_TOOLS
from layered_memory.core._tool_calls import error_message, named_paths, refused
from layered_memory.core.guard import SHELL_TOOLS, ProtectedPaths, refusal
from layered_memory.graph._tools import MUTATING_TOOLS

SUBAGENT_TOOLS = frozenset({"task"})
"""Tools that run a subagent, which may hold the graph's tools too."""


def read_only_paths(path: str) -> ProtectedPaths:
    """The graph file, protected as `guard.protect` and `guard.refusal` take it."""
    return ProtectedPaths(files={path: "the knowledge graph, read-only for this agent"})


def kept_in_state(backend: Any, path: str) -> bool:
    """Whether `path` is stored in the agent state, where parallel writes overwrite each other."""
    target, _key = final_route(backend, path)
    return isinstance(target, StateBackend)


@dataclass(frozen=True, slots=True)
class GraphFile:
    """The graph file as tool calls may name it.

    Attributes:
        backend: The backend it lives in.
        path: Its path there.
        protected: It alone, as `guard.refusal` takes protected paths.
    """

    backend: Any
    path: str
    protected: ProtectedPaths

    @classmethod
    def of(cls, backend: Any, path: str) -> GraphFile:
        """The graph file `path` of `backend`."""
        return cls(backend, path, read_only_paths(path))

    def changed_by(self, call: Mapping[str, Any]) -> bool:
        """Whether the call changes the file: a graph mutation, or a file tool writing it
        under any alias (`..`, a symlink, a route) or deleting a folder holding it."""
        name = call.get("name", "")
        if name in MUTATING_TOOLS:
            return True
        operation = FILE_MUTATING_TOOLS.get(name)
        return operation is not None and any(
            refusal(self.backend, self.protected, operation, path) is not None
            for path in named_paths(call)
        )

    def access_of(self, path: str) -> tuple[str | None, None]:
        """`("graph", None)` when a file tool writing `path` writes the graph file (under any
        alias), else `(None, None)`: the form `redact_memory_edit` asks of a memory file."""
        found = refusal(self.backend, self.protected, "write", path)
        return ("graph" if found is not None else None), None


def read_only_refusal(call: Mapping[str, Any], graph: GraphFile) -> ToolMessage | None:
    """The refusal of a call that would change a read-only graph (None: it would not)."""
    name = call.get("name", "")
    if name in MUTATING_TOOLS:
        return error_message(
            call,
            f"Error: {name} refused: the knowledge graph is read-only for this agent. Nothing "
            "was changed; report what should be recorded instead.",
        )
    operation = FILE_MUTATING_TOOLS.get(name)
    if operation is None:
        return None
    for path in sorted(named_paths(call)):
        reason = refusal(graph.backend, graph.protected, operation, path)
        if reason is not None:
            return refused(call, reason)
    return None


def parallel_refusal(
    call: Mapping[str, Any], state: Mapping[str, Any], graph: GraphFile
) -> ToolMessage | None:
    """The refusal of a change to a state-kept graph file that another call of the same model
    turn would overwrite: an earlier change of the file, or a subagent anywhere in the turn (it
    hands back every file as it found it before the turn, the graph file included)."""
    if not graph.changed_by(call):
        return None
    turn = _latest_ai_message(state.get("messages") or ())
    if turn is None:
        return None
    conflict: str | None = None
    earlier = True
    for other in turn.tool_calls:
        if other.get("id") == call.get("id"):
            earlier = False
            continue
        if other.get("name") in SUBAGENT_TOOLS:
            conflict = f"the subagent call ({other.get('name')}) in the same turn hands back"
            break
        if earlier and conflict is None and graph.changed_by(other):
            conflict = f"{other.get('name')} in the same turn already changes"
    if conflict is None:
        return None
    return error_message(
        call,
        f"Error: {call.get('name', '')} refused: {conflict} the knowledge graph {graph.path}, "
        "which is kept in the agent state, where changes made in parallel overwrite each other. "
        "Nothing was changed; make this call again after that call's result.",
    )


def _latest_ai_message(messages: Sequence[Any]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def graph_may_have_changed(messages: Sequence[Any], graph: GraphFile) -> bool:
    """Whether a tool that ran since the model last spoke may have changed the graph file."""
    results: list[ToolMessage] = []
    turn: AIMessage | None = None
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            turn = message
            break
        if isinstance(message, ToolMessage) and message.status != "error":
            results.append(message)
    if not results:
        return False
    calls = {call.get("id"): call for call in turn.tool_calls} if turn is not None else {}
    for result in results:
        name = result.name or ""
        if name in MUTATING_TOOLS or name in SUBAGENT_TOOLS or name in SHELL_TOOLS:
            return True
        call = calls.get(result.tool_call_id)
        if name in FILE_MUTATING_TOOLS and call is not None and graph.changed_by(call):
            return True
    return False
