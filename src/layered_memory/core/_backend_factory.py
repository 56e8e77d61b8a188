"""deepagents' backend factory form, `backend=lambda runtime: ...`, resolved per hook call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langchain.tools import ToolRuntime

from layered_memory.core.guard import ProtectedPaths, protect

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

BackendFactory = Callable[[Any], Any]
"""`callable(runtime) -> backend`, resolved at each hook."""


def resolve(
    factory: BackendFactory, state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
) -> Any:
    """The backend a factory gives for this run (called with a `ToolRuntime`, as deepagents
    called its factories)."""
    tool_runtime = ToolRuntime(
        state=state,
        context=getattr(runtime, "context", None),
        config=config or getattr(runtime, "config", None) or {},  # type: ignore[arg-type]
        stream_writer=getattr(runtime, "stream_writer", None) or _no_stream,
        tool_call_id=None,
        store=getattr(runtime, "store", None),
    )
    return factory(tool_runtime)


def protecting(factory: BackendFactory, paths: ProtectedPaths) -> BackendFactory:
    """A factory whose every backend is protected (`guard.protect`)."""

    def protected_factory(runtime: Any) -> Any:
        return protect(factory(runtime), paths)

    return protected_factory


def _no_stream(_chunk: Any) -> None:
    """Stream writer for a factory called outside a streaming run."""
