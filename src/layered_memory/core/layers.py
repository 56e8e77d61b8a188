"""Memory layers: what files make up each layer, who may edit them, and how much may be shown.

Layers are listed from lowest to highest precedence (organization -> user -> project -> team);
a later layer wins a conflict. Paths are backend paths: `~` expands to the home folder, and a
path that would leave the backend's root is refused before any I/O happens.

A path ending in `/` is a folder: every `*.md` file directly in it, in name order (the memory
directory of Anthropic's memory tool, `/memories/`). Which files those are is known only once a
load listed the folder: `Layer.files_of` gives a layer's files among what a load found.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from layered_memory.core.internals import is_backend_class
from layered_memory.core.validation import (
    MAX_PATH_CHARS,
    as_path,
    check_bool,
    invalid_path_reason,
)

DEFAULT_MAX_FOLDER_FILES = 100
"""Files a folder layer shows by default (`Layer(max_files=)`): one command or a loop of
`write_file` calls can fill a folder with thousands of files, and the cut names the rest."""

MEMORY_FILE_NAME = "MEMORY.md"
MEMORY_FILE_DEFAULT_MAX_LINES = 200
"""A `MEMORY.md` grows with every learned insight; by default only its head is injected."""


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer of memory: one or more files shown to the agent under one name.

    Args:
        name: Shown to the agent (e.g. `"organization"`, `"project"`).
        paths: One path or several, in the order they are shown. A path ending in `/` is a
            folder: every `*.md` file directly in it, in name order.
        writable: Whether the agent may edit these files with its file tools.
        max_lines: Lines shown per file (default: all, or 200 for a file named `MEMORY.md`).
        max_chars: Characters shown for the whole layer (default: limited by the total budget).
        max_files: Files shown per folder of the layer, the first in name order (default
            `DEFAULT_MAX_FOLDER_FILES`; None: no cap). The files past it are named in one
            marker, so the agent can `read_file` them.
        max_tokens: Tokens shown for the whole layer, counted with the model's own counter
            (see `MemoryMiddleware(max_tokens=...)`); with `max_chars`, both hold.
        recall: When a file does not fit its share of the budget, show its entries (list
            items, sections under headings) most relevant to the latest user message and the
            paths the agent touched, in file order, with a marker counting those left out;
            False: keep the file's head. No line cap applies (the choice is the cap).

    Example:
        Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True),
        Layer("memories", "/memories/", writable=True)
    """

    name: str
    paths: tuple[str, ...]
    writable: bool = field(default=False, kw_only=True)
    max_lines: int | None = field(default=None, kw_only=True)
    max_chars: int | None = field(default=None, kw_only=True)
    max_files: int | None = field(default=DEFAULT_MAX_FOLDER_FILES, kw_only=True)
    max_tokens: int | None = field(default=None, kw_only=True)
    recall: bool = field(default=False, kw_only=True)

    def __init__(
        self,
        name: str,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        writable: bool = False,
        max_lines: int | None = None,
        max_chars: int | None = None,
        max_files: int | None = DEFAULT_MAX_FOLDER_FILES,
        max_tokens: int | None = None,
        recall: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            msg = f"Layer name must be a non-empty string; got {name!r}"
            raise ValueError(msg)
        path_tuple = _layer_paths(name, paths)
        check_bool(writable, parameter=f"Layer {name.strip()!r}: writable")
        for label, value in (
            ("max_lines", max_lines),
            ("max_chars", max_chars),
            ("max_files", max_files),
            ("max_tokens", max_tokens),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                msg = f"Layer {name!r}: {label} must be a positive int or None, got {value!r}"
                raise ValueError(msg)
        object.__setattr__(self, "name", name.strip())
        object.__setattr__(self, "paths", path_tuple)
        object.__setattr__(self, "writable", writable)
        object.__setattr__(self, "max_lines", max_lines)
        object.__setattr__(self, "max_chars", max_chars)
        object.__setattr__(self, "max_files", max_files)
        object.__setattr__(self, "max_tokens", max_tokens)
        if not isinstance(recall, bool):
            msg = f"Layer {name!r}: recall must be True or False, got {recall!r}"
            raise TypeError(msg)
        object.__setattr__(self, "recall", recall)

    @property
    def folders(self) -> tuple[str, ...]:
        """The layer's folder paths (those ending in `/`)."""
        return tuple(path for path in self.paths if is_folder(path))

    @property
    def files(self) -> tuple[str, ...]:
        """The layer's file paths (every path that is not a folder)."""
        return tuple(path for path in self.paths if not is_folder(path))

    def files_of(
        self, found: Iterable[str], *, taken: Collection[str] = (), capped: bool = True
    ) -> list[str]:
        """The layer's files in a load, in the order they are shown: each file path, and in
        place of each folder the paths of `found` that are `*.md` files directly in it, in
        name order, at most `max_files` of them unless `capped` is false (`taken`: files
        another layer names, which it shows instead).

        Args:
            found: The files a load listed in the layer's folders.
            taken: Files another layer names (that layer shows them).
            capped: Keep at most the layer's `max_files` of a folder's files.

        Returns:
            The layer's files, in the order they are shown.
        """
        if not self.folders:
            return list(self.paths)
        listed = sorted(found)
        paths: list[str] = []
        for path in self.paths:
            if is_folder(path):
                inside = [p for p in listed if in_folder(p, path) and p not in taken]
                paths.extend(inside[: self.max_files] if capped else inside)
            else:
                paths.append(path)
        return list(dict.fromkeys(paths))

    def left_out_of(
        self, found: Iterable[str], *, taken: Collection[str] = ()
    ) -> dict[str, list[str]]:
        """Per folder of the layer, its files past `max_files` (name order), when any."""
        if not self.folders or self.max_files is None:
            return {}
        listed = sorted(found)
        over: dict[str, list[str]] = {}
        for folder in self.folders:
            inside = [p for p in listed if in_folder(p, folder) and p not in taken]
            if len(inside) > self.max_files:
                over[folder] = inside[self.max_files :]
        return over

    def line_cap(self, path: str) -> int | None:
        """Lines of `path` that may be shown: the layer's cap, else 200 for `MEMORY.md`.

        Args:
            path: One of the layer's files.

        Returns:
            The line cap, or None for no cap (a recall layer: the entries chosen by
            relevance are the cap).
        """
        if self.recall:
            return None  # the entries chosen by relevance are the cap
        if self.max_lines is not None:
            return self.max_lines
        if PurePosixPath(path).name == MEMORY_FILE_NAME:
            return MEMORY_FILE_DEFAULT_MAX_LINES
        return None


def is_folder(path: str) -> bool:
    """Whether a layer path names a folder (it ends in `/`)."""
    return path.endswith("/")


def in_folder(path: str, folder: str) -> bool:
    """Whether `path` is a memory file of the folder layer path `folder`: a `*.md` file
    directly in it, spelled from the folder as configured (`/memories/` + `notes.md`)."""
    return (
        path.startswith(folder)
        and path.endswith(".md")
        and "/" not in path[len(folder) :]
        and len(path) > len(folder) + len(".md")
    )


def _layer_paths(name: str, paths: object) -> tuple[str, ...]:
    """One path or a sequence of them (`str` or `os.PathLike`), as a tuple of strings."""
    items = [paths] if isinstance(paths, str | os.PathLike) else paths
    if isinstance(items, bytes) or not isinstance(items, Sequence):
        msg = (
            f"Layer {name!r}: paths must be a str, an os.PathLike or a list of them; "
            f"got {type(paths).__name__}"
        )
        raise TypeError(msg)
    path_tuple = tuple(as_path(item, parameter=f"Layer {name!r} path") for item in items)
    if not path_tuple or not all(path.strip() for path in path_tuple):
        msg = f"Layer {name!r} needs at least one non-empty path"
        raise ValueError(msg)
    return path_tuple


def layers_from_sources(sources: Sequence[str]) -> tuple[Layer, ...]:
    """The layers equivalent to deepagents' flat `sources=[...]` list: one layer per source.

    Compatible mode never refuses an edit (deepagents lets the agent edit its sources), so the
    layers are marked writable; budgets stay at their defaults.
    """
    return tuple(Layer(path, (path,), writable=True) for path in dict.fromkeys(sources))


def check_unique_layer_names(layers: Sequence[Layer]) -> None:
    """Raise `ValueError` when two layers share a name (the prompt would be ambiguous)."""
    seen: set[str] = set()
    for layer in layers:
        if layer.name in seen:
            msg = f"two layers are named {layer.name!r}; layer names must be unique"
            raise ValueError(msg)
        seen.add(layer.name)


def expand_user(path: str) -> str:
    """`~` and `~user` expanded; any other path unchanged."""
    return os.path.expanduser(path) if path.startswith("~") else path


def normalize_backend_path(
    path: str, backend: Any, *, resolve_links: bool = True
) -> tuple[str | None, str | None]:
    """The path to hand to the backend, or the reason it must not be read.

    Args:
        path: The path as the user wrote it (may start with `~`).
        backend: The deepagents backend it will be read through.
        resolve_links: Follow symlinks (every alias of a file then compares equal). Loading
            through a virtual-mode `FilesystemBackend` may skip it: that backend refuses a
            symlink out of its root itself, per file.

    Returns:
        `(normalized_path, None)` when the path stays inside the backend's root, else
        `(None, reason)`. A path no file can have (a NUL byte, an unencodable character, past
        4096 characters) is refused here, whoever wrote it: the agent, a file, the user.
    """
    # Slicing, not `len()`, and a cached check: free on the per-load path (`make bench`, 6).
    invalid = _path_problem(path) if not path[MAX_PATH_CHARS:] else invalid_path_reason(path)
    if invalid is not None:
        return None, f"invalid path: {invalid}"
    expanded = expand_user(path)
    if is_backend_class(backend, "FilesystemBackend"):
        from_home = path.startswith("~")
        if backend.virtual_mode and not resolve_links and not from_home:
            lexical = _normalize_virtual(expanded)
            if lexical is None:
                return None, f"path escapes the backend root {backend.cwd}"
            return lexical, None
        return _normalize_for_filesystem(
            expanded, Path(backend.cwd), virtual=backend.virtual_mode, from_home=from_home
        )
    # State, store and composite backends address files by virtual absolute paths.
    virtual_path = _normalize_virtual(expanded)
    if virtual_path is None:
        return None, "path escapes the backend root"
    return virtual_path, None


def lexical_path(path: str) -> str | None:
    """`path` as a `/`-anchored POSIX path with `.`, `..` and `//` folded (no I/O), or None
    when `..` would climb above `/` or the path holds a NUL byte."""
    if "\x00" in path:
        return None
    return _normalize_virtual(path)


@functools.lru_cache(maxsize=8192)
def _path_problem(path: str) -> str | None:
    """`invalid_path_reason`, remembered for the paths every load asks about again."""
    return invalid_path_reason(path)


def _resolved(root: Path) -> Path:
    """A backend root with symlinks resolved (the backend fixes its root when it is built)."""
    return root.resolve()


@functools.lru_cache(maxsize=8192)
def _normalize_virtual(path: str) -> str | None:
    """`/`-anchored POSIX path, or None when `..` would climb above the root."""
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def _normalize_for_filesystem(
    path: str, root: Path, *, virtual: bool, from_home: bool
) -> tuple[str | None, str | None]:
    """The real file's path (symlinks resolved), so every alias of one file compares equal.

    Read-only protection compares these forms: `AGENTS.md`, `/abs/root/AGENTS.md` and a
    symlink to it must all be recognised as the same file.
    """
    if virtual and not from_home:
        normalized = _normalize_virtual(path)
        if normalized is None:
            return None, f"path escapes the backend root {root}"
        candidate = root / normalized.lstrip("/")
    else:
        candidate = Path(path) if os.path.isabs(path) else root / path
    try:
        real = candidate.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long
        return None, f"cannot resolve the path: {type(exc).__name__}: {exc}"
    if not virtual:
        # A host-path backend reads any absolute path (deepagents' own docs put a user layer at
        # `~/.deepagents/AGENTS.md`): there is no root to escape.
        return str(real), None
    try:
        relative = real.relative_to(_resolved(root)).as_posix()
    except ValueError:
        if from_home:
            return None, (
                f"path is outside the backend root {root}; a virtual-mode backend cannot "
                "read the home folder: route it with a CompositeBackend (docs: getting-started.md, "
                "'A user layer in the home folder') or use FilesystemBackend(virtual_mode=False)"
            )
        return None, f"path escapes the backend root {root} (through a symlink)"
    # A virtual-mode backend addresses files by `/`-anchored paths under its root.
    return ("/" + relative if relative != "." else "/"), None
