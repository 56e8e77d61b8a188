"""The managed `## Learned` section of consolidation: its entries, and the rules every change
goes through (`Plan`, `carry_out`), shared by consolidation and a reviewer's approval. Pure
text, no I/O.

An entry is one bullet of the section. Consolidation keeps its provenance in an HTML comment at
the end of the line, which the loader strips before the prompt (`core.loading`), so the agent
reads the lesson and `layered-memory inspect` / `review` read where it came from:

    - The user prefers metric units. <!-- learned id=k3f9 thread=t1 date=2025-06-01 model=m -->

The id is short and stable for the entry's life: derived from the text when the entry is
created, then read back from the comment. A bullet written by hand (no comment) gets the id
derived from its text, so it can be updated and deleted like the others. (An entry id names a
place in the section; a *change's* id, in the review queue, is the digest of its exact text:
`writeback.review_queue`.)

`Plan` maps the current texts of the memory file, its archive and the queue, plus the changes
to make, to their new texts; it runs inside one locked transaction (`core.files.transact`).
Lines are split on `\n` only and every line outside the entries consolidation writes stays as it
was (the section's own prose, every other section, CRLF endings).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, NamedTuple

from layered_memory.core.files import LEARNED_MARK, learned_entry
from layered_memory.core.loading import strip_html_comments
from layered_memory.core.staleness import CITES_FIELD, Cite
from layered_memory.writeback.review_queue import (
    Change,
    Provenance,
    advance_generation,
    queue_text,
    read_queue,
)
from layered_memory.writeback.sections import (
    RESCAN_MARGIN,
    archive_text,
    cut_text,
    find_section,
    insert_at_top,
    newline_of,
    one_line,
    redacted_line,
    split_lines,
    with_newline,
)

__all__ = [
    "ConsolidationResult",
    "Entry",
    "Files",
    "Plan",
    "Proposal",
    "carry_out",
    "clean_text",
    "entry_line",
    "section_entries",
]

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


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """What one consolidation (or one review decision) did.

    Attributes:
        applied: Changes written to the section.
        pending: Changes waiting for review (`MemoryConsolidator.pending()`).
        rejected: Changes refused, each with its reason; nothing of them was written.
        archived: Entries moved to the archive file to keep the section within `max_entries`.
        expired: Entries moved to the archive file because nothing confirmed them for
            `expire_after_days` (`MemoryConsolidator`), each as `[id] text`.
    """

    applied: list[Change] = field(default_factory=list)
    pending: list[Change] = field(default_factory=list)
    rejected: list[Change] = field(default_factory=list)
    archived: int = 0
    expired: list[str] = field(default_factory=list)


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
        lines: Its lines in the file, line endings kept (continuation lines included); a
            tuple, which the garbage collector stops tracking (a section may hold 100,000).
        meta: The provenance comment's fields (empty for a line written by hand).
    """

    id: str
    text: str
    lines: tuple[str, ...]
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
        items.append(Entry("", text, tuple(body[index:stop]), meta))
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
    counters: dict[str, int] = {}
    for entry in entries:
        if not entry.id:
            entry.id = derive_id(entry.text, taken, counters)
            taken.add(entry.id)


def derive_id(text: str, taken: Iterable[str], counters: dict[str, int] | None = None) -> str:
    """A short id from the text (4 characters, longer only on a collision with `taken`).

    A set is used as it is: a section's ids are assigned in one pass, never copied per entry.
    `counters` remembers, per digest, the last number given to a repeated text, so a section
    of a hundred thousand identical lines numbers them in one pass, not one search each.
    """
    used = taken if isinstance(taken, (set, frozenset)) else set(taken)
    number = int.from_bytes(hashlib.blake2b(fold(text).encode(), digest_size=10).digest())
    short = _base32(number >> (80 - 5 * _ID_LENGTH), _ID_LENGTH)
    if short not in used:
        return short  # the usual case, without spelling the whole digest
    spelled = _base32(number, 16)
    for length in range(_ID_LENGTH, len(spelled) + 1):
        if spelled[:length] not in used:
            return spelled[:length]
    counter = (counters or {}).get(spelled, 1) + 1
    while f"{spelled}{counter}" in used:
        counter += 1
    if counters is not None:
        counters[spelled] = counter
    return f"{spelled}{counter}"


_BASE32: Final = "abcdefghijklmnopqrstuvwxyz234567"
"""RFC 4648's base32 alphabet in lower case: the ids `base64.b32encode` spelled before, made
here without its per-call cost (a section of 100,000 lines derives 100,000 ids)."""


def _base32(number: int, digits: int) -> str:
    return "".join(_BASE32[(number >> (5 * (digits - 1 - i))) & 31] for i in range(digits))


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


def entry_line(entry_id: str, text: str, provenance: Provenance, cites: str | None = None) -> str:
    """An entry's line, without its line ending (`cites`: the cited spans with their digests,
    `a@d1,b#L3-5@d2`, built by `writeback.cites` from checked cites only)."""
    fields = [f"id={entry_id}"]
    for name, value in (
        ("thread", provenance.thread_id),
        ("date", provenance.date),
        ("model", provenance.model),
        ("reviewed", provenance.reviewed),
    ):
        if value:
            fields.append(f"{name}={_meta_value(value)}")
    if cites:
        fields.append(f"{CITES_FIELD}{cites}")
    return f"- {text} {LEARNED_MARK}{' '.join(fields)} -->"


def section_entries(memory: str | None, heading: str) -> list[Entry]:
    """The entries of the section `heading` of a memory file (none when it has no section)."""
    lines = split_lines(memory or "")
    bounds = find_section(lines, heading)
    if bounds is None:
        return []
    start, end = bounds
    return [item for item in parse_entries(lines[start + 1 : end]) if isinstance(item, Entry)]


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
    binding: str = ""
    """Where the queue lives, as its seals bind it (`review_queue.queue_binding`)."""


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
    cites: tuple[Cite, ...] | None = None
    """Checked cites, not yet digested (None: the operation named none)."""


class Plan:
    """The working copy of the three files during one transaction."""

    def __init__(self, files: Files, texts: Mapping[str, str | None], *, key: bytes) -> None:
        self.files = files
        self.key = key
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
        self.queue = read_queue(texts[files.queue], key, binding=files.binding)
        self.memory_changed = False
        self.queue_changed = False
        self.unqueued = False
        """A change left the queue: it is written after the memory file (see `finish`)."""
        self.applied: list[Change] = []
        self.pending: list[Change] = []
        self.rejected: list[Change] = []
        self.changed: set[str] = set()
        """Entries this transaction changed already."""
        self.expired: list[Entry] = []
        """Entries moved to the archive by `expire`."""

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
            self._insert(self._new_entry(entry_id, change.text, provenance, change.cites))
            self.applied.append(replace(change, entry_id=entry_id))
        elif change.op == "update":
            assert change.text is not None
            old = self.entry(change.entry_id)
            assert old is not None
            cites = change.cites if change.cites is not None else old.meta.get("cites")
            new = self._new_entry(old.id, change.text, provenance, cites)
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

    def expire(self, due: Mapping[str, str]) -> None:
        """Move these entries (id -> first line as judged) to the archive, those still there
        as they were judged and not changed by this transaction: nothing confirmed them for
        the consolidator's `expire_after_days`."""
        gone = [
            entry
            for entry in self.entries()
            if entry.id not in self.changed and due.get(entry.id) == entry.lines[0]
        ]
        if not gone:
            return
        moved = {id(entry) for entry in gone}
        self.fresh = [entry for entry in self.fresh if id(entry) not in moved]
        self.items = [item for item in self.items if id(item) not in moved]
        self.expired.extend(gone)
        self.memory_changed = True

    def unqueue(self, change: Change) -> None:
        self.queue.changes = [queued for queued in self.queue.changes if queued.id != change.id]
        self.queue_changed = True
        self.unqueued = True

    # -- the new texts -----------------------------------------------------------------------

    def finish(self) -> tuple[dict[str, str], ConsolidationResult]:
        """The files to write, in the order that makes every crash point recoverable, and what
        was done.

        The files are replaced one at a time (each atomically), and a process may be killed
        between two replaces, so the order decides what a crash can leave:

        - the archive first: a crash after it duplicates an entry in the archive (which the
          next rotation does not add again), never loses one;
        - a queue that grows (changes held) before the memory file: a crash in between keeps
          the held changes and loses only the applied ones, which were never acknowledged;
          never an applied lesson whose held companions are gone;
        - a queue that shrinks (a change approved) after the memory file: a crash in between
          leaves the approved change both applied and still queued, and approving it again is
          refused as already known; never a change taken off the queue and not applied.
        """
        changes: dict[str, str] = {}
        rotated = self._rotate()
        archived = [*self.expired, *rotated]
        if archived:
            changes[self.files.archive] = archive_text(
                self._archive_before,
                [with_newline(line, self.newline) for entry in archived for line in entry.lines],
                heading=self.files.archive_heading,
                preamble=self.files.archive_preamble,
                is_entry=is_bullet,
            )
        queue = (
            queue_text(
                self.queue,
                memory_path=self.files.memory,
                key=self.key,
                binding=self.files.binding,
                generation=advance_generation(self.files.binding, len(self.queue.changes)),
            )
            if self.queue_changed
            else None
        )
        if queue is not None and not self.unqueued:
            changes[self.files.queue] = queue
        if self.memory_changed:
            changes[self.files.memory] = self._memory_text()
        if queue is not None and self.unqueued:
            changes[self.files.queue] = queue
        result = ConsolidationResult(
            applied=self.applied,
            pending=self.pending,
            rejected=self.rejected,
            archived=len(rotated),
            expired=[f"[{entry.id}] {entry.text}" for entry in self.expired],
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
        """Entries beyond `max_entries`, oldest last, taken out of the section in one pass:
        a section of any length (a hand-written megabyte) costs one scan, never one per entry
        moved."""
        overflow = self.entries()[self.files.max_entries :]
        if not overflow:
            return []
        moved = {id(entry) for entry in overflow}
        self.fresh = [entry for entry in self.fresh if id(entry) not in moved]
        self.items = [item for item in self.items if id(item) not in moved]
        self.memory_changed = True
        return overflow

    def _new_entry(
        self, entry_id: str, text: str, provenance: Provenance, cites: str | None = None
    ) -> Entry:
        line = entry_line(entry_id, text, provenance, cites)
        parts = learned_entry(line)
        assert parts is not None  # written just above
        return Entry(entry_id, text, (line + self.newline,), _parse_meta(parts[1]))

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


def _lines_of(item: Entry | str) -> tuple[str, ...]:
    return item.lines if isinstance(item, Entry) else (item,)


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
            for queued in plan.queue.trusted()
        ):
            plan.reject(change, "the same lesson already waits for review")
            return
    if change.op == "update":
        assert change.text is not None
        assert target is not None
        recited = change.cites is not None and change.cites != target.meta.get("cites", "")
        if fold(target.text) == fold(change.text) and not recited:
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
