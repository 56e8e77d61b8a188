"""Which operations would change read-only memory: `ProtectedPaths` and `refusal()`.

The policy the guard enforces (`core.guard`: the backend view and the middleware's tool hook) and
that locked writes ask first (`core.files`: a write through a protected view is refused as the
view would refuse it). Pure apart from looking at the disk (symlinks, inodes) through
`core.places`.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from deepagents.backends.filesystem import FilesystemBackend

from layered_memory._logs import get_logger
from layered_memory.core.layers import lexical_path
from layered_memory.errors import FolderTooLargeError
from layered_memory.safety.redaction import redact_text

if TYPE_CHECKING:
    pass


from layered_memory.core.places import (
    MAX_FOLDER_ENTRIES,
    Place,
    identity,
    is_host_backend,
    locate,
    relation,
    walk_files,
)

logger = get_logger(__name__)

Operation = Literal["write", "edit", "delete", "upload"]


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
        memory).

        Returns:
            Path -> owner (what a refusal names), for every read-only file.
        """
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


def is_protected(backend: Any) -> bool:
    """Whether `backend` is a view made by `protect`."""
    return getattr(type(backend), "_lm_is_view", False) is True
