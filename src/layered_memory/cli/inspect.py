"""`layered-memory inspect`: what memory an agent gets, measured from the block it would receive.

Memory is loaded and rendered by `MemoryAssembler`, the engine the middleware runs, so the block
shown is byte for byte the one a model call would carry; the per-layer sizes are measured on
that block. Output: `_cli_inspect_view`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from layered_memory.cli._store import CliStoreError, list_file_items, open_store, parse_namespace
from layered_memory.cli._text import printable
from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.layers import Layer
from layered_memory.core.loading import download_files_safely
from layered_memory.core.render import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_RULES_CHARS,
    PieceReport,
    RenderedMemory,
)
from layered_memory.rules import list_rule_files
from layered_memory.rules._types import RuleDecision
from layered_memory.sessions.stores._common import redact_url

DEFAULT_LAYERS = (("project", "/AGENTS.md", False), ("memory", "/MEMORY.md", True))
"""Discovered when no `--layer` is given, lowest precedence first, if the file exists."""

DEFAULT_RULE_FOLDERS = ("/.agents/rules", "/.claude/rules", "/.cursor/rules", "/rules")
"""Discovered when no `--rules` is given, lowest precedence first, if they hold files."""

EXIT_OK, EXIT_USAGE = 0, 2

Shown = Literal["full", "truncated", "lines-capped", "omitted", "empty", "absent"]
FileStatus = Literal["loaded", "missing", "skipped"]


class UsageError(Exception):
    """A bad option value; printed as one line, exit status 2."""


@dataclass(frozen=True, slots=True)
class FileReport:
    """One file of a layer: what was read and how much of it reached the block.

    Attributes:
        path: The configured path.
        status: `loaded`, `missing` (no such file) or `skipped` (see `reason`).
        chars: Characters read (0 unless loaded).
        lines: Lines read (0 unless loaded).
        reason: Why it was skipped.
        shown: `full`, `truncated` (cut to the budget), `lines-capped` (line cap),
            `omitted` (a one-line stub: over the budget), `empty` (a writable file with nothing
            yet: the block says where to write), `absent` (not in the block).
        cut_by_lines: The line cap kept only the head (also when `truncated` afterwards).
        block_chars: Characters of this file's element in the block, tags included.
    """

    path: str
    status: FileStatus
    chars: int
    lines: int
    reason: str | None
    shown: Shown
    cut_by_lines: bool
    block_chars: int


@dataclass(frozen=True, slots=True)
class LayerReport:
    """One layer: its files and its share of the block."""

    layer: Layer
    files: tuple[FileReport, ...]

    @property
    def chars(self) -> int:
        return sum(file.chars for file in self.files)

    @property
    def block_chars(self) -> int:
        return sum(file.block_chars for file in self.files)


@dataclass(frozen=True, slots=True)
class Problem:
    """A file skipped (`error`) or used with a warning."""

    path: str
    severity: str
    reason: str


@dataclass(frozen=True, slots=True)
class InspectReport:
    """Everything `inspect` prints, in both the human and the JSON form."""

    source: dict[str, Any]
    keys: tuple[str, ...]
    max_chars: int
    max_rules_chars: int
    layers: tuple[LayerReport, ...]
    rule_folders: tuple[str, ...]
    decisions: tuple[RuleDecision, ...]
    rules_block_chars: int
    problems: tuple[Problem, ...]
    block: str

    @property
    def overhead_chars(self) -> int:
        """Template, guidelines, preamble and separators: the block minus layers and rules."""
        used = sum(layer.block_chars for layer in self.layers) + self.rules_block_chars
        return len(self.block) - used


def tokens(chars: int) -> int:
    """Approximate tokens: one per 4 characters, rounded up."""
    return (chars + 3) // 4


def backend_path(path: str) -> str:
    """A path as the backends address it: `AGENTS.md` -> `/AGENTS.md`."""
    return path if path.startswith(("/", "~")) else "/" + path


def parse_layers(specs: Sequence[str]) -> list[Layer]:
    """`NAME=PATH[:rw|:ro]` options -> layers; a repeated NAME adds a path to that layer."""
    order: list[str] = []
    paths: dict[str, list[str]] = {}
    writable: dict[str, bool] = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        flag = False
        for suffix, value in ((":rw", True), (":ro", False)):
            if rest.endswith(suffix):
                rest, flag = rest[: -len(suffix)], value
        if not sep or not name.strip() or not rest.strip():
            msg = f"--layer {spec!r}: expected NAME=PATH or NAME=PATH:rw"
            raise UsageError(msg)
        name = name.strip()
        if name in writable and writable[name] != flag:
            msg = f"--layer {name}: its paths disagree on ':rw' (a layer is writable or not)"
            raise UsageError(msg)
        if name not in paths:
            order.append(name)
        paths.setdefault(name, []).append(backend_path(rest.strip()))
        writable[name] = flag
    return [Layer(name, paths[name], writable=writable[name]) for name in order]


def discover_layers(backend: Any) -> list[Layer]:
    """The conventional layers whose file exists (one batched download)."""
    responses = download_files_safely(backend, [path for _, path, _ in DEFAULT_LAYERS])
    return [
        Layer(name, path, writable=writable)
        for (name, path, writable), response in zip(DEFAULT_LAYERS, responses, strict=True)
        if getattr(response, "error", None) != "file_not_found"
    ]


def discover_rule_folders(backend: Any) -> list[str]:
    """The conventional rule folders that hold at least one rule file (or a listing problem)."""
    found = []
    for folder in DEFAULT_RULE_FOLDERS:
        files, problems = list_rule_files(backend, [folder])
        if files or problems:
            found.append(folder)
    return found


def _file_report(
    path: str,
    snapshot: MemorySnapshot,
    problems: Mapping[str, str],
    piece: PieceReport | None,
) -> FileReport:
    """One file of a layer, from the renderer's own account of its part of the block."""
    text = snapshot.files.get(path)
    status: FileStatus = "loaded" if text is not None else "missing"
    if path in problems:
        status = "skipped"
    cut_by_lines = piece is not None and any("max_lines" in why for why in piece.why)
    shown: Shown
    if piece is None or piece.outcome == "dropped":
        shown = "absent"
    elif piece.outcome == "stub":
        shown = "omitted"
    elif piece.kind == "note" and path not in snapshot.unreadable:
        shown = "empty"
    elif piece.outcome == "truncated" and not (cut_by_lines and len(piece.why) == 1):
        shown = "truncated"
    elif cut_by_lines:
        shown = "lines-capped"
    else:
        shown = "full"
    return FileReport(
        path=path,
        status=status,
        chars=len(text) if text is not None else 0,
        lines=(text.count("\n") + (0 if text.endswith("\n") else 1)) if text else 0,
        reason=problems.get(path),
        shown=shown,
        cut_by_lines=cut_by_lines,
        block_chars=piece.shown_chars if piece is not None and piece.outcome != "dropped" else 0,
    )


def _layer_reports(
    layers: Sequence[Layer], snapshot: MemorySnapshot, rendered: RenderedMemory
) -> tuple[LayerReport, ...]:
    problems = {problem.path: problem.reason for problem in snapshot.problems}
    pieces = {
        (piece.layer, piece.path): piece
        for piece in rendered.pieces
        if piece.kind in ("layer", "note")
    }
    return tuple(
        LayerReport(
            layer,
            tuple(
                _file_report(path, snapshot, problems, pieces.get((layer.name, path)))
                for path in layer.paths
            ),
        )
        for layer in layers
    )


def build_report(
    backend: Any,
    *,
    source: dict[str, Any],
    layers: Sequence[Layer] | None,
    rule_folders: Sequence[str] | None,
    keys: Sequence[str],
    max_chars: int,
    max_rules_chars: int,
) -> InspectReport:
    """Load and render memory as the middleware would, and measure the block."""
    chosen_layers = list(layers) if layers else discover_layers(backend)
    folders = list(rule_folders) if rule_folders else discover_rule_folders(backend)
    try:
        assembler = MemoryAssembler(
            backend=backend,
            layers=chosen_layers,
            rules=folders,
            max_chars=max_chars,
            max_rules_chars=max_rules_chars,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    snapshot = assembler.load()
    rendered = assembler.render_report(snapshot, keys=keys)
    block = rendered.block
    layer_reports = _layer_reports(chosen_layers, snapshot, rendered)
    rules_chars = sum(piece.shown_chars for piece in rendered.pieces if piece.kind == "rules")
    rule_set = assembler.rule_set(snapshot.rule_files)
    decisions = (
        tuple(rule_set.explain(keys, root=assembler.rule_root)) if rule_set is not None else ()
    )
    problems = [Problem(p.path, "error", p.reason) for p in snapshot.problems]
    if rule_set is not None:
        problems.extend(Problem(p.path, p.severity, p.reason) for p in rule_set.problems)
    return InspectReport(
        source=source,
        keys=tuple(keys),
        max_chars=max_chars,
        max_rules_chars=max_rules_chars,
        layers=layer_reports,
        rule_folders=tuple(folders),
        decisions=decisions,
        rules_block_chars=rules_chars,
        problems=tuple(sorted(problems, key=lambda p: (p.path, p.severity, p.reason))),
        block=block,
    )


@contextmanager
def _quiet_package_logs() -> Iterator[None]:
    """The report lists every problem; keep the same warnings off stderr meanwhile."""
    logger = logging.getLogger("layered_memory")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _virtual_key(key: str, folder: Path) -> str:
    """An absolute path below the folder as the agent's file tools name it (`/src/app.py`)."""
    if not key.startswith("/"):
        return key
    try:
        return "/" + Path(key).resolve().relative_to(folder).as_posix()
    except ValueError:
        return key


def collect(
    *,
    root: str | None,
    store_url: str | None,
    namespace: str | None,
    layer_specs: Sequence[str],
    rule_folders: Sequence[str],
    keys: Sequence[str],
    max_chars: int = DEFAULT_MAX_CHARS,
    max_rules_chars: int = DEFAULT_MAX_RULES_CHARS,
) -> InspectReport:
    """Open the folder or the store and build the report.

    Raises:
        UsageError: Bad options.
        CliStoreError: The store cannot be used.
    """
    layers = parse_layers(layer_specs)
    folders = [backend_path(folder) for folder in rule_folders]
    options: dict[str, Any] = {
        "layers": layers,
        "rule_folders": folders,
        "keys": keys,
        "max_chars": max_chars,
        "max_rules_chars": max_rules_chars,
    }
    with _quiet_package_logs():
        if store_url is None:
            if namespace is not None:
                msg = "--namespace goes with --store, not --root"
                raise UsageError(msg)
            from deepagents.backends import FilesystemBackend

            folder = Path(root or ".").expanduser().resolve()
            if not folder.is_dir():
                msg = f"--root {root}: no such folder"
                raise UsageError(msg)
            backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
            options["keys"] = [_virtual_key(key, folder) for key in keys]
            return build_report(backend, source={"kind": "folder", "root": str(folder)}, **options)
        if namespace is None:
            msg = "--store needs --namespace (e.g. --namespace org/acme/project)"
            raise UsageError(msg)
        parts = parse_namespace(namespace)
        with open_store(store_url) as store:
            from deepagents.backends import StoreBackend

            # Also fails clearly, before any download, when the store was never set up.
            items = list_file_items(store, parts)
            store_backend = StoreBackend(namespace=lambda _runtime: parts, store=store)
            source = {
                "kind": "store",
                "store": redact_url(store_url),
                "namespace": list(parts),
                "items": len(items),
            }
            return build_report(store_backend, source=source, **options)


def run_inspect(args: Any, *, render: Any) -> int:
    """Run the subcommand; `render(report, args)` prints it. Errors: one line on stderr, 2."""
    keys = [*args.path, *([args.entity] if args.entity else [])]
    try:
        report = collect(
            root=args.root,
            store_url=args.store,
            namespace=args.namespace,
            layer_specs=args.layer,
            rule_folders=args.rules,
            keys=keys,
            max_chars=args.max_chars,
            max_rules_chars=args.max_rules_chars,
        )
    except (UsageError, CliStoreError) as exc:
        print(f"layered-memory inspect: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    render(report, args)
    return EXIT_OK
