"""The verified put-back of read-only memory after a shell command or a `task` call.

A shell cannot be checked before it runs, and a subagent on the plain backend writes past the
parent's tool hook. After each, read-only memory is compared with what it held when the run
started (`core.snapshot.RunStart`, kept in the run's state), never with a copy taken from
disk mid-run: two parallel tool calls cannot hand each other a planted file as "the original".

What is compared, in this order:

1. On disk, each read-only rule folder and the folders above it are the ones the run started
   with. One moved away and replaced (by a symlink, a file, another folder) is moved aside,
   never deleted (a symlink is removed: it holds no data), and built again.
2. The permission bits of each read-only file and folder are the run-start ones (`chmod 000`
   of a folder would hide it from every later run), put back top-down.
3. Each read-only file holds its run-start text, or is still absent.
4. Each read-only folder holds no file it did not hold (rule folders: any file; folder layers:
   their `*.md` files). The listing has no cap: a planted rule among any number of junk files
   is found (walking them costs what making them cost).
5. With nested memory, no new nested file appeared, where the walk saw every folder.

Putting back is verified: the result is read again. What could not be put back is told to the
model, logged, and recorded (`core.unrestored`): later loads leave it out until the file
changes. Every failure is caught: a check never ends the run. One lock serialises the checks,
so parallel tool calls never interleave their restores.

The protected backend view used outside a run (`protected_backend.execute(...)` called
directly) takes its own snapshot just before the command (`taken_now`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import posixpath
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import read_cache_for
from layered_memory.core.layers import in_folder
from layered_memory.core.loading import (
    decode_content,
    download_files_safely,
    download_texts,
)
from layered_memory.core.places import backend_path, clear_swapped_on_disk

# The guard's `disk_path(backend, path)` (a path as the backend's tools read it), beside the
# loader's `disk_path(root, key, virtual=)` (a path as the loader keys it).
from layered_memory.core.places import disk_path as guard_disk_path
from layered_memory.core.snapshot import (
    RunStart,
    as_backend_path,
    disk_modes,
    identity_of,
    scan,
    text_digest,
    walk_nested,
)
from layered_memory.core.unrestored import Unrestored, entries, fingerprint, place_of, record
from layered_memory.rules import is_rule_file
from layered_memory.safety.defuse import defuse_name

logger = get_logger(__name__)

# -- putting read-only memory back after a shell command or a `task` call --------------------------

_CHECK_LOCK = threading.RLock()
"""One check at a time in a process: parallel tool calls never interleave their restores."""

_RUN: contextvars.ContextVar[Callable[[], RunStart] | None] = contextvars.ContextVar(
    "layered_memory_run_start", default=None
)
"""The running agent's run-start snapshot, for the backend view inside its tool calls."""

_REBUILT: dict[str, list[Any]] = {}
"""Folders the guard built again: disk path -> the identity of the folder it made, accepted
as the run's own by later checks (process-wide: a run resumed elsewhere rebuilds once more)."""

UNKEPT = "its text at the start of the run is not kept (only a digest), so it cannot be put back"

SHOWN_PATHS = 20
"""Paths named in one note or log line (a flood of junk files must not flood the prompt)."""


def _failures(failed: Mapping[str, str]) -> str:
    named = _named(list(failed)).split(", ")
    return ", ".join(f"{path} ({failed[path]})" if path in failed else path for path in named)


def _named(paths: Sequence[str]) -> str:
    """Paths for a message: memory files first, at most `SHOWN_PATHS`, then a count."""
    ordered = sorted(paths, key=lambda path: (not is_rule_file(path), path))
    shown = ", ".join(map(defuse_name, ordered[:SHOWN_PATHS]))
    rest = len(ordered) - SHOWN_PATHS
    return f"{shown} and {rest:,} more" if rest > 0 else shown


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a check found and did.

    Attributes:
        restored: Paths put back as they were (or removed, when they appeared).
        failed: Paths that could not be put back, with the reason.
        moved: Folders moved aside (old path -> where it is now).
    """

    restored: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    moved: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.restored or self.failed or self.moved)

    def note(self) -> str:
        """What the model is told."""
        parts = []
        if self.restored:
            parts.append(
                "this call changed read-only memory, which was put back as it was: "
                + _named(self.restored)
            )
        if self.moved:
            parts.append(
                "read-only folders it replaced were built again; what stood there was moved "
                "aside: " + ", ".join(f"{old} -> {new}" for old, new in self.moved.items())
            )
        if self.failed:
            lost = _failures(self.failed)
            parts.append(
                f"read-only memory it changed could NOT be put back (no prompt shows the "
                f"changed text; later runs leave the file out until the user fixes it): {lost}"
            )
        return (
            f"\n[layered-memory: {'; '.join(parts)}. Do not modify read-only memory; tell the "
            "user what should change instead.]"
        )


@contextlib.contextmanager
def during_run(start: Callable[[], RunStart]) -> Iterator[None]:
    """Make `start` the snapshot the backend view checks against inside a tool call (an
    outer run's wins: a subagent's own middleware started later, maybe after a change)."""
    if _RUN.get() is not None:
        yield
        return
    token = _RUN.set(start)
    try:
        yield
    finally:
        _RUN.reset(token)


def run_start_in_context() -> RunStart | None:
    """The run-start snapshot of the tool call this code runs in, if any."""
    start = _RUN.get()
    return None if start is None else start()


def restore(
    io: Any, where: Any, start: RunStart, *, raw: Mapping[str, bytes] | None = None
) -> Outcome:
    """Put read-only memory back as `start` has it (see the module docstring).

    Args:
        io: Answers `download_files` / `upload_files` / `delete` / `glob` past the guard.
        where: The backend the paths belong to (routes, disk folders); may be `io`.
        start: The run-start snapshot.
        raw: Exact bytes to write back per path (the view's own snapshot); default: the text.
    """
    with _CHECK_LOCK:
        try:
            return _restore(io, where, start, raw or {})
        except Exception as exc:  # a check must never end the run: say so instead
            logger.exception("checking read-only memory failed")
            return Outcome(failed={"read-only memory": f"the check failed: {exc}"})


def _restore(io: Any, where: Any, start: RunStart, raw: Mapping[str, bytes]) -> Outcome:
    moved, failed = _rebuild_folders(start)
    modes_restored = _restore_modes(start.modes, failed)
    paths = {path: at for path in start.texts if (at := backend_path(where, path))}
    absent = {path: at for path in start.absent if (at := backend_path(where, path))}
    digests = {path: at for path in start.digests if (at := backend_path(where, path))}
    now = _current(io, where, [*paths.values(), *absent.values(), *digests.values()], raw)
    wanted: dict[str, bytes | None] = {}
    by_place: dict[str, str] = {}
    for path, at in paths.items():
        content = raw.get(path)
        same = (
            now.content.get(at) == content
            if content is not None
            else now.texts.get(at) == start.texts[path]
        )
        if not same:
            wanted[at] = content if content is not None else start.texts[path].encode("utf-8")
            by_place[at] = path
    for path, at in absent.items():
        if at not in now.missing:
            wanted[at] = None
            by_place[at] = path
    unkept: dict[str, str] = {}
    for path, at in digests.items():
        text = now.texts.get(at)
        if text is None or text_digest(text) != start.digests[path]:
            unkept[at] = path
    for at in _new_files(io, where, start, failed):
        wanted.setdefault(at, None)
        by_place.setdefault(at, at)
    restored, not_put_back = _put_back(io, where, wanted) if wanted else ((), {})
    restored = (*modes_restored, *restored)
    failed.update(not_put_back)
    failed.update(dict.fromkeys(unkept, UNKEPT))
    outcome = Outcome(restored, _recorded(io, where, failed, {**by_place, **unkept}), moved)
    _report(outcome)
    return outcome


@dataclass(frozen=True, slots=True)
class _Now:
    """What the read-only files hold now: decoded texts, bytes (when exact bytes matter), and
    the paths that do not exist (anything else exists but cannot be read)."""

    texts: Mapping[str, str]
    content: Mapping[str, bytes]
    missing: frozenset[str]


def _current(io: Any, where: Any, paths: Sequence[str], raw: Mapping[str, bytes]) -> _Now:
    """Read `paths` back. Text through the loader's own disk cache (a file whose stat
    signature, ctime included, did not change is not read again: 1,000 rule files cost 1,000
    `stat`s per check); bytes when the view's own snapshot kept exact bytes."""
    if raw:
        answers = _download(io, where, paths)
        return _Now(
            {path: text for path in paths if (text := _text(answers.get(path))) is not None},
            {
                path: content
                for path in paths
                if _error(answers.get(path)) is None
                and (content := getattr(answers.get(path), "content", None)) is not None
            },
            frozenset(p for p in paths if _error(answers.get(p)) == "file_not_found"),
        )
    cache = read_cache_for(where) if isinstance(where, FilesystemBackend) else None
    try:
        found = download_texts(where, paths, cache=cache)
    except Exception as exc:  # an unreadable backend: every path counts as unreadable
        logger.warning("cannot read read-only memory back: %s", exc)
        return _Now({}, {}, frozenset())
    return _Now(found.texts, {}, found.missing)


# -- 1. folders ---------------------------------------------------------------------------------


def _rebuild_folders(start: RunStart) -> tuple[dict[str, str], dict[str, str]]:
    """Put back each read-only folder on disk that was moved away or replaced."""
    moved: dict[str, str] = {}
    failed: dict[str, str] = {}
    for path in sorted(start.folders, key=len):
        was = list(start.folders[path])
        now = identity_of(path)
        if now == was or (now is not None and now == _REBUILT.get(path)):
            continue
        try:
            if now is not None:
                if now[2]:
                    os.unlink(path)  # a symlink holds no data: never follow it, drop it
                else:
                    aside = _free_name(path)
                    os.rename(path, aside)
                    moved[path] = aside
            if was[2]:
                os.symlink(was[2], path)
            else:
                os.mkdir(path)
        except OSError as exc:
            failed[path] = f"cannot build the folder again: {exc.strerror or exc}"
            continue
        rebuilt = identity_of(path)
        if rebuilt is not None:
            _REBUILT[path] = rebuilt
    return moved, failed


def _restore_modes(modes: Mapping[str, int], failed: dict[str, str]) -> tuple[str, ...]:
    """Put back the permission bits of each read-only file and folder (`chmod 000 rules`
    would hide them from every later run), top-down so a folder opens before what it holds;
    verified by reading the mode again."""
    restored: list[str] = []
    for path in sorted(modes, key=len):
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode) or stat.S_IMODE(info.st_mode) == modes[path]:
                continue
            os.chmod(path, modes[path])
            if stat.S_IMODE(os.lstat(path).st_mode) != modes[path]:
                raise OSError(f"still {stat.S_IMODE(os.lstat(path).st_mode):o}")
        except FileNotFoundError:
            continue  # removed: the checks of presence below put it back
        except OSError as exc:
            failed[path] = f"cannot put its permissions back: {exc.strerror or exc}"
            continue
        restored.append(path)
    return tuple(restored)


def _free_name(path: str) -> str:
    for number in range(1, 10_000):
        candidate = f"{path}.layered-memory-moved-{number}"
        if not os.path.lexists(candidate):
            return candidate
    raise OSError(f"no free name to move {path} aside")


# -- 2. files -----------------------------------------------------------------------------------


def _download(io: Any, where: Any, paths: Sequence[str]) -> dict[str, Any]:
    if not paths:
        return {}
    try:
        answers = download_files_safely(where, list(paths), download=io.download_files)
    except Exception as exc:  # an unreadable backend: every path counts as unreadable
        logger.warning("cannot read read-only memory back: %s", exc)
        return {}
    return dict(zip(paths, answers, strict=False))


def _error(answer: Any) -> str | None:
    return "unknown" if answer is None else getattr(answer, "error", None)


def _text(answer: Any) -> str | None:
    content = getattr(answer, "content", None)
    if _error(answer) is not None or content is None:
        return None
    return decode_content(content)[0]


# -- 3. and 4. files that appeared ---------------------------------------------------------------


def _new_files(io: Any, where: Any, start: RunStart, failed: dict[str, str]) -> list[str]:
    """Files in the read-only folders, and nested memory files, the run did not start with."""
    known = {
        at
        for path in (*start.texts, *start.left_out, *start.digests, *(start.others or ()))
        if (at := backend_path(where, path))
    }
    new: list[str] = []
    for folder in start.rule_folders:
        at = backend_path(where, folder)
        if at is None or folder in start.unlisted:
            continue  # listed only in part at the start: nothing there can be told new
        listed = _listing(io, where, at)
        if listed is None:
            failed[folder] = "cannot list the folder to check it"
            continue
        # Without the folder's other files (a state from an older version), only rule files
        # can be told new: the user's own files are never removed.
        new.extend(
            path
            for path in listed
            if path not in known and (start.others is not None or is_rule_file(path))
        )
    for folder in start.layer_folders:
        at = backend_path(where, folder)
        if at is None:
            continue
        listed = _listing(io, where, at)
        if listed is None:
            failed[folder] = "cannot list the folder to check it"
            continue
        # Only its memory files (`*.md` right in it): the folder's other files are not memory.
        prefix = at if at.endswith("/") else at + "/"
        new.extend(path for path in listed if path not in known and in_folder(path, prefix))
    if start.nested and start.complete:
        found, complete = walk_nested(where, start.nested, _root_of(where))
        if complete:
            new.extend(path for path in found if path not in known)
    return new


def _listing(io: Any, where: Any, folder: str) -> list[str] | None:
    """Every file below a folder as the loader lists it (no dot names, no linked folders),
    without a cap; None when it cannot be listed completely."""
    if isinstance(where, FilesystemBackend):
        top = guard_disk_path(where, folder)
        return None if top is None else _walk_files(where, top)
    try:
        listing = io.glob("**/*", path=folder)
    except Exception:
        return None
    if getattr(listing, "error", None) or getattr(listing, "truncated", False):
        return None
    return [
        str(info["path"])
        for info in getattr(listing, "matches", None) or []
        if not info.get("is_dir")
    ]


def _walk_files(backend: FilesystemBackend, top: str) -> list[str]:
    folders, _complete = scan(top, lambda entry: not entry.name.startswith("."))
    return [
        as_backend_path(backend, entry.path)
        for _folder, entries in folders
        for entry in entries
        if not entry.name.startswith(".") and not entry.is_dir(follow_symlinks=False)
    ]


def _root_of(where: Any) -> str:
    if isinstance(where, FilesystemBackend) and not where.virtual_mode:
        return str(where.cwd)
    return "/"


# -- putting back --------------------------------------------------------------------------------


def _put_back(
    io: Any, where: Any, wanted: Mapping[str, bytes | None]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Write each path back (None: remove it), clearing whatever occupies it first, then read
    them all again: what does not hold what it should is reported, never called restored."""
    errors: dict[str, str] = {}
    for path, content in wanted.items():
        cleared = _clear(where, path)
        try:
            if content is None:
                if not cleared:
                    answer = io.delete(path)
                    if getattr(answer, "error", None) and _exists(io, where, path):
                        errors[path] = str(answer.error)
                continue
            (answer,) = io.upload_files([(path, content)])
            if getattr(answer, "error", None) is not None:
                io.delete(path)  # a folder or a symlink stands there now: clear it, retry
                (answer,) = io.upload_files([(path, content)])
                if getattr(answer, "error", None) is not None:
                    errors[path] = str(answer.error)
        except Exception as exc:  # a full disk, a permission, a path outside the root
            errors[path] = _reason(exc)
    answers = _download(io, where, list(wanted))
    restored: list[str] = []
    failed: dict[str, str] = {}
    for path, content in wanted.items():
        answer = answers.get(path)
        if content is None:
            ok = _error(answer) == "file_not_found"
        else:
            ok = _error(answer) is None and getattr(answer, "content", None) == content
        if ok:
            restored.append(path)
        else:
            failed[path] = errors.get(path) or f"still {_error(answer) or 'different'}"
    return tuple(restored), failed


def _clear(where: Any, path: str) -> bool:
    try:
        return clear_swapped_on_disk(where, path)
    except Exception:  # the write that follows reports what is wrong
        return False


def _exists(io: Any, where: Any, path: str) -> bool:
    return _error(_download(io, where, [path]).get(path)) != "file_not_found"


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


def _recorded(
    io: Any, where: Any, failed: Mapping[str, str], paths: Mapping[str, str]
) -> dict[str, str]:
    """Record each file that could not be put back for the next runs (`core.unrestored`),
    and return the failures not recorded before as they are: a file an earlier check of the
    run already reported, unchanged since, is not reported again at every later call."""
    files = [path for path in failed if path in paths]
    answers = _download(io, where, files)
    recorded = entries()
    new: dict[str, Unrestored] = {}
    for path in files:
        place = place_of(where, paths[path])
        entry = Unrestored(paths[path], _fingerprint(answers.get(path)), failed[path])
        known = recorded.get(place)
        if known is None or known.found != entry.found:
            new[place] = entry
    if new:
        record(new)
    fresh = {entry.path for entry in new.values()}
    return {path: why for path, why in failed.items() if path not in paths or paths[path] in fresh}


def _report(outcome: Outcome) -> None:
    """Log the outcome."""
    if outcome.restored:
        logger.warning(
            "a tool call changed read-only memory; restored %s", _named(outcome.restored)
        )
    for old, new in outcome.moved.items():
        logger.warning("a tool call replaced read-only folder %s; moved it aside to %s", old, new)
    if outcome.failed:
        logger.error(
            "read-only memory could not be put back (left out of memory until fixed): %s",
            _failures(outcome.failed),
        )


def _fingerprint(answer: Any) -> str:
    error = _error(answer)
    if error == "file_not_found":
        return fingerprint(None, missing=True)
    return fingerprint(_text(answer) if error is None else None)


# -- files kept in the graph state ----------------------------------------------------------------


def read_only_changes(start: RunStart, files: Mapping[str, Any]) -> list[str]:
    """The paths of a `files` state update (a `task` subagent hands back every file it wrote
    on a `StateBackend`) that are read-only memory: leaving them out of the update leaves the
    run's own copy as it was."""
    return [
        path
        for path in files
        if start.knows(path)
        or any(path.startswith(folder.rstrip("/") + "/") for folder in start.rule_folders)
        or posixpath.basename(path) in start.nested
    ]


# -- the view's own snapshot, outside a run -------------------------------------------------------


def taken_now(
    io: Any, where: Any, files: Sequence[str], folders: Sequence[str]
) -> tuple[RunStart, dict[str, bytes]]:
    """A snapshot taken just before a command (the backend view called outside a run): the
    protected files and everything the protected folders hold now, byte for byte."""
    listed: list[str] = []
    for folder in folders:
        at = backend_path(where, folder)
        found = _listing(io, where, at) if at is not None else None
        listed.extend(found or ())
    paths = list(dict.fromkeys([p for f in files if (p := backend_path(where, f))] + listed))
    answers = _download(io, where, paths)
    raw: dict[str, bytes] = {}
    texts: dict[str, str] = {}
    absent: set[str] = set()
    left_out: dict[str, str] = {}
    for path in paths:
        answer = answers.get(path)
        error = _error(answer)
        if error == "file_not_found":
            absent.add(path)
        elif error is None and (content := getattr(answer, "content", None)) is not None:
            raw[path] = content
            texts[path] = _text(answer) or ""
        else:
            left_out[path] = str(error)  # unreadable now: nothing to put back, left alone
    start = RunStart(
        texts=texts,
        absent=frozenset(absent),
        left_out=left_out,
        rule_folders=tuple(folders),
        others=frozenset(),
        modes=disk_modes(where, [*texts, *left_out], folders),
    )
    return start, raw
