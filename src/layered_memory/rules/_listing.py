"""Finding and loading rule files through a deepagents backend: one listing per folder, one
batched download. Only the I/O call differs between the sync and async halves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from layered_memory._logs import get_logger
from layered_memory.core.loading import DownloadResult, adownload_texts, download_texts
from layered_memory.rules._parse import is_rule_file, parse_rule_file
from layered_memory.rules._set import RuleSet, build_rule_set
from layered_memory.rules._types import Rule, RuleProblem

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

logger = get_logger(__name__)

LISTING_PATTERN = "**/*"
"""Every file below a folder. Per the backends' glob contract `**` does not descend into
dot-folders, so a `.git/` or `.obsidian/` inside a rule folder is never read as rules."""

RuleFileList = list[tuple[int, str]]

PARTIAL_LISTING = ("cannot list rule folder", "rule folder listing truncated")
"""How the problem of a folder listed only in part (or not at all) begins."""


def _folder(folder: str) -> str:
    return folder.rstrip("/") or "/"


def _collect(
    results: Sequence[tuple[int, str, Any]], others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """Turn `(folder_index, folder, GlobResult or exception)` into rule files and problems
    (and the other files listed, into `others` when given)."""
    best: dict[str, int] = {}
    problems: list[RuleProblem] = []
    for folder_index, folder, result in results:
        if isinstance(result, BaseException):
            reason = f"cannot list rule folder: {type(result).__name__}: {result}"
            problems.append(RuleProblem(folder, reason, "warning"))
            continue
        if result.error:
            problems.append(
                RuleProblem(folder, f"cannot list rule folder: {result.error}", "warning")
            )
        if result.truncated:
            why = result.truncation_reason or "unknown reason"
            reason = f"rule folder listing truncated ({why}); some rule files may be missing"
            problems.append(RuleProblem(folder, reason, "warning"))
        for info in result.matches or ():
            path = info.get("path", "")
            if info.get("is_dir"):
                continue
            if not is_rule_file(path):
                if others is not None:
                    others.append(path)
                continue
            # A file below two listed folders belongs to the higher one.
            best[path] = max(folder_index, best.get(path, folder_index))
    files = sorted(((index, path) for path, index in best.items()), key=lambda item: item)
    return files, problems


def list_rule_files(
    backend: BackendProtocol, folders: Sequence[str], *, others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """List the rule files below each folder: one recursive `glob` call per folder.

    A missing folder is not a problem (it lists nothing); a listing error is a `warning`
    naming the folder. Nothing is downloaded.

    Args:
        backend: Any deepagents backend.
        folders: Rule folders, lowest precedence first (index = `folder_index`).
        others: Receives the paths of the other files the folders hold (not rule files):
            the read-only guard leaves the user's own files alone.

    Returns:
        `(folder_index, path)` of each rule file, ordered by folder then path, and the problems.
    """
    results: list[tuple[int, str, Any]] = []
    for folder_index, raw in enumerate(folders):
        folder = _folder(raw)
        try:
            results.append((folder_index, folder, backend.glob(LISTING_PATTERN, path=folder)))
        except Exception as exc:  # a backend is foreign code; one bad folder must not stop a run
            results.append((folder_index, folder, exc))
    return _collect(results, others)


async def alist_rule_files(
    backend: BackendProtocol, folders: Sequence[str], *, others: list[str] | None = None
) -> tuple[RuleFileList, list[RuleProblem]]:
    """Async `list_rule_files`."""
    results: list[tuple[int, str, Any]] = []
    for folder_index, raw in enumerate(folders):
        folder = _folder(raw)
        try:
            results.append(
                (folder_index, folder, await backend.aglob(LISTING_PATTERN, path=folder))
            )
        except Exception as exc:  # see list_rule_files
            results.append((folder_index, folder, exc))
    return _collect(results, others)


def parse_loaded(
    files: RuleFileList,
    loaded: DownloadResult,
    *,
    parse: Callable[[str, str, int], tuple[Rule | None, Sequence[RuleProblem]]] | None = None,
) -> list[tuple[Rule | None, list[RuleProblem]]]:
    """Parse the listed rule files from one load of the engine's one decoder.

    The middleware, `load_rule_set` and `layered-memory lint` all read rule files with
    `core.loading.download_texts` and parse them with `parse_rule_file` here, so they reach
    the same verdict on every file.

    Args:
        files: What `list_rule_files` returned.
        loaded: `download_texts(backend, [path for _, path in files])`.
        parse: `parse_rule_file` or a cached form of it (`(path, text, folder_index)`).

    Returns:
        One `(rule or None, problems)` per file, ready for `build_rule_set`.
    """
    why = {problem.path: problem.reason for problem in loaded.problems}
    parsed: list[tuple[Rule | None, list[RuleProblem]]] = []
    for folder_index, path in files:
        text = loaded.texts.get(path)
        if text is not None:
            rule, problems = (
                parse(path, text, folder_index)
                if parse is not None
                else parse_rule_file(path, text, folder_index=folder_index)
            )
            parsed.append((rule, list(problems)))
        elif path in loaded.missing:
            reason = "cannot read: file not found (deleted after it was listed?)"
            parsed.append((None, [RuleProblem(path, reason)]))
        else:
            parsed.append((None, [RuleProblem(path, why.get(path, "unreadable"))]))
    return parsed


def _finish(
    parsed: list[tuple[Rule | None, list[RuleProblem]]],
    listing_problems: list[RuleProblem],
    *,
    strict: bool,
    log: bool,
) -> RuleSet:
    rule_set = build_rule_set([*parsed, (None, listing_problems)], log=log)
    if strict:
        rule_set.raise_on_error()
    return rule_set


def load_rule_set(
    backend: BackendProtocol,
    folders: Sequence[str],
    *,
    strict: bool = False,
    log: bool = True,
) -> RuleSet:
    """List, download (one batched call), parse and build the rules of `folders`.

    Args:
        backend: Any deepagents backend.
        folders: Rule folders, lowest precedence first.
        strict: Raise on the first invalid file instead of skipping it.
        log: Log each problem as a warning naming the file.

    Returns:
        The rule set; its `problems` say what was skipped and why.

    Raises:
        RuleFileError: In strict mode, for the first invalid rule file.

    Example:
        `load_rule_set(FilesystemBackend(root_dir=".", virtual_mode=True), ["/.claude/rules"])`
    """
    files, listing_problems = list_rule_files(backend, folders)
    loaded = download_texts(backend, [path for _, path in files])
    return _finish(parse_loaded(files, loaded), listing_problems, strict=strict, log=log)


async def aload_rule_set(
    backend: BackendProtocol,
    folders: Sequence[str],
    *,
    strict: bool = False,
    log: bool = True,
) -> RuleSet:
    """Async `load_rule_set`."""
    files, listing_problems = await alist_rule_files(backend, folders)
    loaded = await adownload_texts(backend, [path for _, path in files])
    return _finish(parse_loaded(files, loaded), listing_problems, strict=strict, log=log)
