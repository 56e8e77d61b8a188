"""What the tiers hand out: pages, segments, long-term entries, a retrieval, the report of a
consolidation and of a forget (frozen values; the store records are `tiers.records`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Consolidation",
    "Fact",
    "FactKind",
    "Forgotten",
    "Page",
    "Retrieval",
    "ScoredFact",
    "ScoredPage",
    "Segment",
]

FactKind = Literal["profile", "fact"]


@dataclass(frozen=True, slots=True)
class Page:
    """One dialogue page: a user query, the response, and when it happened.

    Attributes:
        id: Unique within the user (`p<n>`).
        query: The user's message.
        response: The assistant's answer.
        timestamp: Seconds since the epoch (from the memory's clock).
        meta: Caller-given metadata (JSON values), e.g. a thread id.
        keywords: Its keyword set K_p (empty while the page is in short-term memory).
        summary: One line about it (empty while in short-term memory).
        segment_id: The segment holding it (mid-term or archived); None in short-term memory.
        forgotten: Hidden from retrieval and prompts (restorable).
    """

    id: str
    query: str
    response: str
    timestamp: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    keywords: tuple[str, ...] = ()
    summary: str = ""
    segment_id: str | None = None
    forgotten: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    """A topic segment and its heat.

    Attributes:
        id: Unique within the user (`s<n>`).
        pages: Its pages, oldest first.
        heat: α·N_visit + β·L + γ·exp(−Δt/μ) at the time it was read, L its visible pages
            (what decides which segment goes to the archive: a promotion does not cool it).
        n_visit: How many retrievals returned one of its pages.
        l_interaction: Pages added since its last promotion to long-term memory (forgotten
            pages not counted: they earn no heat).
        last_access: When a retrieval last returned one of its pages, or it got a page.
        created: When it was created.
        summary: Its summary (model-made with a chat model, lexical without; made again
            lexically from the other pages when one of its pages is forgotten or restored).
        keywords: Its keyword set K_s (never the words of a forgotten page).
        promoted: How many of its pages were promoted to long-term memory.
        forgotten: Hidden from retrieval and prompts (restorable).
        archived: Moved from the mid-term tier to the archive (over `mtm_capacity`): its pages
            are still searched, it takes no new pages and is not promoted.
    """

    id: str
    pages: tuple[Page, ...]
    heat: float
    n_visit: int
    l_interaction: int
    last_access: float
    created: float
    summary: str
    keywords: tuple[str, ...]
    promoted: int = 0
    forgotten: bool = False
    archived: bool = False


@dataclass(frozen=True, slots=True)
class Fact:
    """One long-term personal memory entry.

    Attributes:
        id: Unique within the user (`f<n>`).
        text: The entry.
        kind: `"profile"` (a trait or preference) or `"fact"`; either is retrieved only
            when relevant to the query.
        timestamp: When it was promoted.
        source: The segment it was promoted from.
        forgotten: Hidden from retrieval and prompts (restorable): forgotten itself, or made
            from a page or segment that is forgotten (shown again when that is restored).
        pages: The pages it was made from (empty: from its whole source segment).
    """

    id: str
    text: str
    kind: FactKind
    timestamp: float
    source: str | None = None
    forgotten: bool = False
    pages: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredPage:
    """A page found by a retrieval, with its fused rank score (reciprocal rank fusion of the
    lexical, dense and time rankings: only its order means something).

    Attributes:
        page: The page.
        score: Its fused rank score.
        matched: (query, response): which of its two turns hold the match (share a
            content word with the query; both when neither does). The block shows only
            those: the budget goes to evidence.
    """

    page: Page
    score: float
    matched: tuple[bool, bool] = (True, True)


@dataclass(frozen=True, slots=True)
class ScoredFact:
    """A long-term entry found by a retrieval, with its fused rank score on the pages' scale.

    Attributes:
        fact: The entry.
        score: Its fused rank score.
    """

    fact: Fact
    score: float


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What one retrieval found in the three tiers.

    Attributes:
        short_term: Every visible short-term page, oldest first.
        pages: The top-k relevant pages of any tier (short-term, mid-term, archive), best
            first.
        facts: The relevant long-term facts, best first (at most `lpm_top` with `profile`).
        profile: The relevant long-term profile entries, best first.
        segments: `(segment id, best page score)` of the segments holding `pages`.
    """

    short_term: tuple[Page, ...] = ()
    pages: tuple[ScoredPage, ...] = ()
    facts: tuple[ScoredFact, ...] = ()
    profile: tuple[Fact, ...] = ()
    segments: tuple[tuple[str, float], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.short_term or self.pages or self.facts or self.profile)


@dataclass(frozen=True, slots=True)
class Consolidation:
    """What one consolidation did (moving pages to mid-term, archiving, promoting).

    Attributes:
        moved: Pages moved from short-term to mid-term memory.
        created: Segments created.
        archived: Segments moved to the archive (the coldest, over `mtm_capacity`).
        promoted: Segments promoted to long-term memory.
        facts: Long-term entries added.
        pending: Pages still waiting in short-term memory over its capacity (an embedding
            failure leaves them there; the next consolidation retries).
    """

    moved: int = 0
    created: int = 0
    archived: int = 0
    promoted: int = 0
    facts: int = 0
    pending: int = 0


@dataclass(frozen=True, slots=True)
class Forgotten:
    """The result of `forget` / `restore`.

    Attributes:
        id: The item's id.
        kind: `"page"`, `"segment"` or `"fact"`.
        purged: Deleted for good (`purge=True`) rather than hidden.
    """

    id: str
    kind: Literal["page", "segment", "fact"]
    purged: bool = False
