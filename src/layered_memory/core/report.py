"""The memory report: what one model call was given, file by file and rule by rule, and why.

Every model call `MemoryMiddleware` injects memory into emits one record through LangGraph's
stream writer (`stream_mode="custom"`, as `{"memory": report}`) and, when a LangSmith trace
span is open around the call, puts the same record into that span's metadata. `layered-memory
inspect` prints it for a configuration.

The record is built from what rendering computed anyway (the renderer's own account of each
part, and the rule match behind the rules), kept beside the block as a `MemoryReport`, and only
when someone asks: a model call nobody streams custom mode from, outside a trace, builds
nothing and writes nothing (`core.internals.report_listeners`). Once built, the record is
handed out as is to every call that reuses the block: read it, copy it, never change it in
place.

Keys of the record (`"version": 1`; keys are stable, new keys may be added):

- `files[]`: `{"path", "layer", "kind" ("layer", "nested", "import", or "note": a line
  standing for a missing, empty or unreadable file), "access" ("writable" or "read-only"),
  "chars" (characters of its part of the block, tags included; 0 when dropped),
  "source_chars" (characters of the file's text before any cap), "cut" (false only when
  shown whole), "outcome" ("whole", "truncated", "stub", "dropped"), "why" (the caps and
  budget decisions that cut it, in words), "unit" (what its cut marker counts: "tokens" when
  a token budget bound the cut, else "chars")}`, in prompt order.
- `rules[]`: each rule whose body was injected: `{"name", "path", "why" ("always", "path":
  a match key matched one of its globs, "key": a match key named the rule), "key", "glob"}`.
- `listed_rules[]`: `{"name", "path"}` of the rules listed by name only (`requested` rules
  no key named).
- `rules_part`: `{"chars", "cut"}` of the rules in the block, or null without rules.
- `session`: `{"key", "chars", "cut"}` of the session layer, or null.
- `total`: the block's size; `budget`: its bound; `unit`: what both count (`"chars"`, or
  `"tokens"` with `max_tokens=`); `chars`: the block's characters; `counter`: what counted
  the tokens (`ChatOpenAI.get_num_tokens`, `count_tokens_approximately`), or null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layered_memory.core.internals import Listeners
from layered_memory.core.layers import Layer
from layered_memory.core.loading import MemoryExtras
from layered_memory.core.render import PieceReport, RenderedMemory
from layered_memory.rules import RuleMatch

__all__ = ["REPORT_KEY", "MemoryReport", "build_memory_report", "emit_memory_report"]

REPORT_KEY = "memory"
"""The key of the record in a custom stream chunk and in trace metadata: `{"memory": ...}`."""

REPORT_VERSION = 1


@dataclass(slots=True, eq=False)
class MemoryReport:
    """What the record of one rendered block is built from, and the record once built.

    Kept beside the block in the render cache: building waits for the first model call someone
    listens to (`emit_memory_report`), then every call reusing the block hands out that record.

    Attributes:
        rendered: The block and the renderer's account of each part.
        match: The rules selected for the call's match keys (None without rule folders).
        layers: The configured layers.
        extras: The load's nested and imported files.
        budget: The bound on the block, in `unit`.
        unit: What `total` and `budget` count (`"chars"` or `"tokens"`).
        total: The block's size in `unit` (None: its characters).
        counter: What counted the tokens, with a token budget.
        reworded: Reasons to say otherwise (a character cap that stands for a token cap).
    """

    rendered: RenderedMemory
    match: RuleMatch | None
    layers: Sequence[Layer]
    extras: MemoryExtras | None = None
    budget: int = 0
    unit: str = "chars"
    total: int | None = None
    counter: str | None = None
    reworded: Mapping[str, str] = field(default_factory=dict)
    _record: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def record(self) -> dict[str, Any]:
        """The record (`build_memory_report`), built on first use and shared after.

        Returns:
            JSON-ready data (see the module docstring); never change it in place.
        """
        record = self._record
        if record is None:
            # Two threads may both build it: the same data, the last one kept.
            record = self._record = build_memory_report(
                self.rendered,
                self.match,
                layers=self.layers,
                extras=self.extras,
                budget=self.budget,
                unit=self.unit,
                total=self.total,
                counter=self.counter,
                reworded=self.reworded,
            )
        return record


def build_memory_report(
    rendered: RenderedMemory,
    match: RuleMatch | None,
    *,
    layers: Sequence[Layer],
    extras: MemoryExtras | None = None,
    budget: int,
    unit: str = "chars",
    total: int | None = None,
    counter: str | None = None,
    reworded: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The record of one rendered block: each file shown, each rule applied and why, the total.

    Args:
        rendered: The block and the renderer's account of each part
            (`render_memory_report`).
        match: The rules selected for the call's match keys (None without rule folders).
        layers: The configured layers (for the access of each layer file).
        extras: The load's nested and imported files (for their access).
        budget: The bound on the block, in `unit`.
        unit: What `total` and `budget` count.
        total: The block's size in `unit` (default: its characters).
        counter: What counted the tokens, with `unit="tokens"`.
        reworded: Reasons to say otherwise (a character cap that stands for a token cap).

    Returns:
        JSON-ready data (see the module docstring for the keys).
    """
    writable = {layer.name: layer.writable for layer in layers}
    access_of = (extras or MemoryExtras()).access
    files: list[dict[str, Any]] = []
    rules_part: dict[str, Any] | None = None
    session: dict[str, Any] | None = None
    for piece in rendered.pieces:
        if piece.kind == "rules":
            rules_part = {"chars": _chars(piece), "cut": piece.outcome != "whole"}
        elif piece.kind == "session":
            session = {"key": piece.path, "chars": _chars(piece), "cut": piece.outcome != "whole"}
        else:
            files.append(_file(piece, writable, access_of, reworded or {}))
    return {
        "version": REPORT_VERSION,
        "files": files,
        "rules": _rules(match),
        "listed_rules": [{"name": r.name, "path": r.path} for r in match.requested]
        if match is not None
        else [],
        "rules_part": rules_part,
        "session": session,
        "total": len(rendered.block) if total is None else total,
        "budget": budget,
        "unit": unit,
        "chars": len(rendered.block),
        "counter": counter,
    }


def _chars(piece: PieceReport) -> int:
    return 0 if piece.outcome == "dropped" else piece.shown_chars


def _file(
    piece: PieceReport,
    writable: Mapping[str, bool],
    access_of: Mapping[str, str],
    reworded: Mapping[str, str],
) -> dict[str, Any]:
    if piece.kind in ("nested", "import"):
        access = access_of.get(piece.path, "read-only")
    else:
        access = "writable" if writable.get(piece.layer, False) else "read-only"
    return {
        "path": piece.path,
        "layer": piece.layer,
        "kind": piece.kind,
        "access": access,
        "chars": _chars(piece),
        "source_chars": piece.source_chars,
        "cut": piece.outcome != "whole",
        "outcome": piece.outcome,
        "why": [reworded.get(why, why) for why in piece.why],
        "unit": piece.unit,
    }


def _rules(match: RuleMatch | None) -> list[dict[str, Any]]:
    if match is None:
        return []
    hits = {(hit.name, hit.path): hit for hit in match.hits}
    found: list[dict[str, Any]] = []
    for rule in match.applied:
        hit = hits.get((rule.name, rule.path))
        if hit is None:
            found.append(
                {"name": rule.name, "path": rule.path, "why": "always", "key": None, "glob": None}
            )
        else:
            why = "key" if hit.glob is None else "path"
            found.append(
                {"name": rule.name, "path": rule.path, "why": why, "key": hit.key, "glob": hit.glob}
            )
    return found


def emit_memory_report(listeners: Listeners, report: MemoryReport) -> None:
    """Hand the record of one model call to whoever listens: the run's custom stream and the
    open LangSmith span. The caller asks `report_listeners(runtime)` first and calls this only
    when someone listens: a call nobody listens to neither builds nor writes the record.

    Args:
        listeners: Who listens (`core.internals.report_listeners`).
        report: What the record is built from; the record is shared, not copied.
    """
    record = report.record()
    if listeners.writer is not None:
        listeners.writer({REPORT_KEY: record})
    if listeners.span is not None:
        # The span LangChain opens around this middleware's `wrap_model_call` (traced runs
        # only): the record sits beside the model run it describes.
        listeners.span.add_metadata({REPORT_KEY: record})
