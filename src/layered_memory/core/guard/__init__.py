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

The places and relations (where a path really lands, compared as storage places: below) are
here, the view class in `_view`, the put-back in `core.snapshot` (it compares the disk with
the run-start snapshot).


Where a path really lands, and how two such places relate, for the read-only guard.

Paths are compared as storage places, never as spellings: through `CompositeBackend` routes,
`..`, `~` and symlinks, and on disk by identity (device and inode) as well as by resolved path,
so a hard link, a case-insensitive filesystem (macOS, Windows) or a bind mount cannot hide a
protected file behind another name.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from deepagents.backends.composite import CompositeBackend
from deepagents.backends.filesystem import FilesystemBackend
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from layered_memory._logs import get_logger
from layered_memory.core.internals import route
from layered_memory.core.layers import expand_user, lexical_path
from layered_memory.core.loading import special_file_kind
from layered_memory.errors import FolderTooLargeError
from layered_memory.safety.redaction import Redaction, redact_text

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

# -- protection -----------------------------------------------------------------------------------

__all__ = [
    "MEMORY_TOOL",
    "REDACTED_ARGUMENTS",
    "SHELL_TOOLS",
    "Operation",
    "ProtectedPaths",
    "is_protected",
    "is_same_file",
    "memory_file_of",
    "note_redaction",
    "protect",
    "protected_paths_of",
    "redact_memory_edit",
    "refusal",
    "refusal_message",
    "secret_path_refusal",
    "unreadable_message",
    "writes_memory",
]

logger = get_logger(__name__)

Operation = Literal["write", "edit", "delete", "upload"]

SHELL_TOOLS = frozenset({"execute"})
"""Tools whose effects on files cannot be checked before they run."""


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """What the agent may not change, each with the words that name its owner.

    Attributes:
        files: Path -> owner ("the read-only memory layer 'project'").
        folders: Folder -> owner; everything inside is read-only, and so is the folder.
        redacted: Writable memory files: writes are allowed, with secrets redacted first
            (whoever writes: the agent, a subagent without the middleware).
        names: File name -> owner: every file of that name is read-only (nested memory).
        discovered: Read-only files a load found (imports of read-only memory), asked at
            each check: path -> owner.
        redacted_names: File names whose every file is writable memory (nested memory the
            agent may edit): writes are redacted.
        redacted_folders: Folders whose every file is writable memory (writable folder
            layers, rule folders with `rules_writable=True`): writes are redacted.
        found_writable: Writable files a load found (nested files, imports of writable
            memory, found or not), asked at each check: writes are redacted.
    """

    files: Mapping[str, str] = field(default_factory=dict)
    folders: Mapping[str, str] = field(default_factory=dict)
    redacted: frozenset[str] = frozenset()
    names: Mapping[str, str] = field(default_factory=dict)
    discovered: Callable[[], Mapping[str, str]] | None = None
    redacted_names: frozenset[str] = frozenset()
    redacted_folders: frozenset[str] = frozenset()
    found_writable: Callable[[], Collection[str]] | None = None

    def __bool__(self) -> bool:
        return bool(
            self.files
            or self.folders
            or self.redacted
            or self.names
            or self.discovered
            or self.redacted_names
            or self.redacted_folders
            or self.found_writable
        )

    def __or__(self, other: ProtectedPaths) -> ProtectedPaths:
        """Both sets of protections (protection is only ever added, never replaced)."""
        sources = [found for found in (self.discovered, other.discovered) if found is not None]
        writable = [found for found in (self.found_writable, other.found_writable) if found]
        return ProtectedPaths(
            files={**other.files, **self.files},
            folders={**other.folders, **self.folders},
            redacted=self.redacted | other.redacted,
            names={**other.names, **self.names},
            discovered=(lambda: {k: v for found in sources for k, v in found().items()})
            if sources
            else None,
            redacted_names=self.redacted_names | other.redacted_names,
            redacted_folders=self.redacted_folders | other.redacted_folders,
            found_writable=(lambda: {path for found in writable for path in found()})
            if writable
            else None,
        )

    def all_files(self) -> Mapping[str, str]:
        """The configured read-only files and those a load found (imports of read-only
        memory)."""
        if self.discovered is None:
            return self.files
        return {**self.discovered(), **self.files}


def refusal(backend: Any, protected: ProtectedPaths, operation: Operation, path: str) -> str | None:
    """Why `operation` on `path` would change read-only memory (None: it would not).

    Pure apart from looking at the disk (symlinks, inodes); shared by the backend view and the
    middleware's tool hook, sync and async.
    """
    if not protected:
        return None
    deleting = operation == "delete"
    # A delete may remove a symlink itself or (a virtual-mode FilesystemBackend resolves the
    # whole path) its target: both places count.
    targets = {
        place
        for place in (
            locate(backend, path),
            locate(backend, path, follow_last=False) if deleting else None,
        )
        if place is not None
    }
    # On a virtual tree (not host paths) the tree itself is compared too: a composite's `/`
    # holds its routes, which no single backend's place shows.
    top = None if is_host_backend(backend) else lexical_path(path)
    for file, owner in protected.all_files().items():
        found = relation(backend, targets, top, file, deleting=deleting)
        if found in ("is", "inside"):
            return f"{path} is {owner}"
        if found == "alias":
            return f"{path} is another name (a hard link, another case) of {file}, which is {owner}"
        if found == "holds":
            return f"{path} holds {file}, which is {owner}"
    for folder, owner in protected.folders.items():
        found = relation(backend, targets, top, folder, deleting=deleting)
        if found in ("is", "alias", "inside"):
            return f"{path} is inside {owner}"
        if found == "holds":
            return f"{path} holds {folder}, which is {owner}"
    named = _named_refusal(backend, protected, path, targets, deleting=deleting)
    if named is not None:
        return named
    if not deleting:
        for target in targets:
            if target.space == "disk":
                linked = _hard_link_into_folder(backend, protected, path, target)
                if linked is not None:
                    return linked
    return None


def _named_refusal(
    backend: Any, protected: ProtectedPaths, path: str, targets: set[Place], *, deleting: bool
) -> str | None:
    """Files protected by name (nested memory): the file itself, or a folder holding one."""
    if not protected.names or writes_memory(backend, protected, path):
        return None
    name = posixpath.basename(lexical_path(path) or path)
    if name in protected.names:
        return f"{path} is {protected.names[name]}"
    if not deleting:
        # Another name for a nested file not loaded yet: a symlink to it (its target's name)
        # or a hard link (any other name of a file with several links).
        for target in targets:
            if target.space != "disk":
                continue
            real = os.path.basename(target.path)
            if real in protected.names:
                return f"{path} leads to {target.path}, which is {protected.names[real]}"
            if _has_other_names(target.path):
                return (
                    f"{path} has other names (hard links), and one may be a nested memory file "
                    f"({', '.join(sorted(protected.names))}), which is read-only; write a new "
                    "file instead"
                )
        return None
    for target in targets:
        if target.space == "disk" and os.path.isdir(target.path):
            try:
                for found in walk_files(target.path):
                    if os.path.basename(found) in protected.names:
                        owner = protected.names[os.path.basename(found)]
                        return f"{path} holds {found}, which is {owner}"
            except FolderTooLargeError:
                return (
                    f"{path} holds more than {MAX_FOLDER_ENTRIES:,} files and folders: too many "
                    f"to check for {', '.join(sorted(protected.names))} files, which are "
                    "read-only; delete its subfolders one at a time"
                )
    if isinstance(backend, FilesystemBackend):
        return None
    for wanted, owner in protected.names.items():
        try:
            listing = backend.glob(f"**/{wanted}", path=lexical_path(path) or path)
        except Exception:  # a listing failure: refuse rather than delete unseen memory
            return f"{path} may hold {wanted} files, which are {owner}"
        for info in getattr(listing, "matches", None) or []:
            return f"{path} holds {info.get('path')}, which is {owner}"
    return None


def _hard_link_into_folder(
    backend: Any, protected: ProtectedPaths, path: str, target: Place
) -> str | None:
    """A second name for a file inside a protected folder writes that file: refuse it.

    (A second name for a protected *file* is already the same identity, see `relation`.)
    """
    found = identity(target.path)
    if found is None or not protected.folders:
        return None
    try:
        if os.stat(target.path).st_nlink < 2:
            return None
    except OSError:
        return None
    for folder, owner in protected.folders.items():
        place = locate(backend, folder)
        if place is None or place.space != "disk":
            continue
        try:
            for inside in walk_files(place.path):
                if identity(inside) == found:
                    return f"{path} is a hard link to {inside}, which is inside {owner}"
        except FolderTooLargeError:
            return (
                f"{path} has other names (hard links), and {folder} ({owner}) is too large to "
                "check that none is inside it; write a new file instead"
            )
    return None


def _has_other_names(disk_path: str) -> bool:
    """Whether an existing regular file has more than one hard link."""
    try:
        info = os.lstat(disk_path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def writes_memory(backend: Any, protected: ProtectedPaths, path: str) -> bool:
    """Whether `path` names one of the writable memory files (whose writes are redacted)."""
    return memory_file_of(backend, protected, path) is not None


def memory_file_of(backend: Any, protected: ProtectedPaths, path: str) -> str | None:
    """The writable memory file `path` names under any alias (a symlink, a hard link, `..`):
    a configured one, one a load found (nested, imported: every file that reaches the prompt
    as writable memory), or `path` itself when its name is writable nested memory's or it is
    inside a writable rule folder; None for any other path. A found file that is also
    read-only memory is not writable memory."""
    configured = next(
        (file for file in sorted(protected.redacted) if is_same_file(backend, file, path)), None
    )
    if configured is not None:
        return configured
    found = protected.found_writable() if protected.found_writable is not None else ()
    if found:
        read_only = protected.all_files()
        for file in sorted(found):
            if file in read_only or posixpath.basename(file) in protected.names:
                continue
            if is_same_file(backend, file, path):
                return file
    if protected.redacted_names:
        name = posixpath.basename(lexical_path(path) or path)
        if name in protected.redacted_names:
            return path
    if protected.redacted_folders:
        target = locate(backend, path)
        targets = {target} if target is not None else set()
        top = None if is_host_backend(backend) else lexical_path(path)
        for folder in sorted(protected.redacted_folders):
            if relation(backend, targets, top, folder, deleting=False) in ("is", "inside"):
                return path
    return None


def is_same_file(backend: Any, configured: str, path: str) -> bool:
    """Whether `path` names the file `configured` names: the same storage place or the same
    disk identity, never a comparison of spellings alone."""
    target = locate(backend, path)
    top = None if is_host_backend(backend) else lexical_path(path)
    targets = {target} if target is not None else set()
    return relation(backend, targets, top, configured, deleting=False) in ("is", "alias")


def refusal_message(operation: str, reason: str) -> str:
    """The error text the model sees (the backend's error result, or the tool's message).

    Its paths are shown redacted (`/rules/[REDACTED:github_token].md`): the message is kept in
    the conversation, and a path the agent chose may hold a secret.
    """
    return redact_text(
        f"Error: {operation} refused: {reason}, which cannot be changed by the agent. Nothing "
        "was modified. Save what you learned in a writable memory file instead, or tell the "
        "user what should change."
    ).text


def unreadable_message(operation: str, path: str, reason: str) -> str:
    """The error text for a whole-file write over a memory file nobody could read (the tool
    hook's refusal and the backend view's alike, so the model reads one story)."""
    return redact_text(
        f"Error: {operation} refused: {path} is a memory file that exists but could not be "
        f"read ({reason}), so writing it whole would destroy content nobody has seen. The "
        "file was not modified. Tell the user it needs fixing; save new notes elsewhere."
    ).text


def protected_paths_of(
    layers: Sequence[Any], rule_folders: Sequence[str], backend: Any
) -> ProtectedPaths:
    """The read-only files and folders of a memory configuration, each named by its owner.

    Args:
        layers: The `Layer`s; the files of every read-only one are protected (a folder
            layer's: everything in its folder), the writes of every writable one redacted.
        rule_folders: Rule folders the agent may not change (none with `rules_writable`).
        backend: A backend may declare read-only folders of its own (`read_only_folders`,
            as `shared_memory_backend` does for `/org/` and `/project/`).
    """
    files = {
        path: f"the read-only memory layer {layer.name!r}"
        for layer in layers
        if not layer.writable
        for path in layer.files
    }
    folders = {folder: f"the read-only rule folder {folder}" for folder in rule_folders}
    # A folder layer's files are whatever is in it, a file created there too.
    folders.update(
        (folder, f"the read-only memory layer {layer.name!r}")
        for layer in layers
        if not layer.writable
        for folder in layer.folders
    )
    declared = getattr(backend, "read_only_folders", None)
    if isinstance(declared, Mapping):
        folders.update({str(folder): str(owner) for folder, owner in declared.items()})
    writable = frozenset(path for layer in layers if layer.writable for path in layer.files)
    writable_folders = frozenset(
        folder for layer in layers if layer.writable for folder in layer.folders
    )
    return ProtectedPaths(
        files=files, folders=folders, redacted=writable, redacted_folders=writable_folders
    )


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
    # `_view` (and the put-back in `core.snapshot` it uses) build on this module's places and
    # relations, so they import it; the view class is imported here, when a view is made.
    from layered_memory.core.guard._view import make_view

    if is_protected(backend):
        return make_view(
            backend._layered_memory_base, protected | backend._layered_memory_protected
        )
    if not protected:
        return backend
    return make_view(backend, protected)


def is_protected(backend: Any) -> bool:
    """Whether `backend` is a view made by `protect`."""
    return getattr(type(backend), "_lm_is_view", False) is True


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


# -- where a path lands ---------------------------------------------------------------------------

MAX_FOLDER_ENTRIES = 10_000
"""Files and folders examined per protected folder (hard-link search, shell snapshots): a
bound, so a huge or hostile tree cannot slow every tool call."""

MAX_DEPTH = 64
"""Parent folders compared by identity (deeper trees are compared by path only)."""

Relation = Literal["is", "alias", "inside", "holds"]
"""`alias`: the same file on disk under another name (a hard link, another case)."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where a path lands: a real path on disk, or a key of one virtual backend."""

    space: Hashable
    path: str


def locate(backend: Any, path: str, *, follow_last: bool = True) -> Place | None:
    """The storage place `path` names on `backend`, through composite routes and symlinks.

    Args:
        backend: Any deepagents backend.
        path: A path as a tool would pass it.
        follow_last: Resolve a symlink in the last component.

    Returns:
        The place, or None for a path no backend could use (a NUL byte, `..` above a root).
    """
    if isinstance(backend, CompositeBackend):
        lexical = lexical_path(path)
        if lexical is None:
            return None
        target, key, _prefix = route(backend, lexical)
        return locate(target, key, follow_last=follow_last)
    if isinstance(backend, FilesystemBackend):
        disk = disk_path(backend, path)
        return None if disk is None else Place("disk", _real(disk, follow_last=follow_last))
    lexical = lexical_path(path)
    return None if lexical is None else Place(id(backend), lexical)


def disk_path(backend: FilesystemBackend, path: str) -> str | None:
    """The absolute path on disk a `FilesystemBackend` path names (no symlinks resolved)."""
    if "\x00" in path:
        return None
    root = str(backend.cwd)
    if backend.virtual_mode:
        lexical = lexical_path(path)
        return None if lexical is None else os.path.join(root, lexical.lstrip("/"))
    expanded = expand_user(path)
    return os.path.normpath(expanded if os.path.isabs(expanded) else os.path.join(root, expanded))


def backend_path(backend: Any, path: str) -> str | None:
    """`path` as the backend should be asked for it (`~` expanded on a host-path backend,
    folded lexically on a virtual tree), without resolving symlinks: a symlink swapped in
    for a file must be seen as such."""
    if isinstance(backend, FilesystemBackend) and not backend.virtual_mode:
        return disk_path(backend, path)
    return lexical_path(path)


def _real(disk: str, *, follow_last: bool) -> str:
    try:
        if follow_last:
            return os.path.realpath(disk)
        head, tail = os.path.split(os.path.normpath(disk))
        return os.path.join(os.path.realpath(head), tail)
    except (OSError, ValueError):  # a loop the OS reports; keep the lexical form
        return os.path.normpath(disk)


def relation(
    backend: Any, targets: set[Place], top: str | None, protected: str, *, deleting: bool
) -> Relation | None:
    """How a tool's path relates to one protected path: the same, inside it, or (for a
    delete) holding it; compared as storage places, as disk identities, and on a virtual
    tree (`top` set) as tree paths."""
    place = locate(backend, protected)
    for target in targets:
        found = _place_relation(target, place, deleting=deleting) if place is not None else None
        if found is not None:
            return found
    if top is not None:
        top_protected = lexical_path(protected)
        if top_protected is not None:
            if top == top_protected:
                return "is"
            if lexically_inside(top, top_protected):
                return "inside"
            if deleting and lexically_inside(top_protected, top):
                return "holds"
    return None


def _place_relation(target: Place, place: Place, *, deleting: bool) -> Relation | None:
    if target == place:
        return "is"
    if _inside(target, place):
        return "inside"
    if deleting and _inside(place, target):
        return "holds"
    if target.space == place.space == "disk":
        return _identity_relation(target.path, place.path, deleting=deleting)
    return None


def _identity_relation(target: str, protected: str, *, deleting: bool) -> Relation | None:
    """The same relations by (device, inode): a second name of the same file or folder."""
    protected_id = identity(protected)
    if protected_id is None:
        return None
    target_id = identity(target)
    if target_id == protected_id:
        return "alias"
    if any(folder == protected_id for folder in _parent_identities(target)):
        return "inside"
    if deleting and target_id is not None and target_id in _parent_identities(protected):
        return "holds"
    return None


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of what `path` names on disk, or None when it does not exist."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _parent_identities(path: str) -> Iterator[tuple[int, int]]:
    folder = os.path.dirname(path)
    for _ in range(MAX_DEPTH):
        found = identity(folder)
        if found is not None:
            yield found
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _inside(child: Place, folder: Place) -> bool:
    if child.space != folder.space:
        return False
    return lexically_inside(child.path, folder.path) and child.path != folder.path


def lexically_inside(child: str, folder: str) -> bool:
    """`child` is `folder` or below it, comparing path strings."""
    return child == folder or child.startswith(folder.rstrip("/") + "/")


def walk_files(top: str) -> Iterator[str]:
    """Files below `top`, at most `MAX_FOLDER_ENTRIES` files and folders looked at.

    Raises:
        FolderTooLargeError: Past the bound. A guard asking "does this folder hold memory?" must
            then refuse: stopping quietly answered "no" and let a large folder be deleted
            with the nested memory in it.
    """
    seen = 0
    for folder, dirs, names in os.walk(top):
        seen += 1 + len(dirs)
        for name in names:
            seen += 1
            if seen > MAX_FOLDER_ENTRIES:
                raise FolderTooLargeError(top)
            yield os.path.join(folder, name)
        if seen > MAX_FOLDER_ENTRIES:
            raise FolderTooLargeError(top)


def clear_swapped_on_disk(backend: Any, path: str) -> bool:
    """Remove a symlink, folder, FIFO, socket or device a command put where a local file belongs.

    Writing through a symlink would leave the link in place (and deepagents' virtual-mode
    backend deletes a link's target, not the link), so the occupant is removed here, on disk,
    without following links. Returns whether something was removed.
    """
    if isinstance(backend, CompositeBackend):
        lexical = lexical_path(path)
        if lexical is None:
            return False
        target, key, _prefix = route(backend, lexical)
        return clear_swapped_on_disk(target, key)
    if not isinstance(backend, FilesystemBackend):
        return False
    disk = disk_path(backend, path)
    if disk is None:
        return False
    try:
        if os.path.islink(disk):
            os.unlink(disk)
            return True
        if os.path.isdir(disk):
            shutil.rmtree(disk)  # removes links inside, never what they point to
            return True
        if special_file_kind(disk) is not None:
            os.unlink(disk)  # writing the file back would open it: a FIFO blocks forever
            return True
    except OSError:
        return False
    return False


def is_host_backend(backend: Any) -> bool:
    """A `FilesystemBackend` that reads host paths (no virtual root)."""
    return isinstance(backend, FilesystemBackend) and not backend.virtual_mode
