"""What one load reads beyond the configured files: nested memory files for the directories the
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

import functools
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from layered_memory.core._imports import (
    MAX_IMPORT_DEPTH,
    MAX_IMPORTED_FILES,
    ImportReference,
    find_imports,
    resolve_reference,
)
from layered_memory.core._nested import MAX_NESTED_DIRECTORIES, candidates, directories_of
from layered_memory.core.loading import DownloadResult, SourceProblem

Access = Literal["writable", "read-only"]

Plan = Generator[list[str], DownloadResult, "Discovered"]
"""Yields the paths of one batched download; is sent its result; returns what it found."""


@dataclass(frozen=True, slots=True)
class Discovered:
    """Everything a load found beyond the configured files.

    Attributes:
        first: The first batched download (configured files, rule files, nested candidates).
        nested: Nested file path -> text, shallow to deep.
        nested_dirs: The directories looked up (a touched path outside them means a reload).
        imports: Imported file path -> text.
        edges: Importing file -> the paths it imports, in order (found or not).
        access: Imported file -> its access (inherited from what imports it).
        missing: Importing file -> references that named no file (worth reporting).
        problems: Imported or nested files that exist but could not be used.
        too_deep: Files `MAX_IMPORT_DEPTH` hops from a configured file whose own imports were
            not followed.
    """

    first: DownloadResult
    nested: Mapping[str, str] = field(default_factory=dict)
    nested_dirs: tuple[str, ...] = ()
    imports: Mapping[str, str] = field(default_factory=dict)
    edges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    access: Mapping[str, Access] = field(default_factory=dict)
    missing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    problems: tuple[SourceProblem, ...] = ()
    too_deep: tuple[str, ...] = ()


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
        nested_only = dict.fromkeys(nested, nested_access)
        return Discovered(first, nested, tuple(dirs), access=nested_only, problems=tuple(problems))
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
    return Discovered(
        first,
        nested,
        dirs,
        imports,
        edges,
        shown_access,
        {importer: tuple(dict.fromkeys(refs)) for importer, refs in missing.items()},
        tuple(problems),
        too_deep,
    )


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
