"""What a person reads and removes of a user's tiers: the users of a namespace, each tier's
items, and `forget` (a page, a segment or a long-term fact, hidden or purged). Written as
flows like the algorithm itself (`tiers._flows`), so `TieredMemory` drives them sync or async.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp

from layered_memory.errors import TierItemError
from layered_memory.tiers import summaries
from layered_memory.tiers._flows import (
    Context,
    Flow,
    Loaded,
    Puts,
    StoreBatch,
    _keep,
    _long_term_put,
    _page_vectors,
    _read_archive,
    _read_blocks,
    _read_pages,
    _state_puts,
    _value,
    heat,
    load,
)
from layered_memory.tiers.namespaces import is_user_namespace, listed_user
from layered_memory.tiers.records import (
    MAX_LINES,
    STATE_KEY,
    FactRec,
    LongTerm,
    SegRec,
    top_keywords,
    warn,
)
from layered_memory.tiers.values import Forgotten, Page, Segment

USERS_PAGE = 200
"""User namespaces one listing round trip reads (their state records: one batch)."""


def user_page(prefix: tuple[str, ...], offset: int) -> Flow[tuple[list[str], bool]]:
    """One page of the users whose memory lives under `prefix`, and whether more may follow.

    A namespace that is not a user's, or whose state record does not name the user it
    belongs to (`namespaces.listed_user`), is skipped with a warning naming it.
    """
    listed = yield StoreBatch(
        (
            ListNamespacesOp(
                match_conditions=(MatchCondition("prefix", prefix),),
                max_depth=len(prefix) + 1,
                limit=USERS_PAGE,
                offset=offset,
            ),
        )
    )
    found: list[tuple[str, ...]] = list(listed[0])
    ours = [namespace for namespace in found if is_user_namespace(prefix, namespace)]
    states = (yield StoreBatch(tuple(GetOp(ns, STATE_KEY) for ns in ours))) if ours else []
    users = []
    for namespace, item in zip(ours, states, strict=True):
        user = listed_user(prefix, namespace, _value(item))
        if user is None:
            warn(namespace[-1], "state record", "names no user of this namespace; skipped")
        else:
            users.append(user)
    return users, len(found) == USERS_PAGE


def short_term(ctx: Context) -> Flow[list[Page]]:
    loaded = yield from load(ctx)
    return [page.public() for page in loaded.state.stm]


def segments(ctx: Context) -> Flow[list[Segment]]:
    """The mid-term segments, then the archived ones, with their pages."""
    loaded = yield from load(ctx)
    yield from _read_archive(ctx, loaded, range(len(loaded.state.archive)))
    archived = [seg for n in sorted(loaded.archive) for seg in loaded.archive[n].segments]
    every = [(seg, False) for seg in loaded.mid.segments] + [(seg, True) for seg in archived]
    pages = yield from _read_pages(ctx, loaded, [pid for seg, _ in every for pid in seg.pages])
    by_id = {page.id: page.public() for page in pages}
    return [
        seg.public(
            tuple(by_id[pid] for pid in seg.pages if pid in by_id),
            heat=heat(ctx, seg, loaded.visits),
            n_visit=loaded.visits.get(seg.id, (0, 0.0))[0],
            archived=is_archived,
        )
        for seg, is_archived in every
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


@dataclass(slots=True)
class _Place:
    """Where a segment is kept: the mid-term tier, or an archive block."""

    segment: SegRec
    archive_block: int | None = None


def _find_segment(ctx: Context, loaded: Loaded, segment_id: str) -> Flow[_Place | None]:
    segment = loaded.mid.segment(segment_id)
    if segment is not None:
        return _Place(segment)
    yield from _read_archive(ctx, loaded, range(len(loaded.state.archive)))
    for n, block in loaded.archive.items():
        for archived in block.segments:
            if archived.id == segment_id:
                return _Place(archived, n)
    return None


def _archive_changed(loaded: Loaded, place: _Place) -> None:
    if place.archive_block is not None:
        loaded.changed_archive.add(place.archive_block)


def forget(ctx: Context, item_id: str, *, purge: bool, hide: bool = True) -> Flow[Forgotten]:
    """Hide (or, with `purge`, delete) a page, segment or fact; `hide=False` restores it.

    A forgotten page or segment reaches no prompt by any route: not its text (the index hides
    it), not its words through its segment's keywords or summary (made again from the other
    pages), not the long-term entries made from it (hidden while it is forgotten; for good
    once purged).
    """
    kind = _kind(item_id)
    loaded = yield from load(ctx, writer=True)
    lpm_changed = True
    if kind == "page":
        lpm_changed = yield from _forget_page(ctx, loaded, item_id, purge=purge, hide=hide)
    elif kind == "segment":
        lpm_changed = yield from _forget_segment(ctx, loaded, item_id, purge=purge, hide=hide)
    else:
        _forget_fact(loaded.lpm, item_id, purge=purge, hide=hide)
    lpm_put = _long_term_put(ctx, loaded) if lpm_changed else None
    puts: Puts = []
    if kind != "fact":
        puts += _state_puts(ctx, loaded, pages=False)
    elif lpm_put is not None:
        puts.append(PutOp(ctx.namespace, STATE_KEY, loaded.state.dump()))
    if lpm_put is not None:
        puts.append(lpm_put)
    yield StoreBatch(tuple(puts))
    _keep(ctx, loaded)
    return Forgotten(item_id, kind, purged=purge)


def _forget_page(
    ctx: Context, loaded: Loaded, item_id: str, *, purge: bool, hide: bool
) -> Flow[bool]:
    """Returns whether long-term memory changed."""
    state = loaded.state
    stm = next((page for page in state.stm if page.id == item_id), None)
    if stm is not None:
        # Nothing was made from a short-term page yet; moving to mid-term carries the flag.
        if purge:
            state.stm.remove(stm)
        stm.forgotten = hide
        return False
    pages = yield from _read_pages(ctx, loaded, [item_id])
    place = None
    if pages and pages[0].segment is not None:
        place = yield from _find_segment(ctx, loaded, pages[0].segment)
    if place is None or item_id not in place.segment.pages:
        raise TierItemError(item_id, "no such page")
    page, segment = pages[0], place.segment
    puts: Puts = []
    if item_id in segment.hidden:
        segment.hidden.remove(item_id)
    if page.block is not None and page.block < len(state.index):
        yield from _read_blocks(ctx, loaded, [page.block])
    block = loaded.blocks.get(page.block) if page.block is not None else None
    if purge:
        if segment.pages.index(item_id) < segment.promoted:
            segment.promoted -= 1
        segment.pages.remove(item_id)
        if block is not None:
            block.remove(item_id)
        puts += [PutOp(ctx.pages, item_id, None), PutOp(ctx.vectors, item_id, None)]
    else:
        page.forgotten = hide
        if hide:
            segment.hidden.append(item_id)
        if block is not None:
            block.hide(item_id, hidden=hide or segment.forgotten)
        puts.append(PutOp(ctx.pages, item_id, page.dump()))
    loaded.pages.pop(item_id, None)
    yield from _rebuild(ctx, loaded, place)
    _archive_changed(loaded, place)
    yield StoreBatch(tuple(puts))
    # A purged page's entries stay hidden: nothing is left to restore them with.
    return _hide_made_from(loaded.lpm, item_id, segment.id, hide=hide or purge)


def _rebuild(ctx: Context, loaded: Loaded, place: _Place) -> Flow[None]:
    """Make a segment's keywords, summary and vector again from its visible pages, and count
    its L_interaction again (a page of it was forgotten, restored or purged).

    Lexical even with a chat model: a model-made summary may hold a forgotten page's words,
    and forgetting must neither wait for a model nor fail with it.
    """
    segment = place.segment
    segment.recount()
    shown = segment.visible()
    pages = yield from _read_pages(ctx, loaded, shown)
    segment.counts = {}
    for page in pages:
        segment.add_keywords(page.keywords)
    segment.keywords = top_keywords(segment.counts)
    segment.lines = [page.summary for page in pages if page.summary][-MAX_LINES:]
    segment.summary = summaries.segment_summary(segment.keywords, segment.lines)
    if place.archive_block is not None:
        return  # an archived segment has no vector: its pages are searched one by one
    found = yield from _page_vectors(ctx, [page.id for page in pages], loaded.state.dim or 0)
    rows = [vector for vector in found.values() if vector is not None]
    previous = loaded.mid.vectors.get(segment.id)
    if rows:  # the centroid of the visible pages (their stored vectors have length 1)
        loaded.mid.vectors[segment.id] = np.stack(rows).sum(axis=0)
    elif previous is not None:
        loaded.mid.vectors[segment.id] = 0 * previous


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
    ctx: Context, loaded: Loaded, item_id: str, *, purge: bool, hide: bool
) -> Flow[bool]:
    """Returns whether long-term memory changed."""
    place = yield from _find_segment(ctx, loaded, item_id)
    if place is None:
        raise TierItemError(item_id, "no such segment")
    segment = place.segment
    pages = yield from _read_pages(ctx, loaded, segment.pages)
    numbers = sorted({p.block for p in pages if p.block is not None})
    yield from _read_blocks(ctx, loaded, [n for n in numbers if n < len(loaded.state.index)])
    puts: Puts = []
    for page in pages:
        block = loaded.blocks.get(page.block) if page.block is not None else None
        if block is None:
            continue
        if purge:
            block.remove(page.id)
        else:
            block.hide(page.id, hidden=hide or page.id in segment.hidden)
    if purge:
        if place.archive_block is None:
            loaded.mid.segments.remove(segment)
            loaded.mid.vectors.pop(segment.id, None)
        else:
            loaded.archive[place.archive_block].segments.remove(segment)
            _archive_changed(loaded, place)
        puts += [PutOp(ctx.pages, page_id, None) for page_id in segment.pages]
        puts += [PutOp(ctx.vectors, page_id, None) for page_id in segment.pages]
    segment.forgotten = hide
    _archive_changed(loaded, place)
    if puts:
        yield StoreBatch(tuple(puts))
    return _hide_made_from(loaded.lpm, item_id, None, hide=hide or purge)


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
