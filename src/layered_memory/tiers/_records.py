"""The store records of one user's tiers, and their checked conversion from and to JSON.

Per user namespace (see `_settings.user_namespace`):

| key | value |
|---|---|
| `state` | short-term pages (inline); mid-term segments (page ids, keywords, summary, |
|   | counters) and their vectors as one base64 float32 matrix |
| `visits` | `N_visit` and last retrieval time per segment: the only record a retrieval writes |
| `long_term` | long-term entries and their vectors |
| `pages/<id>` | one mid-term page (query, response, keywords, summary) |
| `vectors/<segment id>` | the vectors of a segment's pages as one matrix, and which are hidden |

Page vectors are kept per segment, not per page: the second retrieval stage decodes the top-m
segments' matrices in a few calls and fetches the bodies of the top-k pages only.

A value that is not what this module wrote (a hand edit, another program) never crashes a
run: a malformed entry is skipped with a warning naming the namespace and the entry's id.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from layered_memory._logs import get_logger
from layered_memory.tiers import _vectors as vec
from layered_memory.tiers._text import top_keywords
from layered_memory.tiers._types import Fact, FactKind, Page, Segment

logger = get_logger(__name__)

VERSION = 1
MAX_LINES = 5


MAX_INT = 2**53
"""Counters and ids past this are not what this module wrote (and would overflow a float)."""
MAX_DIM = 65_536
"""Embedding dimensions past this are refused: a record claiming `10**12` must not make a
zero vector of that size (a few real models reach 4,096; none comes near this)."""


def warn(where: str, record: str, reason: str) -> None:
    """The one warning of a malformed record: the user's namespace, the record, the reason."""
    logger.warning("tiered memory %s: %s: %s", where, record, reason)


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


def _counts(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    if set(map(type, value)) <= {str} and set(map(type, value.values())) <= {int}:
        return dict(value)  # the common case, checked at C speed
    return {k: _int(v) for k, v in value.items() if isinstance(k, str)}


def _meta(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def id_number(item_id: str) -> int:
    """The `<n>` of an id `p<n>` / `s<n>` / `f<n>` (0 when it is not one)."""
    digits = item_id[1:]
    if 0 < len(digits) <= 16 and digits.isascii() and digits.isdigit():
        return int(digits)
    return 0


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
    vector: vec.Vector | None = None

    @classmethod
    def load(cls, value: object, *, where: str, record: str = "page") -> PageRec | None:
        """The page, or None when `value` is no page object (the caller warns)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
            return None
        bad: list[str] = []
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
    """A mid-term segment as stored."""

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
    forgotten: bool = False
    hidden: list[str] = field(default_factory=list)
    """Its forgotten pages. Its keywords, summary, vector and `l_interaction` are made from
    the other pages only, so a forgotten page reaches no prompt and earns no heat through it."""

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
            forgotten=value.get("forgotten") is True,
            hidden=hidden or [],
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
            "forgotten": self.forgotten,
            "hidden": self.hidden,
        }

    def add_keywords(self, words: list[str]) -> None:
        for word in words:
            self.counts[word] = self.counts.get(word, 0) + 1
        # Bound the counts: a long-lived segment must not grow a dictionary of every word.
        if len(self.counts) > 200:
            self.counts = {word: self.counts[word] for word in top_keywords(self.counts, limit=100)}

    def public(self, pages: tuple[Page, ...], *, heat: float, n_visit: int) -> Segment:
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
        )


@dataclass(slots=True)
class UserState:
    """The `state` record: short-term pages, segments and segment vectors."""

    user_id: str
    seq: int = 0
    dim: int | None = None
    stm: list[PageRec] = field(default_factory=list)
    segments: list[SegRec] = field(default_factory=list)
    vectors: dict[str, vec.Vector] = field(default_factory=dict)
    seq_rebuilt: bool = False
    """`seq` was unusable and rebuilt from the ids (the caller adds the long-term ones)."""

    def next_id(self, kind: str) -> str:
        self.seq += 1
        return f"{kind}{self.seq}"

    def segment(self, segment_id: str) -> SegRec | None:
        for segment in self.segments:
            if segment.id == segment_id:
                return segment
        return None

    @classmethod
    def load(cls, value: object, *, user_id: str, where: str) -> UserState:
        state = cls(user_id=user_id)
        if value is None:
            return state
        if not isinstance(value, Mapping):
            warn(where, "state record", "not an object; starting empty")
            return state
        bad: list[str] = []
        seq = value.get("seq")
        state.seq = _int(seq, bad, "seq")
        dim = _int(value.get("dim"), bad, "dim")
        for raw in _list(value.get("stm"), where, "state record", "stm"):
            page = PageRec.load(raw, where=where, record="short-term page")
            if page is None:
                warn(where, "state record", "skipped a malformed short-term page (no object or id)")
            else:
                state.stm.append(page)
        for raw in _list(value.get("segments"), where, "state record", "segments"):
            segment = SegRec.load(raw, where=where)
            if segment is None:
                warn(where, "state record", "skipped a malformed segment (no object or id)")
            else:
                state.segments.append(segment)
        if bad:
            _report(where, "state record", bad)
        if state.seq != seq:
            # Ids come from `seq`: restarting it at 0 would give a new page the id of a kept one
            # and overwrite it. Its floor is the highest id in the record.
            ids = [page.id for page in state.stm]
            ids += [page_id for seg in state.segments for page_id in (seg.id, *seg.pages)]
            state.seq = max(map(id_number, ids), default=0)
            state.seq_rebuilt = True
        if not state.segments:
            return state  # no vector to check `dim` against: the next embedding sets it
        if dim > MAX_DIM:
            # Never trusted: a zero vector of that size is what the next write would allocate.
            warn(where, "state record", f"'dim' {dim} is over {MAX_DIM}; segment vectors ignored")
            return state
        state.dim = dim or None
        matrix = DECODED.get(value, len(state.segments), dim) if dim else None
        if matrix is None:
            # `dim` stays (bounded): the segments' page vectors are read with it.
            warn(where, "state record", "segment vectors unreadable; segments kept without them")
        else:
            state.vectors = {seg.id: matrix[i] for i, seg in enumerate(state.segments)}
        return state

    def dump(self) -> dict[str, Any]:
        rows: list[vec.Vector] = []
        if self.dim:
            zero = vec.zeros(self.dim)
            rows = [self.vectors.get(segment.id, zero) for segment in self.segments]
        rev = uuid.uuid4().hex
        text = DECODED.put(rev, vec.stack(rows)) if rows else ""
        return {
            "version": VERSION,
            "user_id": self.user_id,
            "seq": self.seq,
            "dim": self.dim,
            "stm": [page.dump() for page in self.stm],
            "segments": [segment.dump() for segment in self.segments],
            "rev": rev,
            "vectors": text,
        }


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
    """The pages it was made from; None: from its whole source segment (a keyword profile
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
        return Fact(self.id, self.text, self.kind, self.timestamp, self.source, not self.shown)


@dataclass(slots=True)
class LongTerm:
    """The `long_term` record: entries, oldest first, and their vectors."""

    facts: list[FactRec] = field(default_factory=list)
    vectors: dict[str, vec.Vector] = field(default_factory=dict)

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
        elif lpm.facts and (dim or value.get("vectors")):
            warn(where, "long_term record", "vectors unreadable; entries kept without them")
        return lpm

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
            zero = vec.zeros(dim)
            rows = [self.vectors.get(f.id, zero) for f in self.facts]
            rows = [row if row.shape == zero.shape else zero for row in rows]
            text = DECODED.put(rev, vec.stack(rows))
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


class _DecodedMatrices:
    """Decoded page matrices by the random revision their record was written with.

    Every write of a `vectors/` record draws a new revision, and the revision is read from the
    store in the same call that uses the cache, so an entry can never be older than its record
    (in this process or any other). Decoding dominated retrieval time before this cache
    (base64 of every searched segment's matrix on every turn); bounded by entry count.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, int, int, int, str, str], vec.Vector] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, value: Mapping[str, Any], rows: int, dim: int) -> vec.Vector | None:
        rev, text = value.get("rev"), value.get("vectors")
        key = None
        if isinstance(rev, str) and rev and isinstance(text, str):
            # The text's length and ends too: a hand edit that kept the revision is not served.
            key = (rev, rows, dim, len(text), text[:32], text[-32:])
        if key is not None:
            with self._lock:
                found = self._entries.get(key)
                if found is not None:
                    self._entries.move_to_end(key)
                    return found
        matrix = vec.decode_matrix(text, rows, dim)
        if matrix is not None and key is not None:
            self._remember(key, matrix)
        return matrix

    def put(self, rev: str, matrix: vec.Vector) -> str:
        """Encode `matrix`, remember it under `rev` (saves decoding it back); the text."""
        text = vec.encode(matrix)
        rows, dim = int(matrix.shape[0]), int(matrix.shape[1])
        self._remember((rev, rows, dim, len(text), text[:32], text[-32:]), matrix)
        return text

    def _remember(self, key: tuple[str, int, int, int, str, str], matrix: vec.Vector) -> None:
        matrix.flags.writeable = False  # shared by every reader: nobody may change it
        with self._lock:
            self._entries[key] = matrix
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


DECODED = _DecodedMatrices()


BLOCK_ROWS = 256
"""Page vectors per block: a new page re-encodes its block only, never the whole segment."""


@dataclass(frozen=True, slots=True)
class _Block:
    rev: str
    text: str
    matrix: vec.Vector

    @classmethod
    def of(cls, rows: list[vec.Vector]) -> _Block:
        rev = uuid.uuid4().hex
        matrix = vec.stack(rows)
        return cls(rev, DECODED.put(rev, matrix), matrix)


@dataclass(slots=True)
class SegVectors:
    """The `vectors/<segment id>` record: the segment's page vectors (unit length), in page
    order, in blocks of `BLOCK_ROWS` rows, and the ids of its hidden pages."""

    ids: list[str] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, value: object, dim: int | None, *, where: str) -> SegVectors:
        if not isinstance(value, Mapping) or not dim:
            return cls()
        ids = _strs(value.get("ids"))
        blocks: list[_Block] = []
        raw_blocks = value.get("blocks")
        for raw in raw_blocks if isinstance(raw_blocks, list) else []:
            rows = _int(raw.get("rows")) if isinstance(raw, Mapping) else 0
            matrix = DECODED.get(raw, rows, dim) if isinstance(raw, Mapping) and rows else None
            if matrix is None:
                break
            blocks.append(_Block(str(raw.get("rev")), str(raw.get("vectors")), matrix))
        if sum(int(block.matrix.shape[0]) for block in blocks) != len(ids):
            logger.warning("tiered memory %s: page vectors of a segment unreadable", where)
            return cls()
        return cls(ids=ids, blocks=blocks, hidden=set(_strs(value.get("hidden"))))

    def parts(self) -> list[tuple[list[str], vec.Vector]]:
        """`(page ids, their vectors)` per block."""
        out, start = [], 0
        for block in self.blocks:
            end = start + int(block.matrix.shape[0])
            out.append((self.ids[start:end], block.matrix))
            start = end
        return out

    def append(self, page_id: str, vector: vec.Vector) -> None:
        """Add a page's vector, scaled to length 1 (retrieval then needs no row norms)."""
        row = vec.unit(vector)
        if self.blocks and self.blocks[-1].matrix.shape[0] < BLOCK_ROWS:
            self.blocks[-1] = _Block.of([*self.blocks[-1].matrix, row])
        else:
            self.blocks.append(_Block.of([row]))
        self.ids.append(page_id)

    def remove(self, page_id: str) -> None:
        if page_id in self.ids:
            rows = [row for _, matrix in self.parts() for row in matrix]
            index = self.ids.index(page_id)
            del self.ids[index], rows[index]
            self.blocks = [
                _Block.of(rows[i : i + BLOCK_ROWS]) for i in range(0, len(rows), BLOCK_ROWS)
            ]
        self.hidden.discard(page_id)

    def dump(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "ids": self.ids,
            "hidden": sorted(self.hidden),
            "dim": int(self.blocks[0].matrix.shape[1]) if self.blocks else 0,
            "blocks": [
                {"rev": b.rev, "rows": int(b.matrix.shape[0]), "vectors": b.text}
                for b in self.blocks
            ],
        }
