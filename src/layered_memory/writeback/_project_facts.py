"""Project facts: whether what a lesson names is in the project itself.

A lesson read only from a web page, shell output or another agent is held for its provenance
(`writeback.lesson_hold`), unless it is plainly a fact about the project. "Plainly" is checked
against the project, not the run: every path the lesson names exists in the project (one `ls`
of its folder through the consolidator's own backend), and every command, address or code name
it uses is named by the project's own files (the read-only memory files, README, Makefile,
package.json, pyproject). Paths outside the project (`~`, `..`, absolute, `$VAR`) never count.

Bounded: at most `MAX_LOOKUPS` folder listings and `MAX_PROJECT_BYTES` of the project's files
per consolidation, each cached for the call; a lookup past the bound answers "not verified"
(the lesson stays held). The backend is called synchronously: the async consolidator runs the
hold in a worker thread, off the event loop.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from typing import Any, Final

from layered_memory.core.disk_cache import oversized_files
from layered_memory.core.loading import download_files_safely

MAX_LOOKUPS: Final = 16
"""Folder listings (`ls`) one consolidation may make to check that paths exist."""

MAX_PROJECT_BYTES: Final = 256 * 1024
"""Bytes of the project's own files read, in all, to check that commands are named there."""

PROJECT_FILES: Final = (
    "AGENTS.md",
    "CLAUDE.md",
    "README.md",
    "CONTRIBUTING.md",
    "Makefile",
    "package.json",
    "pyproject.toml",
)
"""The project's own files whose text names its commands (beside the memory file)."""

_URL = re.compile(r"(?:https?|ftp|s3|ssh|git)://[^\s`'\"<>)]+")
_TICKED = re.compile(r"`([^`]{1,200})`")
_EMAIL = re.compile(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)")
_STRIP = ".,;:()[]{}'\"!?«»“”‘’。，；："
_CODE_NAME = re.compile(r"[\w]+(?:[-_.=][\w]+)+|\.[\w]+(?:\.[\w]+)*")
_NUMBER = re.compile(r"[\d.:]+")
_HOST = re.compile(r"(?<![\w.-])((?:[a-z0-9-]+\.)+[a-z][a-z0-9-]+)(?![\w-])")
"""A host name as the project's (folded) files write it, bare or in a URL."""
_RUNNER = re.compile(r"(?:npm|pnpm|yarn|bun)(?: run)? ([\w:.-]+)")


class ProjectFacts:
    """What the project itself shows, read lazily through a backend (one per consolidation).

    Args:
        backend: The consolidator's backend (deepagents `BackendProtocol`).
        root: The project's folder in the backend (the memory file's folder).
        exclude: Backend paths never read as the project's word (the writable memory file:
            lessons applied earlier must not vouch for new ones).
    """

    def __init__(self, backend: Any, root: str, *, exclude: tuple[str, ...] = ()) -> None:
        self._backend = backend
        self._root = root if root.endswith("/") else root + "/"
        self._exclude = frozenset(exclude)
        self._listed: dict[str, frozenset[str] | None] = {}
        self._text: str | None = None

    def is_fact(self, text: str) -> bool:
        """Whether every path `text` names exists in the project and every command, address
        and code name it uses is named by the project's files (and it names at least one)."""
        names = named_in(text)
        if not any(names.values()):
            return False
        return (
            all(self._exists(path) for path in names["paths"])
            and all(self._named_command(command) for command in names["commands"])
            and all(self._named(host) for host in names["hosts"])
            and all(self._exists(name) or self._named(name) for name in names["names"])
        )

    def hosts(self) -> frozenset[str]:
        """The hosts the project's own files name (its services: `staging.internal.example.com`
        is the team's own only where they name `example.com`)."""
        return frozenset(_HOST.findall(self._project_text()))

    # -- paths ----------------------------------------------------------------------------

    def _exists(self, path: str) -> bool:
        relative = _project_relative(path)
        if relative is None:
            return False
        parent, name = posixpath.split(relative)
        entries = self._listing(parent)
        return entries is not None and name in entries

    def _listing(self, folder: str) -> frozenset[str] | None:
        if folder in self._listed:
            return self._listed[folder]
        if len(self._listed) >= MAX_LOOKUPS:
            return None  # past the bound: not verified, the lesson stays held
        target = (self._root + folder).rstrip("/") or "/"
        try:
            result = self._backend.ls(target)
            entries = getattr(result, "entries", None) or []
            found = frozenset(
                posixpath.basename(str(entry.get("path", "")).rstrip("/")) for entry in entries
            )
        except Exception:  # a backend that cannot list: nothing verified
            found = None
        self._listed[folder] = found
        return found

    # -- commands and names ---------------------------------------------------------------

    def _project_text(self) -> str:
        if self._text is None:
            paths = [
                self._root + name
                for name in PROJECT_FILES
                if self._root + name not in self._exclude
            ]
            parts: list[str] = []
            budget = MAX_PROJECT_BYTES
            try:
                # A file on disk past the budget costs one stat, never a read (fail closed:
                # what only it names is not confirmed).
                large = oversized_files(self._backend, paths, MAX_PROJECT_BYTES)
                paths = [path for path in paths if path not in large]
                responses = download_files_safely(self._backend, paths) if paths else []
            except Exception:  # a backend that cannot read: nothing named
                responses = []
            for response in responses:
                content = getattr(response, "content", None)
                if getattr(response, "error", None) is None and content and budget > 0:
                    parts.append(bytes(content[:budget]).decode("utf-8", "replace"))
                    budget -= len(content)
            self._text = _folded("\n".join(parts))
        return self._text

    def _named(self, name: str) -> bool:
        # As a whole name: `evil.com` is not named by `notevil.com`, nor `make test` by
        # `make test-all`.
        pattern = rf"(?<![\w.-]){re.escape(_folded(name))}(?![\w-])"
        return re.search(pattern, self._project_text()) is not None

    def _named_command(self, command: str) -> bool:
        if self._named(command):
            return True
        command = _folded(command)
        text = self._project_text()
        target = re.fullmatch(r"make ([\w.-]+)", command)
        if target and re.search(rf"(?m)^{re.escape(target[1])}\s*:", text):
            return True
        script = _RUNNER.fullmatch(command)
        return bool(script and f'"{script[1]}":' in text)


def named_in(text: str) -> dict[str, list[str]]:
    """The paths, commands, hosts and code names a lesson names, by kind."""
    text = unicodedata.normalize("NFKC", text)
    names: dict[str, list[str]] = {"paths": [], "commands": [], "hosts": [], "names": []}
    for url in _URL.findall(text):
        names["hosts"].append(url.split("://", 1)[1].split("/", 1)[0].rstrip(_STRIP))
    rest = _URL.sub(" ", text)
    for span in _TICKED.findall(rest):
        _sort(span.strip(), names, ticked=True)
    rest = _TICKED.sub(" ", rest)
    for host in _EMAIL.findall(rest):
        names["hosts"].append(host)
    rest = _EMAIL.sub(" ", rest)
    for token in rest.split():
        _sort(token.strip(_STRIP), names, ticked=False)
    return names


def _sort(token: str, names: dict[str, list[str]], *, ticked: bool) -> None:
    if not token or _NUMBER.fullmatch(token):
        return
    if ticked or any(space in token for space in " \t"):
        # Quoted as code: something to run or type, named by the project's files.
        names["commands"].append(token)
        if " " not in token and ("/" in token or "\\" in token):
            names["paths"].append(token)  # a script run by its path must exist there too
    elif "/" in token or "\\" in token:
        names["paths"].append(token)
    elif _CODE_NAME.fullmatch(token):
        names["names"].append(token)


def _project_relative(path: str) -> str | None:
    """`path` inside the project, relative to its root; None when it points outside."""
    path = path.replace("\\", "/")
    if path.startswith(("~", "$", "/")) or re.match(r"[a-zA-Z]:", path):
        return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _folded(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())
