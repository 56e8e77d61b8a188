"""The tier algorithm, written once for the sync and async halves.

Each flow is a generator that yields the I/O it needs (`StoreBatch`, `Embed`, `Ask`,
`WriteInsight`) and receives the result; `TieredMemory` drives it with the sync or the async
clients. The logic (FIFO, F_score, heat, eviction, promotion, two-stage retrieval) lives only
here. Failures of embeddings, the chat model or the memory file come back as `Failed` values,
so a flow decides what to keep: a page is written before any of them is asked, and nothing a
failure interrupts is lost (short-term pages over capacity wait for the next consolidation;
a promotion whose facts cannot be embedded is retried later; a bad model answer falls back to
the lexical path).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.store.base import GetOp, Item, PutOp

from layered_memory._logs import get_logger
from layered_memory.errors import TierItemError
from layered_memory.tiers import _prompts, _text
from layered_memory.tiers import _vectors as vec
from layered_memory.tiers._heat import heat
from layered_memory.tiers._records import (
    MAX_LINES,
    FactRec,
    LongTerm,
    PageRec,
    SegRec,
    SegVectors,
    UserState,
    dump_visits,
    load_visits,
    warn,
)
from layered_memory.tiers._settings import (
    LPM_KEY,
    PAGES,
    STATE_KEY,
    VECTORS,
    VISITS_KEY,
    TierSettings,
)
from layered_memory.tiers._types import (
    Consolidation,
    FactKind,
    Forgotten,
    Page,
    Retrieval,
    ScoredFact,
    ScoredPage,
    Segment,
)

logger = get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Run these store operations in one `batch` call; the result is the list of results."""

    ops: tuple[GetOp | PutOp, ...]


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


@dataclass(frozen=True, slots=True)
class Context:
    """What every flow needs: settings, the user's namespace and the time."""

    settings: TierSettings
    namespace: tuple[str, ...]
    user_id: str
    now: float
    has_model: bool = False
    has_writer: bool = False

    @property
    def pages(self) -> tuple[str, ...]:
        return (*self.namespace, PAGES)

    @property
    def vectors(self) -> tuple[str, ...]:
        return (*self.namespace, VECTORS)

    @property
    def where(self) -> str:
        """The user's namespace component, for log lines (never the raw id)."""
        return self.namespace[-1]


@dataclass(slots=True)
class Loaded:
    state: UserState
    visits: dict[str, tuple[int, float]]
    lpm: LongTerm


def _value(item: object) -> object:
    return item.value if isinstance(item, Item) else None


def load(ctx: Context) -> Flow[Loaded]:
    """Read the user's three records in one batch."""
    items = yield StoreBatch(
        (
            GetOp(ctx.namespace, STATE_KEY),
            GetOp(ctx.namespace, VISITS_KEY),
            GetOp(ctx.namespace, LPM_KEY),
        )
    )
    state_item, visits_item, lpm_item = items
    state = UserState.load(_value(state_item), user_id=ctx.user_id, where=ctx.where)
    lpm = LongTerm.load(_value(lpm_item), where=ctx.where)
    if state.seq_rebuilt:
        state.seq = max(state.seq, lpm.top_seq())  # entries share the id counter
    return Loaded(state=state, visits=load_visits(_value(visits_item)), lpm=lpm)


def _vectors(
    result: object, count: int, dim: int | None, ctx: Context, what: str
) -> vec.Vector | None:
    if isinstance(result, Failed):
        logger.warning(
            "tiered memory %s: embedding %s failed (%s)",
            ctx.where,
            what,
            type(result.error).__name__,
        )
        return None
    try:
        return vec.as_matrix(result, count=count, dim=dim)
    except vec.VectorError as exc:
        logger.warning("tiered memory %s: embedding %s unusable: %s", ctx.where, what, exc)
        return None


def page_text(page: PageRec) -> str:
    """The text a page is embedded from."""
    return f"{page.query}\n{page.response}"


def segment_heat(ctx: Context, segment: SegRec, visits: dict[str, tuple[int, float]]) -> float:
    n_visit, visited = visits.get(segment.id, (0, 0.0))
    s = ctx.settings
    return heat(
        n_visit=n_visit,
        l_interaction=segment.l_interaction,
        last_access=max(segment.last_access, visited),
        now=ctx.now,
        alpha=s.alpha,
        beta=s.beta,
        gamma=s.gamma,
        mu=s.mu,
    )


# --- recording and consolidation -------------------------------------------------------------


def add_page(
    ctx: Context, query: str, response: str, meta: dict[str, Any], *, then_consolidate: bool = True
) -> Flow[Page]:
    """Append a page to short-term memory (written at once), then consolidate."""
    loaded = yield from load(ctx)
    state = loaded.state
    page = PageRec(
        id=state.next_id("p"), query=query, response=response, timestamp=ctx.now, meta=meta
    )
    state.stm.append(page)
    # Written before any embedding or model call: whatever fails next, the page is kept.
    yield StoreBatch((PutOp(ctx.namespace, STATE_KEY, state.dump()),))
    if then_consolidate:
        yield from consolidate(ctx, loaded, written=True)
    return page.public()


def consolidate(
    ctx: Context, loaded: Loaded | None = None, *, written: bool = False
) -> Flow[Consolidation]:
    """Move short-term overflow to mid-term, evict the coldest segments, promote hot ones."""
    if loaded is None:
        loaded = yield from load(ctx)
    state, lpm = loaded.state, loaded.lpm
    puts: list[GetOp | PutOp] = []
    report = _Report()
    touched: dict[str, SegVectors] = {}
    yield from _move_overflow(ctx, state, puts, touched, report)
    report.evicted = _evict(ctx, state, loaded.visits, puts, touched)
    lpm_changed = yield from _promote(ctx, loaded, puts, report)
    state_changed = report.moved or report.evicted or report.promoted
    if state_changed or not written:
        puts.append(PutOp(ctx.namespace, STATE_KEY, state.dump()))
    if lpm_changed:
        puts.append(PutOp(ctx.namespace, LPM_KEY, lpm.dump()))
    if puts and (state_changed or lpm_changed):
        yield StoreBatch(tuple(puts))
    report.pending = max(0, len(state.stm) - ctx.settings.stm_capacity)
    return Consolidation(
        moved=report.moved,
        created=report.created,
        evicted=report.evicted,
        promoted=report.promoted,
        facts=report.facts,
        pending=report.pending,
    )


@dataclass(slots=True)
class _Report:
    moved: int = 0
    created: int = 0
    evicted: int = 0
    promoted: int = 0
    facts: int = 0
    pending: int = 0


def _segment_vectors(
    ctx: Context, state: UserState, segment_ids: Sequence[str], cache: dict[str, SegVectors]
) -> Flow[dict[str, SegVectors]]:
    """The page-vector records of these segments (read once per flow, then from `cache`)."""
    missing = [sid for sid in segment_ids if sid not in cache]
    if missing:
        items = yield StoreBatch(tuple(GetOp(ctx.vectors, sid) for sid in missing))
        for sid, item in zip(missing, items, strict=True):
            cache[sid] = SegVectors.load(_value(item), state.dim, where=ctx.where)
    return {sid: cache[sid] for sid in segment_ids}


def _move_overflow(
    ctx: Context,
    state: UserState,
    puts: list[GetOp | PutOp],
    touched: dict[str, SegVectors],
    report: _Report,
) -> Flow[None]:
    overflow = state.stm[: max(0, len(state.stm) - ctx.settings.stm_capacity)]
    if not overflow:
        return
    result = yield Embed(tuple(page_text(page) for page in overflow))
    matrix = _vectors(result, len(overflow), state.dim, ctx, "pages moving to mid-term")
    if matrix is None:
        return  # the pages stay in short-term memory; the next consolidation retries
    state.dim = int(matrix.shape[1])
    resummarized: list[SegRec] = []
    for page, vector in zip(overflow, matrix, strict=True):
        page.vector = vector
        words = _text.keywords(page_text(page))
        summary = _text.summary_line(page.query, page.response)
        if ctx.has_model and not page.forgotten:  # a forgotten page's text goes to no model
            answer = yield Ask(tuple(_prompts.page_messages(page.query, page.response)))
            parsed = _parsed(answer, _prompts.parse_summary, ctx, "page summary")
            if parsed is not None:
                words, summary = parsed
        page.keywords, page.summary = words[: _text.MAX_KEYWORDS], summary
        segment, score = _best_segment(state, vector, page.keywords)
        if segment is not None and score >= ctx.settings.theta:
            yield from _segment_vectors(ctx, state, [segment.id], touched)
            if page.forgotten:
                # Kept (restorable), but nothing of it enters the segment's keywords, summary,
                # vector or L_interaction, and its vector is hidden from retrieval below.
                segment.pages.append(page.id)
                segment.hidden.append(page.id)
            else:
                yield from _join(ctx, state, segment, page)
        else:
            segment = _create(ctx, state, page)
            touched[segment.id] = SegVectors()
            report.created += 1
        touched[segment.id].append(page.id, vector)
        if page.forgotten:
            touched[segment.id].hidden.add(page.id)
        elif ctx.has_model and segment not in resummarized:
            resummarized.append(segment)
        page.segment = segment.id
        puts.append(PutOp(ctx.pages, page.id, page.dump()))
        report.moved += 1
    del state.stm[: len(overflow)]
    puts.extend(PutOp(ctx.vectors, sid, record.dump()) for sid, record in touched.items())
    if resummarized:
        # The paper embeds a segment's summary; without a usable answer the centroid stays.
        result = yield Embed(tuple(segment.summary for segment in resummarized))
        summaries = _vectors(result, len(resummarized), state.dim, ctx, "segment summaries")
        if summaries is not None:
            for segment, vector in zip(resummarized, summaries, strict=True):
                state.vectors[segment.id] = vector.copy()


def _parsed(answer: object, parse: Any, ctx: Context, what: str) -> Any:
    if isinstance(answer, Failed):
        logger.warning(
            "tiered memory %s: model call for %s failed (%s); lexical fallback",
            ctx.where,
            what,
            type(answer.error).__name__,
        )
        return None
    parsed = parse(_prompts.answer_text(answer))
    if parsed is None:
        logger.warning(
            "tiered memory %s: unusable model answer for %s; lexical fallback", ctx.where, what
        )
    return parsed


def _best_segment(
    state: UserState, vector: vec.Vector, words: Sequence[str]
) -> tuple[SegRec | None, float]:
    """The visible segment with the highest F_score = cos(e_s, e_p) + Jaccard(K_s, K_p)."""
    candidates = [s for s in state.segments if s.shown and s.id in state.vectors]
    if not candidates:
        return None, 0.0
    cos = vec.cosines(vec.stack([state.vectors[s.id] for s in candidates]), vector)
    best: SegRec | None = None
    best_score = float("-inf")
    for segment, similarity in zip(candidates, cos.tolist(), strict=True):
        score = similarity + _text.jaccard(segment.keywords, words)
        if score > best_score:
            best, best_score = segment, score
    return best, best_score


def _join(ctx: Context, state: UserState, segment: SegRec, page: PageRec) -> Flow[None]:
    segment.pages.append(page.id)
    segment.l_interaction += 1
    segment.last_access = ctx.now
    segment.add_keywords(page.keywords)
    segment.lines = [*segment.lines, page.summary][-5:]
    assert page.vector is not None
    state.vectors[segment.id] = state.vectors.get(segment.id, 0 * page.vector) + page.vector
    lexical = True
    if ctx.has_model:
        answer = yield Ask(
            tuple(
                _prompts.segment_messages(
                    segment.summary, segment.keywords, page.summary, page.keywords
                )
            )
        )
        parsed = _parsed(answer, _prompts.parse_summary, ctx, "segment summary")
        if parsed is not None:
            words, segment.summary = parsed
            segment.keywords = words[: _text.MAX_SEGMENT_KEYWORDS]
            lexical = False
    if lexical:
        segment.keywords = _text.top_keywords(segment.counts)
        segment.summary = _text.segment_summary(segment.keywords, segment.lines)


def _create(ctx: Context, state: UserState, page: PageRec) -> SegRec:
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
    state.segments.append(segment)
    if hidden:
        # Nothing of a forgotten page shows: no keywords, no summary, and a zero vector that
        # no query or new page can score against.
        state.vectors[segment.id] = 0 * page.vector
        return segment
    segment.add_keywords(page.keywords)
    segment.keywords = list(page.keywords[: _text.MAX_SEGMENT_KEYWORDS])
    segment.summary = (
        page.summary if ctx.has_model else _text.segment_summary(segment.keywords, segment.lines)
    )
    state.vectors[segment.id] = page.vector.copy()
    return segment


def _evict(
    ctx: Context,
    state: UserState,
    visits: dict[str, tuple[int, float]],
    puts: list[GetOp | PutOp],
    touched: dict[str, SegVectors],
) -> int:
    """Evict the coldest segments (and their pages) while over capacity.

    A segment that just received a page is spared unless nothing else is left: the newest page
    must not be dropped in the very call that moved it.
    """
    evicted = 0
    while len(state.segments) > ctx.settings.mtm_capacity:
        candidates = [s for s in state.segments if s.id not in touched] or state.segments
        coldest = min(candidates, key=lambda s: (segment_heat(ctx, s, visits), s.created))
        state.segments.remove(coldest)
        state.vectors.pop(coldest.id, None)
        puts.extend(PutOp(ctx.pages, page_id, None) for page_id in coldest.pages)
        puts.append(PutOp(ctx.vectors, coldest.id, None))
        evicted += 1
    if evicted:
        logger.info("tiered memory %s: evicted %d cold segment(s)", ctx.where, evicted)
    return evicted


def _promote(
    ctx: Context, loaded: Loaded, puts: list[GetOp | PutOp], report: _Report
) -> Flow[bool]:
    """Promote hot segments (heat >= τ) to long-term memory, then reset their L_interaction.

    Only pages not forgotten are promoted, and each entry records the pages it was made from,
    so forgetting one of them later hides the entry too (`forget`).
    """
    state, lpm, s = loaded.state, loaded.lpm, ctx.settings
    hot = [
        (segment_heat(ctx, segment, loaded.visits), segment)
        for segment in state.segments
        if not segment.forgotten and segment.unpromoted()
    ]
    hot = sorted(
        ((h, seg) for h, seg in hot if h >= s.tau), key=lambda pair: (-pair[0], pair[1].created)
    )[: s.max_promotions]
    changed = False
    fresh = {op.key: op.value for op in puts if isinstance(op, PutOp) and op.namespace == ctx.pages}
    for _, segment in hot:
        pages = yield from _pages(ctx, segment.unpromoted(), fresh)
        visible = [page for page in pages if not page.forgotten]
        entries = _lexical_promotion(segment, visible)
        if ctx.has_model and visible:
            answer = yield Ask(
                tuple(_prompts.promotion_messages([(p.query, p.response) for p in visible]))
            )
            parsed = _parsed(answer, _prompts.parse_promotion, ctx, "promotion")
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


def _lexical_promotion(segment: SegRec, pages: Sequence[PageRec]) -> list[Entry]:
    """Without a model: the segment's keywords as a profile line, the users' statements as facts.

    A question ("what time is it?") says nothing about the user, and a greeting ("Hi!") little,
    so summary lines ending with `?` or with fewer than three content words are left out.
    Nothing comes out of a segment with no page to promote: its keywords alone are no news.
    """
    entries: list[Entry] = []
    if segment.keywords and pages:
        # Made from every visible page of the segment, not only these.
        entries.append(("profile", "Talks about: " + ", ".join(segment.keywords[:5]), None))
    for page in pages:
        line = page.summary or _text.summary_line(page.query, page.response)
        if line and not line.endswith("?") and len(_text.tokens(line)) >= 3:
            entries.append(("fact", line, [page.id]))
    return entries


def _pages(ctx: Context, ids: Sequence[str], fresh: dict[str, Any]) -> Flow[list[PageRec]]:
    missing = [page_id for page_id in ids if page_id not in fresh]
    items: list[Any] = []
    if missing:
        items = yield StoreBatch(tuple(GetOp(ctx.pages, page_id) for page_id in missing))
    found = dict(zip(missing, (_value(item) for item in items), strict=True))
    pages = []
    for page_id in ids:
        value = fresh[page_id] if page_id in fresh else found.get(page_id)
        page = PageRec.load(value, where=ctx.where)
        if page is not None:
            pages.append(page)
        elif value is not None:
            warn(ctx.where, f"page {page_id!r}", "not a page object; skipped")
    return pages


# --- retrieval -------------------------------------------------------------------------------


def retrieve(ctx: Context, query: str) -> Flow[Retrieval]:
    """All of STM; top-m segments then top-k pages above thresholds; top LPM entries."""
    loaded = yield from load(ctx)
    state, lpm, s = loaded.state, loaded.lpm, ctx.settings
    short_term = tuple(page.public() for page in state.stm if not page.forgotten)
    profile = tuple(
        fact.public() for fact in reversed(lpm.facts) if fact.kind == "profile" and fact.shown
    )[: s.max_profile]
    segments = [seg for seg in state.segments if seg.shown and seg.id in state.vectors]
    facts = [f for f in lpm.facts if f.kind == "fact" and f.shown and f.id in lpm.vectors]
    base = Retrieval(short_term=short_term, profile=profile)
    if not query.strip() or not (segments or facts):
        return base
    result = yield Embed((query,), query=True)
    matrix = _vectors(result, 1, None, ctx, "the query")
    if matrix is None:
        return base
    q = matrix[0]
    scored_pages, searched = yield from _search_mid_term(ctx, loaded, segments, q, query)
    scored_facts: tuple[ScoredFact, ...] = ()
    usable = [f for f in facts if lpm.vectors[f.id].shape == q.shape]
    if usable and s.lpm_top:
        cos = vec.cosines(vec.stack([lpm.vectors[f.id] for f in usable]), q).tolist()
        ranked = sorted(zip(cos, usable, strict=True), key=lambda p: (-p[0], -p[1].timestamp))
        scored_facts = tuple(
            ScoredFact(fact.public(), score)
            for score, fact in ranked[: s.lpm_top]
            if score >= s.fact_threshold
        )
    return Retrieval(short_term, scored_pages, scored_facts, profile, searched)


def _search_mid_term(
    ctx: Context, loaded: Loaded, segments: list[SegRec], q: vec.Vector, query: str
) -> Flow[tuple[tuple[ScoredPage, ...], tuple[tuple[str, float], ...]]]:
    s = ctx.settings
    if not segments or loaded.state.dim != q.shape[0]:
        if segments:
            logger.warning(
                "tiered memory %s: query has %d dimensions, mid-term %s; mid-term skipped",
                ctx.where,
                q.shape[0],
                loaded.state.dim,
            )
        return (), ()
    words = _text.keywords(query)
    cos = vec.cosines(vec.stack([loaded.state.vectors[seg.id] for seg in segments]), q)
    scores = [
        c + _text.jaccard(seg.keywords, words)
        for c, seg in zip(cos.tolist(), segments, strict=True)
    ]
    order = sorted(range(len(segments)), key=lambda i: (-scores[i], -segments[i].last_access))
    top = [(segments[i], scores[i]) for i in order[: s.top_m] if scores[i] >= s.segment_threshold]
    if not top:
        return (), ()
    records = yield from _segment_vectors(ctx, loaded.state, [seg.id for seg, _ in top], {})
    # Scored with numpy end to end: Python only touches the top-k pages (10,000s per turn).
    page_scores: list[vec.Vector] = []
    page_ids: list[str] = []
    owners: list[str] = []
    visited: set[str] = set()
    for segment, _ in top:
        record = records[segment.id]
        hidden = record.hidden.union(segment.hidden) if segment.hidden else record.hidden
        for ids, matrix in record.parts():
            cosines = vec.cosines(matrix, q, unit_rows=True)
            if hidden:
                cosines = cosines.copy()
                cosines[[i for i, pid in enumerate(ids) if pid in hidden]] = -2.0
            # As MemoryOS's reference code (`search_sessions`): a searched segment with a page
            # above the page threshold gets the visit, whether or not that page then makes the
            # top-k cut across segments. A forgotten page never scores, so it earns none.
            if bool((cosines >= s.page_threshold).any()):
                visited.add(segment.id)
            page_scores.append(cosines)
            page_ids += ids
            owners += [segment.id] * len(ids)
    best = [
        (score, page_ids[i], owners[i])
        for i, score in vec.top_indices(page_scores, s.top_k, minimum=s.page_threshold)
    ]
    pages = yield from _pages(ctx, [pid for _, pid, _ in best], {})
    by_id = {page.id: page for page in pages if not page.forgotten}
    found = [(c, by_id[pid]) for c, pid, _ in best if pid in by_id]
    found.sort(key=lambda pair: (-pair[0], -pair[1].timestamp))
    if visited:
        # Retrieval updates N_visit and recency (the paper's R_recency is since the last access).
        visits = {
            seg.id: loaded.visits[seg.id]
            for seg in loaded.state.segments
            if seg.id in loaded.visits
        }
        for segment_id in visited:
            n_visit, _ = visits.get(segment_id, (0, 0.0))
            visits[segment_id] = (n_visit + 1, ctx.now)
        yield StoreBatch((PutOp(ctx.namespace, VISITS_KEY, dump_visits(visits)),))
    return (
        tuple(ScoredPage(page.public(), score) for score, page in found[: s.top_k]),
        tuple((seg.id, score) for seg, score in top),
    )


# --- reading and editing ---------------------------------------------------------------------


def short_term(ctx: Context) -> Flow[list[Page]]:
    loaded = yield from load(ctx)
    return [page.public() for page in loaded.state.stm]


def segments(ctx: Context) -> Flow[list[Segment]]:
    loaded = yield from load(ctx)
    state = loaded.state
    pages = yield from _pages(ctx, [pid for seg in state.segments for pid in seg.pages], {})
    by_id = {page.id: page.public() for page in pages}
    return [
        seg.public(
            tuple(by_id[pid] for pid in seg.pages if pid in by_id),
            heat=segment_heat(ctx, seg, loaded.visits),
            n_visit=loaded.visits.get(seg.id, (0, 0.0))[0],
        )
        for seg in state.segments
    ]


def long_term(ctx: Context) -> Flow[list[FactRec]]:
    loaded = yield from load(ctx)
    return list(loaded.lpm.facts)


Kind = Literal["page", "segment", "fact"]

_KINDS: dict[str, Kind] = {"p": "page", "s": "segment", "f": "fact"}


def _kind(item_id: str) -> Kind:
    valid = isinstance(item_id, str) and item_id[:1] in _KINDS
    if valid and item_id[1:].isascii() and item_id[1:].isdigit():
        return _KINDS[item_id[0]]
    raise TierItemError(str(item_id), "not an id of a page (p<n>), segment (s<n>) or fact (f<n>)")


def forget(ctx: Context, item_id: str, *, purge: bool, hide: bool = True) -> Flow[Forgotten]:
    """Hide (or, with `purge`, delete) a page, segment or fact; `hide=False` restores it.

    A forgotten page or segment reaches no prompt by any route: not its text, not its words
    through its segment's keywords or summary (made again from the other pages), not the
    long-term entries made from it (hidden while it is forgotten; for good once purged).
    """
    kind = _kind(item_id)
    loaded = yield from load(ctx)
    state, lpm = loaded.state, loaded.lpm
    puts: list[GetOp | PutOp] = []
    lpm_changed = True
    if kind == "page":
        lpm_changed = yield from _forget_page(
            ctx, state, lpm, item_id, puts, purge=purge, hide=hide
        )
    elif kind == "segment":
        lpm_changed = _forget_segment(ctx, state, lpm, item_id, puts, purge=purge, hide=hide)
    else:
        _forget_fact(lpm, item_id, purge=purge, hide=hide)
    if kind != "fact":
        puts.append(PutOp(ctx.namespace, STATE_KEY, state.dump()))
    if lpm_changed:
        puts.append(PutOp(ctx.namespace, LPM_KEY, lpm.dump()))
    yield StoreBatch(tuple(puts))
    return Forgotten(item_id, kind, purged=purge)


def _forget_page(
    ctx: Context,
    state: UserState,
    lpm: LongTerm,
    item_id: str,
    puts: list[GetOp | PutOp],
    *,
    purge: bool,
    hide: bool,
) -> Flow[bool]:
    """Returns whether long-term memory changed."""
    stm = next((page for page in state.stm if page.id == item_id), None)
    if stm is not None:
        # Nothing was made from a short-term page yet; moving to mid-term carries the flag.
        if purge:
            state.stm.remove(stm)
        stm.forgotten = hide
        return False
    segment = next((seg for seg in state.segments if item_id in seg.pages), None)
    pages = (yield from _pages(ctx, [item_id], {})) if segment else []
    if segment is None or not pages:
        raise TierItemError(item_id, "no such page")
    record = (yield from _segment_vectors(ctx, state, [segment.id], {}))[segment.id]
    if item_id in segment.hidden:
        segment.hidden.remove(item_id)
    if purge:
        if segment.pages.index(item_id) < segment.promoted:
            segment.promoted -= 1
        segment.pages.remove(item_id)
        record.remove(item_id)
        puts.append(PutOp(ctx.pages, item_id, None))
    else:
        pages[0].forgotten = hide
        if hide:
            segment.hidden.append(item_id)
            record.hidden.add(item_id)
        else:
            record.hidden.discard(item_id)
        puts.append(PutOp(ctx.pages, item_id, pages[0].dump()))
    yield from _rebuild(ctx, state, segment, record)
    puts.append(PutOp(ctx.vectors, segment.id, record.dump()))
    # A purged page's entries stay hidden: nothing is left to restore them with.
    return _hide_made_from(lpm, item_id, segment.id, hide=hide or purge)


def _rebuild(ctx: Context, state: UserState, segment: SegRec, record: SegVectors) -> Flow[None]:
    """Make a segment's keywords, summary and vector again from its visible pages, and count
    its L_interaction again (a page of it was forgotten, restored or purged).

    Lexical even with a chat model: a model-made summary may hold a forgotten page's words,
    and forgetting must neither wait for a model nor fail with it.
    """
    segment.recount()
    shown = segment.visible()
    pages = yield from _pages(ctx, shown, {})
    segment.counts = {}
    for page in pages:
        segment.add_keywords(page.keywords)
    segment.keywords = _text.top_keywords(segment.counts)
    segment.lines = [page.summary for page in pages if page.summary][-MAX_LINES:]
    segment.summary = _text.segment_summary(segment.keywords, segment.lines)
    wanted = set(shown)
    rows = [
        row
        for ids, matrix in record.parts()
        for page_id, row in zip(ids, matrix, strict=True)
        if page_id in wanted
    ]
    if rows:  # the centroid of the visible pages (their stored vectors have length 1)
        state.vectors[segment.id] = vec.stack(rows).sum(axis=0)
    elif not shown and segment.id in state.vectors:
        state.vectors[segment.id] = 0 * state.vectors[segment.id]


def _hide_made_from(lpm: LongTerm, item_id: str, segment_id: str | None, *, hide: bool) -> bool:
    """Hide (`hide=False`: show again) the long-term entries made from page `item_id` of
    segment `segment_id`, or from segment `item_id` (`segment_id=None`); whether any changed."""
    changed = False
    for fact in lpm.facts:
        if not fact.made_from(item_id, segment_id):
            continue
        if hide and item_id not in fact.hidden_by:
            fact.hidden_by.append(item_id)
            changed = True
        elif not hide and item_id in fact.hidden_by:
            fact.hidden_by.remove(item_id)
            changed = True
    return changed


def _forget_segment(
    ctx: Context,
    state: UserState,
    lpm: LongTerm,
    item_id: str,
    puts: list[GetOp | PutOp],
    *,
    purge: bool,
    hide: bool,
) -> bool:
    """Returns whether long-term memory changed."""
    segment = state.segment(item_id)
    if segment is None:
        raise TierItemError(item_id, "no such segment")
    if purge:
        state.segments.remove(segment)
        state.vectors.pop(segment.id, None)
        puts.extend(PutOp(ctx.pages, page_id, None) for page_id in segment.pages)
        puts.append(PutOp(ctx.vectors, segment.id, None))
    segment.forgotten = hide
    return _hide_made_from(lpm, item_id, None, hide=hide or purge)


def _forget_fact(lpm: LongTerm, item_id: str, *, purge: bool, hide: bool) -> None:
    fact = next((f for f in lpm.facts if f.id == item_id), None)
    if fact is None:
        raise TierItemError(item_id, "no such fact")
    if purge:
        lpm.facts.remove(fact)
        lpm.vectors.pop(fact.id, None)
    fact.forgotten = hide
    if not hide:
        fact.hidden_by.clear()  # restoring an entry by its id shows it, whatever it came from
