"""The block a model call would carry, measured: each layer's files, the rules, the problems.

The block is rendered by the middleware's own code (`MemoryAssembler.render_report`), which
also says what became of each part (whole, truncated, left as a stub, dropped, and why); this
module turns that account into per-file verdicts ("shown in full / cut / left out"), so the
sizes describe the bytes the model receives. `inspect` prints the result, `doctor` and `lint`
judge it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.files import LEARNED_MARK
from layered_memory.core.imports import TOO_DEEP_REASON
from layered_memory.core.layers import Layer
from layered_memory.core.render import (
    PieceReport,
    RenderedMemory,
)
from layered_memory.rules import RuleDecision
from layered_memory.writeback.consolidation import learned_entries

Shown = Literal["full", "truncated", "lines-capped", "omitted", "empty", "absent"]
FileStatus = Literal["loaded", "missing", "skipped"]


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
class LearnedEntry:
    """A learned entry of a layer file, with the provenance the block does not show (the
    loader strips the HTML comment that keeps it)."""

    path: str
    id: str | None
    text: str
    thread: str | None
    date: str | None
    model: str | None
    reviewed: str | None


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
    session_key: str | None = None
    session_block_chars: int = 0
    extras: tuple[PieceReport, ...] = ()
    """Nested memory files and `@path` imports, as the renderer placed them."""
    learned: tuple[LearnedEntry, ...] = ()
    """Entries consolidation wrote into the layer files, with their provenance."""
    memory_report: dict[str, Any] | None = None
    """The record a model call streams (`core.report`); None when nothing is injected."""

    @property
    def extras_block_chars(self) -> int:
        """Characters of the nested and imported files' elements in the block."""
        return sum(piece.shown_chars for piece in self.extras if piece.outcome != "dropped")

    @property
    def overhead_chars(self) -> int:
        """Template, guidelines, preamble and separators: the block minus layers, rules and
        the session layer."""
        used = (
            sum(layer.block_chars for layer in self.layers)
            + self.rules_block_chars
            + self.session_block_chars
            + self.extras_block_chars
        )
        return len(self.block) - used


def tokens(chars: int) -> int:
    """Approximate tokens: one per 4 characters, rounded up."""
    return (chars + 3) // 4


def shown_of(piece: PieceReport | None, *, unreadable: bool = False) -> tuple[Shown, bool]:
    """The verdict on one file's part of the block, and whether its line cap cut it."""
    cut_by_lines = piece is not None and any("max_lines" in why for why in piece.why)
    shown: Shown
    if piece is None:
        shown = "absent"
    elif piece.outcome in ("stub", "dropped"):
        shown = "omitted"  # left out by the budget (named in the block's note if dropped)
    elif piece.kind == "note" and not unreadable:
        shown = "empty"
    elif piece.outcome == "truncated" and not (cut_by_lines and len(piece.why) == 1):
        shown = "truncated"
    elif cut_by_lines:
        shown = "lines-capped"
    else:
        shown = "full"
    return shown, cut_by_lines


def _file_report(
    path: str,
    snapshot: MemorySnapshot,
    problems: Mapping[str, str],
    piece: PieceReport | None,
) -> FileReport:
    """One file of a layer, from the renderer's own account of its part of the block."""
    text = snapshot.files.get(path)
    status: FileStatus = "loaded" if text is not None else "missing"
    if text is None and path in problems:
        status = "skipped"  # a loaded file's problems (a missing @import) are listed apart
    shown, cut_by_lines = shown_of(piece, unreadable=path in snapshot.unreadable)
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
    assembler: MemoryAssembler, snapshot: MemorySnapshot, rendered: RenderedMemory
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
                for path in assembler.files_of(layer, snapshot)
            ),
        )
        for layer in assembler.layers
    )


def _learned(assembler: MemoryAssembler, snapshot: MemorySnapshot) -> tuple[LearnedEntry, ...]:
    found: list[LearnedEntry] = []
    layers = assembler.layers
    for path in dict.fromkeys(p for layer in layers for p in assembler.files_of(layer, snapshot)):
        text = snapshot.files.get(path)
        if text is None or LEARNED_MARK not in text:
            continue
        found.extend(
            LearnedEntry(
                path=path,
                id=entry.get("id"),
                text=entry["text"],
                thread=entry.get("thread"),
                date=entry.get("date"),
                model=entry.get("model"),
                reviewed=entry.get("reviewed"),
            )
            for entry in learned_entries(text)
        )
    return tuple(found)


def _chars(rendered: RenderedMemory, kind: str) -> int:
    return sum(
        piece.shown_chars
        for piece in rendered.pieces
        if piece.kind == kind and piece.outcome != "dropped"
    )


def report_from(
    assembler: MemoryAssembler,
    snapshot: MemorySnapshot,
    rendered: RenderedMemory,
    *,
    keys: Sequence[str],
    source: dict[str, Any],
    block: str | None = None,
    injected: bool = True,
) -> InspectReport:
    """Measure the block `assembler` rendered from `snapshot` (`render_report`) layer by layer,
    and explain the rules for `keys`.

    Args:
        assembler: The assembler that rendered it.
        snapshot: What it loaded.
        rendered: `assembler.render_report(snapshot, keys=keys)`.
        keys: The rule match keys of the call.
        source: Where memory came from (printed as is).
        block: The block as the middleware injects it, when it was rendered through the
            middleware's own function (the same text as `rendered.block`); default
            `rendered.block`.
        injected: Whether the block reaches the model (no record without it).

    Returns:
        The measured report.
    """
    rule_set = assembler.rule_set(snapshot.rule_files)
    decisions = (
        tuple(rule_set.explain(keys, root=assembler.rule_root)) if rule_set is not None else ()
    )
    # An import chain cut at the depth limit is reported from `extras.too_deep` (doctor's
    # import-too-deep check, lint's import problems), not twice.
    problems = [
        Problem(p.path, "error", p.reason) for p in snapshot.problems if p.reason != TOO_DEEP_REASON
    ]
    if rule_set is not None:
        problems.extend(Problem(p.path, p.severity, p.reason) for p in rule_set.problems)
    return InspectReport(
        source=source,
        keys=tuple(keys),
        max_chars=assembler.max_chars,
        max_rules_chars=assembler.max_rules_chars,
        layers=_layer_reports(assembler, snapshot, rendered),
        rule_folders=tuple(assembler.rule_folders),
        decisions=decisions,
        rules_block_chars=_chars(rendered, "rules"),
        problems=tuple(sorted(problems, key=lambda p: (p.path, p.severity, p.reason))),
        block=rendered.block if block is None else block,
        session_key=snapshot.session.key if snapshot.session else None,
        session_block_chars=_chars(rendered, "session"),
        extras=tuple(piece for piece in rendered.pieces if piece.kind in ("nested", "import")),
        learned=_learned(assembler, snapshot),
        memory_report=_call_record(assembler, snapshot, keys) if injected else None,
    )


def _call_record(
    assembler: MemoryAssembler, snapshot: MemorySnapshot, keys: Sequence[str]
) -> dict[str, Any]:
    """The record a model call with these keys streams: the assembler's own (cached with the
    block the middleware injects)."""
    return assembler.render_call(
        snapshot.files,
        snapshot.rule_files,
        snapshot.session,
        keys,
        digest=snapshot.digest,
        unreadable=snapshot.unreadable,
        extras=snapshot.extras,
    )[1].record()
