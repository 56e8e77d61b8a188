"""Read-only memory as it was when the run started: the run-start snapshot, the record of what
could not be put back, and the verified put-back after a shell command or a `task` call.

One concept, one section each: the snapshot is what the put-back compares the disk with, and
the record keeps what the put-back could not undo, for every later load.

**The run-start snapshot.** During a run, read-only memory is what the user had when the run
started, taken once at the start and never again from disk mid-run:

- the read-only files the run loads anyway (layers, rule files, nested files and imports of
  the folders already touched): their texts are in the run's state;
- the read-only paths it looked for and did not find, and those it could not read;
- the nested memory files of the folders not touched yet, and what they import: a digest of
  each, found by one bounded walk of the tree and read through the loader's own disk cache
  (`RunStart.digests`; their texts are not kept: state stays small);
- the other files of the read-only rule folders (the user's own, never removed), and on disk
  the identity of each rule folder and of the folders above it (a folder moved away and
  replaced by another or by a symlink is told from the one the run started with).

A mid-run load is pinned to it (`Pinned`): a read-only file's text comes from the snapshot,
and a nested or imported file loaded for the first time must match its digest, or it is left
out with a problem naming it. The guard compares the disk with the same snapshot after every
shell command and `task` call (the put-back, below).

**The record of read-only memory that could not be put back**, remembered across runs. When
the put-back fails (a full disk, a permission, or a nested file the run never loaded, whose
text the snapshot does not keep), what the file holds now is recorded here by its
fingerprint. Every later load leaves that file out of the prompt, with one warning naming it,
until the file changes (the user fixed it, and the entry is dropped) or the user deletes the
record. `layered-memory doctor` reports the same through its load.

The record is one small JSON file in the user's state folder (`LAYERED_MEMORY_STATE_DIR`,
else `$XDG_STATE_HOME/layered-memory`, else `~/.local/state/layered-memory`), never in the
project: the disk a command filled, or the folder it broke, need not be able to hold it.
Writers take a file lock and replace the file atomically; readers cache it by its stat
signature, so a load with nothing recorded costs one `stat`.

**The put-back after a shell command or a `task` call.** A shell cannot be checked before it
runs, and a subagent on the plain backend writes past the parent's tool hook. After each,
read-only memory is compared with what it held when the run started (`RunStart`, kept in the
run's state), never with a copy taken from disk mid-run: two parallel tool calls cannot hand
each other a planted file as "the original".

What is compared, in this order:

1. On disk, each read-only rule folder and the folders above it are the ones the run started
   with. One moved away and replaced (by a symlink, a file, another folder) is moved aside,
   never deleted (a symlink is removed: it holds no data), and built again.
2. Each read-only file holds its run-start text, or is still absent.
3. Each read-only folder holds no file it did not hold. The listing has no cap: a planted rule
   among any number of junk files is found (walking them costs what making them cost).
4. With nested memory, no new nested file appeared, where the walk saw every folder.

Putting back is verified: the result is read again. What could not be put back is told to the
model, logged, and recorded (above): later loads leave it out until the file changes. Every
failure is caught: a check never ends the run. One lock serialises the checks, so parallel
tool calls never interleave their restores.

The protected backend view used outside a run (`protected_backend.execute(...)` called
directly) takes its own snapshot just before the command (`taken_now`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
import posixpath
import stat
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend
from filelock import FileLock

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import disk_path, read_cache_for
from layered_memory.core.files import atomic_write
from layered_memory.core.internals import final_route
from layered_memory.core.layers import expand_user, lexical_path
from layered_memory.core.loading import (
    Discovered,
    DownloadResult,
    SourceProblem,
    decode_content,
    download_files_safely,
    download_texts,
)
from layered_memory.core.places import backend_path, clear_swapped_on_disk

# The guard's `disk_path(backend, path)` (a path as the backend's tools read it), beside the
# loader's `disk_path(root, key, virtual=)` (a path as the loader keys it).
from layered_memory.core.places import disk_path as guard_disk_path
from layered_memory.rules import is_rule_file

logger = get_logger(__name__)

# -- the run-start snapshot -----------------------------------------------------------------------

MAX_WALK_ENTRIES = 20_000
"""Files and folders the walk for nested memory files looks at. A nested file beyond it has
no digest, so a mid-run load leaves it out (a bound must refuse, never answer "nothing
there"), and the guard removes no file it did not see at the start."""

SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})
"""Folders the walk does not enter (nor dot folders): no memory lives there, and a mid-run
load leaves a nested file found there out, as beyond the bound."""

CHANGED = "changed since the run started: left out (read-only memory is what it was then)"
UNKNOWN = (
    "not in the run-start snapshot (created during the run, or in a folder the snapshot does "
    f"not cover: dot folders, {', '.join(sorted(SKIPPED_FOLDERS))}, past "
    f"{MAX_WALK_ENTRIES:,} entries): left out"
)

Download = Callable[[list[str]], DownloadResult]
AsyncDownload = Callable[[list[str]], Awaitable[DownloadResult]]


def text_digest(text: str) -> str:
    """The digest a snapshot keeps of a text it does not keep (the record of unrestored
    memory keeps the same)."""
    return fingerprint(text)


@dataclass(frozen=True, slots=True)
class RunStart:
    """The run-start snapshot, as the state keeps it and the guard and pinned loads read it.

    Attributes:
        texts: Read-only files the run loaded: path -> text.
        absent: Read-only paths the run looked for and did not find.
        left_out: Read-only paths that existed but were not used (unreadable, or left out
            since an earlier run): path -> reason. Never restored, never removed.
        digests: Nested and imported read-only files not loaded: path -> `text_digest`.
        rules: The rule listing, `(folder index, path)`; None when rules are writable.
        rule_folders: The read-only rule folders.
        others: Other files of the read-only rule folders; None when not known.
        folders: On disk, each read-only rule folder and the folders above it inside the
            root: disk path -> `[device, inode, link text or ""]`.
        complete: The walk saw every nested file (the guard may remove ones it finds new).
        nested: The nested memory file names.
        unlisted: Read-only rule folders listed only in part at the start (an error, a
            listing cut short): the guard removes nothing there.
        layer_folders: Read-only folder layers: their files are those in `texts` and
            `left_out` (a mid-run load does not list them again).
    """

    texts: Mapping[str, str] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()
    left_out: Mapping[str, str] = field(default_factory=dict)
    digests: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[tuple[int, str], ...] | None = None
    rule_folders: tuple[str, ...] = ()
    others: frozenset[str] | None = None
    folders: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    complete: bool = False
    nested: tuple[str, ...] = ()
    unlisted: frozenset[str] = frozenset()
    layer_folders: frozenset[str] = frozenset()

    def knows(self, path: str) -> bool:
        """Whether the snapshot says anything about `path`."""
        return (
            path in self.texts
            or path in self.absent
            or path in self.left_out
            or path in self.digests
        )


@dataclass(frozen=True, slots=True)
class Pinned:
    """A mid-run load held to the run-start snapshot (see the module docstring)."""

    start: RunStart

    def download(self, download: Download) -> Download:
        """`download`, answering read-only paths from the snapshot without any I/O."""

        def pinned(paths: list[str]) -> DownloadResult:
            known, rest = self._split(paths)
            return self._merge(paths, known, download(rest) if rest else DownloadResult({}))

        return pinned

    def adownload(self, download: AsyncDownload) -> AsyncDownload:
        """Async twin of `download`."""

        async def pinned(paths: list[str]) -> DownloadResult:
            known, rest = self._split(paths)
            fetched = await download(rest) if rest else DownloadResult({})
            return self._merge(paths, known, fetched)

        return pinned

    def _split(self, paths: Sequence[str]) -> tuple[DownloadResult, list[str]]:
        start = self.start
        texts = {path: start.texts[path] for path in paths if path in start.texts}
        missing = frozenset(path for path in paths if path in start.absent)
        problems = tuple(
            SourceProblem(path, start.left_out[path], unreadable=True)
            for path in paths
            if path in start.left_out and path not in texts
        )
        known = DownloadResult(texts, missing, problems)
        done = texts.keys() | missing | {problem.path for problem in problems}
        return known, [path for path in paths if path not in done]

    @staticmethod
    def _merge(
        paths: Sequence[str], known: DownloadResult, fetched: DownloadResult
    ) -> DownloadResult:
        texts = {**known.texts, **fetched.texts}
        return DownloadResult(
            {path: texts[path] for path in paths if path in texts},
            known.missing | fetched.missing,
            (*known.problems, *fetched.problems),
        )

    def verified(self, found: Discovered) -> Discovered:
        """`found` without the read-only nested and imported files that are not as the run
        started (each becomes a problem naming it)."""
        start = self.start
        dropped: dict[str, str] = {}
        extras = found.extras
        for kind in (extras.nested, extras.imports):
            for path, text in kind.items():
                if extras.access.get(path) != "read-only" or path in start.texts:
                    continue
                digest = start.digests.get(path)
                if digest is None:
                    if start.nested:  # else no snapshot covers files loaded later (no nested)
                        dropped[path] = UNKNOWN
                elif text_digest(text) != digest:
                    dropped[path] = CHANGED
        if not dropped:
            return found
        return replace(
            found,
            extras=extras.without(dropped),
            problems=(
                *found.problems,
                *(SourceProblem(path, why, unreadable=True) for path, why in dropped.items()),
            ),
        )


# -- what the snapshot looks at on disk -------------------------------------------------------


def local_root(backend: Any) -> FilesystemBackend | None:
    """The `FilesystemBackend` holding the tree (`/` through composite routes), if any."""
    target, _key = final_route(backend, "/")
    return target if isinstance(target, FilesystemBackend) else None


def walk_nested(backend: Any, names: Sequence[str], root: str) -> tuple[list[str], bool]:
    """Every nested memory file of the tree (backend paths, each folder's first name that
    exists) and whether the walk saw all of it."""
    disk = local_root(backend)
    if disk is not None and backend is disk:
        return _walk_disk(disk, names)
    found: dict[str, list[str]] = {}
    complete = True
    for name in names:
        try:
            listing = backend.glob(f"**/{name}", path=root)
        except Exception:  # a listing failure: nothing is known, so nothing is trusted
            return [], False
        if getattr(listing, "error", None) or getattr(listing, "truncated", False):
            complete = False
        for info in getattr(listing, "matches", None) or []:
            path = str(info.get("path", ""))
            if not info.get("is_dir") and os.path.basename(path) == name:
                found.setdefault(os.path.dirname(path), []).append(path)
    order = {name: index for index, name in enumerate(names)}
    firsts = [min(paths, key=lambda p: order[os.path.basename(p)]) for paths in found.values()]
    return sorted(firsts), complete


def _walk_disk(backend: FilesystemBackend, names: Sequence[str]) -> tuple[list[str], bool]:
    wanted = set(names)
    order = {name: index for index, name in enumerate(names)}
    found: list[str] = []
    folders, complete = scan(
        str(backend.cwd),
        lambda entry: entry.name[0] != "." and entry.name not in SKIPPED_FOLDERS,
        limit=MAX_WALK_ENTRIES,
    )
    for folder, entries in folders:
        here = [entry.name for entry in entries if entry.name in wanted]
        if here:
            first = min(here, key=order.__getitem__)
            found.append(as_backend_path(backend, os.path.join(folder, first)))
    return sorted(found), complete


def scan(
    top: str, enter: Callable[[os.DirEntry[str]], bool], *, limit: int | None = None
) -> tuple[list[tuple[str, list[os.DirEntry[str]]]], bool]:
    """Each folder below `top` (itself included) with its entries, and whether the walk saw
    them all. Links to folders are never followed; `enter` chooses the subfolders to enter.

    Args:
        top: Where to start (a missing one, or a file, gives nothing).
        enter: Whether to walk into a subfolder.
        limit: Entries to look at, at most; past it the walk stops and says it is partial.
    """
    folders: list[tuple[str, list[os.DirEntry[str]]]] = []
    seen = 0
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue  # missing, not a folder, or unreadable: nothing is there to see
        seen += len(entries)
        if limit is not None and seen > limit:
            return folders, False
        folders.append((folder, entries))
        pending.extend(
            entry.path for entry in entries if entry.is_dir(follow_symlinks=False) and enter(entry)
        )
    return folders, True


def as_backend_path(backend: FilesystemBackend, disk: str) -> str:
    """The backend path of a file on a `FilesystemBackend`'s disk."""
    if not backend.virtual_mode:
        return disk
    return "/" + os.path.relpath(disk, str(backend.cwd)).replace(os.sep, "/")


def folder_chains(backend: Any, folders: Sequence[str]) -> list[str]:
    """Each folder on local disk and the folders above it inside the backend's root, top
    down (disk paths): the folders whose identity a run-start snapshot keeps."""
    disk = local_root(backend)
    if disk is None or not folders:
        return []
    root = os.path.normpath(str(disk.cwd))
    found: dict[str, None] = {}
    for folder in folders:
        target, key = final_route(backend, folder)
        if target is not disk:
            continue
        path = os.path.normpath(disk_path(root, key, virtual=disk.virtual_mode))
        while path.startswith(root + os.sep) and path not in found:
            found[path] = None
            path = os.path.dirname(path)
    return sorted(found, key=len)


def identity_of(path: str) -> list[Any] | None:
    """`[device, inode, link text or ""]` of what `path` names on disk now (links not
    followed), or None when nothing is there."""
    try:
        info = os.lstat(path)
        link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    except (OSError, ValueError):
        return None
    return [info.st_dev, info.st_ino, link]


# -- read-only memory that could not be put back --------------------------------------------------

STATE_DIR_ENV = "LAYERED_MEMORY_STATE_DIR"
LEDGER_NAME = "unrestored.json"

MISSING = "missing"
UNREADABLE = "unreadable"

LEFT_OUT_START = "left out: an agent changed it during an earlier run"
LEFT_OUT_REASON = (
    LEFT_OUT_START + " and it could not be put back "
    "({why}); it stays out of the prompt until the file changes: check it (e.g. `git diff`), "
    "fix it, and run again (`layered-memory doctor` lists these)"
)


@dataclass(frozen=True, slots=True)
class Unrestored:
    """One file the guard could not put back.

    Attributes:
        path: The backend path, as the run named it.
        found: The fingerprint of what the file held after the failed put-back.
        why: Why it could not be put back.
    """

    path: str
    found: str
    why: str

    def reason(self) -> str:
        """The load problem's reason (the prompt's note says the same)."""
        return LEFT_OUT_REASON.format(why=self.why)


def state_dir() -> str:
    """The folder of the package's per-user state (see the module docstring)."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return configured
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(xdg, "layered-memory")


@functools.lru_cache(maxsize=16)
def _ledger_in(configured: str | None) -> str:
    return os.path.join(state_dir() if configured is None else configured, LEDGER_NAME)


def ledger_path() -> str:
    """Where the record lives. Every load looks: one environment read (the variable may
    change, tests set it), then a remembered answer (without it, the XDG default is worked
    out once per process)."""
    return _ledger_in(os.environ.get(STATE_DIR_ENV) or None)


def fingerprint(text: str | None, *, missing: bool = False) -> str:
    """What a file holds, in a form the record keeps: a digest of its decoded text,
    `missing`, or `unreadable` (exists, cannot be decoded)."""
    if missing:
        return MISSING
    if text is None:
        return UNREADABLE
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def place_of(backend: Any, path: str) -> str:
    """A path's place, the record's key: the file on disk for a local backend (through
    composite routes), else the backend's kind and the path within it."""
    target, key = final_route(backend, path)
    if isinstance(target, FilesystemBackend):
        key = key if target.virtual_mode else expand_user(key)
        return os.path.normpath(disk_path(str(target.cwd), key, virtual=target.virtual_mode))
    return f"{type(target).__name__}:{lexical_path(key) or key}"


_cache_lock = threading.Lock()
_cached: dict[str, tuple[tuple[int, int, int], dict[str, Unrestored]]] = {}
"""The record as last read, by its file's stat signature."""


def entries() -> Mapping[str, Unrestored]:
    """Place -> entry, as recorded now (empty when nothing is; a damaged record is logged and
    read as empty: it only ever adds caution)."""
    path = ledger_path()
    try:
        info = os.stat(path)
    except OSError:
        return {}
    signature = (info.st_mtime_ns, info.st_size, info.st_ino)
    with _cache_lock:
        known = _cached.get(path)
    if known is not None and known[0] == signature:
        return known[1]
    found = _read(path)
    with _cache_lock:
        _cached.clear()  # one state folder at a time (tests switch it)
        _cached[path] = (signature, found)
    return found


def _read(path: str) -> dict[str, Unrestored]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {
            str(place): Unrestored(str(item["path"]), str(item["found"]), str(item["why"]))
            for place, item in data.items()
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        logger.warning("cannot read the record of unrestored memory %s: %s", path, exc)
        return {}


def record(found: Mapping[str, Unrestored]) -> bool:
    """Add entries (place -> entry); False when the record could not be written (logged)."""
    return _update(dict(found), ())


def forget(places: Iterable[str]) -> None:
    """Drop the entries of files that changed since (the user fixed them)."""
    gone = tuple(places)
    if gone:
        _update({}, gone)


def _update(added: dict[str, Unrestored], removed: tuple[str, ...]) -> bool:
    path = ledger_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with FileLock(path + ".lock", timeout=30):
            current = dict(_read(path)) if os.path.exists(path) else {}
            current.update(added)
            for place in removed:
                current.pop(place, None)
            document = {
                place: {"path": entry.path, "found": entry.found, "why": entry.why}
                for place, entry in sorted(current.items())
            }
            atomic_write(Path(path), json.dumps(document, indent=1).encode("utf-8"))
    except Exception as exc:  # the state folder is full or unwritable too: say so, go on
        logger.error("cannot record unrestored read-only memory in %s: %s", path, exc)
        return False
    return True


def left_out(
    backend: Any, texts: Mapping[str, str | None], missing: Iterable[str] = ()
) -> dict[str, Unrestored]:
    """The files a load found that stay out of the prompt: those recorded with what they hold
    now. `texts` is path -> text (None: exists but unreadable); `missing` are read-only paths
    not found. Entries of files that changed since are dropped (the user fixed them)."""
    recorded = entries()
    if not recorded:
        return {}
    hits: dict[str, Unrestored] = {}
    stale: list[str] = []
    for path in [*texts, *missing]:
        place = place_of(backend, path)
        entry = recorded.get(place)
        if entry is None:
            continue
        now = fingerprint(texts.get(path), missing=path not in texts)
        if entry.found == now:
            hits[path] = entry
        else:
            stale.append(place)
    forget(stale)
    return hits


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
    shown = ", ".join(ordered[:SHOWN_PATHS])
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
    """Record each file that could not be put back for the next runs (`core.snapshot`),
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
    )
    return start, raw
