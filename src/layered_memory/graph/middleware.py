"""`KnowledgeGraphMiddleware`: the MCP memory server's tools, plus the facts in focus.

- `before_agent`: read the graph file (unchanged local files are not read again, unchanged
  content is never parsed again), keep its content digest and the run's focus context (the
  session key's entity, `match_keys` values) in the agent state.
- `wrap_model_call`: find the entities named in the latest user message (an index lookup per
  word of the message: the graph's size does not enter), fill the rest of the focus with the
  entities most relevant to it (`recall`: the recall engine's index, built once per content
  digest), render what the graph knows about the entities in focus within `max_chars`, and
  append it to the system message. Renders are cached by (content digest, focus context,
  message): a warm call neither reads nor parses nor ranks nor renders. After
  a tool that may have changed the file (a graph tool, a file tool writing it, `execute`, a
  subagent), or when a local file's stat signature changed (another process), the call first
  reloads it, so the very next model call sees the change; the new digest rides back on the
  model response.
- `wrap_tool_call`: in read-only mode, refuse the six mutating tools, whoever provides them,
  and `write_file` / `edit_file` / `delete` of the graph file (`guard.refusal`); on a graph
  kept in the agent state, refuse a second change of the file in one model turn (parallel
  tool calls there overwrite each other); redact secrets from the text a `write_file` /
  `edit_file` would put in the graph file, and say so in the tool's result (the package's
  `redact_memory_edit` / `note_redaction`, as `MemoryMiddleware` does for memory files).

Everything a later step needs is in the state (digest, focus context) or in the messages
(which tools ran), never in the instance: a run resumed in another process behaves the same.

What the tool hook decides is a pure function of the call, the conversation and where the
graph file lives (the functions at the end of this module):

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

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from deepagents.backends import StateBackend
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ContextT,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ResponseT,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from layered_memory._logs import get_logger
from layered_memory.core.guard import SHELL_TOOLS, note_redaction, protect, redact_memory_edit
from layered_memory.core.internals import final_route
from layered_memory.core.protection import ProtectedPaths, refusal
from layered_memory.core.run_data import MatchKeySource, context_strings, current_config
from layered_memory.core.system_message import append_block
from layered_memory.core.tool_calls import MUTATING_TOOLS as FILE_MUTATING_TOOLS
from layered_memory.core.tool_calls import error_message, named_paths, refused
from layered_memory.core.validation import check_bool, check_int, check_match_keys
from layered_memory.errors import LayeredMemoryError, SessionKeyError
from layered_memory.graph._focus import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_ENTITIES,
    DEFAULT_MAX_OBSERVATION_CHARS,
    DEFAULT_MAX_RELATIONS,
    FocusSettings,
    focus_names,
    minimum_chars,
    render_focus,
    render_unavailable,
)
from layered_memory.graph._format import GraphSnapshot
from layered_memory.graph._names import MAX_SCAN_CHARS
from layered_memory.graph._tools import DEFAULT_MAX_RESULT_CHARS, MUTATING_TOOLS, graph_tools
from layered_memory.graph.knowledge_graph import (
    DEFAULT_MAX_BYTES,
    DEFAULT_PATH,
    KnowledgeGraph,
    cached,
    changed_since,
)
from layered_memory.safety.redaction import Redaction
from layered_memory.sessions import parse_session_key

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

logger = get_logger(__name__)

_RENDER_CACHE_SIZE = 256


class KnowledgeGraphState(AgentState):  # type: ignore[type-arg]
    """State keys of `KnowledgeGraphMiddleware` (private: not in the agent's input or output)."""

    knowledge_graph_digest: NotRequired[Annotated[str | None, PrivateStateAttr]]
    """Content digest of the graph file as last loaded (None: it could not be read)."""
    knowledge_graph_problem: NotRequired[Annotated[str | None, PrivateStateAttr]]
    """Why the file could not be read, when it could not."""
    knowledge_graph_context: NotRequired[Annotated[list[str], PrivateStateAttr]]
    """Focus context of this invocation: the session key's entity, then `match_keys` values."""


class KnowledgeGraphMiddleware(AgentMiddleware[KnowledgeGraphState, ContextT, ResponseT]):
    """Knowledge-graph memory in the MCP memory server's format, for any LangChain agent.

    Args:
        backend: The deepagents backend the graph file lives in.
        path: The graph file's path in that backend.
        max_chars: Upper bound on the injected block, guidelines included.
        max_entities: Entities in focus shown at most.
        recall: When the context and the message name fewer than `max_entities` entities,
            fill the focus with the entities most relevant to the latest user message (the
            recall engine over their name, type and observations; an entity sharing no
            content word with the message is never shown). Needs numpy (the `tiers` extra):
            without it, a warning and focus by name only.
        max_relations: Relations shown per entity in focus.
        max_observation_chars: An observation longer than this is cut in the prompt.
        match_keys: Context names (read from `runtime.context`, the state, then
            `config["configurable"]`) or callables `(state, runtime) -> strings` whose values
            name entities to focus on, besides the session key's entity and the message.
        session_entity: Focus on the entity of a `entity:{name}:...` thread id.
        read_only: Only the reading tools; the mutating ones are refused (for subagents).
        max_result_chars: Tool results longer than this are cut with a note.
        max_bytes: Larger graph files are not read (bounded memory).
        redact_secrets: Cut credentials out of every string a write stores (names, types,
            observations, relations), and out of the agent's `write_file` / `edit_file` of
            the graph file, before storing it.
        strict: Raise when the graph file cannot be read instead of logging and going on.

    Attributes:
        protected_paths: What the agent may not change: the graph file when `read_only`;
            else the graph file as a writable memory file (its writes redacted).
        protected_backend: The backend to give the agent's file tools, shell and subagents
            (`create_deep_agent(backend=graph_middleware.protected_backend, ...)`): the same
            storage, refusing every change to a read-only graph file (`guard.protect`). The
            middleware's own tool hook refuses the file tools on it either way. On a writable
            graph, the file tools' writes of the graph file take the lock the graph's own
            operations take and replace the file atomically (`core.files`), so neither loses
            the other's changes.

    Example:
        KnowledgeGraphMiddleware(backend=FilesystemBackend(root_dir=".", virtual_mode=True))
    """

    state_schema = KnowledgeGraphState

    def __init__(
        self,
        *,
        backend: BackendProtocol,
        path: str = DEFAULT_PATH,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_entities: int = DEFAULT_MAX_ENTITIES,
        max_relations: int = DEFAULT_MAX_RELATIONS,
        max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
        recall: bool = True,
        match_keys: Sequence[MatchKeySource] = (),
        session_entity: bool = True,
        read_only: bool = False,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        redact_secrets: bool = True,
        strict: bool = False,
    ) -> None:
        self.graph = KnowledgeGraph(
            backend, path, max_bytes=max_bytes, redact_secrets=redact_secrets
        )
        for parameter, value in (
            ("max_entities", max_entities),
            ("max_relations", max_relations),
            ("max_observation_chars", max_observation_chars),
            ("max_result_chars", max_result_chars),
            ("max_chars", max_chars),
        ):
            check_int(value, parameter=parameter, minimum=1)
        check_bool(recall, parameter="recall")
        recall = recall and _recall_available(path)
        floor = minimum_chars(path, recall=recall)
        if max_chars < floor:
            msg = f"max_chars must be at least {floor} (header and guidelines), got {max_chars}"
            raise ValueError(msg)
        self.match_keys = check_match_keys(match_keys)
        super().__init__()
        for flag, value in (
            ("session_entity", session_entity),
            ("read_only", read_only),
            ("redact_secrets", redact_secrets),
            ("strict", strict),
        ):
            check_bool(value, parameter=flag)
        self.session_entity = session_entity
        self.strict = strict
        self.writable = not read_only
        self._file = GraphFile.of(backend, path)
        self.protected_paths = (
            ProtectedPaths(redacted=frozenset({path}) if redact_secrets else frozenset())
            if self.writable
            else self._file.protected
        )
        self.protected_backend: Any = protect(backend, self.protected_paths)
        # Parallel tool calls on a graph kept in the agent state overwrite each other's writes.
        self._one_change_per_turn = self.writable and kept_in_state(backend, path)
        self.settings = FocusSettings(
            path=path,
            max_chars=max_chars,
            max_entities=max_entities,
            max_relations=max_relations,
            max_observation_chars=max_observation_chars,
            writable=self.writable,
            recall=recall,
        )
        self._max_result_chars = max_result_chars
        self.tools = graph_tools(
            self.graph, writable=self.writable, max_result_chars=max_result_chars
        )
        # Derived data only (a pure function of its key), so sharing it across threads and
        # runs is safe; the state decides which digest is current.
        self._renders: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._renders_lock = threading.Lock()

    def focus(self, *, message: str = "", context: Sequence[str] = ()) -> tuple[list[str], str]:
        """What a model call would be told: the entity names in focus and the block, read from
        the file now (`layered-memory graph --message` prints this).

        Args:
            message: The latest user message.
            context: Focus values as the run gives them: the session key's entity, then the
                `match_keys` values.

        Returns:
            The entity names in focus and the block.

        Raises:
            KnowledgeGraphError: The file cannot be read.
        """
        snapshot = self.graph.snapshot()
        names = focus_names(
            snapshot,
            context=list(context),
            message=message[:MAX_SCAN_CHARS],
            limit=self.settings.max_entities,
            recall=self.settings.recall,
        )
        return names, render_focus(snapshot, names, self.settings)

    def read_only(self) -> KnowledgeGraphMiddleware[Any, Any]:
        """A twin for subagents: the same graph and focus, only the reading tools.

        Returns:
            A new middleware; this one is unchanged.
        """
        return KnowledgeGraphMiddleware[Any, Any](
            backend=self.graph.backend,
            path=self.graph.path,
            max_chars=self.settings.max_chars,
            max_entities=self.settings.max_entities,
            max_relations=self.settings.max_relations,
            max_observation_chars=self.settings.max_observation_chars,
            recall=self.settings.recall,
            match_keys=self.match_keys,
            session_entity=self.session_entity,
            read_only=True,
            max_result_chars=self._max_result_chars,
            max_bytes=self.graph.max_bytes,
            redact_secrets=self.graph.redact_secrets,
            strict=self.strict,
        )

    # -- before_agent ---------------------------------------------------------------------

    def before_agent(
        self, state: KnowledgeGraphState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Load the graph (if changed) and fix this invocation's focus context.

        Args:
            state: The graph state at the start of the invocation.
            runtime: The run's runtime (its context names the focus).

        Returns:
            The state update, or None when nothing changed.
        """
        try:
            snapshot: GraphSnapshot | None = self.graph.snapshot()
            problem = None
        except LayeredMemoryError as exc:
            snapshot, problem = None, self._problem(exc)
        return self._state_update(state, snapshot, problem, runtime)

    async def abefore_agent(
        self, state: KnowledgeGraphState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        try:
            snapshot: GraphSnapshot | None = await self.graph.asnapshot()
            problem = None
        except LayeredMemoryError as exc:
            snapshot, problem = None, self._problem(exc)
        return self._state_update(state, snapshot, problem, runtime)

    # -- wrap_model_call ------------------------------------------------------------------

    def modify_request(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        """The request with the focus block appended (from cached state: no I/O).

        Args:
            request: The model request.

        Returns:
            The request with the focus block in its system message.
        """
        snapshot = cached(str(request.state.get("knowledge_graph_digest") or ""))
        return self._inject(request, request.state, snapshot)

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelCallResult[ResponseT]:
        """Reload after a graph edit (or in a process that lacks the snapshot), inject, call.

        Args:
            request: The model request.
            handler: Calls the model (and the middlewares inside this one).

        Returns:
            The model's response.
        """
        state = request.state
        digest = state.get("knowledge_graph_digest")
        snapshot = cached(str(digest)) if digest else None
        if not self._must_reload(request, digest, snapshot):
            return handler(self._inject(request, state, snapshot))
        try:
            snapshot, problem = self.graph.snapshot(), None
        except LayeredMemoryError as exc:
            snapshot, problem = None, self._problem(exc)
        return self._call_with_update(request, handler, snapshot, problem)

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        """Async twin of `wrap_model_call`."""
        state = request.state
        digest = state.get("knowledge_graph_digest")
        snapshot = cached(str(digest)) if digest else None
        if not self._must_reload(request, digest, snapshot):
            return await handler(self._inject(request, state, snapshot))
        try:
            snapshot, problem = await self.graph.asnapshot(), None
        except LayeredMemoryError as exc:
            snapshot, problem = None, self._problem(exc)
        update = _digest_update(request.state, snapshot, problem)
        merged = {**request.state, **update}
        response = await handler(self._inject(request, merged, snapshot))
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _call_with_update(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
        snapshot: GraphSnapshot | None,
        problem: str | None,
    ) -> ModelCallResult[ResponseT]:
        update = _digest_update(request.state, snapshot, problem)
        response = handler(self._inject(request, {**request.state, **update}, snapshot))
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- wrap_tool_call (refusals) --------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Refuse a change of a read-only graph, or a second change of a state-kept graph in
        one model turn; else run the tool, with secrets redacted from a file tool's write of
        the graph file.

        Args:
            request: The tool call.
            handler: Runs the tool (and the middlewares inside this one).

        Returns:
            The tool's result (a message or a command), or a refusal as a tool message.
        """
        refused_call = self._refusal(request)
        if refused_call is not None:
            return refused_call
        request, redaction = self._redacted(request)
        return note_redaction(handler(request), redaction)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of `wrap_tool_call`."""
        refused_call = self._refusal(request)
        if refused_call is not None:
            return refused_call
        request, redaction = self._redacted(request)
        return note_redaction(await handler(request), redaction)

    # -- pure helpers shared by both halves -----------------------------------------------

    def _must_reload(
        self, request: ModelRequest[ContextT], digest: Any, snapshot: GraphSnapshot | None
    ) -> bool:
        """Whether the file may differ from the state's version: a tool may have changed it,
        this process lacks the parsed version, or a local file's signature changed."""
        return (
            bool(digest and snapshot is None)
            or graph_may_have_changed(request.messages, self._file)
            or changed_since(self.graph._local, digest)
        )

    def _problem(self, exc: LayeredMemoryError) -> str:
        if self.strict:
            raise exc
        reason = str(getattr(exc, "reason", None) or exc)
        logger.warning("knowledge graph %s not injected: %s", self.graph.path, reason)
        return reason

    def _state_update(
        self,
        state: Mapping[str, Any],
        snapshot: GraphSnapshot | None,
        problem: str | None,
        runtime: Any,
    ) -> dict[str, Any] | None:
        update = _digest_update(state, snapshot, problem)
        context = self._context(state, runtime, current_config())
        if state.get("knowledge_graph_context") != context:
            update["knowledge_graph_context"] = context
        return update or None

    def _context(
        self, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
    ) -> list[str]:
        found: dict[str, None] = {}
        if self.session_entity:
            thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
            if isinstance(thread_id, str) and thread_id.startswith("entity:"):
                # A thread id that only looks like a session key gives no focus.
                with contextlib.suppress(SessionKeyError):
                    found[parse_session_key(thread_id).entity] = None
        for value in context_strings(self.match_keys, state, runtime, config):
            found.setdefault(value, None)
        return list(found)

    def _inject(
        self,
        request: ModelRequest[ContextT],
        state: Mapping[str, Any],
        snapshot: GraphSnapshot | None,
    ) -> ModelRequest[ContextT]:
        block = self._block(state, snapshot, _latest_user_text(request.messages))
        return request.override(system_message=append_block(request.system_message, block))

    def _block(self, state: Mapping[str, Any], snapshot: GraphSnapshot | None, message: str) -> str:
        if snapshot is None:
            problem = state.get("knowledge_graph_problem") or "not loaded yet"
            return render_unavailable(self.settings, str(problem))
        context = tuple(state.get("knowledge_graph_context") or ())
        key = (snapshot.digest, context, message)
        with self._renders_lock:
            block = self._renders.get(key)
            if block is not None:
                self._renders.move_to_end(key)
                return block
        names = focus_names(
            snapshot,
            context=context,
            message=message,
            limit=self.settings.max_entities,
            recall=self.settings.recall,
        )
        block = render_focus(snapshot, names, self.settings)
        with self._renders_lock:
            self._renders[key] = block
            while len(self._renders) > _RENDER_CACHE_SIZE:
                self._renders.popitem(last=False)
        return block

    def _redacted(self, request: ToolCallRequest) -> tuple[ToolCallRequest, Redaction | None]:
        # Read-only: every file tool writing the graph file was refused already.
        if not (self.writable and self.graph.redact_secrets):
            return request, None
        return redact_memory_edit(request, self._file.access_of)

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        call = request.tool_call
        if not self.writable:
            return read_only_refusal(call, self._file)
        if self._one_change_per_turn:
            state = getattr(request, "state", None) or {}
            return parallel_refusal(call, state, self._file)
        return None


def _recall_available(path: str) -> bool:
    """Whether the recall engine can be used (a warning if not). Imported here, at
    construction: never a first import (file reads) inside a model call."""
    try:
        import layered_memory.graph._recall  # noqa: F401
    except ImportError as exc:
        logger.warning(
            "knowledge graph %s: entities in focus by name only (recall=True needs numpy: "
            "%s): pip install 'layered-memory[tiers]', or pass recall=False",
            path,
            exc,
        )
        return False
    return True


def _digest_update(
    state: Mapping[str, Any], snapshot: GraphSnapshot | None, problem: str | None
) -> dict[str, Any]:
    digest = snapshot.digest if snapshot is not None else None
    update: dict[str, Any] = {}
    if state.get("knowledge_graph_digest") != digest or "knowledge_graph_digest" not in state:
        update["knowledge_graph_digest"] = digest
    if state.get("knowledge_graph_problem") != problem:
        update["knowledge_graph_problem"] = problem
    return update


def _latest_user_text(messages: Sequence[Any]) -> str:
    """The latest user message's text, as much of it as the name scan reads."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text[:MAX_SCAN_CHARS]
    return ""


# --- the tool hook's decisions, pure: functions of the call, the conversation and the file --

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
