"""Read-only memory enforced where every tool, subagent and shell command passes: the backend.

`protect(backend, protected)` returns a *view* of `backend` whose mutating methods first ask
`refusal()` whether the operation would change read-only memory:

- `write` / `edit` / `upload_files` of a protected file under any alias: `..`, `~`, a symlink
  (also behind a `CompositeBackend` route), a hard link, another case on a case-insensitive
  disk (paths are compared as storage places and by device and inode, never as spellings);
- `delete` of a protected file, of anything inside a protected folder, or of any folder that
  holds protected memory (up to `delete /`);
- (in the view) a whole-file `write` / `upload_files` over a *writable* memory file, under
  any alias, that exists but cannot be read: what it holds would be lost unseen;
- `execute` (a shell) cannot be checked before it runs: after the command, read-only memory
  is compared with the running agent's run-start snapshot (outside a run: with a snapshot the
  view takes just before the command); what changed, appeared or was swapped in is put back,
  the result is read again, and the command's output tells the model what was put back and
  what could not be.

Pass the view to the agent (`create_deep_agent(backend=memory.protected_backend, ...)`) to
refuse changes up front: the parent's tools, deepagents' own `general-purpose` subagent and
every custom subagent all use that backend. The middleware's tool hook asks the same
`refusal()` for the parent's calls, and after every `execute` and `task` call puts read-only
memory back as the run started with it, so the plain backend is safe too: a subagent's change
is undone after its call instead of refused.

Writable memory is guarded too, at the middleware's tool hook (below): the text the agent's
own `write_file` / `edit_file` would write into a memory file is redacted first
(`redact_memory_edit`, `note_redaction`), and a call whose path holds a secret is refused
(`secret_path_refusal`). The view does the same for a subagent's writes.

Which operations are refused is `core.protection`; where a path really lands, compared as
storage places, is `core.places`; the view class is in `_view`, the put-back in `core.put_back`
(it compares the disk with the run-start snapshot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from layered_memory._logs import get_logger
from layered_memory.core.guard._view import make_view
from layered_memory.core.internals import BackendFactory
from layered_memory.core.protection import ProtectedPaths, is_protected
from layered_memory.safety.redaction import Redaction, redact_text

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest


__all__ = [
    "MEMORY_TOOL",
    "REDACTED_ARGUMENTS",
    "SHELL_TOOLS",
    "note_redaction",
    "protect",
    "protecting",
    "redact_memory_edit",
    "secret_path_refusal",
]

logger = get_logger(__name__)

SHELL_TOOLS = frozenset({"execute"})
"""Tools whose effects on files cannot be checked before they run."""


def protect(backend: Any, protected: ProtectedPaths) -> Any:
    """A view of `backend` that refuses every change to the `protected` paths.

    Args:
        backend: Any deepagents backend (the view shares its storage and its class's checks).
        protected: The read-only files and folders, with their owners' names.

    Returns:
        The view (the backend itself when nothing is protected). Protecting a view again adds
        the new protections to the ones it has; nothing is ever dropped.

    Example:
        backend = protect(FilesystemBackend(root_dir=".", virtual_mode=True),
                          ProtectedPaths(files={"/AGENTS.md": "the project's instructions"}))
    """
    if is_protected(backend):
        return make_view(
            backend._layered_memory_base, protected | backend._layered_memory_protected
        )
    if not protected:
        return backend
    return make_view(backend, protected)


def protecting(factory: BackendFactory, paths: ProtectedPaths) -> BackendFactory:
    """A factory whose every backend is protected (`guard.protect`)."""

    def protected_factory(runtime: Any) -> Any:
        return protect(factory(runtime), paths)

    return protected_factory


# -- the agent's own edits of memory files ---------------------------------------------------------

# The agent's own edits of memory files, redacted before the tool writes them.
#
# `MemoryMiddleware.wrap_tool_call` passes every tool call it did not refuse through
# `redact_memory_edit`. For a ``write_file`` / ``edit_file`` of a memory file (or a writable
# rule file) the text the tool would write (``content``, ``new_string``) is redacted, the tool
# runs on the redacted call, and `note_redaction` tells the model in the tool result, so it
# neither retries with the secret nor later looks for it in the file. ``old_string`` is left
# alone: it must match what the file holds.
#
# Anthropic's ``memory`` tool (langchain-anthropic's ``FilesystemClaudeMemoryMiddleware`` /
# ``StateClaudeMemoryMiddleware``) writes nothing but memory: what its ``create``
# (``file_text``), ``str_replace`` and ``insert`` (``new_str``) write is redacted whichever file
# they name, and a ``create`` / ``rename`` whose target path holds a secret is refused.
#
# A secret in the *path* cannot be redacted that way: the file would be saved under the redacted
# name, not the one the agent asked for, and every later listing, rule match and tool result
# would carry it. `secret_path_refusal` refuses such a call instead, and no log line here ever
# shows a path unredacted.

REDACTED_ARGUMENTS: Final[dict[str, tuple[str, ...]]] = {
    "write_file": ("content",),
    "edit_file": ("new_string",),
}
"""Per file tool, the arguments whose text ends up in the file."""

MEMORY_TOOL: Final = "memory"
"""The name of Anthropic's memory tool (langchain-anthropic's memory middlewares)."""

MEMORY_TOOL_WRITES: Final[dict[str, tuple[str, ...]]] = {
    "create": ("file_text",),
    "str_replace": ("new_str",),
    "insert": ("new_str",),
    "rename": (),
}
"""Per command of the memory tool that writes a file, the arguments whose text ends up in it
(a rename writes no text, but its target's name is stored: checked for secrets)."""


AccessOf = Callable[[str], tuple[object | None, object]]
"""``MemoryAssembler.access_of``: whether a path is a memory or rule file (``(None, None)`` for
any other file, which is left alone). It compares spellings."""

WritesMemory = Callable[[str], bool]
"""Whether a path is a writable memory file by identity (``guard.writes_memory`` bound to the
backend and the protected paths): a hard link has no spelling in common with its file."""


def _written_arguments(call: Mapping[str, Any]) -> tuple[str, ...]:
    """The arguments of a tool call whose text the tool writes into the file it names."""
    name = call.get("name", "")
    if name == MEMORY_TOOL:
        command = (call.get("args") or {}).get("command")
        return MEMORY_TOOL_WRITES.get(command, ()) if isinstance(command, str) else ()
    return REDACTED_ARGUMENTS.get(name, ())


def _memory_paths(
    call: Mapping[str, Any], access_of: AccessOf, writes_memory: WritesMemory | None
) -> list[str]:
    """The paths a file-writing call names that are memory or rule files."""
    args = call.get("args") or {}
    if call.get("name", "") == MEMORY_TOOL:
        # Everything the memory tool writes is memory: the file it writes (or renames to).
        command = args.get("command")
        if not isinstance(command, str) or command not in MEMORY_TOOL_WRITES:
            return []
        key = "new_path" if command == "rename" else "path"
        return [args[key]] if isinstance(args.get(key), str) else []
    if call.get("name", "") not in REDACTED_ARGUMENTS:
        return []
    paths = [args[key] for key in ("file_path", "path") if isinstance(args.get(key), str)]
    return [
        path
        for path in paths
        if access_of(path)[0] is not None or (writes_memory is not None and writes_memory(path))
    ]


def secret_path_refusal(
    request: ToolCallRequest, access_of: AccessOf, writes_memory: WritesMemory | None = None
) -> ToolMessage | None:
    """The tool's error when a file tool would write a memory or rule file whose path holds a
    secret (None: it would not).

    The content could be redacted, the name cannot: the file would be saved under another name
    than the one asked for. The error shows the path redacted, so the model learns which part
    to drop without the secret being repeated in the conversation.

    Args:
        request: A tool call the middleware did not refuse.
        access_of: See `AccessOf`.
        writes_memory: See `WritesMemory` (None: spellings only).
    """
    call = request.tool_call
    for path in _memory_paths(call, access_of, writes_memory):
        found = redact_text(path)
        if not found.count:
            continue
        name = call.get("name", "")
        kinds = ", ".join(found.kinds)
        logger.warning(
            "refused the agent's %s of %s: the path holds %d secret(s) (%s)",
            name,
            found.text,
            found.count,
            kinds,
        )
        return ToolMessage(
            content=(
                f"Error: {name} refused: the path {found.text} holds a secret ({kinds}). Memory "
                "and rule files are listed and read into later prompts, so their names must "
                "never carry one. Nothing was written. Choose a name without the secret; refer "
                "to where it is kept instead (an environment variable, a secret manager)."
            ),
            tool_call_id=call.get("id") or "",
            name=name,
            # The memory tool answers its own errors as plain text results: the same shape.
            status="success" if name == MEMORY_TOOL else "error",
        )
    return None


def redact_memory_edit(
    request: ToolCallRequest, access_of: AccessOf, writes_memory: WritesMemory | None = None
) -> tuple[ToolCallRequest, Redaction | None]:
    """Redact the text a file tool would write into a memory file.

    Args:
        request: A tool call the middleware did not refuse.
        access_of: See `AccessOf`.
        writes_memory: See `WritesMemory` (None: spellings only).

    Returns:
        The request to run (the same one when it writes no memory file or nothing was found)
        and what was redacted (None when nothing was).
    """
    call = request.tool_call
    names = _written_arguments(call)
    if not names or not _memory_paths(call, access_of, writes_memory):
        return request, None
    args: dict[str, Any] = dict(call.get("args") or {})
    kinds: set[str] = set()
    count = 0
    for name in names:
        value = args.get(name)
        if not isinstance(value, str):
            continue
        result = redact_text(value)
        if result.count:
            args[name] = result.text
            kinds.update(result.kinds)
            count += result.count
    if not count:
        return request, None
    path = str(args.get("file_path") or args.get("path"))
    ordered = tuple(sorted(kinds))
    logger.warning(
        "redacted %d secret(s) (%s) from the agent's %s of %s before it was saved",
        count,
        ", ".join(ordered),
        call.get("name"),
        redact_text(path).text,  # the agent chose the path: never logged as it is
    )
    redacted = request.override(tool_call={**call, "args": args})
    return redacted, Redaction("", ordered, count)


def note_redaction(
    result: ToolMessage | Command[Any], redaction: Redaction | None
) -> ToolMessage | Command[Any]:
    """Add to a successful tool result that secrets were redacted before saving."""
    if redaction is None:
        return result
    note = (
        f"\n{redaction.count} secret{'s were' if redaction.count != 1 else ' was'} redacted "
        f"before saving ({', '.join(redaction.kinds)}): the file holds [REDACTED:<kind>] "
        "markers in their place. Never write secrets into memory; refer to where they are "
        "kept instead (an environment variable, a secret manager)."
    )
    if isinstance(result, ToolMessage):
        return _with_note(result, note)
    update = result.update if isinstance(result.update, dict) else None
    messages = update.get("messages") if update else None
    if not update or not isinstance(messages, list):
        return result
    noted = [_with_note(m, note) if isinstance(m, ToolMessage) else m for m in messages]
    return Command(
        graph=result.graph,
        update={**update, "messages": noted},
        resume=result.resume,
        goto=result.goto,
    )


_MEMORY_TOOL_WROTE = ("File created:", "String replaced in", "Text inserted in")
"""How langchain-anthropic's `memory` tool answers a write it made; its errors are plain text
too (`Path must start with ...`), so anything else wrote nothing."""


def _with_note(message: ToolMessage, note: str) -> ToolMessage:
    if message.status == "error" or not isinstance(message.content, str):
        return message
    if message.content.startswith("Error") or (
        message.name == MEMORY_TOOL and not message.content.startswith(_MEMORY_TOOL_WROTE)
    ):
        return message  # nothing was saved: saying "redacted before saving" would mislead
    return message.model_copy(update={"content": message.content + note})
