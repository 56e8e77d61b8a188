"""Replacing a file so that a reader (or a crash) sees the old bytes or the new, never half.

The one atomic write of the package: the write-back, the file session store and
`layered-memory sync` all use it. There is no well-kept library for exactly this (write a
temporary file in the same folder, fsync it, keep the file's mode, `os.replace`, fsync the
folder), so it is written here once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import IO


def _write_all(stream: IO[bytes], data: bytes) -> None:
    """Write `data` to the temporary file (a seam the crash tests replace)."""
    stream.write(data)


def atomic_write(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    durable: bool = True,
    temp_prefix: str | None = None,
) -> None:
    """Replace `path` with `data` atomically (and durably, unless told otherwise).

    Args:
        path: The file (its folder is created if missing).
        data: The new content.
        mode: Permission bits for a new file (default: the old file's, else 0o644).
        durable: fsync the file and its folder (a crash keeps the new file, not only a whole
            one); off for caches that can be rebuilt.
        temp_prefix: Name prefix of the temporary file (default `.<name>.`), for callers that
            sweep their own leftovers.

    Raises:
        OSError: The temporary file could not be written or moved into place; the original
            file is untouched and the temporary file removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
    prefix = temp_prefix if temp_prefix is not None else f".{path.name}."
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            _write_all(stream, data)
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    if durable:
        fsync_directory(path.parent)


def fsync_directory(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where the filesystem cannot)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(dir_fd)
