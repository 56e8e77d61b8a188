"""Where a path really lands, and how two such places relate: the read-only guard's path checks.

Paths are compared as storage places, never as spellings: through `CompositeBackend` routes,
`..`, `~` and symlinks, and on disk by identity (device and inode) as well as by resolved path,
so a hard link, a case-insensitive filesystem (macOS, Windows) or a bind mount cannot hide a
protected file behind another name.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from deepagents.backends.composite import CompositeBackend
from deepagents.backends.filesystem import FilesystemBackend

from layered_memory.core.disk_cache import special_file_kind
from layered_memory.core.internals import route
from layered_memory.core.layers import expand_user, lexical_path
from layered_memory.errors import FolderTooLargeError

if TYPE_CHECKING:
    pass


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
