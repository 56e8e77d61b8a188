"""`MemoryMiddleware`: layered, budgeted, always-fresh memory for LangChain and deepagents agents.

The hooks only move data between the graph state and a `MemoryAssembler`:

- `before_agent`: load every layer and rule file (one batched download), keep the texts in
  state, fire `PIPELINE_START`.
- `wrap_tool_call`: refuse changes to read-only memory; run the tool; return the paths it
  named and whether it edited memory as a state update beside the tool's message (so they are
  checkpointed with it); after a shell command or a `task` subagent, put read-only memory back
  as the run started with it.
- `wrap_model_call`: reload when a tool edited memory (the very next model call sees the edit),
  pinned to the run-start snapshot for read-only memory, then append the memory block
  (cached, byte-identical while unchanged) to the system message.
- `after_agent`: with `hooks`, `write_back` or a `consolidator` only (`EndOfRun`, the
  write-back concern): fire `PIPELINE_END` with the final state, then hand the run to the
  consolidator. The class is chosen at construction (`__new__`): `MemoryMiddleware` itself
  defines no `after_agent`, so without them the compiled graph has no end-of-run node; with
  them the instance is a `MemoryMiddlewareWithEndOfRun`, a subclass that adds the hook.

Constructed with `backend=` and `sources=` only, it is a drop-in for deepagents'
`MemoryMiddleware` (same state key, layout and options) that also reloads changed files.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional, Self

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ContextT,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    ResponseT,
    TracePolicy,
    omit_payload,
)
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from layered_memory._logs import get_logger
from layered_memory.core import internals
from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.guard import (
    MEMORY_TOOL,
    SHELL_TOOLS,
    note_redaction,
    protect,
    protecting,
    redact_memory_edit,
    secret_path_refusal,
)
from layered_memory.core.layers import Layer, layers_from_sources
from layered_memory.core.loading import MemoryExtras
from layered_memory.core.nested import directories_of
from layered_memory.core.options import MemoryOptions
from layered_memory.core.permissions import deny_writes
from layered_memory.core.protection import (
    is_same_file,
    protected_paths_of,
    refusal,
    unreadable_message,
    writes_memory,
)
from layered_memory.core.put_back import (
    Outcome,
    during_run,
    read_only_changes,
    restore,
    run_start_in_context,
)
from layered_memory.core.render import (
    DEFAULT_MAX_CHARS,
    MEMORY_SYSTEM_PROMPT,
)
from layered_memory.core.report import MemoryReport, emit_memory_report
from layered_memory.core.run_data import (
    MatchKeySource,
    context_strings,
    current_config,
    run_data,
    thread_id,
)
from layered_memory.core.snapshot import Pinned, RunStart
from layered_memory.core.state import (
    LayeredMemoryState,
    extras_of,
    latest_user_text,
    loaded,
    match_keys_of,
    merge_paths,
    needs_reload,
    run_start_of,
    session_of,
    snapshot_update,
    tool_notes,
    touched_of,
)
from layered_memory.core.system_message import (
    append_block,
    is_anthropic_model,
    tag_last_block_for_cache,
)
from layered_memory.core.tool_calls import (
    MUTATING_TOOLS,
    ToolResult,
    changed_paths,
    error_message,
    invalid_path_refused,
    named_paths,
    refused,
    state_files,
    with_note,
    with_state_update,
    without_files,
)
from layered_memory.core.validation import (
    check_bool,
    check_instance,
    check_match_keys,
    check_path_list,
    describe,
    is_backend,
)
from layered_memory.core.wiring_checks import (
    WarnOnce,
    check_consolidated_file,
    checks_files,
    says_not_found,
    unreachable_memory,
    warn_if_no_tool_writes,
    warn_unfired_write_backs,
    write_landed_elsewhere,
    wrote_memory,
)
from layered_memory.recall.entries import RecallQuery
from layered_memory.safety.redaction import Redaction
from layered_memory.writeback.consolidation import MemoryConsolidator
from layered_memory.writeback.end_of_run import with_end_of_run
from layered_memory.writeback.hooks import EndOfRun, HookEvent, HookRegistry
from layered_memory.writeback.insights import MemoryWriter, register_write_back
from layered_memory.writeback.review_queue import QUEUE_OWNER

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol
    from deepagents.middleware.filesystem import FilesystemPermission
    from langchain.agents.middleware.types import ToolCallRequest
    from langgraph.runtime import Runtime

    from layered_memory.sessions.stores import SessionStore

__all__ = ["LayeredMemoryState", "MatchKeySource", "MemoryMiddleware"]

logger = get_logger(__name__)


class MemoryMiddleware(AgentMiddleware[LayeredMemoryState, ContextT, ResponseT]):
    """Layered memory for an agent: loads, budgets, injects and protects memory files.

    Args:
        backend: The deepagents backend the memory files live in, or a factory
            `callable(runtime) -> backend`.
        sources: deepagents-compatible flat list of files (exclusive with `layers`).
        layers: `Layer`s from lowest to highest precedence (exclusive with `sources`).
        rules: Rule folders, lowest to highest precedence.
        match_keys: Context names (read from `runtime.context`, the state, then
            `config["configurable"]`) or callables `(state, runtime) -> strings`, matched
            against rule globs besides the paths the agent touched.
        session_store: Store whose entry under the thread id is the top layer.
        hooks: Registry fired with `PIPELINE_START`/`PIPELINE_END` and the memory events.
        max_chars: Upper bound on the injected block, guidelines included.
        max_tokens: Upper bound on the injected block in the model's tokens, beside
            `max_chars` (both hold), counted with the model's own counter where its
            integration has one, else `count_tokens_approximately`
            (`layered_memory.core.tokens`). `Layer(max_tokens=...)` bounds one layer.
        strict: Raise on an unusable memory file instead of logging and skipping it.
        add_cache_control: Tag the last system block for Anthropic prompt caching.
        system_prompt: Template with an `{agent_memory}` slot, or `None` to inject nothing.
        nested: File names of nested memory (`("AGENTS.md", "CLAUDE.md")`): when the agent
            touches a path, the first existing name in every folder from the backend root down
            to it is loaded and injected, shallow to deep (a deeper file wins a conflict).
        consolidator: A `MemoryConsolidator` run after each run (`after_agent`), never on the
            model-call path: a model merges what the run taught into the `## Learned` section
            of a writable memory file (see `layered_memory.writeback.consolidation`).
        write_back: At the end of each run, write the final answer's `INSIGHT:` line into
            this writable layer file (a path, written through `protected_backend`) or with
            this `MemoryWriter`: `register_write_back` on `hooks` (a new registry if None).
        options: `MemoryOptions`: the rules budget, whether rule files and nested memory
            are writable, and whether `@path` imports are followed.

    Raises:
        TypeError: An argument of the wrong type (a flag that is not a bool, one string
            where a list is expected, ...), named with the fix.
        ValueError: A value no run could use (both or neither of `sources` and `layers`, a
            `write_back` or consolidator path that is not a writable layer file, ...).

    Attributes:
        protected_backend: The backend to give the agent
            (`create_deep_agent(backend=memory.protected_backend, ...)`): the same storage,
            refusing every change to read-only memory for every tool, subagent and shell
            command (see `layered_memory.core.guard`).
        protected_paths: What the agent may not change.
        permissions: The read-only memory as deepagents `FilesystemPermission` deny rules
            (`create_deep_agent(..., permissions=memory.permissions)`).
        end_of_run: The `EndOfRun` fired after each run (with `hooks`, `write_back` or a
            `consolidator`), or None; the instance is then a `MemoryMiddlewareWithEndOfRun`.

    Example:
        MemoryMiddleware(backend=FilesystemBackend(root_dir="."), layers=[
            Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)])
    """

    state_schema = LayeredMemoryState
    trace_policy = TracePolicy(process_inputs=omit_payload)
    _plain_class: type[Any] | None = None
    """On a class `__new__` chose for its end of run: the class the user called."""
    _last_block: tuple[str, list[str], list[str], str, MemoryReport, object, str | None] | None = (
        None
    )

    def __new__(cls, *_args: Any, **kwargs: Any) -> Self:
        """The class LangChain will read the hooks from, chosen once: with an end of run
        (`hooks`, `write_back` or `consolidator`) a subclass that adds `after_agent`, else
        `cls`, whose graph then has no end-of-run node."""
        if cls._plain_class is None and any(
            kwargs.get(name) is not None for name in ("hooks", "write_back", "consolidator")
        ):
            cls = with_end_of_run(cls)  # noqa: PLW0642 (as CachedCheckpointSaver.__new__)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        backend: BackendProtocol | internals.BackendFactory,
        sources: Sequence[str | os.PathLike[str]] | None = None,
        layers: Sequence[Layer] | None = None,
        rules: Sequence[str | os.PathLike[str]] | None = None,
        match_keys: Sequence[MatchKeySource] = (),
        session_store: SessionStore | None = None,
        hooks: HookRegistry | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_tokens: int | None = None,
        strict: bool = False,
        add_cache_control: bool = False,
        system_prompt: str | None = MEMORY_SYSTEM_PROMPT,
        nested: Sequence[str] = (),
        consolidator: MemoryConsolidator | None = None,
        write_back: str | MemoryWriter | None = None,
        options: MemoryOptions | None = None,
    ) -> None:
        if (sources is None) == (layers is None):
            msg = "pass exactly one of `sources` (a flat list of files) or `layers`"
            raise ValueError(msg)
        source_list = check_path_list(sources, parameter="sources")
        check_bool(add_cache_control, parameter="add_cache_control")
        # The options the assembler shares are checked there, once (`core.validation`): the
        # same mistake gets the same error from `MemoryAssembler` as from this class.
        self.assembler = MemoryAssembler(
            backend=backend,
            layers=layers_from_sources(source_list) if source_list is not None else layers,  # type: ignore[arg-type]
            rules=() if rules is None else rules,
            session_store=session_store,
            max_chars=max_chars,
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            # A `sources=` drop-in reads exactly what deepagents reads: imports are opt-in
            # there (a hostile AGENTS.md naming `@.env` must not change what a drop-in shows).
            compat=source_list is not None,
            strict=strict,
            nested=nested,
            options=options,
        )
        options = self.assembler.options
        rules_writable = options.rules_writable
        nested_writable = options.nested_writable
        self.match_keys = check_match_keys(match_keys)
        check_instance(
            hooks,
            HookRegistry,
            parameter="hooks",
            hint="Build one with HookRegistry() and register handlers on it.",
        )
        check_instance(
            consolidator,
            MemoryConsolidator,
            parameter="consolidator",
            hint="Build one with MemoryConsolidator(model, backend=..., path=...).",
        )
        if consolidator is not None and consolidator.model is None:
            msg = "consolidator has no model (model=None): such a consolidator only reviews"
            raise ValueError(msg)
        if write_back is not None and not isinstance(write_back, str | MemoryWriter):
            msg = (
                f"write_back must be the path of a writable layer file "
                f'(write_back="/MEMORY.md"), a MemoryWriter or None; got {describe(write_back)}'
            )
            raise TypeError(msg)
        super().__init__()
        self._consolidator = consolidator  # the guard asks for its review queue
        self.sources = source_list
        self.system_prompt = system_prompt
        self.rules_writable = rules_writable
        self._add_cache_control = add_cache_control
        self._backend_factory: internals.BackendFactory | None = (
            None if is_backend(backend) else backend  # type: ignore[assignment]
        )
        if consolidator is not None:
            check_consolidated_file(self.assembler, consolidator)
        self._found_read_only = _FoundReadOnly()
        # Said once per middleware at its first model call (a logging concern, not run state).
        self._check_tools = not self.assembler.compat and any(
            layer.writable for layer in self.assembler.layers
        )
        self._parent_queues: tuple[str, ...] = ()
        self._unreachable_warnings = WarnOnce()
        self._read_only_layer_paths = frozenset(
            path for layer in self.assembler.layers if not layer.writable for path in layer.files
        )
        configured = protected_paths_of(
            self.assembler.layers,
            () if rules_writable else self.assembler.rule_folders,
            backend,
        )
        self.protected_paths = replace(
            configured,
            names=(
                {}
                if nested_writable
                else dict.fromkeys(self.assembler.nested, "nested memory (read-only)")
            ),
            discovered=self._read_only_found,
            redacted_names=frozenset(self.assembler.nested if nested_writable else ()),
            redacted_folders=configured.redacted_folders  # writable folder layers
            | frozenset(self.assembler.rule_folders if rules_writable else ()),
            found_writable=self._found_read_only.writable,
        )
        self.protected_backend: Any = (
            protecting(self._backend_factory, self.protected_paths)
            if self._backend_factory is not None
            else protect(backend, self.protected_paths)
        )
        if write_back is not None:
            hooks = hooks or HookRegistry()
            register_write_back(hooks, self._writer(write_back))
        self._hooks = hooks
        self.end_of_run = (
            None
            if hooks is None and consolidator is None
            else EndOfRun(hooks=hooks, consolidator=consolidator)
        )

    @property
    def permissions(self) -> list[FilesystemPermission]:
        """Read-only memory as deepagents `FilesystemPermission` deny rules for writes.

        `create_deep_agent(..., permissions=memory.permissions)` makes deepagents' own file
        tools refuse to write read-only layer files, read-only folder layers, rule folders,
        nested memory, read-only imports found so far and the consolidator's review queue:
        in the parent agent and in every subagent that inherits the rules, with or without
        this middleware. Deepagents checks its file tools by path only; the protected backend
        (`backend=memory.protected_backend`) stays the defence against a shell command, a
        hard link and memory found at run time (see `layered_memory.core.permissions`).

        Returns:
            A new list (empty when nothing is read-only), to pass as `permissions=`.
        """
        # The review queues are among the files `protected_paths.discovered` names.
        return deny_writes(self.protected_paths)

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The layers, lowest to highest precedence."""
        return self.assembler.layers

    def read_only(self) -> MemoryMiddleware[Any, Any]:
        """A twin for subagents: the same memory, every layer read-only, no hooks fired.

        A subagent should see what its parent knows but not rewrite it, and its end must not
        fire the parent's write-back.
        """
        twin = (self._plain_class or type(self))(
            backend=self._backend_factory or self.assembler.backend,
            layers=[replace(layer, writable=False) for layer in self.layers],
            rules=self.assembler.rule_folders,
            match_keys=self.match_keys,
            session_store=self.assembler.session_store,
            max_chars=self.assembler.max_chars,
            max_tokens=self.assembler.max_tokens,
            strict=self.assembler.strict,
            add_cache_control=self._add_cache_control,
            system_prompt=self.system_prompt,
            nested=self.assembler.nested,
            options=replace(
                self.assembler.options,
                rules_writable=False,
                nested_writable=False,
                imports=self.assembler.follow_imports,
            ),
        )
        # The twin is built from layers, but must keep the flat layout a `sources=` parent uses.
        twin.assembler.compat = self.assembler.compat
        twin._parent_queues = self._review_queues()  # a subagent never decides the parent's queue
        return twin

    # -- before_agent ---------------------------------------------------------------------------

    def before_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (LangGraph matches this spelling)
    ) -> dict[str, Any] | None:
        """Fire PIPELINE_START, load memory (each invocation, so disk changes are seen) and
        take the run-start snapshot of read-only memory.

        Callable as LangChain calls it, `(state, runtime)`, and as deepagents' own class is
        called, `(state, runtime, config)`; LangGraph passes the node's config.
        """
        config = current_config(config)
        if self.end_of_run is None:
            warn_unfired_write_backs(self.assembler)
        if self.hooks is not None:
            self.hooks.trigger(HookEvent.PIPELINE_START, run_data(state, runtime, config))
        backend = self._backend(state, runtime, config)
        snapshot = self.assembler.load(
            session_key=thread_id(config),
            backend=backend,
            touched=touched_of(state),
            pinned=_outer_run(),
        )
        run_start = self.assembler.run_start(snapshot, backend=backend)
        update = self._loaded(state, snapshot, runtime, config, run_start)
        if self.hooks is not None:
            self.hooks.trigger(HookEvent.MEMORY_LOADED, _loaded_event(snapshot, config))
            if self.assembler.rule_folders:
                self.hooks.trigger(HookEvent.RULES_MATCHED, self._rules_event(state, update))
        return update or None

    async def abefore_agent(
        self,
        state: LayeredMemoryState,
        runtime: Runtime[ContextT],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see before_agent)
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        config = current_config(config)
        if self.end_of_run is None:
            warn_unfired_write_backs(self.assembler)
        if self.hooks is not None:
            await self.hooks.atrigger(HookEvent.PIPELINE_START, run_data(state, runtime, config))
        backend = self._backend(state, runtime, config)
        snapshot = await self.assembler.aload(
            session_key=thread_id(config),
            backend=backend,
            touched=touched_of(state),
            pinned=_outer_run(),
        )
        run_start = await self.assembler.arun_start(snapshot, backend=backend)
        update = self._loaded(state, snapshot, runtime, config, run_start)
        if self.hooks is not None:
            await self.hooks.atrigger(HookEvent.MEMORY_LOADED, _loaded_event(snapshot, config))
            if self.assembler.rule_folders:
                await self.hooks.atrigger(HookEvent.RULES_MATCHED, self._rules_event(state, update))
        return update or None

    # -- wrap_model_call ------------------------------------------------------------------------

    def modify_request(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        """The request with the memory block appended to its system message."""
        return self._inject(request, request.state)

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelCallResult[ResponseT]:
        """Reload after a memory edit, inject the memory block, call the model.

        A reload's state changes ride back on the model response (`ExtendedModelResponse`),
        so no extra graph node runs before every model call.
        """
        if self._check_tools:
            self._check_tools = False
            warn_if_no_tool_writes(self.assembler.layers, request.tools)
        update: dict[str, Any] = {}
        if needs_reload(request.state):
            config = current_config()
            snapshot = self.assembler.load(
                session_key=thread_id(config),
                backend=self._backend(request.state, request.runtime, config),
                touched=touched_of(request.state),
                pinned=Pinned(self._run_start(request.state)),
            )
            self._found_read_only.remember(snapshot.extras, self.assembler.is_read_only_layer_file)
            update = snapshot_update(
                request.state, snapshot, list(loaded(request.state).get("match_context", []))
            )
        if not update:
            return handler(self.modify_request(request))
        response = handler(self._inject(request, {**request.state, **update}))
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        """Async twin of `wrap_model_call` (only a reload after a memory edit does I/O)."""
        if self._check_tools:
            self._check_tools = False
            warn_if_no_tool_writes(self.assembler.layers, request.tools)
        update: dict[str, Any] = {}
        if needs_reload(request.state):
            config = current_config()
            snapshot = await self.assembler.aload(
                session_key=thread_id(config),
                backend=self._backend(request.state, request.runtime, config),
                touched=touched_of(request.state),
                pinned=Pinned(self._run_start(request.state)),
            )
            self._found_read_only.remember(snapshot.extras, self.assembler.is_read_only_layer_file)
            update = snapshot_update(
                request.state, snapshot, list(loaded(request.state).get("match_context", []))
            )
        if not update:
            return await handler(self.modify_request(request))
        response = await handler(self._inject(request, {**request.state, **update}))
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- wrap_tool_call -------------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        """Refuse changes to read-only memory; redact secrets from memory edits; run the tool;
        note what it did in the state."""
        refusal_message, notes = self._before_tool(request)
        if refusal_message is not None:
            return refusal_message
        request, redaction = self._redacted(request)
        if self._unguarded(request):
            with during_run(self._run_start_later(request)):
                result = note_redaction(handler(request), redaction)
            result = self._put_back(request, result)
        else:
            result = note_redaction(handler(request), redaction)
        if says_not_found(request, result):
            result = unreachable_memory(
                request,
                result,
                assembler=self.assembler,
                tool_backend=self._tool_backend,
                warnings=self._unreachable_warnings,
            )
        elif wrote_memory(request, result, notes):
            result = write_landed_elsewhere(
                request,
                result,
                assembler=self.assembler,
                tool_backend=self._tool_backend,
                warnings=self._unreachable_warnings,
            )
        if self.hooks is not None and self._reports_rules(notes):
            self.hooks.trigger(HookEvent.RULES_MATCHED, self._rules_after(request, notes))
        return with_state_update(result, notes)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Async twin of `wrap_tool_call`."""
        if checks_files(request):
            # The guard's checks resolve and stat paths on disk: in one worker thread hop
            # (which carries the run's context along), never on the event loop.
            refusal_message, notes, request, redaction = await asyncio.to_thread(
                self._checked, request
            )
        else:
            # A call that changes no file (a read, a search, any other tool) is decided from
            # its arguments and the state alone: no file system, so no thread hop.
            (refusal_message, notes), redaction = self._before_tool(request), None
        if refusal_message is not None:
            return refusal_message
        if self._unguarded(request):
            with during_run(self._run_start_later(request)):
                result = note_redaction(await handler(request), redaction)
            # File checks either way; in a thread that carries the run's context along.
            result = await asyncio.to_thread(self._put_back, request, result)
        else:
            result = note_redaction(await handler(request), redaction)
        if says_not_found(request, result):
            # It asks the memory backend whether the file is there: not on the event loop.
            result = await asyncio.to_thread(
                unreachable_memory,
                request,
                result,
                assembler=self.assembler,
                tool_backend=self._tool_backend,
                warnings=self._unreachable_warnings,
            )
        elif wrote_memory(request, result, notes):
            result = await asyncio.to_thread(
                write_landed_elsewhere,
                request,
                result,
                assembler=self.assembler,
                tool_backend=self._tool_backend,
                warnings=self._unreachable_warnings,
            )
        if self.hooks is not None and self._reports_rules(notes):
            await self.hooks.atrigger(HookEvent.RULES_MATCHED, self._rules_after(request, notes))
        return with_state_update(result, notes)

    # -- end of run: fixed at construction ------------------------------------------------------

    @property
    def hooks(self) -> HookRegistry | None:
        """The hook registry (`PIPELINE_START` ... `PIPELINE_END`), or None."""
        return self._hooks

    @hooks.setter
    def hooks(self, hooks: HookRegistry | None) -> None:
        msg = (
            "MemoryMiddleware.hooks is fixed at construction (the agent's graph gets its "
            "end-of-run node from it): pass it as MemoryMiddleware(..., hooks=registry)"
        )
        raise AttributeError(msg)

    def _read_only_found(self) -> dict[str, str]:
        """Read-only files beyond the configured ones, asked at each guard check: those a load
        found, and the consolidator's review queue (only `layered-memory review` decides it,
        see `writeback.review_queue`)."""
        found = dict(self._found_read_only.get())
        found.update(dict.fromkeys(self._review_queues(), QUEUE_OWNER))
        return found

    def _review_queues(self) -> tuple[str, ...]:
        """The review queues this agent (or, in a `read_only` twin, its parent) must not touch."""
        own = (self._consolidator.pending_path,) if self._consolidator is not None else ()
        return own + self._parent_queues

    @property
    def consolidator(self) -> MemoryConsolidator | None:
        """The consolidator run at the end of each run, or None."""
        return self._consolidator

    @consolidator.setter
    def consolidator(self, consolidator: MemoryConsolidator | None) -> None:
        msg = (
            "MemoryMiddleware.consolidator is fixed at construction (the agent's graph gets "
            "its end-of-run node from it): pass it as MemoryMiddleware(..., consolidator=...)"
        )
        raise AttributeError(msg)

    @property
    def name(self) -> str:
        """The name deepagents replaces its memory slot by: the class the user called."""
        return (self._plain_class or type(self)).__name__

    def _writer(self, write_back: str | MemoryWriter) -> MemoryWriter:
        """The writer of `write_back=`: a path must be a writable layer file of this middleware
        (it is written through the protected backend)."""
        if isinstance(write_back, MemoryWriter):
            return write_back
        access, _layer = self.assembler.access_of(write_back)
        if access != "writable":
            what = "read-only memory" if access is not None else "not a layer file"
            msg = (
                f"write_back={write_back!r} is {what} of this middleware: name a writable "
                f'layer file (layers=[..., Layer("notes", {write_back!r}, writable=True)])'
            )
            raise ValueError(msg)
        return MemoryWriter(self.protected_backend, write_back)

    # -- pure helpers shared by both halves -----------------------------------------------------

    def _loaded(
        self,
        state: Mapping[str, Any],
        snapshot: MemorySnapshot,
        runtime: Any,
        config: RunnableConfig | None,
        run_start: dict[str, Any],
    ) -> dict[str, Any]:
        keys = context_strings(self.match_keys, state, runtime, config)
        self._found_read_only.remember(snapshot.extras, self.assembler.is_read_only_layer_file)
        return snapshot_update(state, snapshot, keys, run_start)

    def _reports_rules(self, notes: Mapping[str, Any]) -> bool:
        """`RULES_MATCHED` fires when a tool call adds a match key (a new touched path)."""
        return (
            self.hooks is not None
            and bool(self.assembler.rule_folders)
            and "memory_touched_paths" in notes
        )

    def _rules_after(self, request: ToolCallRequest, notes: Mapping[str, Any]) -> dict[str, Any]:
        state = getattr(request, "state", None) or {}
        paths = merge_paths(state.get("memory_touched_paths"), notes["memory_touched_paths"])
        return self._rules_event(state, {"memory_touched_paths": paths})

    def _inject(
        self, request: ModelRequest[ContextT], state: Mapping[str, Any]
    ) -> ModelRequest[ContextT]:
        system_message = request.system_message
        if self.system_prompt is not None:
            block, report = self._memory_call(state, request.model)
            system_message = append_block(system_message, block)
            listeners = internals.report_listeners(request.runtime)
            if listeners is not None:
                emit_memory_report(listeners, report)
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
        """The block for `state` (see `_memory_call`)."""
        return self._memory_call(state)[0]

    def _memory_call(
        self, state: Mapping[str, Any], model: object = None
    ) -> tuple[str, MemoryReport]:
        """The block for `state` and its report (`core.report`): the last ones while the
        digest and match keys are unchanged.

        The block is a function of the load's digest (which covers every part: texts, rules,
        session, unreadable files, nested and imported memory) and the match keys; between
        two model calls of a run they rarely change. Compared by value (C-level `==`, no
        Python call), the last block comes back without rebuilding the session, the extras
        and the key tuple from the state nor hashing 50 match keys for the renderer's cache
        (what that saves per model call: `benchmarks/RESULTS.md`, scenario 1).

        With a budget in tokens the block depends on the model's counter too: the model is
        passed on, and the last block is reused for the very same model object only.
        """
        if not self.assembler.counts_tokens:
            model = None
        memory = loaded(state)
        digest = memory.get("digest")
        touched = state.get("memory_touched_paths") or []
        context = memory.get("match_context") or []
        # A recall layer's choice follows the latest user message: part of the key then only.
        message = latest_user_text(state) if self.assembler.recalls else None
        last = self._last_block
        if (
            last is not None
            and last[0] == digest
            and last[1] == touched
            and last[2] == context
            and last[5] is model
            and last[6] == message
        ):
            return last[3], last[4]
        block, report = self.assembler.render_call(
            state.get("memory_contents") or {},
            memory.get("rule_files") or {},
            session_of(state),
            match_keys_of(state),
            digest=digest,
            unreadable=memory.get("unreadable"),
            extras=extras_of(state),
            query=None if message is None else RecallQuery(message, tuple(touched)),
            model=model,
        )
        if digest is not None:
            # Copies: a list changed in place must not look unchanged. One tuple, replaced
            # whole, so threads sharing this middleware read a consistent entry.
            self._last_block = (digest, list(touched), list(context), block, report, model, message)
        return block, report

    def _before_tool(self, request: ToolCallRequest) -> tuple[ToolMessage | None, dict[str, Any]]:
        """A refusal, or the state notes the call will add once it ran."""
        call = request.tool_call
        tool_name = call.get("name", "")
        paths = named_paths(call)
        state = getattr(request, "state", None) or {}
        invalid = invalid_path_refused(call, paths)
        if invalid is not None:
            return invalid, {}
        edits_memory = False
        changes = changed_paths(call)
        if changes:
            unreadable = loaded(state).get("unreadable") or {}
            backend = self._tool_backend(request)
            for path, operation in changes:
                reason = refusal(backend, self.protected_paths, operation, path)
                if reason is not None:
                    return refused(call, reason), {}
                if operation == "write" and unreadable:
                    why = self._unreadable_reason(backend, path, unreadable)
                    if why is not None:
                        text = unreadable_message(tool_name, path, why)
                        return error_message(call, text), {}
                access, _layer = self.assembler.access_of(path)
                # By spelling, then by disk identity (a hard link to MEMORY.md is MEMORY.md).
                # Whatever the memory tool changes is memory (its own directory).
                edits_memory = (
                    edits_memory
                    or tool_name == MEMORY_TOOL
                    or access is not None
                    or writes_memory(backend, self.protected_paths, path)
                )
            secret = secret_path_refusal(request, self.assembler.access_of, self._writes(backend))
            if secret is not None:
                return secret, {}
        # A shell command or a subagent may have changed writable memory out of sight: the
        # next model call reloads (a digest check; nothing is re-rendered when unchanged).
        if tool_name in SHELL_TOOLS or tool_name == "task":
            edits_memory = True
        if paths and (self.assembler.nested or self.assembler.follow_imports):
            edits_memory = edits_memory or self._brings_memory(state, tool_name, paths)
        return None, tool_notes(state, paths, edits_memory)

    def _brings_memory(self, state: Mapping[str, Any], tool_name: str, paths: set[str]) -> bool:
        """A path in a folder nested memory was not looked up in yet, or an edit of a nested
        or imported file: the next model call loads again."""
        extras = extras_of(state)
        if tool_name in MUTATING_TOOLS and any(
            path in extras.nested or path in extras.imports for path in paths
        ):
            return True
        if not self.assembler.nested:
            return False
        known = set(extras.nested_dirs)
        return any(
            folder not in known
            for folder in directories_of(sorted(paths), self.assembler.rule_root)
        )

    def _checked(
        self, request: ToolCallRequest
    ) -> tuple[ToolMessage | None, dict[str, Any], ToolCallRequest, Redaction | None]:
        """`_before_tool`, then (when not refused) `_redacted`: the file checks of one call."""
        refusal_message, notes = self._before_tool(request)
        if refusal_message is not None:
            return refusal_message, notes, request, None
        request, redaction = self._redacted(request)
        return None, notes, request, redaction

    def _redacted(self, request: ToolCallRequest) -> tuple[ToolCallRequest, Redaction | None]:
        """The call with secrets redacted from what it writes into memory; memory is named
        by spelling (`access_of`) or by identity (a hard link shares no spelling with it)."""
        backend = self._tool_backend(request)
        return redact_memory_edit(request, self.assembler.access_of, self._writes(backend))

    def _writes(self, backend: Any) -> Callable[[str], bool]:
        """Whether a path is a writable memory file of `backend`, by identity."""
        return lambda path: writes_memory(backend, self.protected_paths, path)

    def _unreadable_reason(
        self, backend: Any, tool_path: str, unreadable: Mapping[str, str]
    ) -> str | None:
        """Why the layer file `tool_path` names (any alias: a hard link has no spelling in
        common with it) could not be read at the last load, if so."""
        for path, reason in unreadable.items():
            if self.assembler.same_file(path, tool_path) or is_same_file(backend, path, tool_path):
                return reason
        return None

    def _unguarded(self, request: ToolCallRequest) -> bool:
        """A call whose changes to files cannot be checked before it runs: a shell command,
        or a `task` subagent (on the plain backend its own tools pass no guard)."""
        name = request.tool_call.get("name")
        return bool(self.protected_paths) and (name in SHELL_TOOLS or name == "task")

    def _run_start(self, state: Mapping[str, Any]) -> RunStart:
        """The run-start snapshot of read-only memory kept in `state`."""
        read_only = self._read_only_layer_paths
        if self.assembler.read_only_folders:  # their files: those the run loaded
            unreadable = loaded(state).get("unreadable") or {}
            found = [*(state.get("memory_contents") or {}), *unreadable]
            read_only = read_only | {
                path for path in found if self.assembler.is_read_only_layer_file(path)
            }
        return run_start_of(
            state,
            read_only=read_only,
            rule_folders=() if self.rules_writable else self.assembler.rule_folders,
            rule_index=self.assembler.folder_index,
            nested=() if self.assembler.nested_writable else self.assembler.nested,
        )

    def _run_start_later(self, request: ToolCallRequest) -> Callable[[], RunStart]:
        """The snapshot for the backend view inside the call, worked out once if asked."""
        state = getattr(request, "state", None) or {}
        found: list[RunStart] = []

        def start() -> RunStart:
            if not found:
                found.append(self._run_start(state))
            return found[0]

        return start

    def _put_back(self, request: ToolCallRequest, result: ToolResult) -> ToolResult:
        """After a shell command or a subagent: read-only memory back to the run-start snapshot.

        A command may also leave a process behind that changes a file later: every such call
        compares with the snapshot again, so what that process changed by then is undone too.
        """
        backend = self._tool_backend(request)
        state = getattr(request, "state", None) or {}
        # Inside an outer run's tool call (a subagent's own middleware), the outer snapshot
        # is the truth: this run started later, maybe after a change.
        start = run_start_in_context() or self._run_start(state)
        outcome = restore(backend, backend, start)
        # On a `StateBackend` the subagent hands back the files it wrote as a state update.
        handed_back = state_files(result)
        kept = read_only_changes(start, handed_back)
        if kept:
            result = without_files(result, kept)
            ours = state.get("files") or {}
            changed = [path for path in kept if handed_back[path] != ours.get(path)]
            outcome = Outcome((*outcome.restored, *changed), outcome.failed, outcome.moved)
        return with_note(result, outcome.note()) if outcome else result

    def _backend(
        self, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
    ) -> BackendProtocol | None:
        """The backend a factory gives for this run (None: the fixed backend is used)."""
        if self._backend_factory is None:
            return None
        return internals.resolve(self._backend_factory, state, runtime, config)  # type: ignore[no-any-return]

    def _tool_backend(self, request: ToolCallRequest) -> Any:
        state = getattr(request, "state", None) or {}
        return self._backend(state, request.runtime, None) or self.assembler.backend

    def _rules_event(
        self, state: Mapping[str, Any], update: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """RULES_MATCHED data: which rules apply to the state as it is after `update`."""
        merged = {**state, **(update or {})}
        keys = list(match_keys_of(merged))
        match = self.assembler.match_rules(loaded(merged).get("rule_files") or {}, keys)
        return {
            "keys": keys,
            "applied": [rule.name for rule in match.applied] if match else [],
            "requested": [rule.name for rule in match.requested] if match else [],
        }


# `inspect.signature(MemoryMiddleware)` would show `__new__`'s `(*_args, **kwargs)`: the
# constructor's parameters are `__init__`'s (help(), IDEs, the API reference's test).
def _init_signature() -> inspect.Signature:
    parameters = list(inspect.signature(MemoryMiddleware.__init__).parameters.values())
    return inspect.Signature(parameters[1:])  # without `self`


setattr(MemoryMiddleware, "__signature__", _init_signature())  # noqa: B010 (mypy knows no class `__signature__`)


class _FoundReadOnly:
    """Memory files the loads of this middleware found (nested files, imports), for the guard:
    the read-only ones are protected, writes of the writable ones redacted. Derived from the
    files on disk, never run state.

    Only ever grows while the process lives: a file once imported by read-only memory stays
    protected, so a later edit of the importing file cannot free it for the agent's turn; a
    file once imported by writable memory keeps its writes redacted.
    """

    def __init__(self) -> None:
        self._files: dict[str, str] = {}
        self._writable: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def remember(self, extras: MemoryExtras, is_read_only_layer: Callable[[str], bool]) -> None:
        if not extras.access and not extras.edges:
            return  # no nested or imported file: nothing found
        found = {
            path: (
                "nested memory (read-only)"
                if path in extras.nested
                else "imported by read-only memory"
            )
            for path, access in extras.access.items()
            if access == "read-only"
        }
        writable = {path for path, access in extras.access.items() if access == "writable"}
        # Every target a file imports, found or not: a missing or unreadable one written by
        # the agent would enter the prompt as memory of its importer's access at the next load.
        for importer, targets in extras.edges.items():
            access = extras.access.get(importer)
            if access is None:  # a layer file
                access = "read-only" if is_read_only_layer(importer) else "writable"
            if access == "read-only":
                for target in targets:
                    found.setdefault(target, "imported by read-only memory")
            else:
                writable.update(targets)
        if found.keys() - self._files.keys() or writable - self._writable:
            with self._lock:
                self._files.update(found)
                self._writable |= writable

    def get(self) -> Mapping[str, str]:
        with self._lock:
            return dict(self._files)

    def writable(self) -> frozenset[str]:
        """Writable memory files found (read-only ones found too are left out by the guard)."""
        return self._writable


def _outer_run() -> Pinned | None:
    """A run started inside another run's tool call (a subagent with its own middleware)
    holds read-only memory to the outer run's snapshot: the files may have been changed
    since the outer run started."""
    start = run_start_in_context()
    return None if start is None else Pinned(start)


def _loaded_event(snapshot: MemorySnapshot, config: RunnableConfig | None) -> dict[str, Any]:
    return {
        "paths": sorted(snapshot.files),
        "rule_files": sorted(snapshot.rule_files),
        "problems": [(p.path, p.reason) for p in snapshot.problems],
        "digest": snapshot.digest,
        "thread_id": thread_id(config),
    }
