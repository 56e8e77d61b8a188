"""Wiring checks: the mistakes a newcomer makes wiring `MemoryMiddleware` into an agent, each
found where it shows and told once, naming the fix.

- The agent's file tools use another backend than memory (`create_deep_agent` without
  `backend=`): a "not found" for loaded memory (`unreachable_memory`), or a `write_file` of
  memory that succeeded elsewhere (`write_landed_elsewhere`): one warning per file, and a
  note for the model.
- Writable memory and no tool that can write a file (`warn_if_no_tool_writes`).
- A write-back registered on a `HookRegistry` nothing fires (`warn_unfired_write_backs`).
- A consolidator writing a file that is not a writable layer (`check_consolidated_file`).

The middleware's hooks call these; they hold no run state.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepagents.backends import StateBackend
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from layered_memory._logs import get_logger
from layered_memory.core import internals
from layered_memory.core.guard import MEMORY_TOOL, REDACTED_ARGUMENTS, SHELL_TOOLS
from layered_memory.core.state import extras_of, loaded
from layered_memory.core.tool_calls import (
    MUTATING_TOOLS,
    ToolResult,
    changed_paths,
    named_paths,
    with_note,
)
from layered_memory.writeback.hooks import take_unfired_write_backs

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ToolCallRequest

    from layered_memory.core.assembler import MemoryAssembler
    from layered_memory.core.layers import Layer
    from layered_memory.writeback.consolidation import MemoryConsolidator

__all__ = [
    "WarnOnce",
    "check_consolidated_file",
    "checks_files",
    "says_not_found",
    "unreachable_memory",
    "warn_if_no_tool_writes",
    "warn_unfired_write_backs",
    "write_landed_elsewhere",
    "wrote_memory",
]

logger = get_logger(__name__)


def checks_files(request: ToolCallRequest) -> bool:
    """Whether the checks before this call look at the disk: only for a call that changes or
    writes a file (`changed_paths`, the redacted arguments). A shell command or a subagent is
    checked after it ran (`MemoryMiddleware._put_back`)."""
    call = request.tool_call
    name = call.get("name")
    return name in REDACTED_ARGUMENTS or name == MEMORY_TOOL or bool(changed_paths(call))


_READS_ONE_FILE = frozenset({"read_file", "edit_file", "delete"})
"""deepagents' file tools that answer "File '<path>' not found" for a missing file."""


_NOT_FOUND = re.compile(r"(?:Error: )*(?:File '(?P<path>.*)'|File) not found")
"""deepagents' answer for a missing file, whole (`Error: File '/x' not found`, from every
backend's read, edit and delete), never text inside a file that was read."""


def says_not_found(request: ToolCallRequest, result: ToolResult) -> bool:
    """A file tool's error that the file it named is missing (cheap: every tool call asks).

    "String not found in file" is `edit_file` finding the file but not the text.
    """
    if request.tool_call.get("name") not in _READS_ONE_FILE:
        return False
    message = result if isinstance(result, ToolMessage) else _tool_message_of(result)
    if message is None or not isinstance(message.content, str):
        return False
    found = _NOT_FOUND.fullmatch(message.content.strip())
    if found is None:
        return False  # file content that happens to say "not found", or another error
    named = found.group("path")
    return named is None or named in named_paths(request.tool_call)
    # A `write_file` of memory on the tools' `StateBackend` succeeds there: see
    # `wrote_memory` and `write_landed_elsewhere`.


def wrote_memory(request: ToolCallRequest, result: ToolResult, notes: Mapping[str, Any]) -> bool:
    """A `write_file` of memory that answered success: the memory backend should have the
    file now. When the agent's tools use deepagents' default `StateBackend`, the write lands
    in the graph state and never reaches the memory file, while the tool says it succeeded
    (`create_deep_agent` without `backend=`, MEMORY.md not created yet; issue 36)."""
    if request.tool_call.get("name") != "write_file" or "memory_edits" not in notes:
        return False
    message = result if isinstance(result, ToolMessage) else _tool_message_of(result)
    return (
        message is not None
        and message.status != "error"
        and not (isinstance(message.content, str) and message.content.startswith("Error"))
    )


_WRITING_TOOLS = frozenset({*MUTATING_TOOLS, MEMORY_TOOL, *SHELL_TOOLS})
"""Tools that can change a memory file: without one, writable memory cannot be written."""


def warn_if_no_tool_writes(layers: Sequence[Layer], tools: Sequence[Any]) -> None:
    """One warning when the agent has writable memory and no tool that can write it
    (`create_agent` without deepagents' `FilesystemMiddleware`): the model would be told to
    edit memory and get "edit_file is not a valid tool" (issue 36)."""
    names = {
        tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
        for tool in tools
    }
    if names & _WRITING_TOOLS:
        return
    writable = [layer.name for layer in layers if layer.writable]
    logger.warning(
        "memory layers %s are writable, but the agent has no tool that can write a file "
        "(edit_file, write_file, the memory tool or a shell): the model cannot edit them. "
        "Give the agent file tools (create_deep_agent, or create_agent(..., middleware=["
        "memory, FilesystemMiddleware(backend=memory.protected_backend)])), or make the "
        "layers read-only (Layer(..., writable=False))",
        ", ".join(writable),
    )


def _tool_message_of(result: ToolResult) -> ToolMessage | None:
    if isinstance(result, Command) and isinstance(result.update, Mapping):
        for message in reversed(list(result.update.get("messages") or ())):
            if isinstance(message, ToolMessage):
                return message
    return None


def _unreachable_note(path: str) -> str:
    return (
        f"\n\nNote: {path} is memory loaded for this agent from another backend than the "
        "file tools use: changes made with these tools do not reach that memory."
    )


class WarnOnce:
    """The unreachable-memory warning, once per memory file and middleware. What was logged
    is a logging concern of this process, not run state: a resumed run may warn again."""

    def __init__(self) -> None:
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def once(self, path: str) -> None:
        with self._lock:
            if path in self._warned:
                return
            self._warned.add(path)
        logger.warning(
            "memory file %s was loaded by MemoryMiddleware, but the agent's file tools "
            "answered 'not found': they use another backend (create_deep_agent without "
            "backend= gives them a StateBackend), so the agent's edits of memory are lost. "
            "Give the agent the memory's backend: "
            "create_deep_agent(..., backend=memory.protected_backend)",
            path,
        )


def unreachable_memory(
    request: ToolCallRequest,
    result: ToolResult,
    *,
    assembler: MemoryAssembler,
    tool_backend: Callable[[ToolCallRequest], Any],
    warnings: WarnOnce,
) -> ToolResult:
    """A file tool answered "not found" for memory this middleware loaded, and the memory
    backend still has it: the agent's tools use another backend (`create_deep_agent`
    without `backend=` gives them deepagents' `StateBackend`), so its edits of memory
    cannot land. Without this the agent only sees "File not found" and the developer
    nothing (issue 26): one warning per file naming the fix, and a note for the model.
    """
    state = getattr(request, "state", None) or {}
    path = _loaded_memory_named(assembler, state, named_paths(request.tool_call))
    if path is None:
        return result
    backend = tool_backend(request)
    try:
        [response] = backend.download_files([path])
    except Exception:  # a failing backend: nothing is known, so say nothing
        return result
    if getattr(response, "error", None) is not None or getattr(response, "content", None) is None:
        return result  # gone from memory too (deleted mid-run): "not found" is the truth
    warnings.once(path)
    return with_note(result, _unreachable_note(path))


def write_landed_elsewhere(
    request: ToolCallRequest,
    result: ToolResult,
    *,
    assembler: MemoryAssembler,
    tool_backend: Callable[[ToolCallRequest], Any],
    warnings: WarnOnce,
) -> ToolResult:
    """A `write_file` of a layer file answered success, yet the memory backend has no such
    file: the agent's tools wrote somewhere else (deepagents' default `StateBackend`). One
    warning per file naming the fix, and a note for the model."""
    paths = [path for path in named_paths(request.tool_call) if assembler.access_of(path)[0]]
    if not paths:
        return result
    backend = tool_backend(request)
    if isinstance(internals.final_route(backend, paths[0])[0], StateBackend):
        return result  # the memory itself lives in the state: the write is there
    try:
        [response] = backend.download_files(paths[:1])
    except Exception:  # a failing backend: nothing is known, so say nothing
        return result
    if getattr(response, "error", None) != "file_not_found":
        return result
    warnings.once(paths[0])
    return with_note(result, _unreachable_note(paths[0]))


def _loaded_memory_named(
    assembler: MemoryAssembler, state: Mapping[str, Any], paths: set[str]
) -> str | None:
    """The loaded memory file (as it was loaded) one of `paths` names, if any."""
    memory = loaded(state)
    extras = extras_of(state)
    candidates: list[str] = [
        *(state.get("memory_contents") or {}),
        *(memory.get("rule_files") or {}),
        *extras.nested,
        *extras.imports,
    ]
    for tool_path in sorted(paths):
        for path in candidates:
            if path == tool_path or assembler.same_file(path, tool_path):
                return path
    return None


def warn_unfired_write_backs(assembler: MemoryAssembler) -> None:
    """One warning per write-back of this middleware's memory registered on a `HookRegistry`
    that nothing fires: `register_write_back(registry, ...)` without `hooks=registry` writes
    nothing, and used to say nothing (issue 36)."""
    for path in take_unfired_write_backs(lambda path: assembler.access_of(path)[0] is not None):
        logger.warning(
            "write-back to %s is registered on a HookRegistry that no MemoryMiddleware fires, "
            "so nothing will be written: pass the registry as MemoryMiddleware(..., "
            "hooks=registry), or let the middleware write back itself: "
            "MemoryMiddleware(..., write_back=%r)",
            path,
            path,
        )


def check_consolidated_file(assembler: MemoryAssembler, consolidator: MemoryConsolidator) -> None:
    """The consolidator must write a writable layer file: read-only memory never changes, and a
    file no layer loads would learn lessons no run reads."""
    access, _layer = assembler.access_of(consolidator.path)
    if access != "writable":
        what = "read-only memory" if access is not None else "not a layer file of this middleware"
        msg = (
            f"consolidator writes {consolidator.path!r}, which is {what}: give it the path of "
            "a writable layer (Layer(..., writable=True))"
        )
        raise ValueError(msg)
