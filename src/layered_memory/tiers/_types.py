"""The values of the tiers: their settings, where a user's memory lives in the store, and what
they hand out (pages, segments, long-term entries, a retrieval)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from layered_memory.errors import TierUserIdError

FactKind = Literal["profile", "fact"]

DEFAULT_NAMESPACE: Final = ("layered_memory", "tiers")
MAX_USER_ID_CHARS: Final = 1024
_SURROGATE_RE: Final = re.compile(r"[\ud800-\udfff]")

STATE_KEY: Final = "state"
MID_TERM_KEY: Final = "mid_term"
VISITS_KEY: Final = "visits"
LPM_KEY: Final = "long_term"
PAGES: Final = "pages"
INDEX: Final = "index"
ARCHIVE: Final = "archive"


@dataclass(frozen=True, slots=True)
class TierSettings:
    """Every tunable of the tiers. Capacities, θ, heat weights and τ are the paper's (μ: the
    reference code's); retrieval is this package's (measured on LoCoMo, see the README).

    Attributes:
        stm_capacity: Short-term pages kept; the oldest moves to mid-term beyond it.
        mtm_capacity: Mid-term segments kept; beyond it the coldest moves to the archive,
            where its pages stay searchable (never deleted but by `forget(..., purge=True)`).
        theta: A page joins the best segment when cos + Jaccard >= theta.
        alpha: Heat weight of N_visit.
        beta: Heat weight of the segment's pages (L_interaction).
        gamma: Heat weight of recency exp(−Δt/μ).
        mu: Recency time constant, seconds (24 h).
        tau: Heat gained since the last promotion at which a segment is promoted to long-term
            memory.
        top_k: Pages returned per retrieval, best first (the renderer fills its budget with
            them in that order).
        relevance_z: How far above the query's mean similarity over all pages (in standard
            deviations) a page must be to count as a dense match; a lexical match (a shared
            content word) always counts. Calibrated per query, so it holds for any embedding,
            where one cosine cut fits one embedding only.
        lpm_capacity: Long-term entries kept (FIFO).
        lpm_top: Long-term entries returned per retrieval (only relevant ones).
        max_promotions: Segments promoted per consolidation at most (the rest wait for the next).
        max_text_chars: A page's query and response are each kept up to this many characters
            (the rest is cut with a marker and a warning), so one huge message cannot bloat
            every later turn's records.
    """

    stm_capacity: int = 7
    mtm_capacity: int = 200
    theta: float = 0.6
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    mu: float = 24 * 3600.0
    tau: float = 5.0
    top_k: int = 20
    relevance_z: float = 1.0
    lpm_capacity: int = 100
    lpm_top: int = 5
    max_promotions: int = 3
    max_text_chars: int = 20_000

    def __post_init__(self) -> None:
        for name in ("stm_capacity", "mtm_capacity", "top_k", "lpm_capacity", "max_text_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"{name} must be an int >= 1, got {value!r}"
                raise ValueError(msg)
        for name in ("lpm_top", "max_promotions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"{name} must be an int >= 0, got {value!r}"
                raise ValueError(msg)
        for name in ("theta", "alpha", "beta", "gamma", "mu", "tau", "relevance_z"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"{name} must be a number, got {value!r}"
                raise TypeError(msg)
            if not math.isfinite(value):
                msg = f"{name} must be finite, got {value!r}"
                raise ValueError(msg)
        if self.mu <= 0:
            msg = f"mu must be > 0 seconds, got {self.mu!r}"
            raise ValueError(msg)


def check_prefix(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """A namespace prefix, checked: non-empty strings without `.` (PostgresStore's separator)."""
    if not isinstance(prefix, tuple) or not prefix:
        msg = f"namespace must be a non-empty tuple of strings, got {prefix!r}"
        raise ValueError(msg)
    for part in prefix:
        if not isinstance(part, str) or not part or "." in part or "*" in part:
            msg = (
                f"namespace part {part!r} must be a non-empty string without '.' "
                "(PostgresStore's separator) or '*'"
            )
            raise ValueError(msg)
    return prefix


def check_user_id(user_id: object) -> str:
    """The user id, checked: a non-empty string of at most 1,024 characters, without NUL or
    surrogate code points.

    The state record keeps the id as it is, and PostgreSQL stores neither NUL nor a lone
    surrogate in a JSON value: such an id would have every write refused (every page lost),
    so it is refused here, before any, with the reason.
    """
    if not isinstance(user_id, str):
        raise TierUserIdError(user_id, f"must be a string, not {type(user_id).__name__}")
    if not user_id.strip():
        raise TierUserIdError(user_id, "must not be empty")
    if len(user_id) > MAX_USER_ID_CHARS:
        raise TierUserIdError(user_id, f"longer than {MAX_USER_ID_CHARS} characters")
    if "\x00" in user_id:
        raise TierUserIdError(user_id, "user_id contains NUL (\\x00): PostgreSQL cannot store it")
    if _SURROGATE_RE.search(user_id):
        reason = "user_id contains a surrogate (\\ud800-\\udfff): PostgreSQL cannot store it"
        raise TierUserIdError(user_id, reason)
    return user_id


def user_namespace(prefix: tuple[str, ...], user_id: str) -> tuple[str, ...]:
    """The namespace of one user's memory: `prefix + ("u" + 32 hex digits of a hash,)`.

    The id is hashed, never used as it is: PostgresStore joins namespace parts with `.` and
    lists by prefix, so a raw `ada` would prefix `ada.x`, and `/`, control characters or a
    megabyte-long id would reach the store's keys. A fixed-length hex digest cannot prefix
    another one, and 128 bits make collisions a non-issue.
    """
    digest = hashlib.blake2b(
        check_user_id(user_id).encode("utf-8", "surrogatepass"),
        digest_size=16,
        person=b"lm-tiers-user",
    ).hexdigest()
    return (*prefix, f"u{digest}")


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
    lexical, dense and time rankings: only its order means something)."""

    page: Page
    score: float


@dataclass(frozen=True, slots=True)
class ScoredFact:
    """A long-term entry found by a retrieval, with its fused rank score on the pages' scale."""

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
