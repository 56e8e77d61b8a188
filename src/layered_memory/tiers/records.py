"""The store records of the tiers and their checked conversion from and to JSON.

Per user namespace (`tiers.namespaces.user_namespace`):

- `state`: the short-term pages (inline), the id counter, the revision and row count of
  each index block and the segment count of each archive block (every `add_page`);
- `mid_term`: the mid-term segments (page ids, keywords, summary, counters, the revision of
  their vector) (a consolidation that moved a page);
- `visits`: `N_visit` and the last retrieval time per segment (a retrieval that returned a
  page);
- `long_term`: the long-term entries and their vectors (a promotion);
- `pages/<id>`: one page that left short-term memory (query, response, keywords, summary,
  segment, index block);
- `index/<n>`: block `n` of the page index: up to `INDEX_ROWS` pages' ids, times and content
  words, and which are hidden;
- `vectors/<id>`: the vector of one page (unit length, written once) or of one mid-term
  segment (written when it changes), base64 of float32, with a revision;
- `archive/<n>`: block `n` of the archive: up to `ARCHIVE_ROWS` segments moved out of the
  mid-term tier.

Every record a consolidation writes is bounded (a block, a capacity) and no record holds more
than one vector, so recording a page costs the same at 8,000 pages as at 1,000 and with 5,000
dimensions as with 200: its `pages/` and `vectors/` records, its words in one index block, its
segment's vector, the segment list (no vectors) and, once archived, its share of an archive
entry.

A store written by the layout before `VERSION` 2 (all vectors of a block or of the mid-term
tier in one record) is refused with `TierStoreError` on first use, never read as empty: the
next write would otherwise start the ids again and overwrite the pages kept.

A value that is not what this module wrote (a hand edit, another program) never crashes a
run: a malformed entry is skipped with a warning naming the namespace and the entry's id.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from layered_memory._logs import get_logger
from layered_memory.errors import TierStoreError
from layered_memory.recall.text import word_counts
from layered_memory.tiers.values import Fact, FactKind, Page, Segment
from layered_memory.tiers.vectors import (
    BY_REVISION,
    DECODED,
    MAX_DIM,
    Vector,
    decode_matrix,
    encode,
    unit,
    zeros,
)

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    msg = "layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    raise ImportError(msg) from exc


STATE_KEY: Final = "state"
MID_TERM_KEY: Final = "mid_term"
VISITS_KEY: Final = "visits"
LPM_KEY: Final = "long_term"
PAGES: Final = "pages"
INDEX: Final = "index"
ARCHIVE: Final = "archive"
VECTORS: Final = "vectors"


MAX_SEGMENT_KEYWORDS: Final = 12
"""Keywords kept per segment (its keyword set K_s in F_score)."""


def top_keywords(counts: dict[str, int], *, limit: int = MAX_SEGMENT_KEYWORDS) -> list[str]:
    """The `limit` most counted keywords (ties broken alphabetically, for determinism)."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word for word, _ in ranked[:limit]]


logger = get_logger(__name__)

VERSION = 2
MAX_LINES = 5
INDEX_ROWS = 256
"""Pages per index block: a new page rewrites its block only, never the whole index."""
ARCHIVE_ROWS = 128
"""Segments per archive block."""

MAX_INT = 2**53
"""Counters and ids past this are not what this module wrote (and would overflow a float)."""


def warn(where: str, record: str, reason: str) -> None:
    """The one warning of a malformed record: the user's namespace, the record, the reason."""
    logger.warning("tiered memory %s: %s: %s", where, record, reason)


# --- checked reading of JSON values ----------------------------------------------------------


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _num(
    value: object, default: float = 0.0, bad: list[str] | None = None, name: str = ""
) -> float:
    if type(value) is float and math.isfinite(value):  # what `dump` writes: the fast path
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        number = math.nan
    else:
        try:
            number = float(value)  # an int of 400 digits overflows
        except OverflowError:
            number = math.nan
    if math.isfinite(number):
        return number
    if value is not None and bad is not None:
        bad.append(f"{name!r} is not a finite number")
    return default


def _int(value: object, bad: list[str] | None = None, name: str = "") -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT:
        return value
    if value is not None and bad is not None:
        bad.append(f"{name!r} is not an int from 0 to 2**53")
    return 0


def _list(value: object, where: str, record: str, name: str) -> list[Any]:
    """`value` if it is a list; anything else (an int, a string, an object) is no list of
    entries: iterating it would crash or make one entry per character."""
    if isinstance(value, list):
        return value
    if value is not None:
        warn(where, record, f"{name!r} is a {type(value).__name__}, not a list; ignored")
    return []


def _report(where: str, record: str, bad: list[str]) -> None:
    warn(where, record, "; ".join(bad) + " (defaults used, the rest kept)")


def _strs(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    if set(map(type, value)) <= {str}:  # the common case, checked at C speed (10,000s of ids)
        return list(value)  # a copy: a store may hand out the very list it keeps
    return [item for item in value if isinstance(item, str)]


def _nums(value: object, count: int) -> list[float] | None:
    """`count` finite numbers, or None."""
    if not isinstance(value, list) or len(value) != count:
        return None
    if set(map(type, value)) <= {float}:
        numbers = list(value)
    else:
        numbers = [_num(item, math.nan) for item in value]
    return numbers if all(map(math.isfinite, numbers)) else None


def _counts(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    if set(map(type, value)) <= {str} and set(map(type, value.values())) <= {int}:
        return dict(value)  # the common case, checked at C speed
    return {k: _int(v) for k, v in value.items() if isinstance(k, str)}


def _meta(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _revs(value: object, where: str, name: str) -> list[tuple[str, int]]:
    """A list of `[revision, count]` pairs (the index and archive blocks)."""
    pairs = []
    for raw in _list(value, where, "state record", name):
        if isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str):
            pairs.append((raw[0], _int(raw[1])))
        else:
            warn(where, "state record", f"a malformed entry of {name!r}; block read as empty")
            pairs.append(("", 0))
    return pairs


def id_number(item_id: str) -> int:
    """The `<n>` of an id `p<n>` / `s<n>` / `f<n>` (0 when it is not one)."""
    digits = item_id[1:]
    if 0 < len(digits) <= 16 and digits.isascii() and digits.isdigit():
        return int(digits)
    return 0


def vector_record(vector: Vector) -> tuple[str, dict[str, Any]]:
    """A new revision and the `vectors/<id>` record of `vector` under it."""
    rev = uuid.uuid4().hex
    return rev, {"version": VERSION, "rev": rev, "vector": encode(vector)}


def read_vector(value: object, *, rev: str | None, dim: int) -> Vector | None:
    """The vector of a `vectors/<id>` record: None when it is missing, not `dim` finite
    values, or (`rev` given) not the revision its listing names."""
    if not isinstance(value, Mapping) or (rev is not None and value.get("rev") != rev):
        return None
    matrix = decode_matrix(value.get("vector"), 1, dim)
    return None if matrix is None else matrix[0]


# --- pages, segments and the short-term state ------------------------------------------------


@dataclass(slots=True)
class PageRec:
    """A page as stored (mutable while a flow works on it)."""

    id: str
    query: str
    response: str
    timestamp: float
    meta: dict[str, Any] = field(default_factory=dict)
    keywords: list[str] = field(default_factory=list)
    summary: str = ""
    segment: str | None = None
    forgotten: bool = False
    block: int | None = None
    """The index block holding its vector and words (None in short-term memory)."""
    vector: Vector | None = None

    @classmethod
    def load(cls, value: object, *, where: str, record: str = "page") -> PageRec | None:
        """The page, or None when `value` is no page object (the caller warns)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
            return None
        bad: list[str] = []
        block = value.get("block")
        page = cls(
            id=value["id"],
            query=_str(value.get("query")),
            response=_str(value.get("response")),
            timestamp=_num(value.get("timestamp"), 0.0, bad, "timestamp"),
            meta=_meta(value.get("meta")),
            keywords=_strs(value.get("keywords")),
            summary=_str(value.get("summary")),
            segment=value.get("segment") if isinstance(value.get("segment"), str) else None,
            forgotten=value.get("forgotten") is True,
            block=_int(block) if block is not None else None,
        )
        if bad:
            _report(where, f"{record} {page.id!r}", bad)
        return page

    def dump(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "id": self.id,
            "query": self.query,
            "response": self.response,
            "timestamp": self.timestamp,
            "meta": self.meta,
            "forgotten": self.forgotten,
        }
        if self.segment is not None:
            value["keywords"] = self.keywords
            value["summary"] = self.summary
            value["segment"] = self.segment
            value["block"] = self.block
        return value

    def public(self) -> Page:
        return Page(
            id=self.id,
            query=self.query,
            response=self.response,
            timestamp=self.timestamp,
            meta=dict(self.meta),
            keywords=tuple(self.keywords),
            summary=self.summary,
            segment_id=self.segment,
            forgotten=self.forgotten,
        )


@dataclass(slots=True)
class SegRec:
    """A segment as stored (in `mid_term`, or in an archive block)."""

    id: str
    pages: list[str]
    counts: dict[str, int]
    keywords: list[str]
    summary: str
    lines: list[str]
    l_interaction: int
    last_access: float
    created: float
    promoted: int = 0
    """Its first `promoted` pages were promoted (a promotion takes every page after them)."""
    promoted_visits: int = 0
    """Its N_visit at its last promotion: only visits since then count towards the next."""
    forgotten: bool = False
    hidden: list[str] = field(default_factory=list)
    """Its forgotten pages. Its keywords, summary, vector and `l_interaction` are made from
    the other pages only, so a forgotten page reaches no prompt and earns no heat through it."""
    vector: str = ""
    """The revision of its `vectors/<id>` record ("" none: archived, or not embedded yet)."""

    @classmethod
    def load(cls, value: object, *, where: str) -> SegRec | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
            return None
        bad: list[str] = []
        pages = _strs(value.get("pages"))
        hidden = value.get("hidden")
        if hidden:  # most segments hide nothing (and the list is written empty)
            known = set(pages)
            hidden = [page_id for page_id in _strs(hidden) if page_id in known]
        segment = cls(
            id=value["id"],
            pages=pages,
            counts=_counts(value.get("counts")),
            keywords=_strs(value.get("keywords")),
            summary=_str(value.get("summary")),
            lines=_strs(value.get("lines"))[-MAX_LINES:],
            l_interaction=_int(value.get("l_interaction"), bad, "l_interaction"),
            last_access=_num(value.get("last_access"), 0.0, bad, "last_access"),
            created=_num(value.get("created"), 0.0, bad, "created"),
            promoted=min(_int(value.get("promoted"), bad, "promoted"), len(pages)),
            promoted_visits=_int(value.get("promoted_visits"), bad, "promoted_visits"),
            forgotten=value.get("forgotten") is True,
            hidden=hidden or [],
            vector=_str(value.get("vector")),
        )
        if bad:
            _report(where, f"segment {segment.id!r}", bad)
        return segment

    @property
    def shown(self) -> bool:
        """Not forgotten, and holding a page that is not."""
        return not self.forgotten and len(self.hidden) < len(self.pages)

    def visible(self, page_ids: list[str] | None = None) -> list[str]:
        """`page_ids` (default: all its pages) without the forgotten ones, in order."""
        ids = self.pages if page_ids is None else page_ids
        if not self.hidden:
            return list(ids)
        hidden = set(self.hidden)
        return [page_id for page_id in ids if page_id not in hidden]

    def unpromoted(self) -> list[str]:
        """Its pages since the last promotion, forgotten ones left out."""
        return self.visible(self.pages[self.promoted :])

    def recount(self) -> None:
        """`L_interaction`: the pages added since its last promotion, forgotten ones not
        counted (a page a user asked to forget must not make the segment hotter)."""
        self.l_interaction = len(self.unpromoted())

    def dump(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pages": self.pages,
            "counts": self.counts,
            "keywords": self.keywords,
            "summary": self.summary,
            "lines": self.lines[-MAX_LINES:],
            "l_interaction": self.l_interaction,
            "last_access": self.last_access,
            "created": self.created,
            "promoted": self.promoted,
            "promoted_visits": self.promoted_visits,
            "forgotten": self.forgotten,
            "hidden": self.hidden,
            "vector": self.vector,
        }

    def add_keywords(self, words: list[str]) -> None:
        for word in words:
            self.counts[word] = self.counts.get(word, 0) + 1
        # Bound the counts: a long-lived segment must not grow a dictionary of every word.
        if len(self.counts) > 200:
            self.counts = {word: self.counts[word] for word in top_keywords(self.counts, limit=100)}

    def public(
        self, pages: tuple[Page, ...], *, heat: float, n_visit: int, archived: bool = False
    ) -> Segment:
        return Segment(
            id=self.id,
            pages=pages,
            heat=heat,
            n_visit=n_visit,
            l_interaction=self.l_interaction,
            last_access=self.last_access,
            created=self.created,
            summary=self.summary,
            keywords=tuple(self.keywords),
            promoted=self.promoted,
            forgotten=self.forgotten,
            archived=archived,
        )


def _segments(value: object, where: str, record: str) -> list[SegRec]:
    segments = []
    for raw in _list(value, where, record, "segments"):
        segment = SegRec.load(raw, where=where)
        if segment is None:
            warn(where, record, "skipped a malformed segment (no object or id)")
        else:
            segments.append(segment)
    return segments


@dataclass(slots=True)
class UserState:
    """The `state` record: short-term pages, the id counter, the blocks' revisions."""

    user_id: str
    seq: int = 0
    dim: int | None = None
    stm: list[PageRec] = field(default_factory=list)
    index: list[tuple[str, int]] = field(default_factory=list)
    """(revision, rows) of each index block, so a retrieval knows whether its in-process copy
    of the index is current without reading the blocks."""
    archive: list[tuple[str, int]] = field(default_factory=list)
    """(revision, segments) of each archive block."""
    long_term: str = ""
    """The revision of the `long_term` record last written ("" unknown: read it)."""
    seq_rebuilt: bool = False
    """`seq` was unusable and rebuilt from the short-term ids (the caller raises it past the
    other records' ids)."""

    def next_id(self, kind: str) -> str:
        self.seq += 1
        return f"{kind}{self.seq}"

    @classmethod
    def load(cls, value: object, *, user_id: str, where: str) -> UserState:
        state = cls(user_id=user_id)
        if value is None:
            return state
        if not isinstance(value, Mapping):
            warn(where, "state record", "not an object; starting empty")
            return state
        version = value.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version != VERSION:
            raise TierStoreError(
                where,
                f"written by layout version {version}, this version of layered_memory reads "
                f"{VERSION} only (version 1 kept every vector of a block in one record); "
                "nothing was changed: keep the store with the version that wrote it, or delete "
                "this user's namespace to start it again",
            )
        bad: list[str] = []
        seq = value.get("seq")
        state.seq = _int(seq, bad, "seq")
        dim = _int(value.get("dim"), bad, "dim")
        if dim > MAX_DIM:
            # Never trusted: a zero vector of that size is what the next write would allocate.
            warn(where, "state record", f"'dim' {dim} is over {MAX_DIM}; ignored")
            dim = 0
        state.dim = dim or None
        for raw in _list(value.get("stm"), where, "state record", "stm"):
            page = PageRec.load(raw, where=where, record="short-term page")
            if page is None:
                warn(where, "state record", "skipped a malformed short-term page (no object or id)")
            else:
                state.stm.append(page)
        state.index = _revs(value.get("index"), where, "index")
        state.archive = _revs(value.get("archive"), where, "archive")
        state.long_term = _str(value.get("long_term"))
        if bad:
            _report(where, "state record", bad)
        if state.seq != seq:
            # Ids come from `seq`: restarting it at 0 would give a new page the id of a kept one
            # and overwrite it. Its floor is the highest id of every record (the caller adds the
            # others').
            state.seq = max((id_number(page.id) for page in state.stm), default=0)
            state.seq_rebuilt = True
        return state

    def dump(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "user_id": self.user_id,
            "seq": self.seq,
            "dim": self.dim,
            "stm": [page.dump() for page in self.stm],
            "index": [list(pair) for pair in self.index],
            "archive": [list(pair) for pair in self.archive],
            "long_term": self.long_term,
        }


@dataclass(slots=True)
class MidTerm:
    """The `mid_term` record: the mid-term segments. Their vectors (the centroid of their
    visible pages, or the embedded model-made summary) live one per `vectors/<id>` record,
    which the segment names by revision: a consolidation writes the vectors that changed."""

    segments: list[SegRec] = field(default_factory=list)
    vectors: dict[str, Vector] = field(default_factory=dict)
    stored: dict[str, tuple[Vector, str]] = field(default_factory=dict)
    """The vector of each segment as read or last written, and its revision."""
    units: dict[str, tuple[Vector, Vector]] = field(default_factory=dict)
    """Each vector's unit copy, while the vector is that very object."""

    def segment(self, segment_id: str) -> SegRec | None:
        for segment in self.segments:
            if segment.id == segment_id:
                return segment
        return None

    @classmethod
    def load(cls, value: object, *, where: str) -> MidTerm:
        """The segments (their vectors are read by the caller: `take` each)."""
        mid = cls()
        if value is None:
            return mid
        if not isinstance(value, Mapping):
            warn(where, "mid_term record", "not an object; starting empty")
            return mid
        mid.segments = _segments(value.get("segments"), where, "mid_term record")
        return mid

    def take(self, segment: SegRec, pair: tuple[Vector, Vector]) -> None:
        """Set `segment`'s vector as read from its record: (vector, unit vector)."""
        self.vectors[segment.id] = pair[0]
        self.stored[segment.id] = (pair[0], segment.vector)
        self.units[segment.id] = pair

    def unit_vector(self, segment_id: str) -> Vector | None:
        """The segment's vector scaled to length 1 (None: it has none)."""
        vector = self.vectors.get(segment_id)
        if vector is None:
            return None
        known = self.units.get(segment_id)
        if known is None or known[0] is not vector:
            known = self.units[segment_id] = (vector, unit(vector))
        return known[1]

    def dump(self, dim: int | None) -> tuple[dict[str, Any], dict[str, dict[str, Any] | None]]:
        """The record, and the `vectors/<id>` records to write (None: to delete): those of
        segments whose vector changed, and of segments that left the tier."""
        writes: dict[str, dict[str, Any] | None] = {}
        if dim:
            zero = zeros(dim)
            for segment in self.segments:
                vector = self.vectors.get(segment.id)
                if vector is None or vector.shape != zero.shape:
                    vector = self.vectors[segment.id] = zero
                known = self.stored.get(segment.id)
                if known is not None and known[0] is vector and known[1] == segment.vector:
                    continue
                segment.vector, writes[segment.id] = vector_record(vector)
                pair = self.units[segment.id] = BY_REVISION.put(segment.vector, vector)
                self.vectors[segment.id] = pair[0]
                self.stored[segment.id] = (pair[0], segment.vector)
        kept = {segment.id for segment in self.segments}
        for segment_id in [sid for sid in self.stored if sid not in kept]:
            writes[segment_id] = None
            del self.stored[segment_id]
        record = {
            "version": VERSION,
            "rev": uuid.uuid4().hex,
            "segments": [segment.dump() for segment in self.segments],
        }
        return record, writes

    def top_seq(self) -> int:
        return max((id_number(i) for seg in self.segments for i in (seg.id, *seg.pages)), default=0)


class _MidTerms:
    """The mid-term tier as the last write of this process left it, per (store, user), by the
    revision of the `mid_term` record it wrote: the next consolidation of that user, finding
    that revision in the record it reads, skips parsing 200 segments and looking up their
    vectors (the bulk of a page's cost once the tier is full).

    A writer takes its user's entry out (`take`) and puts it back only after its writes
    succeeded (`put`), so a flow that failed half-way leaves nothing behind, and no two flows
    share one: writes of one user are serialized within a process, and readers that hold no
    lock (listing segments) parse the record themselves. Another process's write draws a new
    revision, which no entry here has.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, tuple[str, ...]], tuple[str, MidTerm]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: tuple[int, tuple[str, ...]], rev: object) -> MidTerm | None:
        """The entry of `key` if it is of revision `rev`; removed either way."""
        with self._lock:
            found = self._entries.pop(key, None)
        if found is None or not isinstance(rev, str) or found[0] != rev:
            return None
        return found[1]

    def put(self, key: tuple[int, tuple[str, ...]], rev: str, mid: MidTerm) -> None:
        if not rev:
            return
        with self._lock:
            self._entries[key] = (rev, mid)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


MIDTERMS = _MidTerms()


@dataclass(slots=True)
class ArchiveBlock:
    """An `archive/<n>` record: segments moved out of the mid-term tier, oldest first.

    Kept as stored until a segment of it is needed (listing, forgetting): archiving appends
    one entry without parsing the others.
    """

    raw: list[Any] = field(default_factory=list)
    where: str = ""
    parsed: list[SegRec] | None = None

    @classmethod
    def load(cls, value: object, *, where: str) -> ArchiveBlock:
        if value is None:
            return cls(where=where)
        if not isinstance(value, Mapping):
            warn(where, "archive record", "not an object; read as empty")
            return cls(where=where)
        return cls(list(_list(value.get("segments"), where, "archive record", "segments")), where)

    @property
    def segments(self) -> list[SegRec]:
        if self.parsed is None:
            self.parsed = _segments(self.raw, self.where, "archive record")
        return self.parsed

    def append(self, segment: SegRec) -> None:
        if self.parsed is None:
            self.raw.append(segment.dump())
        else:
            self.parsed.append(segment)

    def __len__(self) -> int:
        return len(self.raw) if self.parsed is None else len(self.parsed)

    def dump(self) -> dict[str, Any]:
        segments = self.raw if self.parsed is None else [s.dump() for s in self.parsed]
        return {"version": VERSION, "segments": segments}


@dataclass(slots=True)
class IndexBlock:
    """An `index/<n>` record: the searchable part of up to `INDEX_ROWS` pages (of any segment,
    mid-term or archived) in the order they left short-term memory.

    Each page's content words (space-separated, repeated as often as they occur: BM25 needs
    the counts); the page bodies stay in `pages/<id>`, the vectors in `vectors/<id>` (a new
    page adds its own vector record, never a row to a record of 256).
    """

    ids: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)
    rev: str = ""
    grown_from: str | None = None
    """The revision this version only appended pages to (None: anything else changed); a
    search's copy at that revision reads the new rows only."""
    lineage: str | None = ""
    """What `grown_from` becomes when this version is written."""

    @classmethod
    def load(cls, value: object, *, where: str, number: int) -> IndexBlock:
        """The block, its shape checked."""
        if value is None:
            return cls()
        if isinstance(value, Mapping):
            ids, terms = _strs(value.get("ids")), _strs(value.get("terms"))
            times = _nums(value.get("times"), len(ids))
            if times is not None and len(ids) == len(terms):
                hidden = set(_strs(value.get("hidden")))
                rev, grown_from = _str(value.get("rev")), value.get("grown_from")
                grown = grown_from if isinstance(grown_from, str) and grown_from else None
                return cls(ids, times, terms, hidden, rev, grown, rev)
        warn(where, f"index block {number}", "unreadable; its pages are not searched")
        return cls()

    def append(self, page_id: str, timestamp: float, terms: Sequence[str]) -> None:
        """Add a page (its vector is written to `vectors/<id>` by the caller)."""
        self.ids.append(page_id)
        self.times.append(float(timestamp))
        self.terms.append(" ".join(terms))
        self.rev = uuid.uuid4().hex

    def remove(self, page_id: str) -> None:
        if page_id in self.ids:
            index = self.ids.index(page_id)
            for column in (self.ids, self.times, self.terms):
                del column[index]
        self.hidden.discard(page_id)
        self.rev, self.lineage = uuid.uuid4().hex, None

    def hide(self, page_id: str, *, hidden: bool) -> None:
        if hidden:
            self.hidden.add(page_id)
        else:
            self.hidden.discard(page_id)
        # A new revision, not an extension: the search's copy must read the block again.
        self.rev, self.lineage = uuid.uuid4().hex, None

    def dump(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "rev": self.rev,
            "ids": self.ids,
            "times": self.times,
            "terms": self.terms,
            "hidden": sorted(self.hidden),
            "grown_from": self.lineage,
        }


# --- long-term memory and visits ---------------------------------------------------------------


@dataclass(slots=True)
class FactRec:
    """A long-term entry as stored."""

    id: str
    text: str
    kind: FactKind
    timestamp: float
    source: str | None = None
    forgotten: bool = False
    pages: list[str] | None = None
    """The pages it was made from; None: from its whole source segment (a model-made profile
    line, or an entry written before pages were recorded)."""
    hidden_by: list[str] = field(default_factory=list)
    """Forgotten pages or segments it was made from: hidden while any is (restoring the last
    one shows it again)."""

    @property
    def shown(self) -> bool:
        return not self.forgotten and not self.hidden_by

    def made_from(self, item_id: str, segment_id: str | None) -> bool:
        """Whether forgetting page `item_id` of segment `segment_id` (or segment `item_id`,
        with `segment_id=None`) must hide this entry."""
        if segment_id is None:
            return self.source == item_id
        if self.pages is None:
            return self.source == segment_id
        return item_id in self.pages

    def public(self) -> Fact:
        pages = tuple(p for p in self.pages or () if isinstance(p, str))
        return Fact(
            self.id, self.text, self.kind, self.timestamp, self.source, not self.shown, pages
        )


@dataclass(slots=True)
class LongTerm:
    """The `long_term` record: entries, oldest first, and their vectors."""

    facts: list[FactRec] = field(default_factory=list)
    vectors: dict[str, Vector] = field(default_factory=dict)
    matrix: Vector | None = None
    """The vectors as read, one row per entry in order (a retrieval scores them at once)."""
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    """Each entry's content words, by id, counted when a retrieval first asks (`words`)."""
    postings: dict[str, set[str]] | None = None
    """Content word -> the ids of the entries holding it (`holding`)."""

    @classmethod
    def load(cls, value: object, *, where: str) -> LongTerm:
        lpm = cls()
        if value is None:
            return lpm
        if not isinstance(value, Mapping):
            warn(where, "long_term record", "not an object; ignored")
            return lpm
        bad: list[str] = []
        for raw in _list(value.get("facts"), where, "long_term record", "facts"):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
                warn(where, "long_term record", "skipped a malformed entry (no object or id)")
                continue
            kind: FactKind = "profile" if raw.get("kind") == "profile" else "fact"
            source, pages, hidden_by = raw.get("source"), raw.get("pages"), raw.get("hidden_by")
            lpm.facts.append(
                FactRec(
                    id=raw["id"],
                    text=_str(raw.get("text")),
                    kind=kind,
                    timestamp=_num(raw.get("timestamp"), 0.0, bad, "timestamp"),
                    source=source if isinstance(source, str) else None,
                    forgotten=raw.get("forgotten") is True,
                    # Only tested with `in`: a copy is enough, whatever its items are.
                    pages=list(pages) if isinstance(pages, list) else None,
                    hidden_by=_strs(hidden_by) if hidden_by else [],
                )
            )
            if bad:
                _report(where, f"long-term entry {raw['id']!r}", bad)
                bad.clear()
        dim = _int(value.get("dim"))
        matrix = DECODED.get(value, len(lpm.facts), dim) if 0 < dim <= MAX_DIM else None
        if matrix is not None:
            lpm.vectors = {fact.id: matrix[i] for i, fact in enumerate(lpm.facts)}
            lpm.matrix = matrix
        elif lpm.facts and (dim or value.get("vectors")):
            warn(where, "long_term record", "vectors unreadable; entries kept without them")
        return lpm

    @classmethod
    def cached(cls, rev: str) -> LongTerm | None:
        """The record of revision `rev` as this process last read it (None: not held)."""
        with _READ_LOCK:
            found = _READ.get(rev) if rev else None
            if found is not None:
                _READ.move_to_end(rev)
            return found

    @classmethod
    def read(cls, value: object, *, where: str) -> LongTerm:
        """`load` for a reader that changes nothing (a retrieval, every turn), remembered by
        the record's own revision: the state record names the revision last written, so a
        retrieval reads this record only when it names one this process does not hold
        (`cached`). A writer draws a new revision for every write; an edit by hand must too."""
        found = cls.load(value, where=where)
        rev = value.get("rev") if isinstance(value, Mapping) else None
        if isinstance(rev, str) and rev:
            with _READ_LOCK:
                _READ[rev] = found
                while len(_READ) > 256:
                    _READ.popitem(last=False)
        return found

    def words(self, fact: FactRec) -> Counter[str]:
        """The content words of `fact`'s text, counted once per record read."""
        counts = self.counts.get(fact.id)
        if counts is None:
            counts = self.counts[fact.id] = word_counts(fact.text)
        return counts

    def holding(self, words: Iterable[str]) -> set[str]:
        """The ids of the entries whose text holds one of `words` (an index made once per
        record read: a retrieval looks up its query words, never every entry)."""
        if self.postings is None:
            postings: dict[str, set[str]] = {}
            for fact in self.facts:
                for word in self.words(fact):
                    postings.setdefault(word, set()).add(fact.id)
            self.postings = postings
        found: set[str] = set()
        for word in words:
            found |= self.postings.get(word, set())
        return found

    def dump(self) -> dict[str, Any]:
        # The newest entry's dimension (the embeddings in use): after a change of embedding
        # model the older entries keep their text with a zero vector (never retrieved by
        # similarity, still listed and forgettable) rather than being dropped.
        dim = next(
            (
                int(self.vectors[f.id].shape[0])
                for f in reversed(self.facts)
                if f.id in self.vectors
            ),
            0,
        )
        text, rev = "", uuid.uuid4().hex
        if dim:
            zero = zeros(dim)
            rows = [self.vectors.get(f.id, zero) for f in self.facts]
            rows = [row if row.shape == zero.shape else zero for row in rows]
            text = DECODED.put(rev, np.stack(rows))
        return {
            "version": VERSION,
            "facts": [
                {
                    "id": f.id,
                    "text": f.text,
                    "kind": f.kind,
                    "timestamp": f.timestamp,
                    "source": f.source,
                    "forgotten": f.forgotten,
                    **({} if f.pages is None else {"pages": f.pages}),
                    **({"hidden_by": f.hidden_by} if f.hidden_by else {}),
                }
                for f in self.facts
            ],
            "dim": dim,
            "rev": rev,
            "vectors": text,
        }

    def top_seq(self) -> int:
        """The highest `<n>` of its entries' ids."""
        return max((id_number(fact.id) for fact in self.facts), default=0)


_READ: OrderedDict[str, LongTerm] = OrderedDict()
_READ_LOCK = threading.Lock()


def load_visits(value: object) -> dict[str, tuple[int, float]]:
    """The `visits` record: segment id -> (N_visit, last retrieval time)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("segments"), Mapping):
        return {}
    visits: dict[str, tuple[int, float]] = {}
    for key, raw in value["segments"].items():
        if isinstance(key, str) and isinstance(raw, list) and len(raw) == 2:
            visits[key] = (_int(raw[0]), _num(raw[1]))  # out of range: 0 (never a crash)
    return visits


def dump_visits(visits: Mapping[str, tuple[int, float]]) -> dict[str, Any]:
    return {"version": VERSION, "segments": {k: [n, t] for k, (n, t) in visits.items()}}
