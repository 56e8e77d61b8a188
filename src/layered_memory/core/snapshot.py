"""The run-start snapshot: what read-only memory held when the run started; and the record of
read-only memory that could not be put back, which later runs leave out.

During a run, read-only memory is what the user had when the run started, taken once at the
start and never again from disk mid-run:

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
shell command and `task` call (`core.guard.shell`).


Read-only memory an agent changed and the guard could not put back, remembered across runs.

The guard restores read-only memory from the run-start snapshot after every shell command
and `task` call. When it cannot (a full disk, a permission, or a nested file the run never
loaded, whose text the snapshot does not keep), what the file holds now is recorded here by
its fingerprint. Every later load leaves that file out of the prompt, with one warning naming
it, until the file changes (the user fixed it, and the entry is dropped) or the user deletes
the record. `layered-memory doctor` reports the same through its load.

The record is one small JSON file in the user's state folder (`LAYERED_MEMORY_STATE_DIR`,
else `$XDG_STATE_HOME/layered-memory`, else `~/.local/state/layered-memory`), never in the
project: the disk a command filled, or the folder it broke, need not be able to hold it.
Writers take a file lock and replace the file atomically; readers cache it by its stat
signature, so a load with nothing recorded costs one `stat`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deepagents.backends.filesystem import FilesystemBackend
from filelock import FileLock

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import disk_path
from layered_memory.core.files import atomic_write
from layered_memory.core.internals import final_route
from layered_memory.core.layers import expand_user, lexical_path
from layered_memory.core.loading import Discovered, DownloadResult, SourceProblem

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

logger = get_logger(__name__)

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
