"""The file on disk a write-back writes: pinned when the writer is built, checked again at
every write.

A writer is built once (often at startup) and writes when each run ends. In between, an agent
with a shell (`LocalShellBackend`) can put a symlink where the memory file or one of its
folders was (`ln -sf AGENTS.md MEMORY.md`, `mv memories m.bak && ln -s rules memories`).
Following it would write the insight into read-only memory, which the next run loads as
instructions, and create the lock file there too. So the file's folder is resolved once, when
the writer is built, and before the lock file is created, before the file is read and before
it is replaced, `DiskTarget.check` refuses (a `MemoryWriteError` naming the file and why;
nothing is written) when:

- the folder now resolves somewhere else (a folder on the way was swapped for a symlink);
- the file itself is a symlink (whenever it became one: a write never goes through a link);
- the backend is the guard's protected view and `guard.refusal` says the target is read-only.

A folder that already was a symlink when the writer was built is the user's own layout and
stays allowed, as long as it keeps leading to the same place.

Left open: a swap in the instant between the last check and the replace (a command the agent
left running in the background). Closing that would need every step done relative to an open
folder descriptor, which `core._atomic` (the package's one atomic write) does not do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deepagents.backends.filesystem import FilesystemBackend

from layered_memory.core._disk_cache import disk_path
from layered_memory.core._internals import filesystem_path
from layered_memory.errors import MemoryWriteError

__all__ = ["DiskTarget", "ReadOnlyCheck"]

ReadOnlyCheck = Callable[[], str | None]
"""Why writing the target would change read-only memory (None: it would not)."""


@dataclass(frozen=True, slots=True)
class DiskTarget:
    """One file a transaction writes, with the place it was pinned to.

    Attributes:
        path: The backend path (what errors and logs name).
        disk: The file as the backend names it on disk, no symlink resolved.
        folder: The real path of its folder when the writer was built.
        read_only: The guard's verdict for this path, when the backend is a protected view.
    """

    path: str
    disk: Path
    folder: Path
    read_only: ReadOnlyCheck | None = None

    @classmethod
    def pin(
        cls,
        backend: FilesystemBackend,
        key: str,
        path: str,
        *,
        read_only: ReadOnlyCheck | None = None,
    ) -> DiskTarget:
        """Pin `key` of `backend` (shown as `path`) to the real folder it is in now.

        Raises:
            MemoryWriteError: The backend refuses the key (`..`, out of its root, a loop).
        """
        try:
            filesystem_path(backend, key)  # the backend's own checks: root, `..`, loops
        except (ValueError, OSError) as exc:
            raise MemoryWriteError(key, f"cannot write here: {exc}") from None
        disk = Path(disk_path(str(backend.cwd), key, virtual=backend.virtual_mode))
        folder = Path(os.path.realpath(disk.parent))
        if backend.virtual_mode and not folder.is_relative_to(backend.cwd):
            # The backend checked where the file leads, not its folder: a symlinked file
            # pointing back into the root would otherwise pin a folder outside it.
            raise MemoryWriteError(key, f"cannot write here: its folder leads out of {backend.cwd}")
        return cls(path=path, disk=disk, folder=folder, read_only=read_only)

    @property
    def pinned(self) -> Path:
        """The file in its pinned folder: the only place this target is ever written."""
        return self.folder / self.disk.name

    @property
    def lock_path(self) -> Path:
        """The lock file guarding this file: a hidden file beside it, never deleted.

        Deleting a lock file would let two writers lock two different inodes, so it stays.
        """
        return self.folder / f".{self.disk.name}.lock"

    def check(self) -> Path:
        """The pinned file, once checked to still be the file the writer was built for.

        Raises:
            MemoryWriteError: It is not (see the module docstring); nothing may be written.
        """
        reason = self._problem()
        if reason is not None:
            raise MemoryWriteError(self.path, f"{reason}; nothing was written")
        return self.pinned

    def check_lock_file(self) -> Path:
        """The lock file, once checked not to be a symlink (an older `filelock` opens it with
        `O_TRUNC`, which would empty the file a planted link points to)."""
        self.check()
        if os.path.islink(self.lock_path):
            raise MemoryWriteError(
                self.path, f"its lock file {self.lock_path} is a symlink; nothing was written"
            )
        return self.lock_path

    def _problem(self) -> str | None:
        now = Path(os.path.realpath(self.disk.parent))
        if now != self.folder:
            return (
                f"its folder now leads to {now}, not to {self.folder} as when the writer was "
                "built (a symlink swapped in); a write-back never follows it"
            )
        if os.path.islink(self.pinned):
            return "it is a symlink; a write-back never writes through one"
        if self.read_only is not None:
            refused = self.read_only()
            if refused is not None:
                return f"{refused}, which a write-back never changes"
        return None
