"""`MemoryMiddleware`: layered, budgeted, always-fresh memory for LangChain and deepagents agents.

The hooks only move data between the agent state and a `MemoryAssembler`:

- `before_agent`: load every layer and rule file (one batched download), keep the texts in
  state, fire `PIPELINE_START`.
- `wrap_model_call`: add the paths the agent's tools touched to the rule match keys and
  reload when the agent edited a memory file (so the very next model call sees the edit),
  then append the (cached, byte-identical while unchanged) memory block to the system message.
- `wrap_tool_call`: refuse edits of read-only memory; note touched paths and memory edits.
- `after_agent`: fire `PIPELINE_END` with the final state, for write-back handlers (only
  present with `hooks=`: without them the graph gets no node to run at the end).

Constructed with `backend=` and `sources=` only, it is a drop-in for deepagents'
`MemoryMiddleware` (same state key, layout and options) that also reloads changed files.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, Optional

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
    TracePolicy,
    omit_payload,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.types import Command

from layered_memory._run_data import context_value
from layered_memory._system_message import (
    append_block,
    is_anthropic_model,
    tag_last_block_for_cache,
)
from layered_memory._validation import (
    check_backend,
    check_instance,
    check_int,
    check_layers,
    check_match_keys,
    check_path_list,
    invalid_path_reason,
    is_backend,
)
from layered_memory.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.hooks import HookEvent, HookRegistry
from layered_memory.layers import Layer, layers_from_sources
from layered_memory.render import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_RULES_CHARS,
    MEMORY_SYSTEM_PROMPT,
    SessionEntry,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol
    from langchain.agents.middleware.types import ToolCallRequest
    from langgraph.runtime import Runtime

    from layered_memory.stores import SessionStore

logger = logging.getLogger(__name__)

MatchKeySource = str | Callable[[Mapping[str, Any], Any], Iterable[str]]
"""A context name read from runtime.context / state / config, or a callable(state, runtime)."""

BackendFactory = Callable[[Any], Any]
"""deepagents' factory form: `callable(runtime) -> backend`, resolved at each hook."""

MUTATING_TOOLS = frozenset({"write_file", "edit_file", "delete"})
PATH_ARGUMENTS = ("file_path", "path")


class LayeredMemoryState(AgentState):  # type: ignore[type-arg]
    """State keys of `MemoryMiddleware` (private: not part of the agent's input or output)."""

    memory_contents: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """Layer path -> text, as deepagents' `MemoryMiddleware` keeps it."""
    memory_rule_files: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    memory_session: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    memory_digest: NotRequired[Annotated[str, PrivateStateAttr]]
    memory_touched_paths: NotRequired[Annotated[list[str], PrivateStateAttr]]
    """Paths the agent's file tools named in this thread: rule match keys."""
    memory_match_context: NotRequired[Annotated[list[str], PrivateStateAttr]]
    """Context strings for rule matching (entity name, task tag), fixed per invocation."""
    memory_unreadable: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """Layer files that exist but could not be read: path -> reason (never overwritten)."""


@dataclass(slots=True)
class _Pending:
    """What tool calls noted since the last model call of one thread."""

    touched: set[str] = field(default_factory=set)
    memory_edited: bool = False


class MemoryMiddleware(AgentMiddleware[LayeredMemoryState, ContextT, ResponseT]):
    """Layered memory for an agent: loads, budgets, injects and protects memory files.

    Args:
        backend: The deepagents backend the memory files live in.
        sources: deepagents-compatible flat list of files (exclusive with `layers`).
        layers: `Layer`s from lowest to highest precedence (exclusive with `sources`).
        rules: Rule folders, lowest to highest precedence.
        match_keys: Context names (read from `runtime.context`, the state, then
            `config["configurable"]`) or callables `(state, runtime) -> strings`, matched
            against rule globs besides the paths the agent touched.
        session_store: Store whose entry under the thread id is the top layer.
        hooks: Registry fired with `PIPELINE_START`/`PIPELINE_END` and the memory events.
        max_chars: Upper bound on the injected block, guidelines included.
        max_rules_chars: Upper bound on the matched rules inside the block.
        strict: Raise on an unusable memory file instead of logging and skipping it.
        rules_writable: Let the agent edit rule files (refused by default).
        add_cache_control: Tag the last system block for Anthropic prompt caching.
        system_prompt: Template with an `{agent_memory}` slot, or `None` to inject nothing.

    Example:
        MemoryMiddleware(backend=FilesystemBackend(root_dir="."), layers=[
            Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)])
    """

    state_schema = LayeredMemoryState
    trace_policy = TracePolicy(process_inputs=omit_payload)

    def __new__(cls, *_args: Any, **kwargs: Any) -> MemoryMiddleware[Any, Any]:
        """Without hooks, build the variant that adds no graph node at the end of a run.

        LangChain adds an `after_agent` node for every middleware whose class defines one, and
        that node costs about 5% of a short run; with nothing to fire there, leave it out.
        """
        if cls is MemoryMiddleware and kwargs.get("hooks") is None:
            return super().__new__(_MemoryMiddlewareWithoutEndHook)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        backend: BackendProtocol | BackendFactory,
        sources: Sequence[str | os.PathLike[str]] | None = None,
        layers: Sequence[Layer] | None = None,
        rules: Sequence[str | os.PathLike[str]] | None = None,
        match_keys: Sequence[MatchKeySource] = (),
        session_store: SessionStore | None = None,
        hooks: HookRegistry | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_rules_chars: int = DEFAULT_MAX_RULES_CHARS,
        strict: bool = False,
        rules_writable: bool = False,
        add_cache_control: bool = False,
        system_prompt: str | None = MEMORY_SYSTEM_PROMPT,
    ) -> None:
        if system_prompt is not None:
            if not isinstance(system_prompt, str):
                msg = f"system_prompt must be str or None, got {type(system_prompt).__name__}"
                raise TypeError(msg)
            if "{agent_memory}" not in system_prompt:
                msg = "system_prompt must contain the `{agent_memory}` format slot"
                raise ValueError(msg)
        if (sources is None) == (layers is None):
            msg = "pass exactly one of `sources` (a flat list of files) or `layers`"
            raise ValueError(msg)
        check_backend(backend)
        source_list = check_path_list(sources, parameter="sources")
        layer_list = check_layers(layers, Layer)
        rule_list = check_path_list(rules, parameter="rules")
        self.match_keys = check_match_keys(match_keys)
        check_int(max_chars, parameter="max_chars", minimum=1)
        check_int(max_rules_chars, parameter="max_rules_chars")
        check_instance(
            hooks,
            HookRegistry,
            parameter="hooks",
            hint="Build one with HookRegistry() and register handlers on it.",
        )
        super().__init__()
        self.sources = source_list
        self.system_prompt = system_prompt
        self.hooks = hooks
        self._add_cache_control = add_cache_control
        self._rules_writable = rules_writable
        # A factory (deepagents' `backend=lambda runtime: ...` form) is resolved at each hook;
        # its backends are addressed by virtual `/` paths.
        self._backend_factory: BackendFactory | None = (
            None if is_backend(backend) else backend  # type: ignore[assignment]
        )
        self.assembler = MemoryAssembler(
            backend=backend,
            layers=layers_from_sources(source_list)
            if source_list is not None
            else layer_list or [],
            rules=tuple(rule_list or ()),
            session_store=session_store,
            max_chars=max_chars,
            max_rules_chars=max_rules_chars,
            system_prompt=system_prompt or MEMORY_SYSTEM_PROMPT,
            compat=sources is not None,
            strict=strict,
        )
        self._pending: dict[str, _Pending] = {}
        self._pending_lock = threading.Lock()

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The layers, lowest to highest precedence."""
        return self.assembler.layers

    def read_only(self) -> MemoryMiddleware[Any, Any]:
        """A twin for subagents: the same memory, every layer read-only, no hooks fired.

        A subagent should see what its parent knows but not rewrite it, and its end must not
        fire the parent's write-back.
        """
        twin = MemoryMiddleware[Any, Any](
            backend=self._backend_factory or self.assembler.backend,
            layers=[replace(layer, writable=False) for layer in self.layers],
            rules=self.assembler.rule_folders,
            match_keys=self.match_keys,
            session_store=self.assembler.session_store,
            hooks=None,
            max_chars=self.assembler.max_chars,
            max_rules_chars=self.assembler.max_rules_chars,
            strict=self.assembler.strict,
            rules_writable=False,
            add_cache_control=self._add_cache_control,
            system_prompt=self.system_prompt,
        )
        # The twin is built from layers, but must keep the flat layout a `sources=` parent uses.
        twin.assembler.compat = self.assembler.compat
        return twin

    # -- before_agent ---------------------------------------------------------------------------

    def before_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (LangGraph matches this spelling)
    ) -> dict[str, Any] | None:
        """Fire PIPELINE_START and load memory (each invocation, so disk changes are seen).

        Callable as LangChain calls it, `(state, runtime)`, and as deepagents' own class is
        called, `(state, runtime, config)`; LangGraph passes the node's config.
        """
        config = _config_or_current(config)
        if self.hooks is not None:
            self.hooks.trigger(HookEvent.PIPELINE_START, self._hook_data(state, runtime, config))
        snapshot = self.assembler.load(
            session_key=_thread_id(config), backend=self._backend(state, runtime, config)
        )
        keys = _context_keys(self.match_keys, state, runtime, config)
        update = self._state_update(state, snapshot, keys)
        if self.hooks is not None:
            self.hooks.trigger(HookEvent.MEMORY_LOADED, _loaded_event(snapshot, config))
            if self.assembler.rule_folders:
                self.hooks.trigger(HookEvent.RULES_MATCHED, self._rules_event(state, update))
        return update

    async def abefore_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see before_agent)
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        config = _config_or_current(config)
        if self.hooks is not None:
            await self.hooks.atrigger(
                HookEvent.PIPELINE_START, self._hook_data(state, runtime, config)
            )
        snapshot = await self.assembler.aload(
            session_key=_thread_id(config), backend=self._backend(state, runtime, config)
        )
        keys = _context_keys(self.match_keys, state, runtime, config)
        update = self._state_update(state, snapshot, keys)
        if self.hooks is not None:
            await self.hooks.atrigger(HookEvent.MEMORY_LOADED, _loaded_event(snapshot, config))
            if self.assembler.rule_folders:
                await self.hooks.atrigger(HookEvent.RULES_MATCHED, self._rules_event(state, update))
        return update

    # -- wrap_model_call ------------------------------------------------------------------------

    def modify_request(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        """The request with the memory block appended to its system message."""
        return self._inject(request, request.state)

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelCallResult[ResponseT]:
        """Fold in what tool calls noted (reloading after a memory edit), inject, call the model.

        The state changes ride back on the model response (`ExtendedModelResponse`), so no
        extra graph node runs before every model call.
        """
        config = _current_config()
        pending = self._take_pending(config)
        if pending is None:
            return handler(self.modify_request(request))
        snapshot = (
            self.assembler.load(
                session_key=_thread_id(config),
                backend=self._backend(request.state, request.runtime, config),
            )
            if pending.memory_edited
            else None
        )
        update = self._pending_update(request.state, pending, snapshot)
        if update is None:
            return handler(self.modify_request(request))
        if self.hooks is not None and self.assembler.rule_folders:
            self.hooks.trigger(HookEvent.RULES_MATCHED, self._rules_event(request.state, update))
        response = handler(self._inject(request, {**request.state, **update}))
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        """Async twin of `wrap_model_call` (only a reload after a memory edit does I/O)."""
        config = _current_config()
        pending = self._take_pending(config)
        if pending is None:
            return await handler(self.modify_request(request))
        snapshot = (
            await self.assembler.aload(
                session_key=_thread_id(config),
                backend=self._backend(request.state, request.runtime, config),
            )
            if pending.memory_edited
            else None
        )
        update = self._pending_update(request.state, pending, snapshot)
        if update is None:
            return await handler(self.modify_request(request))
        if self.hooks is not None and self.assembler.rule_folders:
            await self.hooks.atrigger(
                HookEvent.RULES_MATCHED, self._rules_event(request.state, update)
            )
        response = await handler(self._inject(request, {**request.state, **update}))
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- wrap_tool_call -------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Refuse edits of read-only memory; note touched paths and memory edits."""
        refusal, touched, edits_memory = self._inspect_tool_call(request)
        if refusal is not None:
            return refusal
        result = handler(request)
        self._note(request, touched, edits_memory)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of `wrap_tool_call`."""
        refusal, touched, edits_memory = self._inspect_tool_call(request)
        if refusal is not None:
            return refusal
        result = await handler(request)
        self._note(request, touched, edits_memory)
        return result

    # -- after_agent ----------------------------------------------------------------------------

    def after_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see before_agent)
    ) -> dict[str, Any] | None:
        """Fire PIPELINE_END with the final state (write-back handlers run here)."""
        config = _config_or_current(config)
        self._drop_pending(config)
        if self.hooks is not None:
            self.hooks.trigger(HookEvent.PIPELINE_END, self._hook_data(state, runtime, config))
        return None

    async def aafter_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see before_agent)
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        config = _config_or_current(config)
        self._drop_pending(config)
        if self.hooks is not None:
            await self.hooks.atrigger(
                HookEvent.PIPELINE_END, self._hook_data(state, runtime, config)
            )
        return None

    # -- pure helpers shared by both halves -----------------------------------------------------

    def _state_update(
        self, state: Mapping[str, Any], snapshot: MemorySnapshot, context_keys: list[str]
    ) -> dict[str, Any] | None:
        update: dict[str, Any] = {}
        if state.get("memory_digest") != snapshot.digest or "memory_contents" not in state:
            update["memory_contents"] = dict(snapshot.files)
            update["memory_rule_files"] = dict(snapshot.rule_files)
            update["memory_session"] = (
                {"key": snapshot.session.key, "data": dict(snapshot.session.data)}
                if snapshot.session
                else None
            )
            update["memory_digest"] = snapshot.digest
            update["memory_unreadable"] = dict(snapshot.unreadable)
        if state.get("memory_match_context", []) != context_keys:
            update["memory_match_context"] = context_keys
        return update or None

    def _pending_update(
        self, state: Mapping[str, Any], pending: _Pending, snapshot: MemorySnapshot | None
    ) -> dict[str, Any] | None:
        update: dict[str, Any] = {}
        known = state.get("memory_touched_paths") or []
        new_paths = pending.touched.difference(known)
        if new_paths:
            update["memory_touched_paths"] = sorted({*known, *new_paths})
        if snapshot is not None:
            update.update(
                self._state_update(state, snapshot, state.get("memory_match_context", [])) or {}
            )
        return update or None

    def _inject(
        self, request: ModelRequest[ContextT], state: Mapping[str, Any]
    ) -> ModelRequest[ContextT]:
        block = self._memory_block(state) if self.system_prompt is not None else None
        system_message = request.system_message
        if block is not None:
            system_message = append_block(system_message, block)
        if (
            self._add_cache_control
            and system_message is not None
            and is_anthropic_model(request.model)
            and system_message.content_blocks
        ):
            system_message = tag_last_block_for_cache(system_message)
        if system_message is request.system_message:
            return request
        return request.override(system_message=system_message)

    def _memory_block(self, state: Mapping[str, Any]) -> str:
        session_state = state.get("memory_session")
        session = (
            SessionEntry(session_state["key"], session_state["data"]) if session_state else None
        )
        keys = (*state.get("memory_touched_paths", ()), *state.get("memory_match_context", ()))
        return self.assembler.render_parts(
            state.get("memory_contents") or {},
            state.get("memory_rule_files") or {},
            session,
            keys,
            digest=state.get("memory_digest"),
            unreadable=state.get("memory_unreadable"),
        )

    def _inspect_tool_call(
        self, request: ToolCallRequest
    ) -> tuple[ToolMessage | None, set[str], bool]:
        call = request.tool_call
        tool_name = call.get("name", "")
        args = call.get("args") or {}
        paths = {args[name] for name in PATH_ARGUMENTS if isinstance(args.get(name), str)}
        invalid = _invalid_path_refusal(call, tool_name, paths)
        if invalid is not None:
            return invalid, set(), False
        edits_memory = False
        if tool_name in MUTATING_TOOLS:
            unreadable = (getattr(request, "state", None) or {}).get("memory_unreadable") or {}
            for path in paths:
                access, layer = self.assembler.access_of(path)
                if access == "read-only" or (access == "rule" and not self._rules_writable):
                    return _refusal(call, tool_name, path, layer), set(), False
                if tool_name == "write_file" and layer is not None:
                    reason = self._unreadable_reason(path, layer, unreadable)
                    if reason is not None:
                        return _unreadable_refusal(call, path, reason), set(), False
                edits_memory = edits_memory or access is not None
        return None, paths, edits_memory

    def _unreadable_reason(
        self, tool_path: str, layer: Layer, unreadable: Mapping[str, str]
    ) -> str | None:
        """Why the layer file `tool_path` names could not be read at the last load, if so."""
        for path in layer.paths:
            if path in unreadable and self.assembler.same_file(path, tool_path):
                return unreadable[path]
        return None

    def _backend(
        self, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
    ) -> BackendProtocol | None:
        """The backend a factory gives for this run (None: the fixed backend is used)."""
        if self._backend_factory is None:
            return None
        tool_runtime = ToolRuntime(
            state=state,
            context=getattr(runtime, "context", None),
            config=config or {},
            stream_writer=getattr(runtime, "stream_writer", None) or _no_stream,
            tool_call_id=None,
            store=getattr(runtime, "store", None),
        )
        return self._backend_factory(tool_runtime)  # type: ignore[no-any-return]

    def _note(self, request: ToolCallRequest, touched: set[str], edits_memory: bool) -> None:
        if not touched and not edits_memory:
            return
        key = _thread_key(getattr(request.runtime, "config", None))
        with self._pending_lock:
            pending = self._pending.setdefault(key, _Pending())
            pending.touched.update(touched)
            pending.memory_edited = pending.memory_edited or edits_memory

    def _take_pending(self, config: RunnableConfig | None) -> _Pending | None:
        with self._pending_lock:
            return self._pending.pop(_thread_key(config), None)

    def _drop_pending(self, config: RunnableConfig | None) -> None:
        with self._pending_lock:
            self._pending.pop(_thread_key(config), None)

    def _rules_event(
        self, state: Mapping[str, Any], update: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """RULES_MATCHED data: which rules apply to the state as it is after `update`."""
        merged = {**state, **(update or {})}
        keys = [*merged.get("memory_touched_paths", ()), *merged.get("memory_match_context", ())]
        match = self.assembler.match_rules(merged.get("memory_rule_files") or {}, keys)
        return {
            "keys": keys,
            "applied": [rule.name for rule in match.applied] if match else [],
            "requested": [rule.name for rule in match.requested] if match else [],
        }

    def _hook_data(
        self, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
    ) -> dict[str, Any]:
        return {
            **state,
            "config": config or {},
            "runtime_context": getattr(runtime, "context", None),
            "thread_id": _thread_id(config),
        }


class _MemoryMiddlewareWithoutEndHook(MemoryMiddleware[Any, Any]):
    """`MemoryMiddleware` with no hooks: nothing to fire at the end, so no `after_agent` node."""

    after_agent = AgentMiddleware.after_agent  # type: ignore[assignment]
    aafter_agent = AgentMiddleware.aafter_agent  # type: ignore[assignment]

    @property
    def name(self) -> str:
        """Same name as the public class: deepagents replaces its memory slot by name."""
        return "MemoryMiddleware"


def _refusal(
    call: Mapping[str, Any], tool_name: str, path: str, layer: Layer | None
) -> ToolMessage:
    owner = f"the read-only memory layer {layer.name!r}" if layer else "a read-only rule folder"
    return ToolMessage(
        content=(
            f"Error: {tool_name} refused: {path} belongs to {owner} and cannot be changed by "
            "the agent. The file was not modified. Save what you learned in a writable memory "
            "file instead, or tell the user what should change."
        ),
        tool_call_id=call.get("id") or "",
        name=tool_name,
        status="error",
    )


def _invalid_path_refusal(
    call: Mapping[str, Any], tool_name: str, paths: Iterable[str]
) -> ToolMessage | None:
    """An error for a path no file can have: file tools raise on it and would end the run."""
    for path in sorted(paths):
        reason = invalid_path_reason(path)
        if reason is not None:
            return ToolMessage(
                content=f"Error: {tool_name} refused: the path {reason}. Nothing was done.",
                tool_call_id=call.get("id") or "",
                name=tool_name,
                status="error",
            )
    return None


def _unreadable_refusal(call: Mapping[str, Any], path: str, reason: str) -> ToolMessage:
    return ToolMessage(
        content=(
            f"Error: write_file refused: {path} is a memory file that exists but could not be "
            f"read ({reason}), so writing it whole would destroy content nobody has seen. The "
            "file was not modified. Tell the user it needs fixing; save new notes elsewhere."
        ),
        tool_call_id=call.get("id") or "",
        name="write_file",
        status="error",
    )


def _no_stream(_chunk: Any) -> None:
    """Stream writer for a factory called outside a streaming run."""


def _loaded_event(snapshot: MemorySnapshot, config: RunnableConfig | None) -> dict[str, Any]:
    return {
        "paths": sorted(snapshot.files),
        "rule_files": sorted(snapshot.rule_files),
        "problems": [(p.path, p.reason) for p in snapshot.problems],
        "digest": snapshot.digest,
        "thread_id": _thread_id(config),
    }


def _context_keys(
    sources: Sequence[MatchKeySource],
    state: Mapping[str, Any],
    runtime: Any,
    config: RunnableConfig | None,
) -> list[str]:
    """The context strings named by `match_keys` for this invocation, sorted and unique."""
    found: set[str] = set()
    context = getattr(runtime, "context", None)
    configurable = (config or {}).get("configurable") or {}
    for source in sources:
        if callable(source):
            values: Any = source(state, runtime)
        else:
            values = context_value(context, source)
            if values is None:
                values = state.get(source)
            if values is None:
                values = configurable.get(source)
        if isinstance(values, str):
            found.add(values)
        elif isinstance(values, Iterable):
            found.update(value for value in values if isinstance(value, str))
    return sorted(value for value in found if value)


def _config_or_current(config: RunnableConfig | None) -> RunnableConfig | None:
    """The config LangGraph (or a direct caller) passed, else the running graph's own."""
    return config if config is not None else _current_config()


def _current_config() -> RunnableConfig | None:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph (a hook invoked directly in a test)
        return None


def _thread_id(config: RunnableConfig | None) -> str | None:
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(thread_id) if thread_id is not None else None


def _thread_key(config: Any) -> str:
    return _thread_id(config) or "<no thread>"
