"""Read-only memory enforced where every tool, subagent and shell command passes: the backend.

`protect(backend, protected)` returns a *view* of `backend` whose mutating methods first ask
`refusal()` whether the operation would change read-only memory:

- `write` / `edit` / `upload_files` of a protected file under any alias: `..`, a symlink (also
  behind a `CompositeBackend` route), a hard link to the same inode on disk;
- `delete` of a protected file, of anything inside a protected folder, or of any folder that
  holds protected memory (up to `delete /`);
- `execute` (a shell) cannot be checked before it runs: the protected files are read before the
  command and compared after it; a changed, created or deleted file is put back as it was and
  the command's output tells the model so.

Pass the view to the agent (`create_deep_agent(backend=memory.protected_backend, ...)`): the
parent's tools, deepagents' own `general-purpose` subagent and every custom subagent all use
that backend, so none of them can bypass the guard. The middleware's tool hook asks the same
`refusal()` for the parent's calls, so a run that forgot the view still protects the parent.

Why a view and not a wrapper object: deepagents decides what a backend can do with
`isinstance` (a `StateBackend` keeps files in state, a sandbox gets `execute`, a
`CompositeBackend` routes). The view is a shallow copy of the backend re-classed to a subclass
of the backend's own class, so every such check still holds and the storage is shared.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import threading
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from deepagents.backends.composite import CompositeBackend
from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import (
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileUploadResponse,
    WriteResult,
)

from layered_memory._deepagents_internals import route
from layered_memory.layers import expand_user, lexical_path

logger = logging.getLogger(__name__)

Operation = Literal["write", "edit", "delete", "upload"]

MAX_FOLDER_FILES = 10_000
"""Files examined per protected folder when looking for a hard link or snapshotting for a
shell command: a bound, so a huge folder cannot slow every tool call."""


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """What the agent may not change, each with the words that name its owner.

    Attributes:
        files: Path -> owner ("the read-only memory layer 'project'").
        folders: Folder -> owner; everything inside is read-only, and so is the folder.
    """

    files: Mapping[str, str] = field(default_factory=dict)
    folders: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.files or self.folders)


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a path really lands: a real path on disk, or a key of one virtual backend."""

    space: Hashable
    path: str


def locate(backend: Any, path: str, *, follow_last: bool = True) -> _Place | None:
    """The storage place `path` names on `backend`, through composite routes and symlinks.

    Args:
        backend: Any deepagents backend.
        path: A path as a tool would pass it.
        follow_last: Resolve a symlink in the last component (False for `delete`, which
            removes a link itself, never its target).

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
        disk = _disk_path(backend, path)
        return None if disk is None else _Place("disk", _real(disk, follow_last=follow_last))
    lexical = lexical_path(path)
    return None if lexical is None else _Place(id(backend), lexical)


def _disk_path(backend: FilesystemBackend, path: str) -> str | None:
    if "\x00" in path:
        return None
    root = str(backend.cwd)
    if backend.virtual_mode:
        lexical = lexical_path(path)
        return None if lexical is None else os.path.join(root, lexical.lstrip("/"))
    expanded = expand_user(path)
    return expanded if os.path.isabs(expanded) else os.path.join(root, expanded)


def _real(disk: str, *, follow_last: bool) -> str:
    try:
        if follow_last:
            return os.path.realpath(disk)
        head, tail = os.path.split(os.path.normpath(disk))
        return os.path.join(os.path.realpath(head), tail)
    except (OSError, ValueError):  # a loop the OS reports; keep the lexical form
        return os.path.normpath(disk)


def _inside(child: _Place, folder: _Place) -> bool:
    if child.space != folder.space:
        return False
    return child.path == folder.path or child.path.startswith(folder.path.rstrip("/") + "/")


def _lexically_inside(child: str, folder: str) -> bool:
    return child == folder or child.startswith(folder.rstrip("/") + "/")


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
    top = None if _is_host_backend(backend) else lexical_path(path)
    for file, owner in protected.files.items():
        relation = _relation(backend, targets, top, file, deleting=deleting)
        if relation in {"is", "inside"}:
            return f"{path} is {owner}"
        if relation == "holds":
            return f"{path} holds {file}, which is {owner}"
    for folder, owner in protected.folders.items():
        relation = _relation(backend, targets, top, folder, deleting=deleting)
        if relation in ("is", "inside"):
            return f"{path} is inside {owner}"
        if relation == "holds":
            return f"{path} holds {folder}, which is {owner}"
    if not deleting:
        for target in targets:
            if target.space == "disk":
                found = _hard_link_refusal(backend, protected, path, target.path)
                if found is not None:
                    return found
    return None


def _relation(
    backend: Any, targets: set[_Place], top: str | None, protected: str, *, deleting: bool
) -> Literal["is", "inside", "holds"] | None:
    """How the tool's path relates to one protected path: the same, inside it, or (for a
    delete) holding it; compared as storage places and, on a virtual tree, as tree paths."""
    place = locate(backend, protected)
    top_protected = None if top is None else lexical_path(protected)
    for target in targets:
        if place is not None and target == place:
            return "is"
        if place is not None and _inside(target, place):
            return "inside"
        if deleting and place is not None and _inside(place, target):
            return "holds"
    if top is not None and top_protected is not None:
        if top == top_protected:
            return "is"
        if _lexically_inside(top, top_protected):
            return "inside"
        if deleting and _lexically_inside(top_protected, top):
            return "holds"
    return None


def _hard_link_refusal(backend: Any, protected: ProtectedPaths, path: str, real: str) -> str | None:
    """A second name for a protected file's inode writes that file: refuse it."""
    try:
        info = os.stat(real)
    except OSError:
        return None
    if info.st_nlink < 2:
        return None
    inode = (info.st_dev, info.st_ino)
    for file, owner in protected.files.items():
        place = locate(backend, file)
        if place is not None and place.space == "disk" and _inode(place.path) == inode:
            return f"{path} is a hard link to {file}, which is {owner}"
    for folder, owner in protected.folders.items():
        place = locate(backend, folder)
        if place is None or place.space != "disk":
            continue
        for found in _walk_files(place.path):
            if _inode(found) == inode:
                return f"{path} is a hard link to {found}, which is inside {owner}"
    return None


def _inode(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _walk_files(top: str) -> Iterable[str]:
    seen = 0
    for folder, _dirs, names in os.walk(top):
        for name in names:
            seen += 1
            if seen > MAX_FOLDER_FILES:
                return
            yield os.path.join(folder, name)


def _is_host_backend(backend: Any) -> bool:
    return isinstance(backend, FilesystemBackend) and not backend.virtual_mode


def refusal_message(operation: str, reason: str) -> str:
    """The error text the model sees (the backend's error result, or the tool's message)."""
    return (
        f"Error: {operation} refused: {reason}, which cannot be changed by the agent. Nothing "
        "was modified. Save what you learned in a writable memory file instead, or tell the "
        "user what should change."
    )


# -- after a shell command: back to the last loaded content ----------------------------------

SHELL_TOOLS = frozenset({"execute"})
"""Tools whose effects on files cannot be checked before they run."""


def loaded_baseline(protected: ProtectedPaths, state: Mapping[str, Any]) -> dict[str, str | None]:
    """The read-only files as the run last loaded them: path -> text, or None when it did not
    exist. A file that could not be read is left out (there is nothing to put back)."""
    contents = state.get("memory_contents") or {}
    memory = state.get("memory_loaded") or {}
    rules = memory.get("rule_files") or {}
    unreadable = memory.get("unreadable") or {}
    baseline: dict[str, str | None] = {
        path: contents.get(path) for path in protected.files if path not in unreadable
    }
    baseline.update(
        (path, text)
        for path, text in rules.items()
        if any(_lexically_inside(path, folder) for folder in protected.folders)
    )
    return baseline


def drifted(baseline: Mapping[str, str | None], responses: Sequence[Any]) -> list[str]:
    """Paths of `baseline` (in order) whose current download differs from the loaded text."""
    changed = []
    for (path, text), response in zip(baseline.items(), responses, strict=False):
        error = getattr(response, "error", None)
        content = getattr(response, "content", None)
        if text is None:
            if error != "file_not_found":
                changed.append(path)
            continue
        if error is not None or content is None or content.decode("utf-8", "replace") != text:
            changed.append(path)
    return changed


def put_back_note(changed: Sequence[str]) -> str:
    """What the model is told after read-only memory was put back."""
    return (
        "\n[layered-memory: this command changed read-only memory, which was put back as it "
        f"was: {', '.join(changed)}. Do not modify read-only memory; tell the user what "
        "should change instead.]"
    )


def put_back(backend: Any, baseline: Mapping[str, str | None], changed: Sequence[str]) -> None:
    """Write `changed` files back as `baseline` has them (None: delete what appeared)."""
    logger.warning("a shell command changed read-only memory; restored %s", ", ".join(changed))
    uploads = [(p, text.encode("utf-8")) for p in changed if (text := baseline[p]) is not None]
    if uploads:
        backend.upload_files(uploads)
    for path in changed:
        if baseline[path] is None:
            backend.delete(path)


async def aput_back(
    backend: Any, baseline: Mapping[str, str | None], changed: Sequence[str]
) -> None:
    """Async twin of `put_back`."""
    logger.warning("a shell command changed read-only memory; restored %s", ", ".join(changed))
    uploads = [(p, text.encode("utf-8")) for p in changed if (text := baseline[p]) is not None]
    if uploads:
        await backend.aupload_files(uploads)
    for path in changed:
        if baseline[path] is None:
            await backend.adelete(path)


def protected_paths_of(
    layers: Sequence[Any], rule_folders: Sequence[str], backend: Any
) -> ProtectedPaths:
    """The read-only files and folders of a memory configuration, each named by its owner.

    Args:
        layers: The `Layer`s; the files of every read-only one are protected.
        rule_folders: Rule folders the agent may not change (none with `rules_writable`).
        backend: A backend may declare read-only folders of its own (`read_only_folders`,
            as `shared_memory_backend` does for `/org/` and `/project/`).
    """
    files = {
        path: f"the read-only memory layer {layer.name!r}"
        for layer in layers
        if not layer.writable
        for path in layer.paths
    }
    folders = {folder: f"the read-only rule folder {folder}" for folder in rule_folders}
    declared = getattr(backend, "read_only_folders", None)
    if isinstance(declared, Mapping):
        folders.update({str(folder): str(owner) for folder, owner in declared.items()})
    return ProtectedPaths(files=files, folders=folders)


# -- the view ---------------------------------------------------------------------------------


class _GuardMixin:
    """Mutating methods that ask `refusal()` first; everything else is the backend's own.

    Not a base class: its methods are copied into a subclass of the backend's own class (a
    mixin placed first in the bases would change the instance layout, and Python refuses to
    re-class an object to a type of another layout).
    """

    _lm_backend_class: type
    _layered_memory_protected: ProtectedPaths

    def _lm_refusal(self, operation: Operation, path: str) -> str | None:
        reason = refusal(self, self._layered_memory_protected, operation, path)
        if reason is not None:
            logger.warning("refused %s of %s: read-only memory", operation, path)
        return reason

    def write(self, file_path: str, content: str) -> WriteResult:
        reason = self._lm_refusal("write", file_path)
        if reason is not None:
            return WriteResult(error=refusal_message("write", reason))
        return _Unguarded(self).write(file_path, content)  # type: ignore[no-any-return]

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        reason = self._lm_refusal("write", file_path)
        if reason is not None:
            return WriteResult(error=refusal_message("write", reason))
        return await _Unguarded(self).awrite(file_path, content)  # type: ignore[no-any-return]

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        reason = self._lm_refusal("edit", file_path)
        if reason is not None:
            return EditResult(error=refusal_message("edit", reason))
        return _Unguarded(self).edit(file_path, old_string, new_string, replace_all)  # type: ignore[no-any-return]

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        reason = self._lm_refusal("edit", file_path)
        if reason is not None:
            return EditResult(error=refusal_message("edit", reason))
        return await _Unguarded(self).aedit(file_path, old_string, new_string, replace_all)  # type: ignore[no-any-return]

    def delete(self, file_path: str) -> DeleteResult:
        reason = self._lm_refusal("delete", file_path)
        if reason is not None:
            return DeleteResult(error=refusal_message("delete", reason))
        return _Unguarded(self).delete(file_path)  # type: ignore[no-any-return]

    async def adelete(self, file_path: str) -> DeleteResult:
        reason = self._lm_refusal("delete", file_path)
        if reason is not None:
            return DeleteResult(error=refusal_message("delete", reason))
        return await _Unguarded(self).adelete(file_path)  # type: ignore[no-any-return]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        refused, allowed = self._split_uploads(files)
        done = _Unguarded(self).upload_files(allowed) if allowed else []
        return _merge_uploads(files, refused, done)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        refused, allowed = self._split_uploads(files)
        done = await _Unguarded(self).aupload_files(allowed) if allowed else []
        return _merge_uploads(files, refused, done)

    def _split_uploads(
        self, files: Sequence[tuple[str, bytes]]
    ) -> tuple[set[int], list[tuple[str, bytes]]]:
        refused = {i for i, (path, _) in enumerate(files) if self._lm_refusal("upload", path)}
        return refused, [item for i, item in enumerate(files) if i not in refused]


def _merge_uploads(
    files: Sequence[tuple[str, bytes]], refused: set[int], done: Sequence[FileUploadResponse]
) -> list[FileUploadResponse]:
    answers = iter(done)
    return [
        FileUploadResponse(path=path, error="permission_denied")
        if index in refused
        else next(answers)
        for index, (path, _) in enumerate(files)
    ]


class _ShellGuardMixin(_GuardMixin):
    """`execute` on a backend with a shell: protected files are put back after each command."""

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        paths = self._lm_snapshot_paths()
        before = self._lm_read(paths, _Unguarded(self).download_files(paths)) if paths else {}
        if timeout is None:
            response = _Unguarded(self).execute(command)
        else:
            response = _Unguarded(self).execute(command, timeout=timeout)
        if not before:
            return response  # type: ignore[no-any-return]
        after = self._lm_read(paths, _Unguarded(self).download_files(paths))
        changed = _changes(before, after)
        if not changed:
            return response  # type: ignore[no-any-return]
        self._lm_put_back_sync(before, changed)
        return _with_note(response, changed)

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        # The check around the command is sync file I/O either way; one implementation, in a
        # thread (which carries the run's context variables along).
        return await asyncio.to_thread(self.execute, command, timeout=timeout)

    def _lm_snapshot_paths(self) -> list[str]:
        """Every protected file: the configured files and what the protected folders hold."""
        protected = self._layered_memory_protected
        paths = list(protected.files)
        for folder in protected.folders:
            try:
                listing = _Unguarded(self).glob("**/*", path=folder)
            except Exception:  # a listing failure leaves that folder unchecked, nothing more
                continue
            matches = getattr(listing, "matches", None) or []
            paths.extend(
                str(info["path"]) for info in matches[:MAX_FOLDER_FILES] if not info.get("is_dir")
            )
        return list(dict.fromkeys(paths))

    @staticmethod
    def _lm_read(paths: Sequence[str], responses: Sequence[Any]) -> dict[str, bytes | None]:
        """Path -> bytes, or None when missing; unreadable paths are left out (not restorable)."""
        found: dict[str, bytes | None] = {}
        for path, response in zip(paths, responses, strict=False):
            if getattr(response, "error", None) == "file_not_found":
                found[path] = None
            elif getattr(response, "error", None) is None:
                found[path] = getattr(response, "content", None)
        return found

    # Putting files back goes past the guard: `_Unguarded` calls the backend class's own methods.
    def _lm_put_back_sync(self, before: Mapping[str, bytes | None], changed: list[str]) -> None:
        backend = _Unguarded(self)
        uploads = [(path, content) for path in changed if (content := before[path]) is not None]
        if uploads:
            backend.upload_files(uploads)
        for path in changed:
            if before[path] is None:
                backend.delete(path)


def _changes(before: Mapping[str, bytes | None], after: Mapping[str, bytes | None]) -> list[str]:
    return [path for path, content in before.items() if after.get(path, b"\x00gone") != content]


def _with_note(response: ExecuteResponse, changed: list[str]) -> ExecuteResponse:
    logger.warning("a shell command changed read-only memory; restored %s", ", ".join(changed))
    return replace(response, output=f"{response.output}{put_back_note(changed)}")


class _Unguarded:
    """The backend's own methods on a view: how the guard puts protected files back."""

    def __init__(self, view: Any) -> None:
        self._view = view

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._view._lm_backend_class, name)
        return method.__get__(self._view)


_VIEW_CLASSES: dict[type, type] = {}
_VIEW_CLASSES_LOCK = threading.Lock()


def _view_class(cls: type) -> type:
    with _VIEW_CLASSES_LOCK:
        view = _VIEW_CLASSES.get(cls)
        if view is None:
            mixins = (
                (_ShellGuardMixin, _GuardMixin)
                if callable(getattr(cls, "execute", None))
                else (_GuardMixin,)
            )
            methods: dict[str, Any] = {}
            for mixin in reversed(mixins):
                methods.update(
                    (name, value)
                    for name, value in vars(mixin).items()
                    if callable(value) or isinstance(value, staticmethod)
                )
            methods.update(__module__=__name__, _lm_backend_class=cls, _lm_is_view=True)
            view = type(f"Protected{cls.__name__}", (cls,), methods)
            _VIEW_CLASSES[cls] = view
        return view


def protect(backend: Any, protected: ProtectedPaths) -> Any:
    """A view of `backend` that refuses every change to the `protected` paths.

    Args:
        backend: Any deepagents backend (the view shares its storage and its class's checks).
        protected: The read-only files and folders, with their owners' names.

    Returns:
        The view (the backend itself when nothing is protected). Protecting a view again
        replaces its protected paths.

    Example:
        backend = protect(FilesystemBackend(root_dir=".", virtual_mode=True),
                          ProtectedPaths(files={"/AGENTS.md": "the project's instructions"}))
    """
    if not protected:
        return backend
    base = getattr(backend, "_layered_memory_base", backend)
    view = copy.copy(base)
    view.__class__ = _view_class(type(base))
    view._layered_memory_protected = protected
    view._layered_memory_base = base
    return view


def is_protected(backend: Any) -> bool:
    """Whether `backend` is a view made by `protect`."""
    return getattr(type(backend), "_lm_is_view", False) is True
