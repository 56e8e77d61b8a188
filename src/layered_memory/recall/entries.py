"""A memory file larger than its share of the budget, shown as its most relevant entries.

`Layer(name, path, recall=True)`: when the file's text does not fit, its entries (list items,
or the paragraphs of a section under its heading) are ranked by relevance to the latest user
message and the paths the agent touched (BM25 over content words, `recall.bm25`; an entry
naming a touched file's name counts as a match of that file), and as many as fit are shown,
in file order, each under its heading, followed by a marker saying how many were left out
and that the file can be read whole. When the relevant entries leave room, the rest of the
budget goes to the file's first entries (what a plain cut would have shown).

Cost: splitting a file and counting its words is done once per distinct text (`_prepared`,
cached on the text itself: the file's content is its own digest, and CPython keeps a
string's hash), so a model call whose memory did not change only scores the query's words
against the postings: a few dictionary lookups per entry holding a query word.

Parsing is one pass over the lines with anchored regexes (linear in the text); a fenced code
block belongs to the entry it starts in (a `#` line inside it is no heading).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from layered_memory.recall.bm25 import bm25, idf
from layered_memory.recall.text import tokens

__all__ = ["Entry", "RecallQuery", "choose_entries", "split_entries"]

_HEADING_RE: Final = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_ITEM_RE: Final = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_FENCE_RE: Final = re.compile(r" {0,3}(?:```|~~~)")
PATH_WEIGHT: Final = 0.5
"""Weight of a touched path's words beside the message's words."""
NAME_BONUS: Final = 2.0
"""Added (in units of the best message score) to an entry naming a touched file."""


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What a memory file's entries are chosen by.

    Attributes:
        message: The latest user message.
        paths: The paths the agent's tools touched this thread.
    """

    message: str = ""
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a memory file.

    Attributes:
        text: Its lines, trailing blank lines dropped.
        heading: The index of the heading entry it sits under (None: before any heading).
        is_heading: Whether it is a heading line (shown only with an entry under it).
    """

    text: str
    heading: int | None
    is_heading: bool = False


def split_entries(text: str) -> tuple[Entry, ...]:
    """The entries of a Markdown memory file, in file order.

    A heading line is an entry of its own; a list item runs until the next item, heading or
    unindented paragraph; a paragraph runs until a blank line. Lines inside a fenced code
    block stay with the entry the fence opened in.

    Args:
        text: The file's text.

    Returns:
        Its entries.
    """
    entries: list[Entry] = []
    current: list[str] = []
    is_item = False
    blank_before = False
    fenced = False
    heading: int | None = None

    def close() -> None:
        nonlocal current
        while current and not current[-1].strip():
            current.pop()
        if current:
            entries.append(Entry("\n".join(current), heading))
        current = []

    for line in text.split("\n"):
        if fenced:
            current.append(line)
            fenced = _FENCE_RE.match(line) is None
            continue
        if _HEADING_RE.match(line):
            close()
            heading = len(entries)
            entries.append(Entry(line.rstrip(), None, is_heading=True))
            is_item = blank_before = False
            continue
        blank = not line.strip()
        if _ITEM_RE.match(line):
            close()
            is_item = True
        elif blank:
            if not is_item:
                close()
            blank_before = True
            if current:
                current.append(line)
            continue
        elif current and blank_before and not line[:1].isspace():
            close()  # an unindented paragraph after a blank line ends the item
            is_item = False
        current.append(line)
        blank_before = False
        fenced = _FENCE_RE.match(line) is not None
    close()
    return tuple(entries)


@dataclass(frozen=True, slots=True)
class _Prepared:
    entries: tuple[Entry, ...]
    counts: tuple[Counter[str], ...]
    lengths: tuple[int, ...]
    postings: dict[str, tuple[int, ...]]
    avg_length: float
    lowered: tuple[str, ...]


@lru_cache(maxsize=64)
def _prepared(text: str) -> _Prepared:
    """The entries of `text` with their word counts and postings (once per distinct text)."""
    entries = split_entries(text)
    counts = tuple(
        Counter[str]() if entry.is_heading else Counter(tokens(entry.text)) for entry in entries
    )
    lengths = tuple(sum(c.values()) for c in counts)
    postings: dict[str, list[int]] = {}
    for number, words in enumerate(counts):
        for word in words:
            postings.setdefault(word, []).append(number)
    items = sum(1 for entry in entries if not entry.is_heading) or 1
    return _Prepared(
        entries,
        counts,
        lengths,
        {word: tuple(docs) for word, docs in postings.items()},
        max(sum(lengths) / items, 1.0),
        tuple(entry.text.lower() for entry in entries),
    )


def _scores(prepared: _Prepared, query: RecallQuery) -> dict[int, float]:
    """Each matching entry's score: BM25 of the message's words, the touched paths' words at
    `PATH_WEIGHT`, and `NAME_BONUS` for naming a touched file."""
    weights: dict[str, float] = {}
    for word in tokens(query.message):
        weights[word] = 1.0
    names: set[str] = set()
    for path in query.paths:
        name = posixpath.basename(path.rstrip("/")).lower()
        if len(name) > 2:
            names.add(name)
        for word in tokens(path):
            weights[word] = max(weights.get(word, 0.0), PATH_WEIGHT)
    total = sum(1 for entry in prepared.entries if not entry.is_heading)
    scores: dict[int, float] = {}
    for word, weight in weights.items():
        docs = prepared.postings.get(word, ())
        if not docs:
            continue
        value = idf(total, len(docs))
        for number in docs:
            tf = prepared.counts[number][word]
            score = bm25(tf, prepared.lengths[number], prepared.avg_length, value)
            scores[number] = scores.get(number, 0.0) + weight * score
    if names:
        best = max(scores.values(), default=1.0)
        for number, lowered in enumerate(prepared.lowered):
            if not prepared.entries[number].is_heading and any(n in lowered for n in names):
                scores[number] = scores.get(number, 0.0) + NAME_BONUS * best
    return scores


def choose_entries(
    text: str, limit: int, query: RecallQuery, marker: Callable[[int, int], str]
) -> str:
    """The entries of `text` that fit `limit` characters, the most relevant first, shown in
    file order and followed by `marker(left_out, total)` (the whole text if it fits).

    Args:
        text: The file's text.
        limit: Characters the result may take, marker included.
        query: The latest user message and the paths touched.
        marker: The line saying how many entries were left out of how many, and that the
            file can be read whole.

    Returns:
        The chosen entries and the marker; "" when not even the marker fits.
    """
    if len(text) <= limit:
        return text
    prepared = _prepared(text)
    entries = prepared.entries
    total = sum(1 for entry in entries if not entry.is_heading)
    room = limit - len(marker(total, total)) - 1
    if room < 0:
        return ""
    scores = _scores(prepared, query)
    relevant = sorted(scores, key=lambda number: (-scores[number], number))
    rest = [n for n, e in enumerate(entries) if not e.is_heading and n not in scores]
    chosen: set[int] = set()
    used = 0
    for number in (*relevant, *rest):
        entry = entries[number]
        cost = len(entry.text) + 1
        head = entry.heading
        if head is not None and head not in chosen:
            cost += len(entries[head].text) + 2  # the heading and a blank line before it
        if used + cost <= room:
            chosen.add(number)
            if head is not None:
                chosen.add(head)
            used += cost
    lines: list[str] = []
    for number in sorted(chosen):
        if entries[number].is_heading and lines:
            lines.append("")
        lines.append(entries[number].text)
    shown = sum(1 for number in chosen if not entries[number].is_heading)
    lines.append(marker(total - shown, total))
    return "\n".join(lines)
