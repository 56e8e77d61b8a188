"""What the middleware does around a tool call, as pure functions: read the call, refuse it,
or carry the call's notes back into the graph state with the tool's own result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from layered_memory.core.guard import MEMORY_TOOL
from layered_memory.core.protection import Operation, refusal_message
from layered_memory.core.validation import invalid_path_reason

ToolResult = ToolMessage | Command[Any]
"""What a tool call hands back through `wrap_tool_call`: its message, or a state update."""

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


def with_state_update(result: ToolResult, update: Mapping[str, Any]) -> ToolResult:
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
