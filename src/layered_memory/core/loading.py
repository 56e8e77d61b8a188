"""Reading memory files through a deepagents backend: one batched download, decoded and checked.

Every path is checked against the backend's root before any I/O, all files go to the backend
in ONE `download_files` call, and each response is turned into text or into a problem that
names the path and the reason. A problem never stops the run unless the caller asked for
strict mode. A FIFO, socket or device on local disk is never opened: reading one can block
forever (`download_files_safely` gives the same guarantee to callers that want raw answers).

Below that, in this order: the read cache of local disk (unchanged files are not read again),
downloads and decoding, `@path` imports, nested memory directories, and the load plan that
reads both with the configured files.


`@path` imports in memory files, as Claude Code reads them, in time linear in the text.

A memory file may pull in another with `@path`: relative to the importing file, `/`-absolute
within the backend, or `~/...` where the backend can read the home folder. References inside
inline code and fenced code blocks are text, never imports. A reference counts when it looks
like a path (it has a `/`, starts with `~` or `.`, or ends with a file extension), so an
`@alice` mention stays prose; of those, a reference that is missing is reported only when it
clearly names a file (a `/` or a document extension), so `@pytest.fixture` in prose is not
"a missing import".

Written by hand because no Markdown library gives code-span and fence positions cheaply and
for any input size; the scanner below reads each character once.

Nested memory files: which directories' `AGENTS.md` (or fallback names) apply to the paths
the agent touched, without listing the tree.

For a touched path `/a/b/c.py` the directories are `/`, `/a` and `/a/b`: every directory from
the backend root down to the path's own folder, shallow to deep, so a deeper file comes later
in the prompt and wins a conflict. Each directory is looked up once per load, every candidate
name in one batched download with the rest of memory; the first name that exists is that
directory's file (Codex's fallback filenames).

What one load reads beyond the configured files: nested memory files for the directories the
agent works in, and the files memory imports with `@path`.

The plan is one generator shared by the sync and async loaders: it yields the paths of one
batched download and receives its result, so a cold load is one download for the configured
files, the rule files and every nested candidate, then one per import depth (at most
`MAX_IMPORT_DEPTH`), and no per-file round trips.

Rules of the plan:

- Nested files: for every directory from the backend root down to each touched path's
  folder, the first of the configured names that exists (Codex's fallback filenames); a file
  that is also a configured layer file is left to its layer.
- Imports: read from every layer, nested and imported file, outside code. A file is loaded at
  most once per load (a cycle ends silently); an import that names no file is reported once
  when it clearly names a file. An imported file has the access of what imported it; when a
  read-only and a writable file import the same file, it is read-only.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import posixpath
import re
import stat
import threading
import time
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from layered_memory._logs import get_logger
from layered_memory.core.internals import final_route, is_backend_class
from layered_memory.core.layers import normalize_backend_path
from layered_memory.errors import MemorySourceError

if TYPE_CHECKING:
    from deepagents.backends.filesystem import FilesystemBackend
    from deepagents.backends.protocol import FileDownloadResponse

# -- the read cache of local disk ------------------------------------------------------------------

# Skip re-reading memory files on local disk that have not changed since the last read.
#
# The middleware reloads memory at every invocation so that edits made on disk are seen. On a
# `FilesystemBackend` most invocations find nothing changed, so instead of downloading every file
# again, each file's stat signature (mtime, ctime, size, inode, device) is compared with the one
# seen when it was last read; only changed or unknown files go to the backend.
#
# A timestamp is only as fine as the filesystem's clock tick, so a file written twice within one
# tick, with the same size, keeps its signature. As git does with its "racily clean" entries, a
# file whose mtime is within `RACY_WINDOW_NS` of the moment we read it is not trusted: it is read
# again next time. Only regular files are cached (a symlink always goes to the backend, which
# applies its own root checks), and every read of a changed file still goes through the backend.
#
# `non_regular_files` finds FIFOs, sockets and devices before anything opens them: opening a FIFO
# for reading waits for a writer, forever if none comes, and a device may never end.

RACY_WINDOW_NS = 2_000_000_000
"""Files modified this close to our read are re-read next time (coarse filesystem clocks)."""

_MISSING = "missing"

Signature = tuple[int, int, int, int, int]

_MAX_REMEMBERED_PATHS = 16_384

_FILE_TYPE_BITS = 0o170000
"""`stat.S_IFMT`'s mask, applied inline where a call per file shows in the benchmarks."""


@dataclass(frozen=True, slots=True)
class _Entry:
    signature: Signature | str | None
    text: str | None


class DiskReadCache:
    """Remembers texts read from one `FilesystemBackend`, keyed by backend path."""

    def __init__(self, backend: FilesystemBackend) -> None:
        self._root = str(backend.cwd)
        self._virtual = backend.virtual_mode
        self._entries: dict[str, _Entry] = {}
        self._disk_paths: dict[str, str] = {}
        self._lock = threading.Lock()

    def reusable(
        self, plan: Mapping[str, str]
    ) -> tuple[dict[str, str], set[str], dict[str, Signature | str | None]]:
        """What need not be downloaded again, and the signatures of what must be.

        Returns:
            `(texts, missing, to_read)`: still-valid texts and still-missing paths (by
            requested path), and for every other requested path its signature taken now,
            BEFORE the download, so a change racing with the download is seen next time.
        """
        texts: dict[str, str] = {}
        missing: set[str] = set()
        to_read: dict[str, Signature | str | None] = {}
        # Read without the lock: `remember` replaces whole immutable entries, and one dict
        # lookup is atomic, so each entry read is one that was stored.
        entries = self._entries
        disk_paths = self._disk_paths
        for path, backend_path in plan.items():
            # This loop runs for every memory and rule file at every load: no call per file
            # but the one system call (the disk path is remembered, the stat inlined).
            try:
                entry: _Entry | None = entries[backend_path]
            except KeyError:
                entry = None
            if backend_path in disk_paths:
                real = disk_paths[backend_path]
            else:
                if len(disk_paths) >= _MAX_REMEMBERED_PATHS:  # nested lookups grow it
                    disk_paths.clear()
                real = disk_paths[backend_path] = self._real(backend_path)
            try:
                info = os.lstat(real)
            except FileNotFoundError:
                signature: Signature | str | None = _MISSING
            except (OSError, ValueError):
                signature = None
            else:
                signature = (
                    (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)
                    if info.st_mode & _FILE_TYPE_BITS == stat.S_IFREG
                    else None
                )
            if entry is None or signature is None or entry.signature != signature:
                to_read[path] = signature
            elif entry.text is None:
                missing.add(path)
            else:
                texts[path] = entry.text
        return texts, missing, to_read

    def remember(
        self,
        plan: Mapping[str, str],
        signatures: Mapping[str, Signature | str | None],
        texts: Mapping[str, str],
        missing: set[str] | frozenset[str],
        read_started_ns: int,
    ) -> None:
        """Record what a download returned, under the signatures taken before it."""
        updates: dict[str, _Entry | None] = {}
        for path, signature in signatures.items():
            backend_path = plan[path]
            known = path in texts or path in missing
            trusted = signature == _MISSING or (
                isinstance(signature, tuple) and read_started_ns - signature[0] > RACY_WINDOW_NS
            )
            updates[backend_path] = (
                _Entry(signature, texts.get(path)) if known and trusted else None
            )
        with self._lock:
            for backend_path, entry in updates.items():
                if entry is None:
                    self._entries.pop(backend_path, None)
                else:
                    self._entries[backend_path] = entry

    def _real(self, backend_path: str) -> str:
        return disk_path(self._root, backend_path, virtual=self._virtual)


def disk_path(root: str, backend_path: str, *, virtual: bool) -> str:
    """Where a backend path lives on disk (plain strings: this runs for every file, every time)."""
    if virtual or not os.path.isabs(backend_path):
        return os.path.join(root, backend_path.lstrip("/"))
    return backend_path


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_file_kind(path: str) -> str | None:
    """What `path` on disk is when it is a FIFO, a socket or a device (symlinks followed).

    None for a regular file, a folder, a missing or unreachable path: the backend reports
    those itself, and none of them blocks a read.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _SPECIAL_KINDS:
        if test(mode):
            return kind
    return None


def non_regular_files(backend: Any, paths: Iterable[str]) -> dict[str, str]:
    """The backend paths that name a FIFO, socket or device on local disk, with what each is.

    Looks through a `FilesystemBackend`, directly or behind a `CompositeBackend` route; other
    backends hold no such files and cost nothing here.
    """
    found: dict[str, str] = {}
    for path, on_disk in _local_disk_paths(backend, paths):
        kind = special_file_kind(on_disk)
        if kind is not None:
            found[path] = kind
    return found


def oversized_files(backend: Any, paths: Iterable[str], limit: int) -> dict[str, int]:
    """The backend paths that name a local file of more than `limit` bytes, with its size.

    Checked before a download, so a 2 GB file in a rule folder costs one `stat`, not a read
    of 2 GB into memory at every load (same routes as `non_regular_files`).
    """
    found: dict[str, int] = {}
    for path, on_disk in _local_disk_paths(backend, paths):
        try:
            size = os.stat(on_disk).st_size
        except (OSError, ValueError):
            continue  # missing or unreachable: the backend says so itself
        if size > limit:
            found[path] = size
    return found


def _local_disk_paths(backend: Any, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(backend path, disk path) of the paths a `FilesystemBackend` serves, directly or behind a
    `CompositeBackend` route; other backends hold nothing on local disk."""
    if not (
        is_backend_class(backend, "FilesystemBackend")
        or is_backend_class(backend, "CompositeBackend")
    ):
        return
    for path in paths:
        target, key = final_route(backend, path)
        if is_backend_class(target, "FilesystemBackend"):
            yield path, disk_path(str(target.cwd), key, virtual=target.virtual_mode)


_clock: Callable[[], int] = time.time_ns
"""Where `now_ns` reads the time: tests move it ahead instead of backdating files."""


def now_ns() -> int:
    """Wall-clock time in the unit of `st_mtime_ns` (the read starts before the stat)."""
    return _clock()


def _signature(path: str) -> Signature | str | None:
    """A regular file's stat signature, `"missing"`, or None (anything else: not cacheable)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return _MISSING
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


DirSignatures = dict[str, Signature | str]


class ListingCache:
    """Remembers the rule-folder listing of one `FilesystemBackend` while no folder changed.

    Adding, removing or renaming a file changes the mtime of the directory holding it, so the
    listing stands as long as every directory under the rule folders keeps its signature.
    The signatures are taken before the listing, and a directory changed within the racy window
    is not trusted. A folder holding a symlink to a directory is never cached (its target's
    changes would not show in our signatures).
    """

    def __init__(self, backend: FilesystemBackend, folders: Sequence[str]) -> None:
        self._tops = tuple(
            disk_path(str(backend.cwd), folder, virtual=backend.virtual_mode) for folder in folders
        )
        self._lock = threading.Lock()
        self._entry: tuple[DirSignatures, Any] | None = None

    def signatures(self) -> DirSignatures | None:
        """Every directory under the rule folders, with its signature (None: uncacheable).

        While a listing is remembered, its directories are stat'ed again instead of walked: a
        directory created, removed or swapped for a link below one of them changes that
        one's signature, so equal signatures mean the same set of directories (one system
        call per directory instead of one per entry).
        """
        with self._lock:
            entry = self._entry
        if entry is not None:
            known = entry[0]
            again = {path: _dir_signature_or_missing(path, old) for path, old in known.items()}
            if again == known:
                return known
        return self._walk()

    def _walk(self) -> DirSignatures | None:
        found: DirSignatures = {}
        for top in self._tops:
            if not os.path.lexists(top):
                found[top] = _MISSING
                continue
            for dirpath, dirnames, _ in os.walk(top, followlinks=False):
                if any(os.path.islink(os.path.join(dirpath, name)) for name in dirnames):
                    return None
                signature = _dir_signature(dirpath)
                if signature is None:
                    return None
                found[dirpath] = signature
        return found

    def get(self, current: DirSignatures | None) -> Any | None:
        """The remembered listing, if `current` signatures match the ones it was taken under."""
        with self._lock:
            entry = self._entry
        if current is None or entry is None or entry[0] != current:
            return None
        return entry[1]

    def put(self, taken: DirSignatures | None, listing: Any, read_started_ns: int) -> None:
        """Remember `listing`, listed after `taken` was measured, if those can be trusted."""
        trusted = taken is not None and all(
            signature == _MISSING
            or (isinstance(signature, tuple) and read_started_ns - signature[0] > RACY_WINDOW_NS)
            for signature in taken.values()
        )
        with self._lock:
            self._entry = (taken, listing) if trusted and taken is not None else None


def _dir_signature_or_missing(path: str, before: Signature | str) -> Signature | str | None:
    if before == _MISSING:
        return _MISSING if not os.path.lexists(path) else None
    return _dir_signature(path)


def _dir_signature(path: str) -> Signature | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


_registry_lock = threading.Lock()
_read_caches: dict[tuple[str, bool], DiskReadCache] = {}
_listing_caches: dict[tuple[str, bool, tuple[str, ...]], ListingCache] = {}


def read_cache_for(backend: FilesystemBackend) -> DiskReadCache:
    """The process-wide read cache of one folder on disk (shared by every agent using it).

    Servers often build an agent per request; keyed by the disk folder, not the backend
    object, a new agent finds the files its predecessors already read.
    """
    key = (str(backend.cwd), backend.virtual_mode)
    with _registry_lock:
        cache = _read_caches.get(key)
        if cache is None:
            cache = _read_caches[key] = DiskReadCache(backend)
        return cache


def listing_cache_for(backend: FilesystemBackend, folders: Sequence[str]) -> ListingCache:
    """The process-wide listing cache of some rule folders on disk."""
    key = (str(backend.cwd), backend.virtual_mode, tuple(folders))
    with _registry_lock:
        cache = _listing_caches.get(key)
        if cache is None:
            cache = _listing_caches[key] = ListingCache(backend, folders)
        return cache


def clear_shared_caches() -> None:
    """Forget every process-wide disk cache (benchmarks measuring a cold start use it)."""
    with _registry_lock:
        _read_caches.clear()
        _listing_caches.clear()


# -- downloads and decoding -----------------------------------------------------------------------

logger = get_logger(__name__)

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Larger memory files are skipped: nothing that big belongs in a prompt."""

_DOWNLOAD_ERROR_REASONS = {
    "is_directory": "is a directory",
    "permission_denied": "permission denied",
    "invalid_path": "invalid path (outside the backend root, a symlink loop, or not a file)",
}


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A file that was not used, and why (the text never appears here).

    Attributes:
        path: The path as configured.
        reason: Why it was not used, in words fit for a log line.
        unreadable: The file may exist but could not be read or decoded (a directory, binary,
            not UTF-8, permission denied, a backend error). Its content is unknown, so it must
            never be overwritten by a whole-file write. False for a path refused before I/O.
    """

    path: str
    reason: str
    unreadable: bool = False
    used: bool = False
    """The file itself was used; the problem is in what it asks for (an import that names no
    file, imports past the limits): logged without "skipped"."""


@dataclass(frozen=True, slots=True)
class DownloadResult:
    """What one batched download gave: decoded texts by requested path, and the problems.

    Attributes:
        texts: Requested path -> decoded text, for every file that loaded.
        missing: Requested paths that do not exist (not a problem: an optional layer).
        problems: Files that exist but could not be used.
    """

    texts: Mapping[str, str]
    missing: frozenset[str] = field(default_factory=frozenset)
    problems: tuple[SourceProblem, ...] = ()


def strip_html_comments(text: str) -> str:
    """Text without `<!-- ... -->` comments (authoring notes are not shown to the model).

    Gives what `re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)` gives (deepagents' own
    stripper), in time linear in the text: that regex rescans to the end from every unclosed
    `<!--`, so 64 KB of them took seconds. An unclosed `<!--` and everything after it are kept.
    A comment inside a fenced code block is code (a Vue `<template>` example) and stays, and
    no comment spans a fence: each stretch between fences is stripped on its own.
    """
    if text.find("<!--") < 0:
        return text
    if "```" not in text and "~~~" not in text:
        return _strip_comments(text)
    kept: list[str] = []
    position = 0
    for start, end in _fenced_blocks(text):
        kept.append(_strip_comments(text[position:start]))
        kept.append(text[start:end])
        position = end
    kept.append(_strip_comments(text[position:]))
    return "".join(kept)


def _strip_comments(text: str) -> str:
    start = text.find("<!--")
    if start < 0:
        return text
    kept: list[str] = []
    position = 0
    while start >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break  # no comment closes after this point: the rest is kept as it is
        kept.append(text[position:start])
        position = end + 3
        start = text.find("<!--", position)
    kept.append(text[position:])
    return "".join(kept)


_FENCE_LINE = re.compile(r" {0,3}(?P<fence>`{3,}+|~{3,}+)")


def _fenced_blocks(text: str) -> Iterator[tuple[int, int]]:
    """The spans of CommonMark fenced code blocks (an opening fence of three or more backticks
    or tildes, up to the closing fence of the same character at least as long, or the end),
    read line by line once."""
    opened: str | None = None
    block_start = 0
    position = 0
    size = len(text)
    while position < size:
        line_end = text.find("\n", position)
        line_end = size if line_end < 0 else line_end + 1
        fence = _FENCE_LINE.match(text, position, line_end)
        if fence is not None:
            mark = fence["fence"]
            if opened is None:
                if not (mark[0] == "`" and "`" in text[fence.end() : line_end]):
                    opened, block_start = mark, position
            elif (
                mark[0] == opened[0]
                and len(mark) >= len(opened)
                and not text[fence.end() : line_end].strip()
            ):
                yield block_start, line_end
                opened = None
        position = line_end
    if opened is not None:
        yield block_start, size


def digest_texts(*parts: Mapping[str, str] | str | None) -> str:
    """A short stable digest of mappings and strings, used to tell "changed" from "same".

    The parts are hashed as one JSON document: unambiguous (a plain concatenation hashed
    `{"/a": "x\\x02/b\\x03y"}` and `{"/a": "x", "/b": "y"}` alike, and a stale render was
    served) and written by the C encoder, not a Python call per file (this runs for every
    file at every change).
    """
    document = json.dumps(
        [part if part is None or isinstance(part, str) else sorted(part.items()) for part in parts],
        ensure_ascii=False,
    )
    return hashlib.blake2b(document.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _too_large(size: int) -> str:
    return f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB ({size} bytes)"


def decode_content(content: bytes) -> tuple[str | None, str | None]:
    """UTF-8 text of a file, or the reason it is not usable as memory text."""
    if len(content) > MAX_FILE_BYTES:
        return None, _too_large(len(content))
    if b"\x00" in content:
        return None, "binary file (contains NUL bytes)"
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start})"
    # A BOM is an editor artefact, not memory.
    return text.removeprefix("\ufeff"), None


def plan_paths(paths: Iterable[str], backend: Any) -> tuple[dict[str, str], list[SourceProblem]]:
    """Backend path for each requested path, and the paths refused before any I/O.

    Returns:
        `(plan, problems)` where `plan` maps requested path -> path to download (in order).
    """
    if is_backend_class(backend, "FilesystemBackend") and not backend.virtual_mode:
        return _plan_paths(paths, backend)  # real paths: symlinks are resolved on disk
    # Every load asks for the same few hundred paths; for virtual paths the answer depends on
    # the strings alone (and, in a refusal, the root's name), so it is worked out once.
    requested = tuple(paths)
    key = (requested, str(backend.cwd) if is_backend_class(backend, "FilesystemBackend") else "")
    remembered = _lexical_plans.get(key)
    if remembered is None:
        plan, problems = _plan_paths(requested, backend)
        if any(path.startswith("~") for path in requested):
            return plan, problems  # `~` depends on the home folder of the moment
        if len(_lexical_plans) >= _MAX_LEXICAL_PLANS:
            _lexical_plans.clear()
        remembered = _lexical_plans[key] = (plan, tuple(problems))
    return dict(remembered[0]), list(remembered[1])


_MAX_LEXICAL_PLANS = 256
_LexicalPlan = tuple[dict[str, str], tuple[SourceProblem, ...]]
_lexical_plans: dict[tuple[tuple[str, ...], str], _LexicalPlan] = {}


def _plan_paths(paths: Iterable[str], backend: Any) -> tuple[dict[str, str], list[SourceProblem]]:
    plan: dict[str, str] = {}
    problems: list[SourceProblem] = []
    for path in paths:
        if path in plan:
            continue
        normalized, reason = normalize_backend_path(path, backend, resolve_links=False)
        if normalized is None:
            problems.append(SourceProblem(path, reason or "invalid path"))
        else:
            plan[path] = normalized
    return plan, problems


def interpret_responses(
    plan: Mapping[str, str], responses: Sequence[Any], problems: Iterable[SourceProblem] = ()
) -> DownloadResult:
    """Decode a batched download's responses (pure: shared by the sync and async loaders)."""
    texts: dict[str, str] = {}
    missing: set[str] = set()
    found_problems = list(problems)
    if len(responses) != len(plan):
        reason = f"backend answered {len(responses)} files for {len(plan)} requested"
        found_problems.extend(SourceProblem(path, reason, unreadable=True) for path in plan)
        return DownloadResult(texts, frozenset(), tuple(found_problems))
    for requested, response in zip(plan, responses, strict=True):
        error = getattr(response, "error", None)
        content = getattr(response, "content", None)
        if error == "file_not_found":
            missing.add(requested)
            continue
        if error is not None:
            reason = _DOWNLOAD_ERROR_REASONS.get(str(error), f"backend error: {error}")
            found_problems.append(SourceProblem(requested, reason, unreadable=True))
            continue
        if content is None:
            missing.add(requested)
            continue
        text, decode_problem = decode_content(content)
        if text is None:
            found_problems.append(
                SourceProblem(requested, decode_problem or "unreadable", unreadable=True)
            )
        else:
            texts[requested] = text
    return DownloadResult(texts, frozenset(missing), tuple(found_problems))


def download_texts(
    backend: Any, paths: Iterable[str], *, cache: DiskReadCache | None = None
) -> DownloadResult:
    """Download and decode `paths` in one backend call (errors become problems).

    With a `cache`, files unchanged on disk since their last read are not downloaded again.
    """
    plan, refused, reused, fetch, signatures = _prepare(backend, paths, cache)
    if not fetch:
        return _merge(plan, reused, DownloadResult({}), refused)
    started = now_ns()
    try:
        responses = backend.download_files(list(fetch.values()))
    except Exception as exc:  # any backend failure must not abort the run
        return _merge(plan, reused, _backend_failure(fetch, exc), refused)
    fetched = interpret_responses(fetch, responses)
    if cache is not None:
        cache.remember(fetch, signatures, fetched.texts, fetched.missing, started)
    return _merge(plan, reused, fetched, refused)


async def adownload_texts(
    backend: Any, paths: Iterable[str], *, cache: DiskReadCache | None = None
) -> DownloadResult:
    """Async twin of `download_texts`."""
    # The checks before the download stat local files (path resolution, the cache's
    # signatures, special files): in a worker thread, as the backend's own download is.
    prepared = await asyncio.to_thread(_prepare, backend, list(paths), cache)
    plan, refused, reused, fetch, signatures = prepared
    if not fetch:
        return _merge(plan, reused, DownloadResult({}), refused)
    started = now_ns()
    try:
        responses = await backend.adownload_files(list(fetch.values()))
    except Exception as exc:  # any backend failure must not abort the run
        return _merge(plan, reused, _backend_failure(fetch, exc), refused)
    fetched = interpret_responses(fetch, responses)
    if cache is not None:
        cache.remember(fetch, signatures, fetched.texts, fetched.missing, started)
    return _merge(plan, reused, fetched, refused)


def _prepare(
    backend: Any, paths: Iterable[str], cache: DiskReadCache | None
) -> tuple[dict[str, str], list[SourceProblem], DownloadResult, dict[str, str], dict[str, Any]]:
    """Everything before the download, shared by both twins: the planned paths, the refused
    ones, what the cache still holds, what to download and its pre-read signatures."""
    plan, refused = plan_paths(paths, backend)
    reused, fetch, signatures = _split(plan, cache)
    if fetch:
        refused.extend(_refuse_special(backend, fetch, signatures))
    return plan, refused, reused, fetch, signatures


def _refuse_special(
    backend: Any, fetch: dict[str, str], signatures: dict[str, Any]
) -> list[SourceProblem]:
    """Take the FIFOs, sockets, devices and files too large to use out of `fetch` and
    `signatures`, as problems (none of them is opened)."""
    special = non_regular_files(backend, fetch.values())
    problems = []
    for requested, backend_path in list(fetch.items()):
        kind = special.get(backend_path)
        if kind is not None:
            del fetch[requested]
            signatures.pop(requested, None)
            reason = f"not a regular file ({kind}): never opened, reading it could block the run"
            problems.append(SourceProblem(requested, reason, unreadable=True))
    oversized = oversized_files(backend, fetch.values(), MAX_FILE_BYTES)
    for requested, backend_path in list(fetch.items()):
        size = oversized.get(backend_path)
        if size is not None:
            del fetch[requested]
            signatures.pop(requested, None)
            problems.append(SourceProblem(requested, _too_large(size), unreadable=True))
    return problems


def _special_answers(backend: Any, paths: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    special = non_regular_files(backend, paths)
    return special, [path for path in paths if path not in special]


def _answers(
    paths: Sequence[str], special: Mapping[str, str], responses: Sequence[Any]
) -> list[FileDownloadResponse]:
    """`responses` (for the paths not in `special`) with a refusal for each special one."""
    from deepagents.backends.protocol import FileDownloadResponse  # loaded: `special` is a disk's

    answers = iter(responses)
    return [
        FileDownloadResponse(
            path=path, content=None, error=cast(Any, f"not a regular file ({special[path]})")
        )
        if path in special
        else next(answers)
        for path in paths
    ]


def download_files_safely(
    backend: Any,
    paths: Sequence[str],
    *,
    download: Callable[[list[str]], Sequence[Any]] | None = None,
) -> list[FileDownloadResponse]:
    """`backend.download_files(paths)`, except that FIFOs, sockets and devices are not opened.

    Each of those gets an answer whose `error` says what it is ("not a regular file (a
    FIFO)"); every other path is downloaded in one batched call, answers in `paths` order.

    Args:
        backend: Where the paths are looked up (routes, disk folders).
        paths: Backend paths.
        download: What downloads the regular ones (default: `backend.download_files`).
    """
    fetch = download or backend.download_files
    special, rest = _special_answers(backend, paths)
    if not special:
        return cast("list[FileDownloadResponse]", fetch(list(paths)))
    return _answers(paths, special, fetch(rest) if rest else [])


async def adownload_files_safely(backend: Any, paths: Sequence[str]) -> list[FileDownloadResponse]:
    """Async twin of `download_files_safely`."""
    special, rest = _special_answers(backend, paths)
    if not special:
        return cast("list[FileDownloadResponse]", await backend.adownload_files(list(paths)))
    return _answers(paths, special, await backend.adownload_files(rest) if rest else [])


def _split(
    plan: Mapping[str, str], cache: DiskReadCache | None
) -> tuple[DownloadResult, dict[str, str], dict[str, Any]]:
    """What the cache still holds, what must be downloaded, and its pre-read signatures."""
    if cache is None:
        return DownloadResult({}), dict(plan), {}
    texts, missing, signatures = cache.reusable(plan)
    fetch = {path: plan[path] for path in plan if path in signatures}
    return DownloadResult(texts, frozenset(missing)), fetch, signatures


def _merge(
    plan: Mapping[str, str],
    reused: DownloadResult,
    fetched: DownloadResult,
    refused: Iterable[SourceProblem],
) -> DownloadResult:
    """One result in the requested order, whatever came from the cache or the backend."""
    texts = {**reused.texts, **fetched.texts}
    ordered = {path: texts[path] for path in plan if path in texts}
    return DownloadResult(ordered, reused.missing | fetched.missing, (*refused, *fetched.problems))


def report_problems(
    problems: Iterable[SourceProblem], *, strict: bool, already_logged: set[tuple[str, str]]
) -> None:
    """Log each problem once per process (or raise the first one in strict mode)."""
    for problem in problems:
        if strict:
            raise MemorySourceError(problem.path, problem.reason)
        key = (problem.path, problem.reason)
        level = logging.DEBUG if key in already_logged else logging.WARNING
        already_logged.add(key)
        verb = "" if problem.used else " skipped"
        logger.log(level, "memory source %s%s: %s", problem.path, verb, problem.reason)


def _backend_failure(plan: Mapping[str, str], exc: Exception) -> DownloadResult:
    reason = f"backend error: {type(exc).__name__}: {exc}"
    return DownloadResult(
        {}, frozenset(), tuple(SourceProblem(path, reason, unreadable=True) for path in plan)
    )


# -- folder layers --------------------------------------------------------------------------------

MAX_FOLDER_FILES = 1000
"""Memory files one folder layer may hold; past it the rest (in name order) are left out and
one problem says so (a bound on the batched download, not on what fits the budget)."""

FolderListing = tuple[dict[str, list[str]], list[SourceProblem]]
"""Folder layer path -> its memory files (spelled from the folder as configured, name order),
and the problems of folders that could not be listed."""


def _folder_files(folder: str, result: Any, problems: list[SourceProblem]) -> list[str]:
    """The `*.md` files directly in `folder` from one `ls` answer (deepagents' `LsResult`)."""
    error = getattr(result, "error", None)
    if error:
        # A folder not made yet is an empty memory directory (the memory tool makes it).
        if "path_not_found" not in str(error):
            problems.append(SourceProblem(folder, f"cannot list the folder: {error}"))
        return []
    names = sorted(
        {
            posixpath.basename(str(entry.get("path", "")).rstrip("/"))
            for entry in getattr(result, "entries", None) or ()
            if isinstance(entry, Mapping) and not entry.get("is_dir")
        }
    )
    files = [folder + name for name in names if name.endswith(".md") and len(name) > len(".md")]
    if len(files) > MAX_FOLDER_FILES:
        problems.append(
            SourceProblem(
                folder,
                f"holds {len(files)} memory files; only the first {MAX_FOLDER_FILES} in name "
                "order are read",
            )
        )
        del files[MAX_FOLDER_FILES:]
    return files


def _listed_folders(
    backend: Any, folders: Sequence[str]
) -> tuple[dict[str, str], list[SourceProblem]]:
    """Each folder's path to hand to the backend (refused ones become problems)."""
    targets: dict[str, str] = {}
    problems: list[SourceProblem] = []
    for folder in folders:
        normalized, reason = normalize_backend_path(folder, backend)
        if normalized is None:
            problems.append(SourceProblem(folder, reason or "invalid path"))
        else:
            targets[folder] = normalized
    return targets, problems


def list_folder_layers(backend: Any, folders: Sequence[str]) -> FolderListing:
    """The memory files of each folder layer: one `ls` per folder, nothing downloaded (the
    files join the load's one batched download)."""
    targets, problems = _listed_folders(backend, folders)
    listing: dict[str, list[str]] = {}
    for folder, target in targets.items():
        try:
            result = backend.ls(target)
        except Exception as exc:  # any backend failure must not abort the run
            problems.append(SourceProblem(folder, f"backend error: {type(exc).__name__}: {exc}"))
            continue
        listing[folder] = _folder_files(folder, result, problems)
    return listing, problems


async def alist_folder_layers(backend: Any, folders: Sequence[str]) -> FolderListing:
    """Async twin of `list_folder_layers`."""
    targets, problems = _listed_folders(backend, folders)
    listing: dict[str, list[str]] = {}
    for folder, target in targets.items():
        try:
            result = await backend.als(target)
        except Exception as exc:  # any backend failure must not abort the run
            problems.append(SourceProblem(folder, f"backend error: {type(exc).__name__}: {exc}"))
            continue
        listing[folder] = _folder_files(folder, result, problems)
    return listing, problems


# -- @path imports --------------------------------------------------------------------------------

MAX_IMPORT_DEPTH = 5
"""Hops from a configured memory file (Claude Code's limit)."""

MAX_IMPORTS_PER_FILE = 64
"""References read from one file; the rest are ignored (a bound for hostile files)."""

TOO_DEEP_REASON = (
    f"its imports are {MAX_IMPORT_DEPTH} hops from a configured memory file, the limit: they "
    "are not read"
)
"""The load problem of a file whose imports were not followed (`MemoryExtras.too_deep`)."""

MAX_IMPORTED_FILES = 512
"""Files one load may request through imports, all depths together: 64 files importing 64
each would otherwise read thousands of files at every load (the rest are not followed, and
one problem says so)."""

MAX_REFERENCE_CHARS = 512

DOCUMENT_EXTENSIONS = frozenset(
    {"md", "mdc", "markdown", "txt", "rst", "json", "jsonl", "yaml", "yml", "toml"}
)
"""Extensions that make a missing reference worth a warning."""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TOKEN_END = frozenset(" \t\r\n()[]{}<>,;\"'`|")
_TRAILING = ".,:;!?"
_EXTENSION = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,9})$")


@dataclass(frozen=True, slots=True)
class ImportReference:
    """One `@path` in a memory file.

    Attributes:
        raw: The reference as written, without the `@`.
        line: Its 1-based line number (for messages).
        names_a_file: Whether a missing target is worth reporting (see the module docstring).
    """

    raw: str
    line: int
    names_a_file: bool


def find_imports(text: str) -> list[ImportReference]:
    """The `@path` references of `text`, in order, outside code (at most
    `MAX_IMPORTS_PER_FILE`)."""
    found: list[ImportReference] = []
    if "@" not in text:
        return found
    fence: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        if "@" in line:
            for raw in _references_in_line(line):
                found.append(ImportReference(raw, number, _names_a_file(raw)))
                if len(found) >= MAX_IMPORTS_PER_FILE:
                    return found
    return found


def _references_in_line(line: str) -> list[str]:
    """`@` tokens outside inline code spans, each starting the line or after whitespace."""
    references: list[str] = []
    index = 0
    length = len(line)
    while index < length:
        char = line[index]
        if char == "`":
            run_end = index
            while run_end < length and line[run_end] == "`":
                run_end += 1
            closing = line.find(line[index:run_end], run_end)
            # An unclosed run is literal backticks; a closed one is a code span to skip.
            index = run_end if closing == -1 else closing + (run_end - index)
            continue
        if char == "@" and (index == 0 or line[index - 1].isspace()):
            end = index + 1
            while (
                end < length and line[end] not in _TOKEN_END and end - index <= MAX_REFERENCE_CHARS
            ):
                end += 1
            token = line[index + 1 : end].rstrip(_TRAILING)
            if _looks_like_a_path(token):
                references.append(token)
            index = end
            continue
        index += 1
    return references


def _looks_like_a_path(token: str) -> bool:
    if not token or len(token) > MAX_REFERENCE_CHARS or token.startswith("@"):
        return False
    if "/" in token or token.startswith(("~", ".")):
        return True
    return _EXTENSION.search(token) is not None


def _names_a_file(token: str) -> bool:
    if "/" in token or token.startswith("~"):
        return True
    match = _EXTENSION.search(token)
    return match is not None and match.group(1).lower() in DOCUMENT_EXTENSIONS


def resolve_reference(raw: str, importer: str) -> str:
    """The path an import points at: `~` kept for the backend to expand, `/...` as is, and a
    relative reference joined to the importing file's folder (lexically)."""
    if raw.startswith(("~", "/")):
        return raw
    folder = posixpath.dirname(importer)
    return posixpath.normpath(posixpath.join(folder, raw)) if folder else posixpath.normpath(raw)


def import_cycles(edges: Mapping[str, Sequence[str]]) -> list[tuple[str, ...]]:
    """The import cycles of an import graph, each once, as the files in order from its
    smallest path (`("/a.md", "/b.md")` for `a -> b -> a`).

    A load reads each file once, so a cycle costs nothing at run time; `layered-memory lint`
    reports it because it usually is a mistake. Iterative (a hostile graph cannot exhaust the
    stack) and linear in the number of edges: each file is left once.
    """
    cycles: set[tuple[str, ...]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path: list[str] = [start]
        position = {start: 0}
        state[start] = 1
        stack = [iter(edges.get(start, ()))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                done = path.pop()
                del position[done]
                state[done] = 2
                continue
            mark = state.get(target)
            if mark == 1:
                loop = path[position[target] :]
                first = loop.index(min(loop))
                cycles.add(tuple(loop[first:] + loop[:first]))
            elif mark is None:
                state[target] = 1
                position[target] = len(path)
                path.append(target)
                stack.append(iter(edges.get(target, ())))
    return sorted(cycles)


# -- nested memory directories --------------------------------------------------------------------

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


# -- the load plan --------------------------------------------------------------------------------

Access = Literal["writable", "read-only"]

Plan = Generator[list[str], DownloadResult, "Discovered"]
"""Yields the paths of one batched download; is sent its result; returns what it found."""


@dataclass(frozen=True, slots=True)
class MemoryExtras:
    """Nested and imported memory of one load (empty without `nested=` and imports): the one
    shape from the load plan through the snapshot and the graph state to the renderer.

    Attributes:
        nested: Nested file path -> text, shallow to deep.
        imports: Imported file path -> text.
        edges: Importing file -> the paths it imports, in order (found or not).
        access: Nested or imported file -> its access (inherited from what imports it).
        missing: Importing file -> `@` references that named no file (worth reporting).
        nested_dirs: The directories nested memory was looked up in (a touched path outside
            them means a reload).
        too_deep: Files `MAX_IMPORT_DEPTH` hops from a configured file whose own imports were
            not followed.
    """

    nested: Mapping[str, str] = field(default_factory=dict)
    imports: Mapping[str, str] = field(default_factory=dict)
    edges: Mapping[str, Sequence[str]] = field(default_factory=dict)
    access: Mapping[str, Access] = field(default_factory=dict)
    missing: Mapping[str, Sequence[str]] = field(default_factory=dict)
    nested_dirs: Sequence[str] = ()
    too_deep: Sequence[str] = ()

    def __bool__(self) -> bool:
        return bool(self.nested or self.imports or self.missing or self.nested_dirs)

    @property
    def cycles(self) -> list[tuple[str, ...]]:
        """Import cycles among the loaded files (harmless at run time; `lint` reports them)."""
        return import_cycles(self.edges)

    def without(self, paths: Collection[str]) -> MemoryExtras:
        """The same, with the texts and access of `paths` left out (edges and references
        stay: what a file imports is still what it imports)."""
        if not paths:
            return self
        return replace(
            self,
            nested={p: t for p, t in self.nested.items() if p not in paths},
            imports={p: t for p, t in self.imports.items() if p not in paths},
            access={p: a for p, a in self.access.items() if p not in paths},
        )

    def to_state(self) -> dict[str, Any]:
        """Plain data for the checkpointed state (JSON-able; `from_state` reads it back)."""
        return {
            "nested": dict(self.nested),
            "imports": dict(self.imports),
            "edges": {path: list(targets) for path, targets in self.edges.items()},
            "access": dict(self.access),
            "missing": {path: list(refs) for path, refs in self.missing.items()},
            "nested_dirs": list(self.nested_dirs),
            "too_deep": list(self.too_deep),
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any] | None) -> MemoryExtras:
        """What `to_state` wrote, read in place: no copy and no conversion, because every
        model call reads it (the state's lists serve as the sequences)."""
        if not data:
            return _NO_EXTRAS
        return cls(
            nested=data.get("nested") or {},
            imports=data.get("imports") or {},
            edges=data.get("edges") or {},
            access=data.get("access") or {},
            missing=data.get("missing") or {},
            nested_dirs=data.get("nested_dirs") or (),
            too_deep=data.get("too_deep") or (),
        )

    def digest_parts(self) -> tuple[Mapping[str, str], ...]:
        """The parts that shape the block, for the snapshot's digest."""
        return (
            self.nested,
            self.imports,
            {path: "\n".join(targets) for path, targets in self.edges.items()},
            dict(self.access),
            {path: "\n".join(refs) for path, refs in self.missing.items()},
            {"nested directories": "\n".join(self.nested_dirs)},
        )


_NO_EXTRAS = MemoryExtras()


@dataclass(frozen=True, slots=True)
class Discovered:
    """Everything a load found beyond the configured files.

    Attributes:
        first: The first batched download (configured files, rule files, nested candidates).
        extras: The nested and imported files found.
        problems: Imported or nested files that exist but could not be used.
    """

    first: DownloadResult
    extras: MemoryExtras = _NO_EXTRAS
    problems: tuple[SourceProblem, ...] = ()


@functools.lru_cache(maxsize=4096)
def _references(text: str) -> tuple[ImportReference, ...]:
    """The imports of a text, parsed once per distinct text (a warm load parses nothing)."""
    return tuple(find_imports(text))


def plan(
    configured: Sequence[str],
    access_of: Mapping[str, Access],
    *,
    touched: Sequence[str] = (),
    nested_names: Sequence[str] = (),
    nested_access: Access = "read-only",
    root: str = "/",
    follow_imports: bool = True,
    import_scope: Callable[[str], str | None] | None = None,
) -> Plan:
    """The load plan (see the module docstring).

    Args:
        configured: Every path of the first download (layer files, then rule files).
        access_of: The access of each layer file (import roots).
        touched: Paths the agent's tools named (nested discovery).
        nested_names: File names of nested memory, in fallback order (empty: none).
        nested_access: The access of nested files.
        root: The backend root in the path space of `touched`.
        follow_imports: Read `@path` imports.
        import_scope: Why an import target may not be read (None: it may); None reads any
            target the backend can (a virtual-path backend confines them itself).
    """
    dirs = directories_of(touched, root)[:MAX_NESTED_DIRECTORIES] if nested_names else []
    taken = set(configured)
    # A folder whose memory file is a configured layer already has its memory.
    wanted = {
        folder: files
        for folder, files in candidates(dirs, nested_names).items()
        if not taken.intersection(files)
    }
    extra = [path for files in wanted.values() for path in files]
    first = yield [*configured, *extra]
    nested: dict[str, str] = {}
    problems: list[SourceProblem] = []
    unusable = {problem.path: problem for problem in first.problems}
    for files in wanted.values():
        for path in files:
            if path in first.texts:
                nested[path] = first.texts[path]
                break
            if path in unusable:  # exists, but cannot be read: say so, try no fallback
                problems.append(unusable[path])
                break
    if not follow_imports:
        extras = MemoryExtras(
            nested, nested_dirs=tuple(dirs), access=dict.fromkeys(nested, nested_access)
        )
        return Discovered(first, extras, tuple(problems))
    roots: dict[str, str] = {p: t for p, t in first.texts.items() if p in access_of}
    roots.update(nested)
    access: dict[str, Access] = {**access_of, **dict.fromkeys(nested, nested_access)}
    found = yield from _follow(
        first,
        nested=nested,
        dirs=tuple(dirs),
        roots=roots,
        access=access,
        problems=problems,
        scope=import_scope,
    )
    return found


def _follow(
    first: DownloadResult,
    *,
    nested: dict[str, str],
    dirs: tuple[str, ...],
    roots: dict[str, str],
    access: dict[str, Access],
    problems: list[SourceProblem],
    scope: Callable[[str], str | None] | None = None,
) -> Plan:
    """Imports, one batched download per depth."""
    seen = set(first.texts) | set(first.missing) | {p.path for p in first.problems}
    imports: dict[str, str] = {}
    edges: dict[str, tuple[str, ...]] = {}
    missing: dict[str, list[str]] = {}
    frontier = roots
    too_deep: tuple[str, ...] = ()
    imported_access: dict[str, Access] = {}
    requested = 0
    for _depth in range(MAX_IMPORT_DEPTH):
        requests: dict[str, list[tuple[str, ImportReference]]] = {}
        for importer, text in frontier.items():
            targets = []
            for reference in _references(text):
                target = resolve_reference(reference.raw, importer)
                if target == importer:
                    continue
                refused = scope(target) if scope is not None else None
                if refused is not None:
                    reason = f"imports @{reference.raw}, which {refused}: not read"
                    problems.append(SourceProblem(importer, reason, used=True))
                    continue
                targets.append(target)
                requests.setdefault(target, []).append((importer, reference))
                mode = access.get(importer, "read-only")
                if imported_access.get(target) != "read-only":
                    imported_access[target] = mode
            if targets:
                edges[importer] = tuple(dict.fromkeys(targets))
        new = [path for path in requests if path not in seen and path not in access]
        room = MAX_IMPORTED_FILES - requested
        if len(new) > room:
            dropped, new = new[room:], new[:room]
            importer = requests[dropped[0]][0][0]
            reason = (
                f"imports {len(dropped)} more files past the limit of {MAX_IMPORTED_FILES} "
                f"imported files per load (e.g. {dropped[0]}); they are not read"
            )
            problems.append(SourceProblem(importer, reason, used=True))
        if not new:
            break
        requested += len(new)
        result = yield new
        seen.update(new)
        frontier = {}
        for path in new:
            if path in result.texts:
                imports[path] = frontier[path] = result.texts[path]
                access[path] = imported_access[path]
            elif path in result.missing or not any(p.path == path for p in result.problems):
                for importer, reference in requests[path]:
                    if reference.names_a_file:
                        missing.setdefault(importer, []).append(reference.raw)
        problems.extend(p for p in result.problems if p.path in requests)
    else:
        too_deep = tuple(
            path
            for path, text in frontier.items()
            if any(
                (target := resolve_reference(reference.raw, path)) not in seen
                and target not in access
                for reference in _references(text)
            )
        )
    shown_access = {path: access[path] for path in nested}
    shown_access.update((path, imported_access[path]) for path in imports)
    extras = MemoryExtras(
        nested,
        imports,
        edges,
        shown_access,
        {importer: tuple(dict.fromkeys(refs)) for importer, refs in missing.items()},
        dirs,
        too_deep,
    )
    return Discovered(first, extras, tuple(problems))


def run(plan_: Plan, download: Callable[[list[str]], DownloadResult]) -> Discovered:
    """Drive a plan with a sync download."""
    paths = next(plan_)
    while True:
        try:
            paths = plan_.send(download(paths))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


async def arun(
    plan_: Plan, download: Callable[[list[str]], Awaitable[DownloadResult]]
) -> Discovered:
    """Drive a plan with an async download."""
    paths = next(plan_)
    while True:
        try:
            paths = plan_.send(await download(paths))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
