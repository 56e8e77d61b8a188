"""The end-of-run class builder: `MemoryMiddleware`'s subclass with an `after_agent` hook.

`create_agent` adds an `after_agent` graph node for every middleware whose class overrides the
hook, so `MemoryMiddleware` defines none; `MemoryMiddleware.__new__` picks the subclass built
here (`with_end_of_run`) when there is an end of run (`hooks`, `write_back` or a
`consolidator`). Its hook runs the user's own `after_agent` first, then `EndOfRun`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from langchain.agents.middleware.types import AgentMiddleware, AgentState

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

__all__ = ["with_end_of_run"]


class _EndOfRunHooks:
    """The `after_agent` pair of a middleware with an end of run (`EndOfRun`): the user's own
    `after_agent` (if its class has one) first, then `PIPELINE_END` and the consolidator."""

    def after_agent(
        self: Any,
        state: AgentState[Any],
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (LangGraph matches this spelling)
    ) -> dict[str, Any] | None:
        """Fire PIPELINE_END with the final state (write-back handlers run here), then hand
        the run to the consolidator."""
        own = self._own_after_agent
        update = None if own is None else own(self, state, runtime, config)
        self.end_of_run.after_agent(state, runtime, config)
        return update  # type: ignore[no-any-return]

    async def aafter_agent(
        self: Any,
        state: AgentState[Any],
        runtime: Runtime[Any],
        config: Optional[RunnableConfig] = None,  # noqa: UP045 (see after_agent)
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        own = self._own_aafter_agent
        update = None if own is None else await own(self, state, runtime, config)
        await self.end_of_run.aafter_agent(state, runtime, config)
        return update  # type: ignore[no-any-return]


_WITH_END_OF_RUN: dict[type[Any], type[Any]] = {}
_WITH_END_OF_RUN_LOCK = threading.Lock()


def with_end_of_run(cls: type[Any]) -> type[Any]:
    """`cls` with an end of run: a subclass whose `after_agent` fires `EndOfRun`.

    `create_agent` adds an `after_agent` node for every middleware whose class overrides the
    hook. Without hooks or a consolidator the node did nothing, yet ran at every invocation:
    5% of the Python calls of the 20-turn deep-agent conversation of `make bench` (scenario 6,
    the `sources=` drop-in: 1.073x deepagents' own middleware with the node, 1.018x without
    it). So `MemoryMiddleware` defines no `after_agent`, and `__new__` picks this subclass
    (one per class, cached) when there is an end of run: `type(m) is m.__class__` always.
    """
    with _WITH_END_OF_RUN_LOCK:
        subclass = _WITH_END_OF_RUN.get(cls)
        if subclass is None:
            name = f"{cls.__name__}WithEndOfRun"
            subclass = type(
                name,
                (cls,),
                {
                    "__module__": cls.__module__,
                    "__qualname__": f"{cls.__qualname__}WithEndOfRun",
                    "__doc__": f"`{cls.__qualname__}` with an end of run (write-back).",
                    "after_agent": _EndOfRunHooks.after_agent,
                    "aafter_agent": _EndOfRunHooks.aafter_agent,
                    "_plain_class": cls,
                    "_own_after_agent": _static(_own_hook(cls, "after_agent")),
                    "_own_aafter_agent": _static(_own_hook(cls, "aafter_agent")),
                },
            )
            _WITH_END_OF_RUN[cls] = subclass
        return subclass


def _static(hook: Callable[..., Any] | None) -> Any:
    """A class attribute that stays the plain function (or None) when read on an instance."""
    return None if hook is None else staticmethod(hook)


def _own_hook(cls: type[Any], name: str) -> Callable[..., Any] | None:
    """A user subclass's own `after_agent` / `aafter_agent`, called as LangGraph would call it
    (with `config` only when it takes one), or None."""
    hook = getattr(cls, name)
    if hook is getattr(AgentMiddleware, name):
        return None
    if "config" in inspect.signature(hook).parameters:
        return hook  # type: ignore[no-any-return]
    if asyncio.iscoroutinefunction(hook):

        async def without_config_async(self: Any, state: Any, runtime: Any, _config: Any) -> Any:
            return await hook(self, state, runtime)

        return without_config_async

    def without_config(self: Any, state: Any, runtime: Any, _config: Any) -> Any:
        return hook(self, state, runtime)

    return without_config
