"""Reading memory files through a deepagents backend: one batched download, decoded and checked.

Every path is checked against the backend's root before any I/O, all files go to the backend
in ONE `download_files` call, and each response is turned into text or into a problem that
names the path and the reason. A problem never stops the run unless the caller asked for
strict mode. A FIFO, socket or device on local disk is never opened: reading one can block
forever (`download_files_safely` gives the same guarantee to callers that want raw answers).

Then, per folder layer, one listing; and the load plan that reads nested memory files
(`core.nested`) and `@path` imports (`core.imports`) with the configured files, in as few
batched downloads as the import depth allows; the read cache of local disk is
`core.disk_cache`.

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
import posixpath
import re
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import DiskReadCache, non_regular_files, now_ns, oversized_files
from layered_memory.core.imports import (
    MAX_IMPORT_DEPTH,
    MAX_IMPORTED_FILES,
    ImportReference,
    find_imports,
    import_cycles,
    resolve_reference,
)
from layered_memory.core.internals import is_backend_class
from layered_memory.core.layers import normalize_backend_path
from layered_memory.core.nested import MAX_NESTED_DIRECTORIES, candidates, directories_of
from layered_memory.errors import MemorySourceError

if TYPE_CHECKING:
    from deepagents.backends.protocol import FileDownloadResponse


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
        modes: Requested path -> `(normalized disk path, permission bits)` of the local
            files the read cache stat'ed (links left out), for the run-start snapshot.
    """

    texts: Mapping[str, str]
    missing: frozenset[str] = field(default_factory=frozenset)
    problems: tuple[SourceProblem, ...] = ()
    modes: Mapping[str, tuple[str, int]] = field(default_factory=dict)


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
        before = text[position:start]
        kept.append(_strip_comments(before) if "<!--" in before else before)
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


_FENCE_LINE = re.compile(r"^ {0,3}(?P<fence>`{3,}+|~{3,}+)(?P<rest>[^\n]*)", re.MULTILINE)


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of CommonMark fenced code blocks (an opening fence of three or more backticks
    or tildes, up to the closing fence of the same character at least as long, or the end),
    read once. The regex visits the fence lines only: a step per line cost a 200-line memory
    file 400 Python calls at every render (`benchmarks/run.py --only end_to_end`)."""
    spans: list[tuple[int, int]] = []
    opened: str | None = None
    block_start = 0
    size = len(text)
    for fence in _FENCE_LINE.finditer(text):
        mark, rest = fence["fence"], fence["rest"]
        if opened is None:
            if not (mark[0] == "`" and "`" in rest):
                opened, block_start = mark, fence.start()
        elif mark[0] == opened[0] and len(mark) >= len(opened) and not rest.strip():
            end = fence.end()
            spans.append((block_start, end + 1 if end < size else size))  # past its newline
            opened = None
    if opened is not None:
        spans.append((block_start, size))
    return spans


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
    """Async twin of `download_files_safely`; the check for special files stats the disk, so it
    runs off the event loop."""
    special, rest = await asyncio.to_thread(_special_answers, backend, paths)
    if not special:
        return cast("list[FileDownloadResponse]", await backend.adownload_files(list(paths)))
    return _answers(paths, special, await backend.adownload_files(rest) if rest else [])


def _split(
    plan: Mapping[str, str], cache: DiskReadCache | None
) -> tuple[DownloadResult, dict[str, str], dict[str, Any]]:
    """What the cache still holds, what must be downloaded, and its pre-read signatures."""
    if cache is None:
        return DownloadResult({}), dict(plan), {}
    texts, missing, signatures, modes = cache.reusable(plan)
    fetch = {path: plan[path] for path in plan if path in signatures}
    return DownloadResult(texts, frozenset(missing), modes=modes), fetch, signatures


def _merge(
    plan: Mapping[str, str],
    reused: DownloadResult,
    fetched: DownloadResult,
    refused: Iterable[SourceProblem],
) -> DownloadResult:
    """One result in the requested order, whatever came from the cache or the backend."""
    texts = {**reused.texts, **fetched.texts}
    ordered = {path: texts[path] for path in plan if path in texts}
    return DownloadResult(
        ordered,
        reused.missing | fetched.missing,
        (*refused, *fetched.problems),
        modes=reused.modes,
    )


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
