"""Nested memory files: which directories' `AGENTS.md` (or fallback names) apply to the paths
the agent touched, without listing the tree.

For a touched path `/a/b/c.py` the directories are `/`, `/a` and `/a/b`: every directory from
the backend root down to the path's own folder, shallow to deep, so a deeper file comes later
in the prompt and wins a conflict. Each directory is looked up once per load, every candidate
name in one batched download with the rest of memory; the first name that exists is that
directory's file (Codex's fallback filenames).
"""

from __future__ import annotations

import posixpath
from collections.abc import (
    Iterable,
    Sequence,
)
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


MAX_NESTED_DIRECTORIES = 256
"""Directories looked up per load; the deepest touched paths beyond it are ignored (logged)."""


def directories_of(touched: Iterable[str], root: str = "/") -> list[str]:
    """The directories from `root` down to each touched path's folder, shallow to deep.

    Args:
        touched: Paths the agent's tools named (backend paths).
        root: The backend's root in the same path space (`/` for a virtual tree, the disk
            folder for a host-path backend); paths outside it give nothing.

    Returns:
        Unique directories ordered by depth, then by name (deterministic bytes).
    """
    root = _folded(root)
    found: set[str] = set()
    for path in touched:
        if not isinstance(path, str) or "\x00" in path or not path:
            continue
        # deepagents reads a relative path from the backend's root, as `/` + path (virtual) or
        # root/path (host paths).
        folder = posixpath.dirname(_folded(path if path.startswith("/") else f"{root}/{path}"))
        if folder != root and not folder.startswith(root.rstrip("/") + "/"):
            continue
        while True:
            found.add(folder)
            parent = posixpath.dirname(folder)
            if folder in (root, parent):
                break
            folder = parent
    return sorted(found, key=lambda folder: (folder.count("/") if folder != "/" else 0, folder))


def _folded(path: str) -> str:
    """`path` with `.`, `..` and repeated slashes folded, a leading `//` included: POSIX
    `normpath` keeps exactly two leading slashes, and `dirname("//")` is `"//"` (a walk up
    from `//src/x.py` never reached `/`: one tool call hung the run)."""
    return "/" + posixpath.normpath(path).lstrip("/")


def candidates(directories: Sequence[str], names: Sequence[str]) -> dict[str, list[str]]:
    """Directory -> the candidate files to look for there, in fallback order."""
    return {folder: [posixpath.join(folder, name) for name in names] for folder in directories}
