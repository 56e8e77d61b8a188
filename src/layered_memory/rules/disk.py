"""Rule files on local disk, listed and read as the agent's backend would, without deepagents.

`layered-memory lint FOLDER` runs as a pre-commit hook, so it must start quickly; importing
deepagents costs about 2 s, because its package imports LangChain and LangGraph (issue 26:
`lint` of a folder took 1.26x `import deepagents`, `benchmarks/cli_startup.py`). Lint reads rule
files as an agent with `FilesystemBackend(virtual_mode=False)` reads them (`list_rule_files`,
then `core.loading.download_texts`), and both of those take a backend object, and `download_texts`
checks for FIFOs, devices, size caps and symlinks through the backend's class. This module does
the two calls that need a backend, and nothing more:

- `list_local_rule_files`: `FilesystemBackend.glob("**/*", path=folder)`, the same traversal
  (`Path.rglob("*")`, which does not follow links to folders), the same filter (no segment
  starting with `.`), the same `is_file` test (a link to a file is listed, a loop, a broken
  link, a FIFO or a device is not), the same time budget; the answer goes through the rules
  package's own `_collect`, as the backend's does.
- `read_local_texts`: `download_texts` on that backend: the same path plan (invalid paths
  refused, links resolved), the same refusals before any read (`special_file_kind`,
  `MAX_FILE_BYTES`), the backend's read (`O_NOFOLLOW`) and its error codes, decoded by
  `core.loading.interpret_responses`.

Everything else (parsing, precedence, findings) is the shared code. `tests/rules/
test_rules_disk.py` holds both against the backend and the agent's loader over a hostile tree.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layered_memory.core.disk_cache import special_file_kind
from layered_memory.core.layers import expand_user
from layered_memory.core.loading import (
    MAX_FILE_BYTES,
    DownloadResult,
    SourceProblem,
    interpret_responses,
)
from layered_memory.core.validation import invalid_path_reason
from layered_memory.rules._parse import RuleProblem
from layered_memory.rules._set import RuleFileList, _collect, _folder

GLOB_BUDGET_SECONDS = 5
"""`deepagents.backends.filesystem._DEFAULT_GLOB_TIMEOUT`: a longer walk is cut, and reported
as a truncated listing."""

_WIN32_ERROR_CANT_RESOLVE_FILENAME = 1921
"""How NTFS reports a reparse-point cycle; deepagents reads it as a symlink loop."""


@dataclass(frozen=True, slots=True)
class _Listing:
    """The fields of deepagents' `GlobResult` that `_collect` reads."""

    matches: list[dict[str, Any]]
    error: str | None = None
    truncated: bool = False
    truncation_reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Download:
    """The fields of deepagents' `FileDownloadResponse` that `interpret_responses` reads."""

    content: bytes | None
    error: str | None = None


def list_local_rule_files(folders: Sequence[str]) -> tuple[RuleFileList, list[RuleProblem]]:
    """`list_rule_files(FilesystemBackend(virtual_mode=False), folders)`, without the backend.

    Relative folders are taken from the working folder, as that backend's root is.
    """
    results: list[tuple[int, str, Any]] = []
    for folder_index, raw in enumerate(folders):
        folder = _folder(raw)
        results.append((folder_index, folder, _glob(folder, Path.cwd())))
    return _collect(results)


def _listed(relative: str) -> bool:
    """Whether deepagents' compiled `**/*` (`_set.LISTING_PATTERN`) matches a path relative
    to the folder: `**` does not descend into dot-folders, `*` does not match a leading dot."""
    return not any(part.startswith(".") for part in relative.split("/"))


def _search_path(folder: str, cwd: Path) -> Path:
    """The folder `FilesystemBackend.glob` walks (its `_resolve_path`, virtual_mode=False)."""
    if folder == "/":
        return cwd  # the backend takes `/` for its root (the working folder), not the disk's
    path = Path(folder)
    if not path.is_absolute():
        path = (cwd / path).resolve()
    _raise_if_symlink_loop(path)
    return path


def _glob(folder: str, cwd: Path) -> _Listing:
    try:
        search = _search_path(folder, cwd)
        if not search.exists() or not search.is_dir():
            return _Listing([])
    except (OSError, RuntimeError) as exc:
        return _Listing([], f"Error globbing path '{folder}': {exc}")
    deadline = time.monotonic() + GLOB_BUDGET_SECONDS
    matches: list[dict[str, Any]] = []
    truncated = False
    try:
        for found in search.rglob("*"):
            if time.monotonic() > deadline:
                truncated = True
                break
            try:
                relative = found.relative_to(search).as_posix()
            except ValueError:
                continue
            if not _listed(relative):
                continue
            try:
                is_file = found.is_file()
            except (OSError, RuntimeError):
                continue
            if is_file:
                matches.append({"path": str(found), "is_dir": False})
    except (OSError, RuntimeError, ValueError) as exc:
        return _Listing(matches, f"Glob of '{folder}' aborted partway: {exc}")
    return _Listing(matches, None, truncated, "budget" if truncated else None)


def read_local_texts(paths: Iterable[str]) -> DownloadResult:
    """`download_texts(FilesystemBackend(virtual_mode=False), paths)`, without the backend.

    Same texts, missing paths and problems, in the same order: nothing is opened that is not
    a regular file of at most `MAX_FILE_BYTES`.
    """
    plan, refused = _plan(paths, Path.cwd())
    fetch = dict(plan)
    for requested, real in list(fetch.items()):
        kind = special_file_kind(real)
        if kind is not None:
            del fetch[requested]
            reason = f"not a regular file ({kind}): never opened, reading it could block the run"
            refused.append(SourceProblem(requested, reason, unreadable=True))
    for requested, real in list(fetch.items()):
        try:
            size = os.stat(real).st_size
        except (OSError, ValueError):
            continue  # missing or unreachable: the read says so itself
        if size > MAX_FILE_BYTES:
            del fetch[requested]
            reason = f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB ({size} bytes)"
            refused.append(SourceProblem(requested, reason, unreadable=True))
    try:
        responses = [_download(real) for real in fetch.values()]
    except Exception as exc:  # as `download_texts` takes a backend's failure: every file
        reason = f"backend error: {type(exc).__name__}: {exc}"
        failed = tuple(SourceProblem(path, reason, unreadable=True) for path in fetch)
        fetched = DownloadResult({}, frozenset(), failed)
    else:
        fetched = interpret_responses(fetch, responses)
    texts = {path: fetched.texts[path] for path in plan if path in fetched.texts}
    return DownloadResult(texts, fetched.missing, (*refused, *fetched.problems))


def _plan(paths: Iterable[str], cwd: Path) -> tuple[dict[str, str], list[SourceProblem]]:
    """`core.loading.plan_paths` for that backend: each path checked, then resolved (links
    followed), so the read names the real file."""
    plan: dict[str, str] = {}
    problems: list[SourceProblem] = []
    for path in paths:
        if path in plan:
            continue
        invalid = invalid_path_reason(path)
        if invalid is not None:
            problems.append(SourceProblem(path, f"invalid path: {invalid}"))
            continue
        expanded = expand_user(path)
        candidate = Path(expanded) if os.path.isabs(expanded) else cwd / expanded
        try:
            plan[path] = str(candidate.resolve())
        except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long
            reason = f"cannot resolve the path: {type(exc).__name__}: {exc}"
            problems.append(SourceProblem(path, reason))
    return plan, problems


def _download(real: str) -> _Download:
    """`FilesystemBackend.download_files([real])[0]` (virtual_mode=False).

    Raises:
        Whatever the backend would not turn into an error code (it raises it too).
    """
    try:
        path = Path(real)
        _raise_if_symlink_loop(path)
        if path.is_dir():
            return _Download(None, "is_directory")
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as file:
            return _Download(file.read())
    except Exception as exc:
        code = _error_code(exc)
        if code is None:
            raise
        return _Download(None, code)


def _error_code(exc: Exception) -> str | None:
    """deepagents' `_map_exception_to_standard_error`."""
    if isinstance(exc, FileNotFoundError):
        return "file_not_found"
    if _is_loop(exc) or (
        isinstance(exc, RuntimeError) and any(_is_loop(e) for e in (exc.__cause__, exc.__context__))
    ):
        return "invalid_path"
    if isinstance(exc, PermissionError):
        return "permission_denied"
    if isinstance(exc, IsADirectoryError):
        return "is_directory"
    if isinstance(exc, (NotADirectoryError, FileExistsError, ValueError)):
        return "invalid_path"
    return None


def _is_loop(exc: BaseException | None) -> bool:
    return isinstance(exc, OSError) and (
        exc.errno == errno.ELOOP
        or getattr(exc, "winerror", None) == _WIN32_ERROR_CANT_RESOLVE_FILENAME
    )


def _raise_if_symlink_loop(path: Path) -> None:
    """The backend's check before it opens a path: a link that loops raises `ELOOP`."""
    if not path.is_symlink():
        return
    try:
        path.stat()
    except OSError as exc:
        if _is_loop(exc):
            raise
