"""Sections of a memory file as pure text, no I/O: what write-back and consolidation write.

Three parts, in the order they depend on one another:

- the `## Recent Insights` section of write-back (`plan_insight`) and the helpers every section
  shares: finding a section, inserting at its top, rotating entries into the archive;
- the managed `## Learned` section of consolidation and the review queue beside it (`Plan`,
  `carry_out`: the rules every change goes through, shared by consolidation and approval);
- lesson texts that read as instructions aimed at the agent (`instruction_reason`): held for
  a person, never applied.

The sync and async writers share all of it: each maps the current texts of the files to their
new texts inside one locked transaction (`core.files.transact`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, Final, Literal, NamedTuple

from layered_memory.core.files import INSIGHT_ENTRY, LEARNED_MARK, learned_entry
from layered_memory.core.layers import MEMORY_FILE_DEFAULT_MAX_LINES
from layered_memory.core.loading import strip_html_comments
from layered_memory.core.render import ascii_skeleton
from layered_memory.safety.redaction import redact

__all__ = [
    "OPS",
    "RESCAN_MARGIN",
    "Change",
    "ConsolidationResult",
    "Files",
    "Insight",
    "InsightPlan",
    "Plan",
    "Proposal",
    "Provenance",
    "carry_out",
    "clean_text",
    "cut_text",
    "entry_line",
    "find_section",
    "instruction_reason",
    "new_change",
    "normalize_entity",
    "one_line",
    "plan_insight",
    "provenance_of",
    "read_queue",
    "redacted_line",
    "section_entries",
    "split_lines",
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
# write would fail). Each becomes U+FFFD, as `tiers.search.storable` does, not nothing: the
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


# ================================================================================================
# The Learned section and the review queue
#
# The managed `## Learned` section and the review queue beside it: pure text, no I/O.
#
# An entry is one bullet of the section. Consolidation keeps its provenance in an HTML comment at
# the end of the line, which the loader strips before the prompt (`core.loading`), so the agent
# reads the lesson and `layered-memory inspect` / `review` read where it came from:
#
#     - The user prefers metric units. <!-- learned id=k3f9 thread=t1 date=2025-06-01 model=m -->
#
# The id is short and stable for the entry's life: derived from the text when the entry is
# created, then read back from the comment. A bullet written by hand (no comment) gets the id
# derived from its text, so it can be updated and deleted like the others.
#
# Changes the consolidator may not apply on its own wait in the review queue, a JSON file beside
# the memory file (`MEMORY.pending.json`). A queued change's id is a digest of what it does
# (operation, entry, text), computed again whenever the queue is read: a queued text edited by
# hand (or by an agent with file tools) gets another id, so approving the id a reviewer saw can
# never apply a text the reviewer did not see.
#
# `Plan` maps the current texts of the memory file, its archive and the queue, plus the changes
# to make, to their new texts; it runs inside one locked transaction (`core.files.transact`).
# Lines are split on `\n` only and every line outside the entries consolidation writes stays as it
# was (the section's own prose, every other section, CRLF endings).
# ================================================================================================

Op = Literal["add", "update", "delete"]
OPS: Final = ("add", "update", "delete")

QUEUE_VERSION: Final = 1
MAX_QUEUE_CHARS: Final = 1_000_000
"""A review queue larger than this is not parsed (a runaway writer, or a hostile file)."""

_BULLETS: Final = ("- ", "* ", "+ ")
_ID_LENGTH: Final = 4
_VALID_ID = re.compile(r"[a-z0-9]{4,24}\Z")
_META_VALUE = re.compile(r"[^A-Za-z0-9._:@/+-]")
_MAX_META_CHARS: Final = 80
_WORD = re.compile(r"\w+(?:'\w+)?")
# Words that do not change what a lesson says; never a negation (see `_NEGATIONS`).
_STOPWORDS: Final = frozenset(
    "a an the is are was were be been being am to of for in on at by with and or as that this "  # noqa: SIM905
    "these those it its their they them he she his her has have had do does did will would "
    "should can could may might also just really very so".split()
)
_NEGATIONS: Final = frozenset(
    "not no never none nobody nothing neither nor without don't doesn't didn't isn't aren't "  # noqa: SIM905
    "wasn't weren't won't can't cannot shouldn't mustn't avoid stop".split()
)


# --- Values -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the learned section: proposed, applied, waiting for review or rejected.

    Attributes:
        id: The change's own id, a digest of `op`, `entry_id` and `text`: what `approve`,
            `reject` and `layered-memory review` name.
        op: `"add"`, `"update"` or `"delete"` (for a malformed operation: what the model sent).
        entry_id: The entry it changes; for an applied add, the new entry's id.
        text: The entry's new text (redacted, one line); None for a delete.
        reason: Why it waits for review or was rejected, or what else happened to it (merged
            into another entry); None when it was applied as asked.
        thread_id: The run it was learned from.
        model: The model that proposed it.
        date: When it was proposed (ISO date).
        entry_text: For an update or a delete: the entry's text when the change was proposed.
    """

    id: str
    op: str
    entry_id: str | None
    text: str | None
    reason: str | None = None
    thread_id: str | None = None
    model: str | None = None
    date: str | None = None
    entry_text: str | None = None


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """What one consolidation (or one review decision) did.

    Attributes:
        applied: Changes written to the section.
        pending: Changes waiting for review (`MemoryConsolidator.pending()`).
        rejected: Changes refused, each with its reason; nothing of them was written.
        archived: Entries moved to the archive file to keep the section within `max_entries`.
    """

    applied: list[Change] = field(default_factory=list)
    pending: list[Change] = field(default_factory=list)
    rejected: list[Change] = field(default_factory=list)
    archived: int = 0


def change_id(op: str, entry_id: str | None, text: str | None) -> str:
    """The id of a change: what it does, digested (8 hex digits)."""
    digest = hashlib.blake2b(
        json.dumps([op, entry_id, text], ensure_ascii=False).encode("utf-8", "replace"),
        digest_size=4,
    )
    return digest.hexdigest()


def new_change(
    op: str,
    entry_id: str | None,
    text: str | None,
    *,
    reason: str | None = None,
    provenance: Provenance,
    entry_text: str | None = None,
) -> Change:
    """A `Change` with its id computed and the run's provenance."""
    return Change(
        id=change_id(op, entry_id, text),
        op=op,
        entry_id=entry_id,
        text=text,
        reason=reason,
        thread_id=provenance.thread_id,
        model=provenance.model,
        date=provenance.date,
        entry_text=entry_text,
    )


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a lesson came from, as the entry's comment keeps it."""

    thread_id: str | None
    date: str
    model: str | None
    reviewed: str | None = None


def provenance_of(change: Change, *, reviewed: str | None = None) -> Provenance:
    """The provenance a change carries (`reviewed`: the date a person approved it)."""
    return Provenance(
        thread_id=change.thread_id, date=change.date or "", model=change.model, reviewed=reviewed
    )


# --- Entry texts ----------------------------------------------------------------------------


def clean_text(raw: str, *, max_chars: int) -> tuple[str, list[str]]:
    """An entry text as stored: secrets redacted, one line, no HTML comment marks, cut.

    `<!--` and `-->` are broken apart: inside an entry they would hide the rest of the line
    (and the provenance comment) from the prompt, or end the comment early.
    """
    line, kinds = redacted_line(raw, one_line, keep=max_chars + RESCAN_MARGIN)
    text = (line or "").replace("<!--", "< !--").replace("-->", "-- >")
    return cut_text(text, max_chars=max_chars) if text else "", kinds


class Lesson(NamedTuple):
    """What two entry texts are compared by: the text folded, and its content words."""

    key: str
    words: tuple[str, ...]


def fold(text: str) -> str:
    """An entry text folded: case, spacing and end punctuation do not count."""
    return " ".join(text.casefold().split()).strip(" .!;:,\"'")


def lesson(text: str) -> Lesson:
    """The comparable form of an entry text (case, spacing, end punctuation and filler words
    do not count; a plural `s` neither)."""
    key = fold(text)
    words = tuple(
        word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
        for word in _WORD.findall(key)
        if word not in _STOPWORDS
    )
    return Lesson(key, words)


def same_lesson(first: Lesson, second: Lesson) -> bool:
    """Whether two entries say the same: equal folded texts or content words, or one is the
    other with a word or two more (one per ten words) that are no negation.

    Cheap on purpose (no model, no embedding). It never merges a changed fact: `prefers tea
    over coffee` and `prefers coffee over tea`, `deploys on Tuesdays` and `on Thursdays`, or
    `deploy on Fridays` and `never deploy on Fridays` stay two entries (the model is told to
    update the old one instead).
    """
    if first.key == second.key:
        return True
    if not first.words or not second.words:
        return False
    if first.words == second.words:
        return True
    short, long = sorted((first.words, second.words), key=len)
    extra = len(long) - len(short)
    if len(short) < 3 or extra > max(1, len(long) // 10):
        return False
    return _is_subsequence(short, long) and not (set(long) - set(short)) & _NEGATIONS


def _is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    remaining = iter(long)
    return all(word in remaining for word in short)


# --- The section ----------------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    """One entry of the section.

    Attributes:
        id: Its id (shown to the model as `[id] text`).
        text: Its text as the prompt shows it (HTML comments of a hand-written line removed).
        lines: Its lines in the file, line endings kept (continuation lines included).
        meta: The provenance comment's fields (empty for a line written by hand).
    """

    id: str
    text: str
    lines: list[str]
    meta: dict[str, str]
    compared: Lesson | None = None
    """`lesson(text)`, computed when first compared (listing entries for a prompt never is)."""

    @property
    def lesson(self) -> Lesson:
        if self.compared is None:
            self.compared = lesson(self.text)
        return self.compared


def is_bullet(line: str) -> bool:
    """Whether a line starts an entry of the section (a top-level bullet)."""
    return line.startswith(_BULLETS)


def parse_entries(body: Sequence[str]) -> list[Entry | str]:
    """The section's body lines as entries and other lines (kept as they are), in file order."""
    items: list[Entry | str] = []
    index = 0
    while index < len(body):
        line = body[index]
        if not is_bullet(line):
            items.append(line)
            index += 1
            continue
        stop = index + 1
        while stop < len(body) and body[stop][:1] in (" ", "\t") and body[stop].strip():
            stop += 1
        parts = learned_entry(line)
        if parts is None:
            text, meta = strip_html_comments(line[2:]).strip(), {}
        else:
            text, meta = parts[0], _parse_meta(parts[1])
        items.append(Entry("", text, list(body[index:stop]), meta))
        index = stop
    _assign_ids([item for item in items if isinstance(item, Entry)])
    return items


def _assign_ids(entries: Sequence[Entry]) -> None:
    """Ids from the comments (first use wins), then derived ids for the rest."""
    taken: set[str] = set()
    for entry in entries:
        written = entry.meta.get("id", "")
        if _VALID_ID.match(written) and written not in taken:
            entry.id = written
            taken.add(written)
    for entry in entries:
        if not entry.id:
            entry.id = derive_id(entry.text, taken)
            taken.add(entry.id)


def derive_id(text: str, taken: Iterable[str]) -> str:
    """A short id from the text (4 characters, longer only on a collision with `taken`)."""
    used = set(taken)
    digest = base64.b32encode(hashlib.blake2b(fold(text).encode(), digest_size=10).digest())
    spelled = digest.decode("ascii").lower()
    for length in range(_ID_LENGTH, len(spelled) + 1):
        if spelled[:length] not in used:
            return spelled[:length]
    counter = 2
    while f"{spelled}{counter}" in used:
        counter += 1
    return f"{spelled}{counter}"


def _parse_meta(meta: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in meta.split():
        name, sep, value = part.partition("=")
        if sep and name and name not in fields:
            fields[name] = value
    return fields


def _meta_value(value: str) -> str:
    """A provenance value that cannot break the comment (`-->`) or the line: a safe subset."""
    return _META_VALUE.sub("_", value)[:_MAX_META_CHARS]


def entry_line(entry_id: str, text: str, provenance: Provenance) -> str:
    """An entry's line, without its line ending."""
    fields = [f"id={entry_id}"]
    for name, value in (
        ("thread", provenance.thread_id),
        ("date", provenance.date),
        ("model", provenance.model),
        ("reviewed", provenance.reviewed),
    ):
        if value:
            fields.append(f"{name}={_meta_value(value)}")
    return f"- {text} {LEARNED_MARK}{' '.join(fields)} -->"


def section_entries(memory: str | None, heading: str) -> list[Entry]:
    """The entries of the section `heading` of a memory file (none when it has no section)."""
    lines = split_lines(memory or "")
    bounds = find_section(lines, heading)
    if bounds is None:
        return []
    start, end = bounds
    return [item for item in parse_entries(lines[start + 1 : end]) if isinstance(item, Entry)]


# --- The review queue -----------------------------------------------------------------------


@dataclass(slots=True)
class Queue:
    """The review queue as read.

    Attributes:
        changes: The changes waiting, oldest first.
        foreign: Items that are not a readable change; written back as they were.
        problem: Why the file cannot be read (it is then left as it is: nothing is added to
            or removed from it until it is fixed or deleted).
    """

    changes: list[Change] = field(default_factory=list)
    foreign: list[Any] = field(default_factory=list)
    problem: str | None = None


_QUEUED_FIELDS: Final = (
    "op",
    "entry_id",
    "text",
    "reason",
    "thread_id",
    "model",
    "date",
    "entry_text",
)


def read_queue(text: str | None) -> Queue:
    """The review queue file's text (None: no file yet) as a `Queue`."""
    if text is None or not text.strip():
        return Queue()
    if len(text) > MAX_QUEUE_CHARS:
        return Queue(problem=f"larger than {MAX_QUEUE_CHARS:,} characters")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Queue(problem=f"not valid JSON ({type(exc).__name__})")
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        return Queue(problem='not a review queue (no "changes" list)')
    queue = Queue()
    for item in data["changes"]:
        change = _queued_change(item)
        if change is None:
            queue.foreign.append(item)
        else:
            queue.changes.append(change)
    return queue


def _queued_change(item: Any) -> Change | None:
    if not isinstance(item, dict):
        return None
    values = {name: item.get(name) for name in _QUEUED_FIELDS}
    if values["op"] not in OPS or not all(
        value is None or isinstance(value, str) for value in values.values()
    ):
        return None
    if (values["op"] == "delete") == isinstance(values["text"], str) or (
        values["op"] != "add" and not values["entry_id"]
    ):
        return None
    # The id is never read from the file: a text edited there gets another id.
    return Change(id=change_id(values["op"], values["entry_id"], values["text"]), **values)  # type: ignore[arg-type]


def queue_text(queue: Queue, *, memory_path: str) -> str:
    """The review queue file for `queue`."""
    changes: list[Any] = [
        {"id": change.id, **{name: getattr(change, name) for name in _QUEUED_FIELDS}}
        for change in queue.changes
    ]
    document = {
        "version": QUEUE_VERSION,
        "about": (
            f"Changes to {memory_path} waiting for review: list, approve or reject them with "
            "`layered-memory review`"
        ),
        "changes": [*changes, *queue.foreign],
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


# --- Planning one transaction -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Files:
    """The three files a consolidation transaction reads and writes, and the section's shape."""

    memory: str
    archive: str
    queue: str
    heading: str
    archive_heading: str
    archive_preamble: str
    max_entries: int
    max_pending: int


@dataclass(frozen=True, slots=True)
class Proposal:
    """A well-formed operation to carry out (text already cleaned).

    Attributes:
        change: The change, with its provenance.
        hold: Why it must wait for review whatever the settings (it reads as an instruction
            to the agent), or None.
    """

    change: Change
    hold: str | None = None


class Plan:
    """The working copy of the three files during one transaction."""

    def __init__(self, files: Files, texts: Mapping[str, str | None]) -> None:
        self.files = files
        memory = texts[files.memory] or ""
        self._archive_before = texts[files.archive]
        self.newline = newline_of(memory)
        self.lines = split_lines(memory)
        self.bounds = find_section(self.lines, files.heading)
        self.items: list[Entry | str] = (
            parse_entries(self.lines[self.bounds[0] + 1 : self.bounds[1]]) if self.bounds else []
        )
        """The section's lines after its heading: entries, and lines kept as they are."""
        self.fresh: list[Entry] = []
        """New entries while the section has none (or no section): `insert_at_top` places
        them as write-back places its first insight."""
        self.queue = read_queue(texts[files.queue])
        self.memory_changed = False
        self.queue_changed = False
        self.applied: list[Change] = []
        self.pending: list[Change] = []
        self.rejected: list[Change] = []
        self.changed: set[str] = set()
        """Entries this transaction changed already."""

    # -- lookups ---------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """The section's entries, newest (top) first."""
        return [*self.fresh, *(item for item in self.items if isinstance(item, Entry))]

    def entry(self, entry_id: str | None) -> Entry | None:
        return next((entry for entry in self.entries() if entry.id == entry_id), None)

    def same_as(self, text: str, *, besides: str | None = None) -> Entry | None:
        """The entry that already says `text` (other than entry `besides`)."""
        wanted = lesson(text)
        return next(
            (
                entry
                for entry in self.entries()
                if entry.id != besides and same_lesson(entry.lesson, wanted)
            ),
            None,
        )

    def queued(self, wanted: str) -> Change | None:
        return next((change for change in self.queue.changes if change.id == wanted), None)

    # -- decisions ---------------------------------------------------------------------------

    def reject(self, change: Change, reason: str) -> None:
        self.rejected.append(replace(change, reason=reason))

    def hold(self, change: Change, reason: str) -> None:
        """Put `change` in the review queue (or reject it when the queue cannot take it)."""
        held = replace(change, reason=reason)
        if self.queue.problem is not None:
            self.reject(
                held,
                f"{reason}; and the review queue {self.files.queue} is unreadable "
                f"({self.queue.problem}): fix or delete it",
            )
            return
        if self.queued(held.id) is not None:
            self.reject(held, "the same change already waits for review")
            return
        if len(self.queue.changes) >= self.files.max_pending:
            self.reject(
                held,
                f"{reason}; and {self.files.max_pending} changes already wait for review: "
                "decide them with `layered-memory review`",
            )
            return
        self.queue.changes.append(held)
        self.queue_changed = True
        self.pending.append(held)

    def apply(self, change: Change, provenance: Provenance) -> None:
        """Write `change` to the section (checked already: its entry exists)."""
        if change.op == "add":
            assert change.text is not None
            entry_id = derive_id(change.text, (entry.id for entry in self.entries()))
            self._insert(self._new_entry(entry_id, change.text, provenance))
            self.applied.append(replace(change, entry_id=entry_id))
        elif change.op == "update":
            assert change.text is not None
            old = self.entry(change.entry_id)
            assert old is not None
            new = self._new_entry(old.id, change.text, provenance)
            old.text, old.lines, old.meta, old.compared = new.text, new.lines, new.meta, None
            self.applied.append(change)
        else:
            self._remove(change.entry_id)
            self.applied.append(change)
        self.changed.add(change.entry_id or "")
        self.memory_changed = True

    def merge(self, change: Change, into: Entry) -> None:
        """An update that makes entry `change.entry_id` say what `into` says: one entry."""
        self._remove(change.entry_id)
        self.changed.update((change.entry_id or "", into.id))
        self.memory_changed = True
        self.applied.append(replace(change, reason=f"merged into [{into.id}], which says the same"))

    def unqueue(self, change: Change) -> None:
        self.queue.changes = [queued for queued in self.queue.changes if queued.id != change.id]
        self.queue_changed = True

    # -- the new texts -----------------------------------------------------------------------

    def finish(self) -> tuple[dict[str, str], ConsolidationResult]:
        """The files to write, archive first (a crash between two writes duplicates an entry
        in the archive, never loses one), and what was done."""
        changes: dict[str, str] = {}
        archived = self._rotate()
        if archived:
            changes[self.files.archive] = archive_text(
                self._archive_before,
                [with_newline(line, self.newline) for entry in archived for line in entry.lines],
                heading=self.files.archive_heading,
                preamble=self.files.archive_preamble,
                is_entry=is_bullet,
            )
        if self.memory_changed:
            changes[self.files.memory] = self._memory_text()
        if self.queue_changed:
            changes[self.files.queue] = queue_text(self.queue, memory_path=self.files.memory)
        result = ConsolidationResult(
            applied=self.applied,
            pending=self.pending,
            rejected=self.rejected,
            archived=len(archived),
        )
        return changes, result

    def _memory_text(self) -> str:
        if self.bounds is not None and not self.fresh:
            start, end = self.bounds
            body = [line for item in self.items for line in _lines_of(item)]
            return "".join([*self.lines[: start + 1], *body, *self.lines[end:]])
        lines = self.lines
        if self.bounds is not None:  # the section had no entries: keep everything else in it
            start, end = self.bounds
            lines = [*lines[: start + 1], *(ln for it in self.items for ln in _lines_of(it))]
            lines += self.lines[end:]
        block = [line for entry in self.fresh for line in entry.lines]
        return "".join(
            insert_at_top(lines, self.files.heading, block, self.newline, is_entry=is_bullet)
        )

    def _rotate(self) -> list[Entry]:
        """Entries beyond `max_entries`, oldest last, taken out of the section."""
        overflow = self.entries()[self.files.max_entries :]
        for entry in overflow:
            self._remove(entry.id)
        if overflow:
            self.memory_changed = True
        return overflow

    def _new_entry(self, entry_id: str, text: str, provenance: Provenance) -> Entry:
        line = entry_line(entry_id, text, provenance)
        parts = learned_entry(line)
        assert parts is not None  # written just above
        return Entry(entry_id, text, [line + self.newline], _parse_meta(parts[1]))

    def _insert(self, entry: Entry) -> None:
        first = next((i for i, item in enumerate(self.items) if isinstance(item, Entry)), None)
        if first is None:
            self.fresh.insert(0, entry)
        else:
            self.items.insert(first, entry)

    def _remove(self, entry_id: str | None) -> None:
        self.fresh = [entry for entry in self.fresh if entry.id != entry_id]
        self.items = [
            item for item in self.items if not (isinstance(item, Entry) and item.id == entry_id)
        ]


def _lines_of(item: Entry | str) -> list[str]:
    return item.lines if isinstance(item, Entry) else [item]


# --- The rules, once for the consolidator and for a reviewer's approval -------------------------


def carry_out(
    plan: Plan,
    proposal: Proposal,
    *,
    provenance: Provenance,
    review: bool,
    seen: Mapping[str, str] | None,
) -> None:
    """Apply, hold or reject one proposed change by the rules of the section.

    Args:
        plan: The transaction's working copy.
        proposal: The change.
        provenance: What an applied entry's comment says.
        review: Hold every change that would change the section.
        seen: Entry id -> text as the model was shown them (None: a reviewer's approval,
            decided on the section as it is now).
    """
    change = proposal.change
    target = plan.entry(change.entry_id) if change.op != "add" else None
    if change.op != "add":
        if seen is not None and change.entry_id not in seen:
            plan.reject(change, f"unknown id [{change.entry_id}]: no entry was shown with it")
            return
        if target is None:
            plan.reject(change, f"entry [{change.entry_id}] no longer exists")
            return
        if target.id in plan.changed:
            plan.reject(change, f"entry [{target.id}] was changed already by this answer")
            return
        change = replace(change, entry_text=target.text)
    if change.op == "add":
        assert change.text is not None
        same = plan.same_as(change.text)
        if same is not None:
            plan.reject(change, f"already known: entry [{same.id}] says the same")
            return
        if seen is not None and any(
            queued.op == "add"
            and queued.text is not None
            and same_lesson(lesson(queued.text), lesson(change.text))
            for queued in plan.queue.changes
        ):
            plan.reject(change, "the same lesson already waits for review")
            return
    if change.op == "update":
        assert change.text is not None
        assert target is not None
        if fold(target.text) == fold(change.text):
            plan.reject(change, f"no change: entry [{target.id}] says that already")
            return
    if seen is not None and target is not None and seen[target.id] != target.text:
        plan.hold(
            change,
            f"entry [{target.id}] was changed by another writer after the model read it",
        )
        return
    if proposal.hold is not None:
        plan.hold(change, proposal.hold)
        return
    if review:
        plan.hold(change, "review=True: every change waits for approval")
        return
    if change.op == "update":
        assert change.text is not None
        assert target is not None
        same = plan.same_as(change.text, besides=target.id)
        if same is not None:
            plan.merge(change, same)
            return
    plan.apply(change, provenance)


# ================================================================================================
# Lessons that read as instructions
#
# Lesson texts that read as instructions aimed at the agent: held for a person, never applied.
#
# Memory is read back into every later prompt, so a learned entry is a standing instruction. A
# run can be steered by text it only read (a web page, a file, a tool's output: prompt
# injection), and a model asked to remember what the run taught would make that injection
# permanent: memory poisoning. So a text is held for review, whatever `review=` says, when it
#
# - overrides the agent's instructions or role ("ignore previous instructions", "you are now",
#   "follow the instructions you find in files", a `system:` turn);
# - sends data somewhere (a verb of sending and an address: a URL, an e-mail address, a
#   webhook, an IP and port) or exposes secrets ("print the API key", "include ~/.ssh");
# - acts behind the user's back ("do not tell the user", "secretly");
# - carries data in a URL (query parameters, a placeholder to fill, a Markdown image, which a
#   client fetches by itself) or runs downloaded code (`curl ... | sh`, `curl -d`, `base64 -d`).
#
# The checks read the text as a model does: look-alike letters and invisible characters undone
# (`core.render.ascii_skeleton`), NFKC applied. They are cheap patterns, tuned to hold rather
# than to let through: a preference such as "always answer in French" passes, "send the weekly
# report to alice@acme.com" waits for a person. A held change is never lost: `layered-memory
# review` shows it with the reason.
# ================================================================================================

_GAP: Final = r"[^.!?\n]{0,60}?"
"""Up to one clause between two words of a pattern (bounded: each search stays linear)."""

_OVERRIDE: Final = re.compile(
    r"\b(?:ignore|disregard|forget|override|overrule|bypass|circumvent)\b"
    rf"{_GAP}\b(?:instruction|rule|prompt|guideline|polic(?:y|ies)|guardrail|constraint"
    r"|directive|safety|restriction|system message)"
    r"|\b(?:new|updated|real|true|hidden|secret)\s+(?:system\s+)?(?:instructions?|prompt|directives?)\b"
    r"|\bsystem\s+prompt\b|\bdeveloper\s+mode\b|\bjailbr(?:ea|o)k|\bdo\s+anything\s+now\b"
    r"|\byou\s+are\s+(?:now|no\s+longer)\b|\bfrom\s+now\s+on\s+you\s+(?:are|must|will)\b"
    r"|\bpretend\s+(?:to\s+be|you\s+are)\b"
    rf"|\b(?:obey|follow|execute|carry\s+out|trust)\b{_GAP}\b(?:instructions?|commands?|requests?)"
    rf"\b{_GAP}\b(?:in|from|inside|found|embedded|contained)\b"
    r"|(?:^|[\[(<])\s*(?:system|assistant|developer)\s*:"
    r"|<\||\[/?inst\]|</?\s*(?:system|instructions?)\s*>"
)

_ADDRESS: Final = (
    r"(?:https?://|ftp://|s3://|\bwww\.|[\w.+-]+@[\w-]+\.[\w.-]+|\bwebhook|\bpastebin|\bngrok"
    r"|\brequestbin|\b\d{1,3}(?:\.\d{1,3}){3}:\d+)"
)
_SENDING: Final = re.compile(
    r"\b(?:send|sent|post|upload|forward|e-?mail|mail|transmit|exfiltrate|leak|report|submit"
    rf"|copy|sync|beacon|ping|notify|share)\w*\b{_GAP}{_ADDRESS}"
)
_SECRETS: Final = re.compile(
    r"\b(?P<verb>reveal|print|show|output|dump|display|leak|include|paste|echo|cat|read|send"
    r"|share|expose|return|append|attach|upload|post)\w*\b"
    rf"{_GAP}(?:secret|credential|password|passphrase|api[ _-]?keys?|access[ _-]?keys?"
    r"|tokens?\b|private[ _-]?keys?|ssh[ _-]?keys?|\.env\b|id_rsa|id_ed25519|environment\s+"
    r"variables|env\s+vars|/etc/(?:passwd|shadow)|\.aws\b|\.ssh\b|keychain|cookies?\b)"
)
_NEGATED: Final = re.compile(
    r"\b(?:never|not|no|don't|do\s+not|must\s+not|avoid)\b[^.!?\n]{0,20}\Z"
)
"""A negation just before the verb: "never print the API key" is a lesson, not a request."""

_BEHIND_BACK: Final = re.compile(
    r"\b(?:do\s+not|don't|never|without)\s+(?:tell|telling|inform|informing|mention|mentioning"
    r"|notify|notifying|alert|alerting|let)\b[^.!?\n]{0,20}?\b(?:the\s+)?(?:user|human|operator"
    r"|owner|anyone)\b|\bsecretly\b|\bcovertly\b|\bbehind\s+the\s+user'?s\s+back\b"
    r"|\bwithout\s+(?:the\s+user'?s?\s+)?(?:knowledge|consent|noticing)\b|\bhide\s+(?:this|it)\s+from\b"
)

_DATA_URL: Final = re.compile(
    r"(?:https?|ftp)://[^\s)\]>\"']*(?:\?[^\s)\]>\"']*=|\{|\}|\$\{?\w|%s|<[a-z_]+>)"
    r"|!\[[^\]\n]{0,200}\]\(\s*(?:https?:)?//"
    r"|\bdata:[a-z]+/[\w.+-]+;base64,"
)
_REMOTE_CODE: Final = re.compile(
    r"\b(?:curl|wget|iwr|invoke-webrequest)\b[^|\n]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|k)?sh\b"
    r"|\b(?:curl|wget)\b[^\n]{0,200}?\s(?:-d|--data\S*|-f|--form|-t|--upload-file|--post-\w+)\b"
    r"|\b(?:bash|sh|zsh)\s+-c\s|\bbase64\s+(?:-d|--decode)\b|\beval\s*\(|\bpowershell\b[^\n]{0,80}-enc"
)

_REASONS: Final = (
    (_OVERRIDE, "overrides its instructions or role"),
    (_SENDING, "sends data to an address"),
    (_BEHIND_BACK, "acts behind the user's back"),
    (_DATA_URL, "a URL that carries data: parameters, a placeholder, an image"),
    (_REMOTE_CODE, "runs downloaded code or uploads data from the shell"),
)


def instruction_reason(text: str) -> str | None:
    """Why `text` must wait for a person (it reads as an instruction aimed at the agent), or
    None when it reads as an ordinary lesson."""
    reading = ascii_skeleton(unicodedata.normalize("NFKC", text)).casefold()
    for pattern, what in _REASONS:
        if pattern.search(reading):
            return f"held for review: reads as an instruction aimed at the agent ({what})"
    for found in _SECRETS.finditer(reading):
        if not _NEGATED.search(reading, 0, found.start("verb")):
            return "held for review: reads as an instruction aimed at the agent (exposes secrets)"
    return None


def archive_path_for(path: str) -> str:
    """`/MEMORY.md` -> `/MEMORY.archive.md` (same folder; `.archive` before the suffix)."""
    pure = PurePosixPath(path)
    name = f"{pure.stem}.archive{pure.suffix}" if pure.suffix else f"{pure.name}.archive"
    return str(pure.with_name(name))
