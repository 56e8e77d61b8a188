"""The block a model call would carry, measured: each layer's files, the rules, the problems.

The block is rendered by the middleware's own code (`MemoryAssembler`); this module only reads
it back, locating each file's element exactly as the renderer writes it, so the sizes and the
"shown in full / cut / left out" verdicts describe the bytes the model receives. `inspect`
prints the result, `doctor` and `lint` judge it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

from layered_memory.core._defuse import defuse_name
from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.layers import Layer
from layered_memory.core.render import EMPTY_WRITABLE_NOTE, clean_memory_text
from layered_memory.rules._types import RuleDecision

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

    @property
    def overhead_chars(self) -> int:
        """Template, guidelines, preamble and separators: the block minus layers, rules and
        the session layer."""
        used = (
            sum(layer.block_chars for layer in self.layers)
            + self.rules_block_chars
            + self.session_block_chars
        )
        return len(self.block) - used


def tokens(chars: int) -> int:
    """Approximate tokens: one per 4 characters, rounded up."""
    return (chars + 3) // 4


def _element_start(layer: Layer, path: str) -> str:
    access = "writable" if layer.writable else "read-only"
    return f'<layer name="{escape(layer.name)}" path="{escape(path)}" access="{access}"'


def _find_element(block: str, start_tag: str, position: int) -> tuple[str, bool, int]:
    """The layer element opened by `start_tag` at or after `position`: its text, whether it is
    the one-line stub of a file left out, and where it ends.

    Memory text has its closing tags defused (`</layer` -> `<\\/layer`), so the first
    `</layer>` after a real opening tag is its own.
    """
    index = block.find(start_tag + ">\n", position)
    stub_index = block.find(start_tag + " omitted=", position)
    if index == -1 and stub_index == -1:
        return "", False, position
    if index == -1 or (stub_index != -1 and stub_index < index):
        end = block.index("/>", stub_index) + 2
        return block[stub_index:end], True, end
    end = block.index("\n</layer>", index) + len("\n</layer>")
    return block[index:end], False, end


def _file_report(
    path: str, snapshot: MemorySnapshot, problems: dict[str, str], element: str, *, stub: bool
) -> FileReport:
    text = snapshot.files.get(path)
    status: FileStatus = "loaded" if text is not None else "missing"
    if path in problems:
        status = "skipped"
    body = "" if stub or not element else element[element.find(">\n") + 2 : -len("\n</layer>")]
    line_marker = f" more lines of {path} not shown (first "
    cut_marker = f" of {path} not shown; read_file {path} for the rest]"
    shown: Shown
    if not element:
        shown = "absent"
    elif stub:
        shown = "omitted"
    elif body == EMPTY_WRITABLE_NOTE.format(path=path):
        shown = "empty"
    elif cut_marker in body:
        shown = "truncated"
    elif line_marker in body:
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
        cut_by_lines=line_marker in body,
        block_chars=len(element),
    )


def _compat_starts(block: str, layers: Sequence[Layer], snapshot: MemorySnapshot) -> list[int]:
    """Where each file's piece starts in a `sources=` (flat) block, -1 when it is not there.

    A flat piece is the file's path, a blank line, then its text; pieces follow the template's
    opening or a blank line. Searched in order, each after the previous one.
    """
    starts = []
    position = 0
    for layer in layers:
        for path in layer.paths:
            raw = snapshot.files.get(path)
            found = -1
            if path in snapshot.unreadable or (raw is not None and clean_memory_text(raw)):
                index = block.find("\n" + defuse_name(path) + "\n\n", position)
                if index != -1:
                    found = index + 1
                    position = found
            starts.append(found)
    return starts


def _compat_elements(
    block: str, layers: Sequence[Layer], snapshot: MemorySnapshot, template: str
) -> list[tuple[int, str]]:
    """Each file's piece of a flat block as `(start, text)`; `(-1, "")` when it is not there."""
    starts = _compat_starts(block, layers, snapshot)
    suffix = template.split("{agent_memory}", 1)[-1]
    body_end = len(block) - len(suffix) if block.endswith(suffix) else len(block)
    ends = sorted({*(start for start in starts if start != -1), body_end})
    elements = []
    for start in starts:
        if start == -1:
            elements.append((-1, ""))
            continue
        end = next(end for end in ends if end > start)
        text = block[start:end]
        elements.append((start, text[:-2] if text.endswith("\n\n") else text))
    return elements


def _layer_reports(
    assembler: MemoryAssembler, snapshot: MemorySnapshot, block: str
) -> tuple[tuple[LayerReport, ...], int]:
    layers = assembler.layers
    problems = {problem.path: problem.reason for problem in snapshot.problems}
    compat = (
        iter(_compat_elements(block, layers, snapshot, assembler.system_prompt))
        if assembler.compat
        else None
    )
    reports = []
    position = 0
    for layer in layers:
        files = []
        for path in layer.paths:
            raw = snapshot.files.get(path)
            element, stub = "", False
            if compat is not None:
                start_at, element = next(compat)
                if element:
                    position = start_at + len(element)
            # Search only for elements the renderer writes, so memory text that imitates a
            # missing file's opening tag is never taken for it.
            elif (
                layer.writable
                or (raw is not None and clean_memory_text(raw))
                or path in snapshot.unreadable
            ):
                start = _element_start(layer, path)
                element, stub, position = _find_element(block, start, position)
            files.append(_file_report(path, snapshot, problems, element, stub=stub))
        reports.append(LayerReport(layer, tuple(files)))
    return tuple(reports), position


def _rules_chars(block: str, position: int) -> int:
    start = block.find("<rules>\n", position)
    if start == -1:
        return 0
    return block.index("</rules>", start) + len("</rules>") - start


def _session_chars(block: str, position: int, snapshot: MemorySnapshot) -> int:
    """The session layer's element, the last piece the renderer writes (after the rules)."""
    if snapshot.session is None:
        return 0
    start = block.find('<layer name="session" key="', position)
    if start == -1:
        return 0
    end = block.find("\n</layer>", start)
    return (end + len("\n</layer>") if end != -1 else len(block)) - start


def report_from(
    assembler: MemoryAssembler,
    snapshot: MemorySnapshot,
    block: str,
    *,
    keys: Sequence[str],
    source: dict[str, Any],
) -> InspectReport:
    """Measure `block` (rendered by `assembler` from `snapshot`) layer by layer, and explain
    the rules for `keys`."""
    layer_reports, position = _layer_reports(assembler, snapshot, block)
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
        max_chars=assembler.max_chars,
        max_rules_chars=assembler.max_rules_chars,
        layers=layer_reports,
        rule_folders=tuple(assembler.rule_folders),
        decisions=decisions,
        rules_block_chars=_rules_chars(block, position),
        session_key=snapshot.session.key if snapshot.session else None,
        session_block_chars=_session_chars(block, position, snapshot),
        problems=tuple(sorted(problems, key=lambda p: (p.path, p.severity, p.reason))),
        block=block,
    )
