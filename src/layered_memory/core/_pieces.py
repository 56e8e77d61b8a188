"""The parts of the memory block, each with its full text and how it gives way to the budget.

A part is one file in its element (a layer file, a nested file, an imported file), a note
standing for a file (missing, empty, unreadable), the rules, or the session layer. Parts come in
display order; `rank` says which give way first (nested memory before the explicit layers).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from layered_memory.core._defuse import defuse, defuse_attribute, defuse_name
from layered_memory.core._imports import import_cycles
from layered_memory.core._truncation import (
    cap_lines,
    clean_memory_text,
    defuse_within,
    omitted_marker,
    redact_within,
    truncate_text,
)
from layered_memory.core.layers import Layer
from layered_memory.writeback.redaction import redact_json

UNREADABLE_NOTE = (
    "(present but unreadable: {reason}. Do not overwrite it with write_file: its content is "
    "unknown and would be lost. Tell the user the file needs fixing.)"
)

EMPTY_WRITABLE_NOTE = (
    "(empty: nothing saved yet. To remember something, write it to {path} with "
    "edit_file or write_file.)"
)

MISSING_IMPORT = "[import @{ref}: no such file]"

PieceKind = Literal["layer", "nested", "import", "rules", "session", "note"]


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """The session store's data for this run, shown as the highest-precedence layer."""

    key: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class MemoryExtras:
    """Nested and imported memory of one load (empty without `nested=` and imports).

    Attributes:
        nested: Nested file path -> text, shallow to deep.
        imports: Imported file path -> text.
        edges: Importing file -> the paths it imports, in order.
        access: Nested or imported file -> `writable` / `read-only`.
        missing: Importing file -> `@` references that named no file.
        nested_dirs: The directories nested memory was looked up in.
        too_deep: Files whose own imports were past `MAX_IMPORT_DEPTH` and not followed.
    """

    nested: Mapping[str, str] = field(default_factory=dict)
    imports: Mapping[str, str] = field(default_factory=dict)
    edges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    access: Mapping[str, str] = field(default_factory=dict)
    missing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    nested_dirs: tuple[str, ...] = ()
    too_deep: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.nested or self.imports or self.missing or self.nested_dirs)

    @property
    def cycles(self) -> list[tuple[str, ...]]:
        """Import cycles among the loaded files (harmless at run time; `lint` reports them)."""
        return import_cycles(self.edges)


@dataclass(frozen=True, slots=True)
class Piece:
    """One part of the body that can give way: its full text and how to shrink it."""

    full: str
    shrink: Callable[[int], str]
    min_len: int
    stub: str = ""
    """Left in place of a piece dropped whole, so the agent still learns the file exists."""
    kind: PieceKind = "layer"
    layer: str = ""
    path: str = ""
    source_chars: int = 0
    """Characters of the file's text before any cap (0 for notes)."""
    capped: tuple[str, ...] = ()
    """Caps applied before the budget was looked at (line cap, layer cap)."""
    rank: int = 0
    """Lower ranks give way to the budget first (then, within a rank, display order)."""


def fixed(text: str) -> Callable[[int], str]:
    """The shrink function of a piece that never shrinks (it is dropped whole, if at all)."""
    return lambda _limit: text


def unreadable_note(reason: str) -> str:
    """What stands for a file that exists but could not be read."""
    return defuse(UNREADABLE_NOTE.format(reason=reason))


def with_missing_imports(text: str, missing: Sequence[str]) -> str:
    """A file's text with a marker line for each import that named no file."""
    if not missing:
        return text
    markers = "\n".join(MISSING_IMPORT.format(ref=defuse_name(ref)) for ref in missing)
    return f"{text}\n{markers}" if text else markers


def layer_pieces(
    layers: Sequence[Layer],
    files: Mapping[str, str],
    unreadable: Mapping[str, str],
    available: int,
    extras: MemoryExtras,
) -> list[Piece]:
    """Every layer file in its element, each followed by what it imports; then nested files."""
    pieces: list[Piece] = []
    placed: set[str] = set()
    for layer in layers:
        remaining = layer.max_chars
        for path in layer.paths:
            if path in unreadable:
                note = unreadable_note(unreadable[path])
                pieces.append(element_piece(layer, path, note, shrinkable=False, kind="note"))
                continue
            raw = with_missing_imports(
                clean_memory_text(files[path]) if path in files else "",
                extras.missing.get(path, ()),
            )
            if not raw:
                if layer.writable:
                    note = EMPTY_WRITABLE_NOTE.format(path=defuse_name(path))
                    pieces.append(element_piece(layer, path, note, shrinkable=False, kind="note"))
                continue
            piece, remaining = file_piece(layer, path, raw, available, remaining=remaining)
            pieces.append(piece)
            pieces.extend(_imported(path, layer.name, extras, placed, available, rank=0))
    for path, text in extras.nested.items():
        name = f"nested: {posixpath.dirname(path) or '/'}"
        layer = Layer(name, path, writable=extras.access.get(path) == "writable")
        raw = with_missing_imports(clean_memory_text(text), extras.missing.get(path, ()))
        if raw:
            piece, _ = file_piece(layer, path, raw, available, kind="nested", rank=-1)
            pieces.append(piece)
        pieces.extend(_imported(path, name, extras, placed, available, rank=-1))
    return pieces


def _imported(
    importer: str,
    owner: str,
    extras: MemoryExtras,
    placed: set[str],
    available: int,
    *,
    rank: int,
) -> Iterator[Piece]:
    """The files `importer` imports, depth first, each placed once (right after its first
    importer)."""
    for target in extras.edges.get(importer, ()):
        if target in placed or target not in extras.imports:
            continue
        placed.add(target)
        raw = with_missing_imports(
            clean_memory_text(extras.imports[target]), extras.missing.get(target, ())
        )
        name = f"{owner}, imported by {importer}"
        layer = Layer(name, target, writable=extras.access.get(target) == "writable")
        if raw:
            piece, _ = file_piece(layer, target, raw, available, kind="import", rank=rank)
            yield piece
        yield from _imported(target, owner, extras, placed, available, rank=rank)


def file_piece(
    layer: Layer,
    path: str,
    text: str,
    available: int,
    *,
    remaining: int | None = None,
    kind: PieceKind = "layer",
    rank: int = 0,
) -> tuple[Piece, int | None]:
    """A file's element, its text cut by the layer's line and character caps; returns the
    layer's remaining character cap too."""
    source_chars = len(text)
    capped: list[str] = []
    line_cap = layer.line_cap(path)
    redacted = redact_within(text, available)
    lined = cap_lines(redacted, line_cap, path)
    if lined is not redacted:
        capped.append(f"first {line_cap} lines kept (max_lines)")
    text = defuse_within(lined, available)
    if remaining is not None:
        cut = truncate_text(text, max(remaining, 0), path)
        if cut != text:
            capped.append(f"over the layer's max_chars={layer.max_chars}")
            # Past the cap, even the cut marker may not fit: a short marker, never "".
            cut = cut or omitted_marker(path, len(text))
        text = cut
        remaining -= len(text)
    piece = element_piece(layer, path, text, shrinkable=True, kind=kind, rank=rank)
    return replace(piece, source_chars=source_chars, capped=tuple(capped)), remaining


def element_piece(
    layer: Layer,
    path: str,
    body: str,
    *,
    shrinkable: bool,
    kind: PieceKind = "layer",
    rank: int = 0,
) -> Piece:
    """A file (or a note standing for it) in its `<layer>` element."""
    access = "writable" if layer.writable else "read-only"
    shown = defuse_attribute(path)
    attributes = f'name="{defuse_attribute(layer.name)}" path="{shown}" access="{access}"'
    head = f"<layer {attributes}>\n"
    tail = "\n</layer>"
    full = f"{head}{body}{tail}"
    stub = f'<layer {attributes} omitted="over the memory budget; read_file {shown}"/>'
    label: dict[str, Any] = {"kind": kind, "layer": layer.name, "path": path, "rank": rank}
    if not shrinkable:
        return Piece(full, fixed(full), len(full), stub, **label)
    frame = len(head) + len(tail)

    def shrink(limit: int) -> str:
        kept = truncate_text(body, max(limit - frame, 0), path)
        return f"{head}{kept}{tail}" if kept else stub

    return Piece(full, shrink, len(stub), stub, **label)


def compat_pieces(
    layers: Sequence[Layer],
    files: Mapping[str, str],
    unreadable: Mapping[str, str],
    available: int,
    extras: MemoryExtras,
) -> list[Piece]:
    """deepagents' layout: each source as its path then its text (nested and imported files
    alike, each after what brought it in)."""
    pieces: list[Piece] = []
    placed: set[str] = set()

    def add(path: str, text: str, owner: str, kind: PieceKind, rank: int) -> None:
        raw = with_missing_imports(clean_memory_text(text), extras.missing.get(path, ()))
        if raw:  # deepagents drops empty and comment-only sources
            pieces.append(_compat_piece(owner, path, raw, available, kind=kind, rank=rank))
        for target in extras.edges.get(path, ()):
            if target in extras.imports and target not in placed:
                placed.add(target)
                add(target, extras.imports[target], owner, "import", rank)

    for layer in layers:
        for path in layer.paths:
            if path in unreadable:
                # deepagents would have aborted the run here; say what is wrong instead.
                note = f"{defuse_name(path)}\n\n{unreadable_note(unreadable[path])}"
                pieces.append(
                    Piece(note, fixed(note), len(note), kind="note", layer=layer.name, path=path)
                )
                continue
            add(path, files.get(path) or "", layer.name, "layer", 0)
    for path, text in extras.nested.items():
        add(path, text, f"nested: {posixpath.dirname(path) or '/'}", "nested", -1)
    return pieces


def _compat_piece(
    owner: str, path: str, text: str, available: int, *, kind: PieceKind, rank: int
) -> Piece:
    source_chars = len(text)
    line_cap = Layer(owner, path).line_cap(path)
    redacted = redact_within(text, available)
    lined = cap_lines(redacted, line_cap, path)
    capped = () if lined is redacted else (f"first {line_cap} lines kept (max_lines)",)
    text = defuse_within(lined, available)
    head = f"{defuse_name(path)}\n\n"

    def shrink(limit: int) -> str:
        cut = truncate_text(text, max(limit - len(head), 0), path)
        # Never the bare header: it reads as an empty file.
        return f"{head}{cut or (omitted_marker(path, len(text)) if text else '')}"

    return Piece(
        f"{head}{text}",
        shrink,
        len(shrink(0)),
        kind=kind,
        layer=owner,
        path=path,
        source_chars=source_chars,
        capped=capped,
        rank=rank,
    )


def rules_piece(rules: Callable[[int], str], available: int) -> Piece:
    """The matched rules (they render themselves within a limit)."""
    full = rules(max(available, 0))
    return Piece(full, rules, 0, kind="rules", source_chars=len(full))


def session_piece(session: SessionEntry, available: int) -> Piece:
    """The session layer: the store's data for this run as sorted JSON."""
    head = f'<layer name="session" key="{defuse_attribute(session.key)}" access="read-only">\n'
    tail = "\n</layer>"
    # Redacted again (every store `set` redacts already): a store written another way.
    data, _ = redact_json(dict(session.data))
    body = defuse_within(
        json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1, default=str), available
    )
    frame = len(head) + len(tail)

    def shrink(limit: int) -> str:
        return f"{head}{truncate_text(body, max(limit - frame, 0), 'session:' + session.key)}{tail}"

    return Piece(
        f"{head}{body}{tail}",
        shrink,
        len(shrink(0)),
        kind="session",
        layer="session",
        path=session.key,
        source_chars=len(body),
    )
