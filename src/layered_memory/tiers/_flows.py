"""The tier algorithm, written once for the sync and async halves.

Each flow is a generator that yields the I/O it needs (`StoreBatch`, `Embed`, `Ask`,
`WriteInsight`) and receives the result; `TieredMemory` drives it with the sync or the async
clients. The logic (FIFO, F_score, heat, archiving, promotion, retrieval) lives only here;
reading each tier and forgetting are `tiers._editing`. Failures of embeddings, the chat model
or the memory file come back as `Failed` values, so a flow decides what to keep: a page is
written before any of them is asked, and nothing a failure interrupts is lost (short-term
pages over capacity wait for the next consolidation; a promotion whose entries cannot be
embedded is retried later; a bad model answer falls back to the lexical path; a failed query
embedding leaves the lexical search).

**Heat.** H = α·N_visit + β·L + γ·exp(−Δt/μ) as in MemoryOS (Eq. 4), with N_visit the
retrievals that returned one of the segment's pages (the reference code counts every segment
searched with a page above a cosine cut, whether or not that page was used), Δt since it was
last returned or extended. Two uses, two counts: **archiving** takes the coldest segment by
H with L = all its visible pages; **promotion** fires when the heat gained since the last
promotion, α·(visits since) + β·(pages since) + γ·recency, reaches τ. The paper (and its
reference code) resets N_visit and L_interaction on promotion, which makes a just-promoted
segment the coldest and the next to go; here a promotion only starts a new count towards
the next one.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from langchain_core.messages import BaseMessage
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp

from layered_memory._logs import get_logger
from layered_memory.errors import VectorError
from layered_memory.recall import ranking
from layered_memory.recall.periods import time_hint
from layered_memory.recall.text import tokens, word_counts
from layered_memory.tiers import summaries
from layered_memory.tiers.page_index import INDEXES, PageIndex
from layered_memory.tiers.records import (
    ARCHIVE,
    ARCHIVE_ROWS,
    INDEX,
    INDEX_ROWS,
    LPM_KEY,
    MAX_LINES,
    MAX_SEGMENT_KEYWORDS,
    MID_TERM_KEY,
    MIDTERMS,
    PAGES,
    STATE_KEY,
    VECTORS,
    VISITS_KEY,
    ArchiveBlock,
    FactRec,
    IndexBlock,
    LongTerm,
    MidTerm,
    PageRec,
    SegRec,
    UserState,
    dump_visits,
    id_number,
    load_visits,
    read_vector,
    top_keywords,
    vector_record,
    warn,
)
from layered_memory.tiers.settings import TierSettings
from layered_memory.tiers.values import (
    Consolidation,
    FactKind,
    Page,
    Retrieval,
    ScoredFact,
    ScoredPage,
)
from layered_memory.tiers.vectors import BY_REVISION, Vector, as_matrix, unit

logger = get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Run these store operations in one `batch` call; the result is the list of results."""

    ops: tuple[GetOp | PutOp | ListNamespacesOp, ...]


@dataclass(frozen=True, slots=True)
class Embed:
    """Embed `texts` (`query=True`: one query); the result is the vectors or `Failed`."""

    texts: tuple[str, ...]
    query: bool = False


@dataclass(frozen=True, slots=True)
class Ask:
    """Call the chat model; the result is its answer or `Failed`."""

    messages: tuple[BaseMessage, ...]


@dataclass(frozen=True, slots=True)
class WriteInsight:
    """Write one line into the user's MEMORY.md; the result is a bool or `Failed`."""

    user_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Failed:
    """An embedding, model or memory-file call that raised."""

    error: BaseException


Op = StoreBatch | Embed | Ask | WriteInsight
Flow = Generator[Op, Any, T]
Puts = list[GetOp | PutOp]


@dataclass(frozen=True, slots=True)
class Context:
    """What every flow needs: settings, the user's namespace and the time."""

    settings: TierSettings
    namespace: tuple[str, ...]
    user_id: str
    now: float
    has_model: bool = False
    has_writer: bool = False
    store: int = 0
    """The store's `id`: with the namespace, the key of this process's copy of the index."""

    @property
    def pages(self) -> tuple[str, ...]:
        return (*self.namespace, PAGES)

    @property
    def index(self) -> tuple[str, ...]:
        return (*self.namespace, INDEX)

    @property
    def archive(self) -> tuple[str, ...]:
        return (*self.namespace, ARCHIVE)

    @property
    def vectors(self) -> tuple[str, ...]:
        return (*self.namespace, VECTORS)

    @property
    def where(self) -> str:
        """The user's namespace component, for log lines (never the raw id)."""
        return self.namespace[-1]


@dataclass(slots=True)
class Loaded:
    """A user's records as one flow reads and changes them (blocks read on demand)."""

    state: UserState
    mid: MidTerm
    visits: dict[str, tuple[int, float]]
    lpm: LongTerm
    blocks: dict[int, IndexBlock] = field(default_factory=dict)
    archive: dict[int, ArchiveBlock] = field(default_factory=dict)
    pages: dict[str, PageRec] = field(default_factory=dict)
    """Pages read or changed by this flow, by id."""
    changed_archive: set[int] = field(default_factory=set)
    """Archive blocks this flow changed."""
    new_vectors: dict[str, Vector] = field(default_factory=dict)
    """Vectors of pages this flow moved out of short-term memory, by page id."""
    lpm_read: bool = True
    """Whether `lpm` is the stored record (it holds every entry's vector: a consolidation
    reads it only to promote)."""
    mid_rev: str = ""
    """The revision of the `mid_term` record `mid` is (as read, then as written)."""


def _keep(ctx: Context, loaded: Loaded) -> None:
    """Hand the mid-term tier back to this process's copy (its writes succeeded)."""
    MIDTERMS.put((ctx.store, ctx.namespace), loaded.mid_rev, loaded.mid)


def _read_long_term(ctx: Context, loaded: Loaded) -> Flow[None]:
    if not loaded.lpm_read:
        items = yield StoreBatch((GetOp(ctx.namespace, LPM_KEY),))
        loaded.lpm, loaded.lpm_read = LongTerm.load(_value(items[0]), where=ctx.where), True


def _value(item: object) -> object:
    return item.value if isinstance(item, Item) else None


def load(ctx: Context, *, long_term: bool = True, writer: bool = False) -> Flow[Loaded]:
    """Read the user's small records in one batch (blocks are read when needed; with
    `long_term=False` the long-term record too: `_read_long_term`). A `writer` (holding the
    user's lock) takes this process's copy of the mid-term tier when it is the revision read,
    and hands it back with `_keep` once its writes succeeded."""
    keys = (STATE_KEY, MID_TERM_KEY, VISITS_KEY) + ((LPM_KEY,) if long_term else ())
    items = yield StoreBatch(tuple(GetOp(ctx.namespace, key) for key in keys))
    state_item, mid_item, visits_item, *lpm_item = (_value(item) for item in items)
    state = UserState.load(state_item, user_id=ctx.user_id, where=ctx.where)
    rev = mid_item.get("rev") if isinstance(mid_item, Mapping) else None
    mid = MIDTERMS.take((ctx.store, ctx.namespace), rev) if writer else None
    loaded = Loaded(
        state=state,
        mid=mid if mid is not None else MidTerm.load(mid_item, where=ctx.where),
        visits=load_visits(visits_item),
        lpm=LongTerm.load(lpm_item[0], where=ctx.where) if long_term else LongTerm(),
        lpm_read=long_term,
        mid_rev=rev if isinstance(rev, str) else "",
    )
    if mid is None:
        yield from _segment_vectors(ctx, loaded)
    if state.seq_rebuilt:
        yield from _read_long_term(ctx, loaded)
        # Ids come from `seq`: its floor is the highest id kept anywhere, archived ones too.
        yield from _read_blocks(ctx, loaded, range(len(state.index)))
        yield from _read_archive(ctx, loaded, range(len(state.archive)))
        state.seq = max(
            state.seq,
            loaded.mid.top_seq(),
            loaded.lpm.top_seq(),
            *(id_number(i) for block in loaded.blocks.values() for i in block.ids),
            *(
                id_number(i)
                for block in loaded.archive.values()
                for seg in block.segments
                for i in (seg.id, *seg.pages)
            ),
        )
    return loaded


def _segment_vectors(ctx: Context, loaded: Loaded) -> Flow[None]:
    """The mid-term segments' vectors: from this process's copies when their revision is the
    one the mid-term record names, else read (only those) from `vectors/<id>`."""
    mid, dim = loaded.mid, loaded.state.dim
    if not dim:
        return
    missing, unreadable = [], []
    for segment in mid.segments:
        known = BY_REVISION.get(segment.vector, dim) if segment.vector else None
        if known is not None:
            mid.take(segment, known)
        elif segment.vector:
            missing.append(segment)
        else:  # every segment written with a dimension names its vector
            unreadable.append(segment.id)
    items = (
        (yield StoreBatch(tuple(GetOp(ctx.vectors, segment.id) for segment in missing)))
        if missing
        else []
    )
    for segment, item in zip(missing, items, strict=True):
        vector = read_vector(_value(item), rev=segment.vector, dim=dim)
        if vector is None:
            unreadable.append(segment.id)
        else:
            mid.take(segment, BY_REVISION.put(segment.vector, vector))
    if unreadable:
        warn(
            ctx.where,
            "mid_term record",
            f"segment vectors unreadable ({', '.join(unreadable[:5])}); segments kept without them",
        )


def _page_vectors(ctx: Context, ids: Sequence[str], dim: int) -> Flow[dict[str, Vector | None]]:
    """The vectors of pages `ids` (None: missing or unreadable, warned)."""
    if not ids:
        return {}
    items = yield StoreBatch(tuple(GetOp(ctx.vectors, page_id) for page_id in ids))
    found = {
        page_id: read_vector(_value(item), rev=None, dim=dim)
        for page_id, item in zip(ids, items, strict=True)
    }
    unreadable = [page_id for page_id, vector in found.items() if vector is None]
    if unreadable:
        warn(
            ctx.where,
            "vectors",
            f"vectors of page(s) {', '.join(unreadable[:5])} unreadable; searched by words only",
        )
    return found


def _read_blocks(ctx: Context, loaded: Loaded, numbers: Sequence[int] | range) -> Flow[None]:
    missing = [n for n in numbers if n not in loaded.blocks]
    if missing:
        items = yield StoreBatch(tuple(GetOp(ctx.index, str(n)) for n in missing))
        for n, item in zip(missing, items, strict=True):
            loaded.blocks[n] = IndexBlock.load(_value(item), where=ctx.where, number=n)


def _read_archive(ctx: Context, loaded: Loaded, numbers: Sequence[int] | range) -> Flow[None]:
    missing = [n for n in numbers if n not in loaded.archive]
    if missing:
        items = yield StoreBatch(tuple(GetOp(ctx.archive, str(n)) for n in missing))
        for n, item in zip(missing, items, strict=True):
            loaded.archive[n] = ArchiveBlock.load(_value(item), where=ctx.where)


def _read_pages(ctx: Context, loaded: Loaded, ids: Sequence[str]) -> Flow[list[PageRec]]:
    """The pages `ids` (those this flow already holds, then the store's), in order."""
    missing = [page_id for page_id in dict.fromkeys(ids) if page_id not in loaded.pages]
    if missing:
        items = yield StoreBatch(tuple(GetOp(ctx.pages, page_id) for page_id in missing))
        for page_id, item in zip(missing, items, strict=True):
            value = _value(item)
            page = PageRec.load(value, where=ctx.where)
            if page is not None:
                loaded.pages[page_id] = page
            elif value is not None:
                warn(ctx.where, f"page {page_id!r}", "not a page object; skipped")
    return [loaded.pages[page_id] for page_id in ids if page_id in loaded.pages]


def _vectors(result: object, count: int, dim: int | None, ctx: Context, what: str) -> Vector | None:
    if isinstance(result, Failed):
        logger.warning(
            "tiered memory %s: embedding %s failed (%s)",
            ctx.where,
            what,
            type(result.error).__name__,
        )
        return None
    try:
        return as_matrix(result, count=count, dim=dim)
    except VectorError as exc:
        logger.warning("tiered memory %s: embedding %s unusable: %s", ctx.where, what, exc)
        return None


def page_text(page: PageRec) -> str:
    """The text a page is embedded and indexed from."""
    return f"{page.query}\n{page.response}"


def _recency(ctx: Context, segment: SegRec, visits: dict[str, tuple[int, float]]) -> float:
    _, visited = visits.get(segment.id, (0, 0.0))
    elapsed = max(0.0, ctx.now - max(segment.last_access, visited))  # a clock going back: 0
    return math.exp(-elapsed / ctx.settings.mu)


def heat(ctx: Context, segment: SegRec, visits: dict[str, tuple[int, float]]) -> float:
    """H = α·N_visit + β·(visible pages) + γ·exp(−Δt/μ): what archiving compares."""
    s = ctx.settings
    n_visit = visits.get(segment.id, (0, 0.0))[0]
    pages = len(segment.pages) - len(segment.hidden)
    return s.alpha * n_visit + s.beta * pages + s.gamma * _recency(ctx, segment, visits)


def promotion_heat(ctx: Context, segment: SegRec, visits: dict[str, tuple[int, float]]) -> float:
    """The heat gained since the last promotion: what τ is compared with."""
    s = ctx.settings
    since = max(0, visits.get(segment.id, (0, 0.0))[0] - segment.promoted_visits)
    return (
        s.alpha * since + s.beta * segment.l_interaction + s.gamma * _recency(ctx, segment, visits)
    )


# --- recording and consolidation -------------------------------------------------------------


def add_page(
    ctx: Context, query: str, response: str, meta: dict[str, Any], *, then_consolidate: bool = True
) -> Flow[Page]:
    """Append a page to short-term memory (written at once), then consolidate."""
    loaded = yield from load(ctx, long_term=False, writer=True)
    state = loaded.state
    page = PageRec(
        id=state.next_id("p"), query=query, response=response, timestamp=ctx.now, meta=meta
    )
    state.stm.append(page)
    # Written before any embedding or model call: whatever fails next, the page is kept.
    yield StoreBatch((PutOp(ctx.namespace, STATE_KEY, state.dump()),))
    if then_consolidate:
        yield from consolidate(ctx, loaded, written=True)
    else:
        _keep(ctx, loaded)
    return page.public()


@dataclass(slots=True)
class _Report:
    moved: int = 0
    created: int = 0
    archived: int = 0
    promoted: int = 0
    facts: int = 0


def consolidate(
    ctx: Context, loaded: Loaded | None = None, *, written: bool = False
) -> Flow[Consolidation]:
    """Move short-term overflow to mid-term, archive the coldest segments, promote hot ones."""
    if loaded is None:
        loaded = yield from load(ctx, long_term=False, writer=True)
    report = _Report()
    touched: set[str] = set()
    yield from _move_overflow(ctx, loaded, touched, report)
    yield from _archive(ctx, loaded, touched, report)
    lpm_changed = yield from _promote(ctx, loaded, report)
    changed = bool(report.moved or report.archived or report.promoted)
    lpm_put = _long_term_put(ctx, loaded) if lpm_changed else None
    puts: Puts = []
    if changed or lpm_changed or not written:
        puts += _state_puts(ctx, loaded)
    if lpm_put is not None:
        puts.append(lpm_put)
    if puts:
        yield StoreBatch(tuple(puts))
    _keep(ctx, loaded)
    return Consolidation(
        moved=report.moved,
        created=report.created,
        archived=report.archived,
        promoted=report.promoted,
        facts=report.facts,
        pending=max(0, len(loaded.state.stm) - ctx.settings.stm_capacity),
    )


def _long_term_put(ctx: Context, loaded: Loaded) -> PutOp:
    """The write of the long-term record; the state record, written in the same batch and
    before it, names its new revision (a retrieval reads the record only when it names one
    it does not hold; one that never got written costs a read, never a stale answer)."""
    assert loaded.lpm_read  # never the empty stand-in: it would drop every entry
    value = loaded.lpm.dump()
    loaded.state.long_term = value["rev"]
    return PutOp(ctx.namespace, LPM_KEY, value)


def _state_puts(ctx: Context, loaded: Loaded, *, pages: bool = True) -> Puts:
    """The writes of everything a flow changed: blocks, archive, pages, mid-term, state."""
    state = loaded.state
    puts: Puts = []
    for n, block in sorted(loaded.blocks.items()):
        if n < len(state.index) and state.index[n] != (block.rev, len(block.ids)):
            state.index[n] = (block.rev, len(block.ids))
            puts.append(PutOp(ctx.index, str(n), block.dump()))
    for n in sorted(loaded.changed_archive):
        if n < len(state.archive):
            state.archive[n] = (uuid.uuid4().hex, len(loaded.archive[n]))
            puts.append(PutOp(ctx.archive, str(n), loaded.archive[n].dump()))
    if pages:
        puts += [PutOp(ctx.pages, page.id, page.dump()) for page in loaded.pages.values()]
    puts += [
        PutOp(ctx.vectors, page_id, vector_record(vector)[1])
        for page_id, vector in loaded.new_vectors.items()
    ]
    loaded.new_vectors.clear()
    # Visits of segments no longer in the mid-term tier are dropped (archived, purged).
    kept = {seg.id for seg in loaded.mid.segments}
    if any(sid not in kept for sid in loaded.visits):
        loaded.visits = {k: v for k, v in loaded.visits.items() if k in kept}
        puts.append(PutOp(ctx.namespace, VISITS_KEY, dump_visits(loaded.visits)))
    mid, vectors = loaded.mid.dump(state.dim)
    loaded.mid_rev = mid["rev"]
    puts += [PutOp(ctx.vectors, item_id, value) for item_id, value in vectors.items()]
    puts.append(PutOp(ctx.namespace, MID_TERM_KEY, mid))
    puts.append(PutOp(ctx.namespace, STATE_KEY, state.dump()))
    return puts


def _open_block(ctx: Context, loaded: Loaded) -> Flow[tuple[int, IndexBlock]]:
    """The index block the next page goes into: the last one while it has room."""
    state = loaded.state
    last = len(state.index) - 1
    if last >= 0 and state.index[last][1] < INDEX_ROWS:
        yield from _read_blocks(ctx, loaded, [last])
        block = loaded.blocks[last]
        # An unreadable block (empty although the state counts rows) is never overwritten.
        if len(block.ids) < INDEX_ROWS and (block.ids or not state.index[last][1]):
            return last, block
    state.index.append(("", 0))
    number = len(state.index) - 1
    loaded.blocks[number] = IndexBlock()
    return number, loaded.blocks[number]


def _move_overflow(ctx: Context, loaded: Loaded, touched: set[str], report: _Report) -> Flow[None]:
    state, mid = loaded.state, loaded.mid
    overflow = state.stm[: max(0, len(state.stm) - ctx.settings.stm_capacity)]
    if not overflow:
        return
    result = yield Embed(tuple(page_text(page) for page in overflow))
    matrix = _vectors(result, len(overflow), state.dim, ctx, "pages moving to mid-term")
    if matrix is None:
        return  # the pages stay in short-term memory; the next consolidation retries
    state.dim = int(matrix.shape[1])
    resummarized: list[SegRec] = []
    for page, raw in zip(overflow, matrix, strict=True):
        vector = unit(raw)
        page.vector = vector
        words = summaries.keywords(page_text(page))
        summary = summaries.summary_line(page.query, page.response)
        terms = tokens(page_text(page))
        if ctx.has_model and not page.forgotten:  # a forgotten page's text goes to no model
            answer = yield Ask(tuple(summaries.page_messages(page.query, page.response)))
            parsed = _parsed(answer, summaries.parse_summary, ctx, "page summary")
            if parsed is not None:
                words, summary = parsed
                # The model's words (synonyms, names it resolved) are searchable too.
                terms += tokens(summary) + words
        page.keywords, page.summary = words[: summaries.MAX_KEYWORDS], summary
        segment, score = _best_segment(mid, vector, page.keywords)
        if segment is not None and score >= ctx.settings.theta:
            if page.forgotten:
                # Kept (restorable), but nothing of it enters the segment's keywords, summary,
                # vector or L_interaction, and the index hides it.
                segment.pages.append(page.id)
                segment.hidden.append(page.id)
            else:
                yield from _join(ctx, mid, segment, page)
        else:
            segment = _create(ctx, state, mid, page)
            report.created += 1
        touched.add(segment.id)
        number, block = yield from _open_block(ctx, loaded)
        block.append(page.id, page.timestamp, terms)
        loaded.new_vectors[page.id] = vector
        if page.forgotten:
            block.hide(page.id, hidden=True)
        elif ctx.has_model and segment not in resummarized:
            resummarized.append(segment)
        page.segment, page.block = segment.id, number
        loaded.pages[page.id] = page
        report.moved += 1
    del state.stm[: len(overflow)]
    if resummarized:
        # The paper embeds a segment's summary; without a usable answer the centroid stays.
        result = yield Embed(tuple(segment.summary for segment in resummarized))
        summary_vectors = _vectors(result, len(resummarized), state.dim, ctx, "segment summaries")
        if summary_vectors is not None:
            for segment, vector in zip(resummarized, summary_vectors, strict=True):
                mid.vectors[segment.id] = unit(vector)


def _parsed(answer: object, parse: Any, ctx: Context, what: str) -> Any:
    if isinstance(answer, Failed):
        logger.warning(
            "tiered memory %s: model call for %s failed (%s); lexical fallback",
            ctx.where,
            what,
            type(answer.error).__name__,
        )
        return None
    parsed = parse(summaries.answer_text(answer))
    if parsed is None:
        logger.warning(
            "tiered memory %s: unusable model answer for %s; lexical fallback", ctx.where, what
        )
    return parsed


def _best_segment(
    mid: MidTerm, vector: Vector, words: Sequence[str]
) -> tuple[SegRec | None, float]:
    """The visible segment with the highest F_score = cos(e_s, e_p) + Jaccard(K_s, K_p)."""
    best: SegRec | None = None
    best_score = float("-inf")
    direction = unit(vector)
    for segment in mid.segments:
        # One dot product per segment with its cached unit vector: stacking the 200 vectors
        # into a matrix copies them all on every page (megabytes at 5,000 dimensions).
        units = mid.unit_vector(segment.id) if segment.shown else None
        if units is None or units.shape != direction.shape:
            continue
        score = float(units @ direction) + summaries.jaccard(segment.keywords, words)
        if score > best_score:
            best, best_score = segment, score
    return best, best_score


def _join(ctx: Context, mid: MidTerm, segment: SegRec, page: PageRec) -> Flow[None]:
    segment.pages.append(page.id)
    segment.l_interaction += 1
    segment.last_access = ctx.now
    segment.add_keywords(page.keywords)
    segment.lines = [*segment.lines, page.summary][-MAX_LINES:]
    assert page.vector is not None
    centroid = mid.vectors.get(segment.id)
    if centroid is None or centroid.shape != page.vector.shape:
        centroid = 0 * page.vector
    mid.vectors[segment.id] = centroid + page.vector
    lexical = True
    if ctx.has_model:
        answer = yield Ask(
            tuple(
                summaries.segment_messages(
                    segment.summary, segment.keywords, page.summary, page.keywords
                )
            )
        )
        parsed = _parsed(answer, summaries.parse_summary, ctx, "segment summary")
        if parsed is not None:
            words, segment.summary = parsed
            segment.keywords = words[:MAX_SEGMENT_KEYWORDS]
            lexical = False
    if lexical:
        segment.keywords = top_keywords(segment.counts)
        segment.summary = summaries.segment_summary(segment.keywords, segment.lines)


def _create(ctx: Context, state: UserState, mid: MidTerm, page: PageRec) -> SegRec:
    assert page.vector is not None
    hidden = page.forgotten
    segment = SegRec(
        id=state.next_id("s"),
        pages=[page.id],
        counts={},
        keywords=[],
        summary="",
        lines=[] if hidden else [page.summary],
        l_interaction=0 if hidden else 1,
        last_access=ctx.now,
        created=ctx.now,
        hidden=[page.id] if hidden else [],
    )
    mid.segments.append(segment)
    if hidden:
        # Nothing of a forgotten page shows: no keywords, no summary, and a zero vector that
        # no new page can score against.
        mid.vectors[segment.id] = 0 * page.vector
        return segment
    segment.add_keywords(page.keywords)
    segment.keywords = list(page.keywords[:MAX_SEGMENT_KEYWORDS])
    segment.summary = (
        page.summary
        if ctx.has_model
        else summaries.segment_summary(segment.keywords, segment.lines)
    )
    mid.vectors[segment.id] = page.vector.copy()
    return segment


def _archive(ctx: Context, loaded: Loaded, touched: set[str], report: _Report) -> Flow[None]:
    """Move the coldest segments to the archive while over capacity; their pages stay in the
    index, so they are still searched (only `forget(..., purge=True)` deletes a page).

    A segment that just received a page is spared unless nothing else is left.
    """
    mid, state = loaded.mid, loaded.state
    while len(mid.segments) > ctx.settings.mtm_capacity:
        candidates = [s for s in mid.segments if s.id not in touched] or mid.segments
        coldest = min(
            candidates,
            key=lambda s: (heat(ctx, s, loaded.visits), s.created, id_number(s.id)),
        )
        mid.segments.remove(coldest)
        mid.vectors.pop(coldest.id, None)
        coldest.vector = ""  # an archived segment has no vector (its record is deleted)
        last = len(state.archive) - 1
        if last >= 0 and state.archive[last][1] < ARCHIVE_ROWS:
            yield from _read_archive(ctx, loaded, [last])
        else:
            state.archive.append(("", 0))
            last += 1
            loaded.archive[last] = ArchiveBlock()
        loaded.archive[last].append(coldest)
        loaded.changed_archive.add(last)
        report.archived += 1
    if report.archived:
        logger.info("tiered memory %s: archived %d cold segment(s)", ctx.where, report.archived)


def _promote(ctx: Context, loaded: Loaded, report: _Report) -> Flow[bool]:
    """Promote segments whose heat gained since their last promotion reaches τ.

    Only pages not forgotten are promoted, and each entry records the pages it was made from,
    so forgetting one of them later hides the entry too (`forget`).
    """
    state, s = loaded.state, ctx.settings
    hot = [
        (promotion_heat(ctx, segment, loaded.visits), segment)
        for segment in loaded.mid.segments
        if not segment.forgotten and segment.unpromoted()
    ]
    hot = sorted(
        ((h, seg) for h, seg in hot if h >= s.tau), key=lambda pair: (-pair[0], pair[1].created)
    )[: s.max_promotions]
    if hot:
        yield from _read_long_term(ctx, loaded)
    lpm = loaded.lpm
    changed = False
    for _, segment in hot:
        pages = yield from _read_pages(ctx, loaded, segment.unpromoted())
        visible = [page for page in pages if not page.forgotten]
        entries = _lexical_promotion(visible)
        if ctx.has_model and visible:
            answer = yield Ask(
                tuple(summaries.promotion_messages([(p.query, p.response) for p in visible]))
            )
            parsed = _parsed(answer, summaries.parse_promotion, ctx, "promotion")
            if parsed is not None:
                profile, facts = parsed
                ids = [page.id for page in visible]
                entries = [("profile", text, ids) for text in profile]
                entries += [("fact", text, ids) for text in facts]
        known = {fact.text.casefold() for fact in lpm.facts if fact.shown}
        new: dict[str, tuple[FactKind, list[str] | None]] = {}
        for kind, text, origin in entries:
            if text.casefold() not in known:
                new.setdefault(text, (kind, origin))
        if new:
            result = yield Embed(tuple(new))
            matrix = _vectors(result, len(new), None, ctx, "long-term entries")
            if matrix is None:
                continue  # not promoted: heat and pages unchanged, retried next time
            for (text, (kind, origin)), vector in zip(new.items(), matrix, strict=True):
                fact = FactRec(state.next_id("f"), text, kind, ctx.now, segment.id, pages=origin)
                lpm.facts.append(fact)
                lpm.vectors[fact.id] = vector
            while len(lpm.facts) > s.lpm_capacity:  # FIFO, as the paper's 100-entry queues
                lpm.vectors.pop(lpm.facts.pop(0).id, None)
            report.facts += len(new)
            changed = True
        segment.l_interaction = 0
        segment.promoted = len(segment.pages)
        segment.promoted_visits = loaded.visits.get(segment.id, (0, 0.0))[0]
        report.promoted += 1
        if ctx.has_writer and new:
            line = "; ".join(new)
            written = yield WriteInsight(ctx.user_id, line)
            if isinstance(written, Failed):
                logger.warning(
                    "tiered memory %s: writing the promotion to MEMORY.md failed (%s)",
                    ctx.where,
                    type(written.error).__name__,
                )
    return changed


Entry = tuple[FactKind, str, list[str] | None]
"""A long-term entry to add: its kind, its text, the pages it was made from (None: the whole
segment)."""


def _lexical_promotion(pages: Sequence[PageRec]) -> list[Entry]:
    """Without a model: the user's statements as facts, each tied to its page.

    A question ("what time is it?") says nothing about the user, and a greeting ("Hi!") little,
    so summary lines ending with `?` or with fewer than three content words are left out. (A
    profile line of keywords, "Talks about: ...", was measured to add no evidence on LoCoMo
    while taking a quarter of a 2,000-character budget: none is made.)
    """
    entries: list[Entry] = []
    for page in pages:
        line = page.summary or summaries.summary_line(page.query, page.response)
        if line and not line.endswith("?") and len(tokens(line)) >= 3:
            entries.append(("fact", line, [page.id]))
    return entries


# --- retrieval -------------------------------------------------------------------------------


def retrieve(ctx: Context, query: str) -> Flow[Retrieval]:
    """The relevant pages of every tier (hybrid search), the relevant long-term entries, and
    the short-term pages; returning a segment's page counts as a visit to it."""
    items = yield StoreBatch(tuple(GetOp(ctx.namespace, key) for key in (STATE_KEY, VISITS_KEY)))
    state_item, visits_item = (_value(item) for item in items)
    state = UserState.load(state_item, user_id=ctx.user_id, where=ctx.where)
    lpm = LongTerm.cached(state.long_term)  # shared: never changed here
    if lpm is None:
        items = yield StoreBatch((GetOp(ctx.namespace, LPM_KEY),))
        lpm = LongTerm.read(_value(items[0]), where=ctx.where)
    short = [page for page in state.stm if not page.forgotten]
    base = Retrieval(short_term=tuple(page.public() for page in short))
    facts = [fact for fact in lpm.facts if fact.shown]
    if not query.strip() or not (short or state.index or facts):
        return base
    index = yield from _current_index(ctx, state)
    q: Vector | None = None
    if (index is not None and index.rows.visible.any()) or facts:
        result = yield Embed((query,), query=True)
        matrix = _vectors(result, 1, None, ctx, "the query")
        q = matrix[0] if matrix is not None else None  # None: the lexical search still runs
    if q is not None and index is not None and q.shape[0] != index.dim:
        logger.warning(
            "tiered memory %s: query has %d dimensions, the index %d; lexical search only",
            ctx.where,
            q.shape[0],
            index.dim,
        )
    dense = q if q is not None and (index is None or q.shape[0] == index.dim) else None
    stm_docs = [
        ranking.LooseDoc(page.id, word_counts(page_text(page)), page.timestamp) for page in short
    ]
    s = ctx.settings
    hint = time_hint(query, ctx.now)
    words = tokens(query)
    with index.lock if index is not None else contextlib.nullcontext():
        found = ranking.rank(
            index.rows if index is not None else None,
            words,
            dense if index is not None else None,
            stm_docs,
            top_k=s.top_k,
            relevance_z=s.relevance_z,
            hint=hint,
            floor_z=s.floor_z,
        )
    by_id = {page.id: page for page in short}
    loaded = Loaded(state, MidTerm(), {}, lpm)
    fetched = yield from _read_pages(
        ctx, loaded, [pid for pid, _ in found.ranked if pid not in by_id]
    )
    by_id.update((page.id, page) for page in fetched if not page.forgotten)
    scored = [
        ScoredPage(by_id[pid].public(), score, _matched(found, by_id[pid]))
        for pid, score in found.ranked
        if pid in by_id
    ]
    entries = _relevant_entries(found, facts, lpm, q, s.lpm_top)
    segments: dict[str, float] = {}
    for hit in scored:
        if hit.page.segment_id is not None:
            segments.setdefault(hit.page.segment_id, hit.score)
    if segments:
        # Visits and recency from real use: a segment is visited when one of its pages is
        # returned (the paper's R_recency is since the last access).
        visits = load_visits(visits_item)
        for segment_id in segments:
            n_visit, _ = visits.get(segment_id, (0, 0.0))
            visits[segment_id] = (n_visit + 1, ctx.now)
        yield StoreBatch((PutOp(ctx.namespace, VISITS_KEY, dump_visits(visits)),))
    return Retrieval(
        short_term=base.short_term,
        pages=tuple(scored),
        facts=tuple(ScoredFact(f.public(), sc) for sc, f in entries if f.kind == "fact"),
        profile=tuple(f.public() for _, f in entries if f.kind == "profile"),
        segments=tuple(segments.items()),
    )


def _matched(found: ranking.Found, page: PageRec) -> tuple[bool, bool]:
    """Which turns of a found page hold the match (a page without a response: its query)."""
    if not page.response:
        return (True, False)
    query, response = ranking.matching_parts(found, (page.query, page.response))
    return (query, response)


def _current_index(ctx: Context, state: UserState) -> Flow[PageIndex | None]:
    """This process's copy of the user's index, brought up to the revisions `state` lists
    (reading only the blocks that changed since it was last brought up)."""
    if not state.dim or not state.index:
        return None
    revs = [rev for rev, _ in state.index]
    key = (ctx.store, ctx.namespace)
    for _ in range(3):
        stale = INDEXES.stale_blocks(key, revs, state.dim)
        blocks: dict[int, IndexBlock] = {}
        if stale:
            items = yield StoreBatch(tuple(GetOp(ctx.index, str(n)) for n in stale))
            for n, item in zip(stale, items, strict=True):
                block = IndexBlock.load(_value(item), where=ctx.where, number=n)
                blocks[n] = block
                revs[n] = block.rev or revs[n]
        # The vectors of the rows the copy lacks only (a new page: its own).
        needed = INDEXES.new_rows(key, revs, state.dim, blocks)
        vectors = yield from _page_vectors(ctx, needed, state.dim)
        index = INDEXES.current(key, revs, state.dim, blocks, vectors)
        if index is not None:
            return index
    return None  # another thread kept changing it: this retrieval searches short-term only


def _relevant_entries(
    found: ranking.Found, facts: list[FactRec], lpm: LongTerm, q: Vector | None, top: int
) -> list[tuple[float, FactRec]]:
    """Long-term entries that would rank among the returned pages (the same scores and the
    same relevance cut as the pages: no cosine cut of their own), best first."""
    if not top or not facts:
        return []
    cosines: dict[str, float] = {}
    if q is not None and lpm.matrix is not None and lpm.matrix.shape[1:] == q.shape:
        every = ranking.cosines(lpm.matrix, q)
        # Only an entry above the dense cut or holding a query word can score (score_extra):
        # the others (most of up to 100, every turn) are not scored at all.
        cosines = {
            lpm.facts[i].id: float(every[i]) for i in np.flatnonzero(every > found.dense_cut)
        }
    lexical = lpm.holding(found.idf) if found.max_lexical > 0 else set()
    scored = []
    for fact in facts:
        if fact.id not in lexical and fact.id not in cosines:
            continue
        score = ranking.score_extra(found, lpm.words(fact), cosines.get(fact.id))
        if score > 0 and score >= found.last_score:
            scored.append((score, fact))
    scored.sort(key=lambda pair: (-pair[0], -pair[1].timestamp))
    return scored[:top]
