"""Reading memory files through a deepagents backend: one batched download, decoded and checked.

Every path is checked against the backend's root before any I/O, all files go to the backend
in ONE `download_files` call, and each response is turned into text or into a problem that
names the path and the reason. A problem never stops the run unless the caller asked for
strict mode. A FIFO, socket or device on local disk is never opened: reading one can block
forever (`download_files_safely` gives the same guarantee to callers that want raw answers).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from layered_memory._logs import get_logger
from layered_memory.core._disk_cache import (
    DiskReadCache,
    non_regular_files,
    now_ns,
    oversized_files,
)
from layered_memory.core._internals import is_backend_class
from layered_memory.core.layers import normalize_backend_path
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
    """

    texts: Mapping[str, str]
    missing: frozenset[str] = field(default_factory=frozenset)
    problems: tuple[SourceProblem, ...] = ()


def strip_html_comments(text: str) -> str:
    """Text without `<!-- ... -->` comments (authoring notes are not shown to the model).

    Gives what `re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)` gives (deepagents' own
    stripper), in time linear in the text: that regex rescans to the end from every unclosed
    `<!--`, so 64 KB of them took seconds. An unclosed `<!--` and everything after it are kept.
    """
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
    plan, refused = plan_paths(paths, backend)
    reused, fetch, signatures = _split(plan, cache)
    if not fetch:
        return _merge(plan, reused, DownloadResult({}), refused)
    refused.extend(_refuse_special(backend, fetch, signatures))
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
    plan, refused = plan_paths(paths, backend)
    reused, fetch, signatures = _split(plan, cache)
    if not fetch:
        return _merge(plan, reused, DownloadResult({}), refused)
    refused.extend(_refuse_special(backend, fetch, signatures))
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
