"""`@path` imports in memory files, as Claude Code reads them, in time linear in the text.

A memory file may pull in another with `@path`: relative to the importing file, `/`-absolute
within the backend, or `~/...` where the backend can read the home folder. References inside
inline code and fenced code blocks are text, never imports. A reference counts when it looks
like a path (it has a `/`, starts with `~` or `.`, or ends with a file extension), so an
`@alice` mention stays prose; of those, a reference that is missing is reported only when it
clearly names a file (a `/` or a document extension), so `@pytest.fixture` in prose is not
"a missing import".

Written by hand because no Markdown library gives code-span and fence positions cheaply and
for any input size; the scanner below reads each character once.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import (
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


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


def host_import_scope(root: str, layer_paths: Sequence[str]) -> Callable[[str], str | None]:
    """Where imports may lead on a host-path backend, which can read any file of the host.

    Inside its folder, and inside the folder of each configured layer file that lives outside
    it (the user's own `~/.deepagents/AGENTS.md` may import its neighbours): a repository's
    memory file must not pull `@/etc/passwd` or `@~/.aws/credentials` into the prompt. The
    target's real place is checked, so a symlink in the project cannot lead out either.

    Args:
        root: The backend's folder on disk.
        layer_paths: The configured layer files.

    Returns:
        `refused(target)`: why an import of `target` may not be read, None when it may.
    """
    real_root = os.path.realpath(root)
    allowed = [real_root]
    for path in layer_paths:
        folder = os.path.dirname(os.path.realpath(os.path.expanduser(path)))
        if not _inside(folder, real_root) and folder not in allowed:
            allowed.append(folder)

    def refused(target: str) -> str | None:
        try:
            real = os.path.realpath(os.path.expanduser(target))
        except (OSError, ValueError):
            return "cannot be resolved"
        if any(_inside(real, folder) for folder in allowed):
            return None
        return (
            f"is outside the backend's folder {root} (imports=True keeps them inside it; "
            "imports='anywhere' reads any file)"
        )

    return refused


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
