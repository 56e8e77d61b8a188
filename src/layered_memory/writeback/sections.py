"""Sections of a memory file as pure text, no I/O: the `## Recent Insights` section of
write-back (`plan_insight`) and what every managed section shares: finding a section, inserting
at its top, rotating entries into the archive, one-line texts redacted twice.

The learned section of consolidation builds on it (`writeback.learned`), its review queue is
`writeback.review_queue`, the hold of lessons that would steer the agent `writeback.lesson_hold`.
The sync and async writers share all of it: each maps the current texts of the files to their
new texts inside one locked transaction (`core.files.transact`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final, NamedTuple

from layered_memory.core.files import INSIGHT_ENTRY
from layered_memory.core.layers import MEMORY_FILE_DEFAULT_MAX_LINES
from layered_memory.safety.redaction import redact

__all__ = [
    "RESCAN_MARGIN",
    "Insight",
    "InsightPlan",
    "archive_path_for",
    "archive_text",
    "cut_text",
    "find_section",
    "insert_at_top",
    "newline_of",
    "normalize_entity",
    "one_line",
    "plan_insight",
    "redacted_line",
    "split_lines",
    "with_newline",
]


# ================================================================================================
# Recent Insights, and what every section shares
#
# Pure text helpers of the write-back: parse the insights section, insert, dedup, rotate.
#
# No I/O here: `plan_insight` maps the current texts of MEMORY.md and its archive to the new
# texts, and the sync and async writers share it. Lines are split on `\n` only and joined back
# unchanged, so every byte outside the lines write-back adds or moves stays as it was (CRLF
# files keep CRLF; new lines use the file's own line ending).
# ================================================================================================

INSIGHTS_HEADING: Final = "## Recent Insights"
ARCHIVE_HEADING: Final = "## Archived Insights"
ARCHIVE_PREAMBLE: Final = (
    "# Archived insights\n"
    "\n"
    "Insights rotated out of {source}'s Recent Insights section, newest first.\n"
)

_HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_WHITESPACE = re.compile(r"\s+")
# Control characters (category Cc) and lone surrogates, once whitespace is collapsed (tab, line
# breaks and `\x1c`-`\x1f` are whitespace and already gone). A NUL makes every later load
# skip the whole file as binary, and `write_file` refuse it: the user's own notes would vanish
# from the prompt. ESC starts terminal escapes, and a lone surrogate cannot be encoded (the
# write would fail). Each becomes U+FFFD, as `tiers.summaries.storable` does, not nothing: the
# line still shows something was there, and the words on either side do not run together.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_MARKUP_STARTS = ("#", "`", "~")


@dataclass(frozen=True, slots=True)
class Insight:
    """One insight line: `- YYYY-MM-DD: [entity] text` (no `[entity] ` when entity is None)."""

    date: dt.date
    entity: str | None
    text: str

    def line(self) -> str:
        """The entry line without its line ending."""
        entity = f"[{self.entity}] " if self.entity else ""
        return f"- {self.date.isoformat()}: {entity}{self.text}"


@dataclass(frozen=True, slots=True)
class InsightPlan:
    """The outcome of adding one insight.

    Attributes:
        memory: The new text of the memory file.
        archive: The new text of the archive file, or None when nothing was rotated out.
        archived: How many entries moved to the archive.
    """

    memory: str
    archive: str | None
    archived: int


class _InsightEntry(NamedTuple):
    start: int
    end: int
    date: str
    entity: str | None
    text: str


def normalize_entity(entity: str | None) -> str | None:
    """One line (see `one_line`), no brackets; None for a missing or blank entity."""
    if entity is None:
        return None
    cleaned = one_line(entity.replace("[", "(").replace("]", ")"))
    return cleaned or None


def one_line(text: str) -> str:
    """One line with single spaces: every run of whitespace (line breaks, U+2028, `\\x1c`...)
    becomes one space, and every other control character (NUL, ESC...) U+FFFD."""
    return _UNPRINTABLE.sub("\ufffd", _WHITESPACE.sub(" ", text).strip())


def cut_text(text: str, *, max_chars: int) -> str:
    """`text` cut to `max_chars` (an ellipsis marks a cut)."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + "…"


def plan_insight(
    memory: str | None,
    archive: str | None,
    insight: Insight,
    *,
    max_insights: int,
    source_name: str,
) -> InsightPlan | None:
    """Add `insight` at the top of the insights section; rotate the overflow into the archive.

    Args:
        memory: Current text of the memory file (None: it does not exist yet).
        archive: Current text of the archive file (None: it does not exist yet).
        insight: The insight to add (already redacted and normalized).
        max_insights: Entries kept in the memory file; older ones move to the archive.
        source_name: The memory file's name, for the archive's preamble.

    Returns:
        The new texts, or None when the section already holds an entry of the same entity on
        the same day (for an insight without entity: the same text on the same day).
    """
    memory_text = memory or ""
    newline = newline_of(memory_text)
    lines = split_lines(memory_text)
    section = find_section(lines, INSIGHTS_HEADING)
    if section is not None:
        entries = parse_insights(lines, *section)
        if any(_same_slot(entry, insight) for entry in entries):
            return None
    new_lines = insert_at_top(lines, INSIGHTS_HEADING, [insight.line() + newline], newline)

    section = find_section(new_lines, INSIGHTS_HEADING)
    assert section is not None  # just inserted
    entries = parse_insights(new_lines, *section)
    overflow = entries[max_insights:]
    if not overflow:
        return InsightPlan(memory="".join(new_lines), archive=None, archived=0)

    moved: list[str] = []
    for entry in overflow:
        moved.extend(with_newline(line, newline) for line in new_lines[entry.start : entry.end])
    drop = {index for entry in overflow for index in range(entry.start, entry.end)}
    kept = [line for index, line in enumerate(new_lines) if index not in drop]
    return InsightPlan(
        memory="".join(kept),
        archive=archive_text(
            archive,
            moved,
            heading=ARCHIVE_HEADING,
            preamble=ARCHIVE_PREAMBLE.format(source=source_name),
        ),
        archived=len(overflow),
    )


def split_lines(text: str) -> list[str]:
    """Split after each `\\n` only, keeping the endings: `"".join(result) == text`."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def find_section(lines: Sequence[str], heading: str) -> tuple[int, int] | None:
    """`(heading index, end index)` of the first `heading` section outside code fences.

    The section ends at the next heading of level 1 or 2 (deeper headings belong to it).
    """
    wanted = heading.strip().casefold()
    start: int | None = None
    fence: str | None = None
    for index, raw in enumerate(lines):
        if not raw.lstrip(" ").startswith(_MARKUP_STARTS):
            continue  # neither a heading nor a fence: most lines, skipped without a regex
        line = raw.rstrip("\r\n")
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match["fence"]
            if fence is None:
                fence = marker
                continue
            if marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
                continue
        if fence is not None:
            continue
        heading_match = _HEADING.match(line)
        if heading_match is None:
            continue
        if start is None:
            if line.strip().casefold() == wanted:
                start = index
        elif len(heading_match["hashes"]) <= 2:
            return start, index
    return None if start is None else (start, len(lines))


def parse_insights(lines: Sequence[str], start: int, end: int) -> list[_InsightEntry]:
    """The dated entries of a section; an entry owns the indented lines that follow it."""
    entries: list[_InsightEntry] = []
    index = start + 1
    while index < end:
        if not lines[index].startswith("- "):
            index += 1
            continue
        match = INSIGHT_ENTRY.match(lines[index].rstrip("\r\n"))
        if match is None:
            index += 1
            continue
        stop = index + 1
        while stop < end and lines[stop][:1] in (" ", "\t") and lines[stop].strip():
            stop += 1
        entries.append(
            _InsightEntry(
                start=index,
                end=stop,
                date=match["date"],
                entity=match["entity"],
                text=match["text"],
            )
        )
        index = stop
    return entries


def is_insight_entry(line: str) -> bool:
    """Whether `line` is a dated insight entry (`- 2025-06-01: ...`)."""
    return line.startswith("- ") and INSIGHT_ENTRY.match(line.rstrip("\r\n")) is not None


EntryCheck = Callable[[str], bool]
"""Whether a line starts an entry of a section (`is_insight_entry`, a learned entry...)."""


def _first_entry(lines: Sequence[str], start: int, end: int, is_entry: EntryCheck) -> int | None:
    for index in range(start + 1, end):
        if is_entry(lines[index]):
            return index
    return None


def _same_slot(entry: _InsightEntry, insight: Insight) -> bool:
    if entry.date != insight.date.isoformat():
        return False
    if insight.entity is None:
        return entry.entity is None and entry.text.strip() == insight.text
    return entry.entity is not None and entry.entity.casefold() == insight.entity.casefold()


def insert_at_top(
    lines: Sequence[str],
    heading: str,
    block: Sequence[str],
    newline: str,
    *,
    is_entry: EntryCheck = is_insight_entry,
) -> list[str]:
    """Insert `block` above the section's first entry, creating the section when missing."""
    result = list(lines)
    section = find_section(result, heading)
    if section is None:
        at = _new_section_index(result)
        if result and at == len(result):
            result[-1] = with_newline(result[-1], newline)
        before = [newline] if at > 0 and result[at - 1].strip() else []
        after = [newline] if at < len(result) else []
        return [*result[:at], *before, heading + newline, newline, *block, *after, *result[at:]]

    start, end = section
    first = _first_entry(result, start, end, is_entry)
    if first is not None:
        return [*result[:first], *block, *result[first:]]

    # No entries yet: after whatever the section already says, before its trailing blanks.
    insert_at = end
    while insert_at > start + 1 and not result[insert_at - 1].strip():
        insert_at -= 1
    result[insert_at - 1] = with_newline(result[insert_at - 1], newline)
    before = [] if not result[insert_at - 1].strip() else [newline]
    after = [newline] if insert_at < len(result) and result[insert_at].strip() else []
    return [*result[:insert_at], *before, *block, *after, *result[insert_at:]]


def _new_section_index(lines: Sequence[str]) -> int:
    """Where a missing insights section goes: near the top, inside the head the prompt shows.

    Only a memory file's first lines are injected (`MEMORY_FILE_DEFAULT_MAX_LINES`, 200), so
    the section goes before the first level-2 heading when its first entry still lands inside
    them; else after the `# ` title and its short intro paragraph (the same condition); else at
    the top. Never inside a code fence: a heading there is no heading, and a fence left open
    (say, by a hostile or half-written file) would swallow the section.
    """
    fenced = fenced_lines(lines)
    for index, line in enumerate(lines):
        if line.startswith("## ") and index not in fenced:
            if _entry_is_shown(index):
                return index
            break  # a long first section: the title is the next best place
    for index, line in enumerate(lines):
        if line.startswith("# ") and index not in fenced:
            at = _after_intro(lines, index + 1)
            unfenced = at not in fenced and at - 1 not in fenced
            return at if unfenced and _entry_is_shown(at) else 0
    return 0


_SECTION_HEAD_LINES = 3
"""Lines a new section puts before its first entry: a blank line, the heading, a blank line."""


def _entry_is_shown(at: int) -> bool:
    """Whether a section inserted at line `at` has its first entry inside the shown head."""
    return at + _SECTION_HEAD_LINES < MEMORY_FILE_DEFAULT_MAX_LINES


def fenced_lines(lines: Sequence[str]) -> set[int]:
    """Indexes of the lines inside code fences, the fence lines included (one pass)."""
    inside: set[int] = set()
    fence: str | None = None
    for index, raw in enumerate(lines):
        match = _FENCE.match(raw.rstrip("\r\n")) if raw.lstrip(" ").startswith(("`", "~")) else None
        if fence is not None:
            inside.add(index)
            if match and match["fence"][0] == fence[0] and len(match["fence"]) >= len(fence):
                fence = None
        elif match:
            fence = match["fence"]
            inside.add(index)
    return inside


_MAX_INTRO_LINES = 20


def _after_intro(lines: Sequence[str], start: int) -> int:
    """The end of the short paragraph introducing a file under its title (else `start`)."""
    index = start
    while index < len(lines) and not lines[index].strip():
        index += 1
    paragraph_start = index
    while index < len(lines) and lines[index].strip():
        index += 1
    return index if index - paragraph_start <= _MAX_INTRO_LINES else start


def archive_text(
    archive: str | None,
    moved: Sequence[str],
    *,
    heading: str,
    preamble: str,
    is_entry: EntryCheck = is_insight_entry,
) -> str:
    """The archive file with the `moved` entry lines at the top of its `heading` section.

    `preamble` starts a new archive file. Entries the section already holds are not added
    again: a retry after a crash between the two writes must not archive them twice.
    """
    text = archive if archive else preamble
    newline = newline_of(text)
    lines = split_lines(text)
    section = find_section(lines, heading)
    present: set[str] = set()
    if section is not None:
        present = {line.rstrip("\r\n") for line in lines[section[0] : section[1]]}
    fresh = _drop_present(moved, present, is_entry)
    block = [with_newline(line.rstrip("\r\n"), newline) for line in fresh]
    if not block:
        return text
    return "".join(insert_at_top(lines, heading, block, newline, is_entry=is_entry))


def _drop_present(moved: Sequence[str], present: set[str], is_entry: EntryCheck) -> list[str]:
    kept: list[str] = []
    skipping = False
    for line in moved:
        if is_entry(line):
            skipping = line.rstrip("\r\n") in present
        if not skipping:
            kept.append(line)
    return kept


def with_newline(line: str, newline: str) -> str:
    """`line` ending with a line break (`newline` when it has none)."""
    return line if line.endswith("\n") else line + newline


def newline_of(text: str) -> str:
    """The line ending a text uses (`\\r\\n` when it has any, else `\\n`)."""
    return "\r\n" if "\r\n" in text else "\n"


RESCAN_MARGIN: Final = 8192
"""Characters past the stored length that the second pass still scans: more than any detector
reads past a secret's start (a quoted value: two lines of 1,024), so a secret that begins
inside the stored text is seen whole enough to be found."""


def redacted_line(
    text: str, normalize: Callable[[str], str | None], *, keep: int | None = None
) -> tuple[str | None, list[str]]:
    """`text` redacted, made one line by `normalize`, and redacted again as that line.

    Redacted first as given (a key block spans lines, and is recognized by its line breaks),
    then as the line that is stored: joining lines can complete a secret neither line showed
    (`PASSWORD=` at the end of one line, the value on the next; `postgres://admin:` and
    `...@host`), and the stored line is what later prompts read. `normalize` runs once more
    when the second pass changed something, so a marker follows the line's own rules too
    (no brackets in an entity). With `keep`, the line is cut to that many characters before
    the second pass: the rest is never stored, and a huge text costs one full scan, not two.
    """
    first, kinds = redact(text)
    normalized = normalize(first)
    if normalized is None:
        return None, kinds
    if keep is not None:
        normalized = normalized[:keep]
    if normalized == first.strip():
        return normalized, kinds  # already one line: nothing joined, nothing new to find
    second, more = redact(normalized)
    if more:
        kinds = sorted({*kinds, *more})
        second = normalize(second) or ""
    return second, kinds


def archive_path_for(path: str) -> str:
    """`/MEMORY.md` -> `/MEMORY.archive.md` (same folder; `.archive` before the suffix)."""
    pure = PurePosixPath(path)
    name = f"{pure.stem}.archive{pure.suffix}" if pure.suffix else f"{pure.name}.archive"
    return str(pure.with_name(name))
