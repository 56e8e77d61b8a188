"""Shared fixtures: memory sources, rule files, touched paths, counting backends, requests.

Everything is generated deterministically (seeded), so two runs measure the same bytes.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from deepagents.backends import FilesystemBackend
from deepagents.middleware.memory import MemoryMiddleware as DeepagentsMemoryMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from layered_memory import Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel

TOTAL_SOURCE_BYTES = 40_000
"""Issue 6: six sources totalling about 40 KB."""

RULES_FOLDER = "/rules"
RUNTIME = SimpleNamespace(context=None)
"""What a hook called outside a graph gets as `runtime` (as in tests/middleware/test_compat.py)."""

# Six sources as a real layered setup would name them: lowest precedence first.
SIX_SOURCES = (
    ("organization", "/org/AGENTS.md"),
    ("user", "/home/AGENTS.md"),
    ("project", "/AGENTS.md"),
    ("team", "/team/AGENTS.md"),
    ("architecture", "/docs/ARCHITECTURE.md"),
    ("notes", "/MEMORY.md"),
)

_EXTENSIONS = ("py", "md", "ts", "tsx", "go", "rs", "yaml", "json", "toml", "sql", "sh", "js")
_WORDS = (
    "always run the linter before committing; the CI gate rejects formatting drift",
    "prefer small pull requests with one concern each and a short description",
    "the billing service owns invoices; never write to its tables from elsewhere",
    "use structured logging with the request id; never log customer data",
    "integration tests need the local stack: `make services` starts it",
    "money is stored as integer cents; convert only at the edges",
    "feature flags live in config/flags.yaml and default to off",
    "the public API is versioned; breaking changes need a new /v2 route",
    "timestamps are UTC in storage and converted in the UI only",
    "ask before adding a dependency; the security team reviews each one",
)


@dataclass(frozen=True, slots=True)
class Project:
    """A generated project folder.

    Attributes:
        root: The folder on disk (a `FilesystemBackend` root, virtual mode).
        layers: `(layer name, backend path)` of each memory source, lowest precedence first.
        n_rules: Rule files written below `RULES_FOLDER`.
    """

    root: Path
    layers: tuple[tuple[str, str], ...]
    n_rules: int

    @property
    def sources(self) -> list[str]:
        """The source paths, as deepagents' `sources=` list."""
        return [path for _, path in self.layers]

    def backend(self) -> FilesystemBackend:
        """A fresh `FilesystemBackend` on the project (virtual mode, as the README shows)."""
        return FilesystemBackend(root_dir=self.root, virtual_mode=True)


def memory_text(index: int, size: int, *, insights: bool = False) -> str:
    """Markdown of about `size` bytes: headings, bullets, a code block, an HTML comment."""
    rng = random.Random(index)
    parts = [f"# Memory source {index}\n\n<!-- maintained by the platform team -->\n"]
    section = 0
    while sum(map(len, parts)) < size:
        if insights:
            day = 1 + len(parts) % 28
            parts.append(f"- 2025-01-{day:02d}: [client{rng.randrange(90)}] {rng.choice(_WORDS)}\n")
            continue
        section += 1
        parts.append(f"\n## Section {section}\n\n")
        parts.extend(f"- {rng.choice(_WORDS)}.\n" for _ in range(rng.randrange(3, 9)))
        if section % 3 == 0:
            parts.append("\n```bash\nmake test && make lint\n```\n")
    text = "".join(parts)
    if insights:
        text = text.replace("\n- ", "\n## Recent Insights\n\n- ", 1)
    return text[:size].rstrip() + "\n"


def _rule_text(i: int) -> tuple[str, str]:
    """(file name relative to the rules folder, text) of rule `i`: the mix people write."""
    ext = _EXTENSIONS[i % len(_EXTENSIONS)]
    body = "\n".join(f"- {random.Random(i * 7 + k).choice(_WORDS)}." for k in range(3 + i % 4))
    sub = f"area{i % 5}/" if i % 3 == 0 else ""
    shape = i % 10
    if i % 50 == 3:  # a few rules apply everywhere
        return f"{sub}always{i}.md", f"---\nname: always-{i}\nalwaysApply: true\n---\n{body}\n"
    if shape == 0:  # Claude Code: `paths:` list
        front = f'paths: ["**/*.{ext}"]\ndescription: {ext} conventions'
        return f"{sub}lang{i}.md", f"---\nname: lang-{i}\n{front}\n---\n{body}\n"
    if shape == 1:  # Cursor .mdc: unquoted comma-separated `globs:`
        globs = f"src/module{i}/**, lib/module{i}/**"
        front = f"description: module {i}\nglobs: {globs}\nalwaysApply: false"
        return f"{sub}module{i}.mdc", f"---\n{front}\n---\n{body}\n"
    if shape == 2:  # Copilot: `applyTo:` string, name from the file stem
        return f"{sub}ext{i}.instructions.md", f'---\napplyTo: "**/*.{ext}"\n---\n{body}\n'
    if shape == 3:  # agent-requested: a description and no globs
        return (
            f"{sub}howto{i}.md",
            f"---\nname: howto-{i}\ndescription: How to do task {i}\n---\n{body}\n",
        )
    if shape == 4:
        return (
            f"{sub}docs{i}.md",
            f'---\nname: docs-{i}\npaths: ["docs/topic{i}/**/*.md"]\n---\n{body}\n',
        )
    if shape == 5:
        return (
            f"{sub}tests{i}.md",
            f'---\nname: tests-{i}\npaths: ["tests/test_mod{i}_*.py"]\n---\n{body}\n',
        )
    if shape == 6:  # matched by an entity name in the run's context
        return f"{sub}client{i}.md", f'---\nname: client-{i}\npaths: ["*client{i}*"]\n---\n{body}\n'
    if shape == 7:
        globs = f'["{{src,lib}}/pkg{i}/**/*.py", "packages/p{i}/**"]'
        return f"{sub}pkg{i}.md", f"---\nname: pkg-{i}\npaths: {globs}\n---\n{body}\n"
    if shape == 8:
        glob = f"services/svc{i % 40}/**/handler_*.go"
        return f"{sub}svc{i}.md", f'---\nname: svc-{i}\npaths: ["{glob}"]\n---\n{body}\n'
    return (
        f"{sub}component{i}.md",
        f'---\nname: comp-{i}\npaths: ["**/component{i}/*.tsx"]\n---\n{body}\n',
    )


def rule_texts(n_rules: int) -> dict[str, str]:
    """`n_rules` rule files: backend path -> text (`RULES_FOLDER` + nested sub-folders)."""
    return {f"{RULES_FOLDER}/{name}": text for name, text in map(_rule_text, range(n_rules))}


def build_project(
    root: Path,
    *,
    n_sources: int = 6,
    source_bytes: int | None = None,
    n_rules: int = 200,
) -> Project:
    """Write memory sources and rule files under `root`.

    Args:
        root: An empty folder.
        n_sources: 6 gives the named layers of `SIX_SOURCES`; any other count generic ones.
        source_bytes: Size of each source (default: 40 KB split evenly).
        n_rules: Rule files to write.
    """
    size = source_bytes or TOTAL_SOURCE_BYTES // n_sources
    layers = (
        SIX_SOURCES
        if n_sources == len(SIX_SOURCES)
        else tuple((f"source{i}", f"/sources/s{i:03d}/AGENTS.md") for i in range(n_sources))
    )
    for index, (_, path) in enumerate(layers):
        insights = path.endswith("MEMORY.md")
        _write(root, path, memory_text(index, size, insights=insights))
    for path, text in rule_texts(n_rules).items():
        _write(root, path, text)
    backdate(root)
    return Project(root, tuple(layers), n_rules)


def backdate(root: Path, seconds: int = 3_600) -> None:
    """Make every file and folder under `root` an hour old, as real memory files are.

    Files modified in the last two seconds are re-read at every invocation (a coarse
    filesystem clock could hide a second write), which a freshly generated fixture would be.
    """
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            stamp = os.lstat(path).st_mtime - seconds
            os.utime(path, (stamp, stamp), follow_symlinks=False)
    stamp = os.stat(root).st_mtime - seconds
    os.utime(root, (stamp, stamp))


def touched_paths(n: int) -> list[str]:
    """`n` paths an agent's file tools named: a mix that matches some rules and not others."""
    shapes = (
        "/src/module{k}/service.py",
        "/docs/topic{k}/guide.md",
        "/tests/test_mod{k}_api.py",
        "/web/app/component{k}/Button.tsx",
        "/services/svc{k}/api/handler_users.go",
        "/lib/pkg{k}/models/core.py",
        "/scripts/deploy{k}.sh",
        "/config/settings{k}.toml",
    )
    return [shapes[j % len(shapes)].format(k=j * 3 + 1) for j in range(n)]


def write_workspace(root: Path, paths: Sequence[str]) -> None:
    """Create the files behind `paths`, so a scripted `read_file` finds them."""
    for path in paths:
        _write(root, path, f"# {path}\nprint('hello')\n")


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


# -- middleware builders ------------------------------------------------------------------------


def ours(project: Project, backend: Any, *, rules: bool = True) -> MemoryMiddleware[Any, Any]:
    """Our middleware in its layered form: one layer per source, `MEMORY.md` writable (no
    hooks: no end-of-run graph node)."""
    return MemoryMiddleware(
        backend=backend,
        layers=[
            Layer(name, path, writable=path.endswith("MEMORY.md")) for name, path in project.layers
        ],
        rules=[RULES_FOLDER] if rules else None,
        match_keys=("entity_name",),
    )


def ours_compat(project: Project, backend: Any) -> MemoryMiddleware[Any, Any]:
    """Our middleware as a drop-in: `sources=` only, exactly deepagents' arguments."""
    return MemoryMiddleware(backend=backend, sources=project.sources)


def theirs(project: Project, backend: Any) -> DeepagentsMemoryMiddleware[Any, Any]:
    """deepagents' built-in `MemoryMiddleware` on the same sources."""
    return DeepagentsMemoryMiddleware(backend=backend, sources=project.sources)


BASE_PROMPT = (
    "You are a careful coding assistant working in a large monorepo. "
    "Read files before you change them and explain what you did.\n"
) * 20


def history(turns: int) -> list[BaseMessage]:
    """A short conversation: what `request.messages` holds a few turns in."""
    messages: list[BaseMessage] = []
    for turn in range(turns):
        messages.append(HumanMessage(f"Turn {turn}: please look at module {turn}."))
        messages.append(AIMessage(f"Done with module {turn}; the tests pass."))
    return messages


def model_request(state: dict[str, Any], model: Any | None = None) -> ModelRequest[Any]:
    """The request a middleware sees: base prompt as a string, some history, the state."""
    return ModelRequest(
        model=model or ScriptedChatModel(script=[]),
        messages=history(5),
        system_message=SystemMessage(BASE_PROMPT),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )


# -- counting backend ---------------------------------------------------------------------------

BACKEND_METHODS = frozenset(
    {
        "ls",
        "read",
        "grep",
        "glob",
        "write",
        "edit",
        "delete",
        "upload_files",
        "download_files",
        "execute",
    }
)
"""`BackendProtocol` operations (each also has an `a`-prefixed async twin)."""

_ALL_METHODS = BACKEND_METHODS | {f"a{name}" for name in BACKEND_METHODS}


class CountingBackend(FilesystemBackend):
    """A real `FilesystemBackend` that counts the backend operations callers make.

    A subclass rather than a wrapper: the library checks `isinstance(backend,
    FilesystemBackend)` to apply its root checks, and a wrapper would skip that work. Only the
    outermost call is counted, so a backend method calling another one counts once.
    """

    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.calls: Counter[str] = Counter()
        self._depth = threading.local()

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name not in _ALL_METHODS:
            return attribute
        depth = super().__getattribute__("_depth")
        calls = super().__getattribute__("calls")

        if name.startswith("a") and name[1:] in BACKEND_METHODS:

            async def counted_async(*args: Any, **kwargs: Any) -> Any:
                outer = not getattr(depth, "value", 0)
                if outer:
                    calls[name] += 1
                depth.value = getattr(depth, "value", 0) + 1
                try:
                    return await attribute(*args, **kwargs)
                finally:
                    depth.value -= 1

            return counted_async

        def counted(*args: Any, **kwargs: Any) -> Any:
            if not getattr(depth, "value", 0):
                calls[name] += 1
            depth.value = getattr(depth, "value", 0) + 1
            try:
                return attribute(*args, **kwargs)
            finally:
                depth.value -= 1

        return counted

    @property
    def total(self) -> int:
        """Backend operations counted so far."""
        return sum(self.calls.values())

    def reset(self) -> None:
        """Forget the counts."""
        self.calls.clear()


@contextmanager
def counting_calls(module: Any, *names: str) -> Iterator[Counter[str]]:
    """Count calls of module-level functions (e.g. the assembler's parse and render steps).

    The functions are replaced in `module`'s namespace for the duration and restored after.
    """
    counts: Counter[str] = Counter()
    originals = {name: getattr(module, name) for name in names}

    def wrap(name: str, function: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return counted

    for name, function in originals.items():
        setattr(module, name, wrap(name, function))
    try:
        yield counts
    finally:
        for name, function in originals.items():
            setattr(module, name, function)
