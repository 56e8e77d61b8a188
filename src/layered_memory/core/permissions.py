"""Read-only memory as deepagents' own `FilesystemPermission` deny rules.

`create_deep_agent(..., permissions=memory.permissions)` makes deepagents' file tools refuse
to write read-only memory themselves, in the parent agent and in every subagent that inherits
the rules, with or without `MemoryMiddleware` in the agent. The rules are a second wall, not
the guard: deepagents applies them to its own file tools only (`write_file`, `edit_file`,
`delete`), by path spelling (plus a symlink's target on a `FilesystemBackend`). A shell
command, a hard link, another tool, and memory found only at run time (imports and nested
files a load discovers later) still need the protected backend
(`backend=memory.protected_backend`), which also puts read-only memory back after a shell
command or a subagent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from deepagents.middleware.filesystem import FilesystemPermission
from wcmatch import glob as wcglob

if TYPE_CHECKING:
    from layered_memory.core.protection import ProtectedPaths

__all__ = ["deny_writes"]


def deny_writes(protected: ProtectedPaths, also: Iterable[str] = ()) -> list[FilesystemPermission]:
    """Deny rules for every write of what `protected` holds read-only.

    Args:
        protected: The middleware's protected paths: read-only files, folders (read-only
            folder layers, rule folders), file names (nested memory) and the files its loads
            found so far (imports of read-only memory).
        also: More files the agent must not write (the consolidator's review queue).

    Returns:
        One `FilesystemPermission(operations=["write"], mode="deny")` holding every pattern,
        or no rule when nothing is read-only. Paths are escaped: a `*` or `[` in a file
        name is that character, never a pattern.
    """
    files: dict[str, None] = {}
    for path in (*protected.files, *_found(protected.discovered), *also):
        files.setdefault(_escaped(path), None)
    for folder in protected.folders:
        base = _escaped(folder.rstrip("/") or "/")
        # deepagents matches without DOTGLOB: `**` skips dot files and dot folders, so they
        # are named as well (one level of dot folder; the guard covers the rest).
        for pattern in (base, f"{base}/**", f"{base}/**/.*", f"{base}/**/.*/**"):
            files.setdefault(pattern.replace("//", "/"), None)
    for name in protected.names:
        escaped = wcglob.escape(name)
        for pattern in (f"/**/{escaped}", f"/**/.*/**/{escaped}"):
            files.setdefault(pattern, None)
    patterns = [pattern for pattern in files if _allowed(pattern)]
    if not patterns:
        return []
    return [FilesystemPermission(operations=["write"], paths=patterns, mode="deny")]


def _found(discovered: object) -> Mapping[str, str]:
    return discovered() if callable(discovered) else {}


def _escaped(path: str) -> str:
    return str(wcglob.escape(path))


def _allowed(pattern: str) -> bool:
    """What `FilesystemPermission` accepts: absolute, no `..` or `~` part (a host path
    outside any root never reaches deepagents' tools that way)."""
    parts = PurePosixPath(pattern.replace("\\", "/")).parts
    return pattern.startswith("/") and ".." not in parts and "~" not in parts
