"""Pipeline hooks: named, prioritized handlers run when something happens in a memory pipeline.

`MemoryMiddleware(hooks=registry)` fires `PIPELINE_START` in `before_agent` and `PIPELINE_END`
in `after_agent` (through `EndOfRun`, the end-of-run concern); a hand-built graph fires them
itself:

    registry = HookRegistry()
    registry.register(HookEvent.PIPELINE_END, on_end, name="audit")
    final_state = graph.invoke(inputs, config)
    registry.trigger(HookEvent.PIPELINE_END, final_state)

Dispatch rules:

- Handlers run one after another, highest `priority` first; equal priorities run in
  registration order.
- A handler is `handler(event, data)`, a plain function or a coroutine function.
- A handler that raises is logged with its name and the event, and the remaining handlers still
  run. A handler registered with `strict=True` is different: its exception stops the dispatch
  at once (lower-priority handlers do not run) and propagates to the caller of `trigger` /
  `atrigger` unchanged, with a note naming the handler. Use it for handlers whose failure must
  fail the run.
- `trigger` (sync) runs a coroutine handler to completion: with `asyncio.run` when the calling
  thread has no running event loop, otherwise in a short-lived worker thread with its own loop
  (the caller's context variables are copied in). That blocks the calling loop until the
  handler is done, and a handler that needs objects bound to the caller's loop must be fired
  with `atrigger` instead.
- `atrigger` (async) awaits coroutine handlers on the running loop and runs plain handlers in a
  worker thread (`asyncio.to_thread`, context variables copied) so a blocking handler never
  stalls the loop. A handler registered with an `async_handler` twin runs that twin instead.
- The handler list is copied when a dispatch starts: handlers registered or removed by a
  running handler take effect from the next dispatch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import enum
import inspect
import itertools
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, TypeAlias

from langchain.agents.middleware.types import AgentMiddleware, AgentState

from layered_memory._logs import get_logger
from layered_memory.core.run_data import current_config, run_data
from layered_memory.core.validation import check_bool

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

    from layered_memory.writeback.consolidation import MemoryConsolidator

__all__ = [
    "AsyncHookHandler",
    "EndOfRun",
    "HookEvent",
    "HookHandler",
    "HookRegistry",
    "note_write_back",
    "take_unfired_write_backs",
]

logger = get_logger(__name__)

HookHandler: TypeAlias = Callable[["HookEvent", Any], object]
"""`handler(event, data)`: a plain function, or a coroutine function (its result awaited)."""

AsyncHookHandler: TypeAlias = Callable[["HookEvent", Any], Awaitable[object]]
"""The native async twin of a handler, used by `atrigger`."""


class HookEvent(enum.StrEnum):
    """What happened in a memory pipeline. The value is the event's stable wire name."""

    PIPELINE_START = "pipeline_start"
    """A run starts. Data: the input state as a dict, plus `config`, `runtime_context` and
    `thread_id` when fired by `MemoryMiddleware`."""

    PIPELINE_END = "pipeline_end"
    """A run ended. Data: the final state as a dict, plus `config` (the `RunnableConfig` dict),
    `runtime_context` (`runtime.context`: a dict, a dataclass or `None`) and `thread_id` when
    fired by `MemoryMiddleware`. The write-back handler listens here."""

    MEMORY_LOADED = "memory_loaded"
    """The memory layers were (re)loaded."""

    RULES_MATCHED = "rules_matched"
    """Rule files matched the run's match keys."""

    MEMORY_WRITTEN = "memory_written"
    """An insight was written into a memory file. Data: a `MemoryWrittenData` dict (see
    `layered_memory.writeback.insights`)."""


@dataclass(frozen=True, slots=True)
class _Registration:
    event: HookEvent
    handler: HookHandler
    async_handler: AsyncHookHandler | None
    name: str
    priority: int
    strict: bool
    order: int


class HookRegistry:
    """Named handlers per `HookEvent`, run by priority with per-handler error isolation.

    Thread-safe: handlers may be registered, removed and fired from several threads.

    Example:
        registry = HookRegistry()
        registry.register(HookEvent.PIPELINE_END, lambda event, data: print(event), name="echo")
        registry.trigger(HookEvent.PIPELINE_END, {"messages": []})
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, _Registration] = {}
        self._order = itertools.count()
        self.fired_at_end_of_run = False
        """Whether an `EndOfRun` (what `MemoryMiddleware(hooks=...)` runs) fires this registry."""

    def register(
        self,
        event: HookEvent | str,
        handler: HookHandler,
        *,
        name: str,
        priority: int = 50,
        strict: bool = False,
        async_handler: AsyncHookHandler | None = None,
    ) -> None:
        """Add a handler for one event.

        Args:
            event: The event (a `HookEvent` or its value, e.g. `"pipeline_end"`).
            handler: `handler(event, data)`, sync or async.
            name: Unique across the registry; used in logs and by `unregister`.
            priority: Higher runs first; equal priorities run in registration order.
            strict: Let this handler's exception stop the dispatch and propagate.
            async_handler: An optional native async twin that `atrigger` runs instead of
                `handler` (for handlers with both a blocking and an async implementation).

        Raises:
            ValueError: The name is empty or already registered, or the event is unknown.
            TypeError: A handler is not callable or the priority is not an int.
        """
        hook_event = HookEvent(event)
        if not isinstance(name, str) or not name.strip():
            msg = "hook handler name must be a non-empty string"
            raise ValueError(msg)
        if not callable(handler):
            msg = f"hook handler {name!r} is not callable"
            raise TypeError(msg)
        if async_handler is not None and not callable(async_handler):
            msg = f"async_handler of hook handler {name!r} is not callable"
            raise TypeError(msg)
        if isinstance(priority, bool) or not isinstance(priority, int):
            msg = f"priority of hook handler {name!r} must be an int, got {priority!r}"
            raise TypeError(msg)
        check_bool(strict, parameter=f"strict of hook handler {name!r}")
        with self._lock:
            if name in self._by_name:
                msg = f"a hook handler named {name!r} is already registered"
                raise ValueError(msg)
            self._by_name[name] = _Registration(
                event=hook_event,
                handler=handler,
                async_handler=async_handler,
                name=name,
                priority=priority,
                strict=strict,
                order=next(self._order),
            )

    def unregister(self, name: str) -> bool:
        """Remove the handler registered under `name`.

        Args:
            name: The name it was registered under.

        Returns:
            True when a handler was removed, False when none had that name.
        """
        with self._lock:
            return self._by_name.pop(name, None) is not None

    def names(self, event: HookEvent | str) -> list[str]:
        """The names of the handlers of `event`, in the order they run.

        Args:
            event: The event (a `HookEvent` or its value).

        Returns:
            The handlers' names, highest priority first.
        """
        return [registration.name for registration in self._handlers_for(HookEvent(event))]

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._by_name

    def trigger(self, event: HookEvent | str, data: Any) -> None:
        """Run every handler of `event` with `data`, blocking until all are done.

        Args:
            event: The event (a `HookEvent` or its value).
            data: What every handler gets as its second argument.

        Raises:
            Exception: Whatever a `strict=True` handler raised (others are logged).
        """
        hook_event = HookEvent(event)
        if hook_event is HookEvent.PIPELINE_END:
            _UNFIRED_WRITE_BACKS.pop(self, None)  # fired by hand (a hand-built graph)
        for registration in self._handlers_for(hook_event):
            try:
                result = registration.handler(hook_event, data)
                if inspect.isawaitable(result):
                    _run_to_completion(result)
            except Exception as exc:
                self._handle_failure(registration, exc)

    async def atrigger(self, event: HookEvent | str, data: Any) -> None:
        """Run every handler of `event` with `data` without blocking the event loop.

        Args:
            event: The event (a `HookEvent` or its value).
            data: What every handler gets as its second argument.

        Raises:
            Exception: Whatever a `strict=True` handler raised (others are logged).
        """
        hook_event = HookEvent(event)
        if hook_event is HookEvent.PIPELINE_END:
            _UNFIRED_WRITE_BACKS.pop(self, None)  # fired by hand (a hand-built graph)
        for registration in self._handlers_for(hook_event):
            try:
                if registration.async_handler is not None:
                    await registration.async_handler(hook_event, data)
                elif inspect.iscoroutinefunction(registration.handler):
                    await registration.handler(hook_event, data)
                else:
                    result = await asyncio.to_thread(registration.handler, hook_event, data)
                    if inspect.isawaitable(result):
                        await result
            except Exception as exc:
                self._handle_failure(registration, exc)

    def _handlers_for(self, event: HookEvent) -> list[_Registration]:
        with self._lock:
            selected = [r for r in self._by_name.values() if r.event is event]
        return sorted(selected, key=lambda r: (-r.priority, r.order))

    @staticmethod
    def _handle_failure(registration: _Registration, exc: Exception) -> None:
        if registration.strict:
            exc.add_note(
                f"raised by strict hook handler {registration.name!r} on {registration.event}"
            )
            raise exc
        logger.exception(
            "hook handler %r failed on %s; the remaining handlers still run",
            registration.name,
            registration.event.value,
        )


class EndOfRun(AgentMiddleware[AgentState[Any], Any, Any]):
    """The end of a run handed to write-back: `PIPELINE_END` with the final state, then the
    consolidator.

    A concern of its own because LangChain adds an `after_agent` graph node for every
    middleware class that defines the hook, and that node runs at every invocation: without
    write-back it did nothing for about 7% of the Python calls of a short scripted deep-agent
    conversation (`make bench`, scenario 6). `MemoryMiddleware(hooks=..., consolidator=...)`
    runs one itself (its graph has the node only then); beside another middleware, add it to
    the agent's list: `middleware=[memory, EndOfRun(hooks=registry)]`.

    Args:
        hooks: Fired with `PIPELINE_END` and the run's data (the final state, `config`,
            `runtime_context`, `thread_id`).
        consolidator: Handed the same data after the hooks (`MemoryConsolidator.after_run`).
    """

    def __init__(
        self,
        *,
        hooks: HookRegistry | None = None,
        consolidator: MemoryConsolidator | None = None,
    ) -> None:
        super().__init__()
        self.hooks = hooks
        self.consolidator = consolidator
        if hooks is not None:
            hooks.fired_at_end_of_run = True
            _UNFIRED_WRITE_BACKS.pop(hooks, None)

    def after_agent(
        self,
        state: AgentState[Any],
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (LangGraph matches this spelling)
    ) -> dict[str, Any] | None:
        """Fire PIPELINE_END with the final state (write-back handlers run here), then
        consolidate the run."""
        if self.hooks is not None or self.consolidator is not None:
            data = run_data(state, runtime, current_config(config))
            if self.hooks is not None:
                self.hooks.trigger(HookEvent.PIPELINE_END, data)
            if self.consolidator is not None:
                self.consolidator.after_run(data)
        return None

    async def aafter_agent(
        self,
        state: AgentState[Any],
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see after_agent)
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        if self.hooks is not None or self.consolidator is not None:
            data = run_data(state, runtime, current_config(config))
            if self.hooks is not None:
                await self.hooks.atrigger(HookEvent.PIPELINE_END, data)
            if self.consolidator is not None:
                await self.consolidator.aafter_run(data)
        return None


_UNFIRED_WRITE_BACKS: weakref.WeakKeyDictionary[HookRegistry, str] = weakref.WeakKeyDictionary()
"""Registries holding a write-back (`register_write_back`) that no `EndOfRun` fires yet, with
the memory file it writes: a registry never passed as `hooks=` writes nothing, and a
`MemoryMiddleware` without hooks says so at its first run (issue 36). Weak: a registry that is
dropped is forgotten."""


def note_write_back(registry: HookRegistry, path: str) -> None:
    """Remember that `registry` writes `path` back, until an `EndOfRun` fires it.

    Args:
        registry: The registry the write-back handler was added to.
        path: The memory file the handler writes.
    """
    if not registry.fired_at_end_of_run:
        _UNFIRED_WRITE_BACKS[registry] = path


def take_unfired_write_backs(writes: Callable[[str], bool]) -> list[str]:
    """The files of the write-backs that nothing fires at the end of a run and that write a
    file `writes` accepts; they are forgotten, so each is reported once.

    Args:
        writes: Whether a path is a memory file of the caller.

    Returns:
        The memory files, in registration order.
    """
    if not _UNFIRED_WRITE_BACKS:
        return []
    taken = []
    for registry, path in list(_UNFIRED_WRITE_BACKS.items()):
        if writes(path) and _UNFIRED_WRITE_BACKS.pop(registry, None) is not None:
            taken.append(path)
    return taken


def _run_to_completion(awaitable: Awaitable[object]) -> None:
    """Run an awaitable to completion from synchronous code (see the module docstring)."""
    coroutine = _as_coroutine(awaitable)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coroutine)
        return
    # This thread's loop is busy running our caller, so the handler gets its own loop in a
    # worker thread; the caller's context variables (e.g. LangGraph's config) go with it.
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="layered-memory-hook"
    ) as executor:
        executor.submit(context.run, asyncio.run, coroutine).result()


async def _await(awaitable: Awaitable[object]) -> object:
    return await awaitable


def _as_coroutine(awaitable: Awaitable[object]) -> Coroutine[Any, Any, object]:
    if inspect.iscoroutine(awaitable):
        return awaitable
    return _await(awaitable)
