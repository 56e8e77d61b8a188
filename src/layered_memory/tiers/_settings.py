"""The tier parameters (MemoryOS defaults) and where a user's memory lives in the store."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Final

from layered_memory.errors import TierUserIdError

DEFAULT_NAMESPACE: Final = ("layered_memory", "tiers")
MAX_USER_ID_CHARS: Final = 1024
_SURROGATE_RE: Final = re.compile(r"[\ud800-\udfff]")

STATE_KEY: Final = "state"
VISITS_KEY: Final = "visits"
LPM_KEY: Final = "long_term"
PAGES: Final = "pages"
VECTORS: Final = "vectors"


@dataclass(frozen=True, slots=True)
class TierSettings:
    """Every tunable of the tiers; the defaults are the paper's (μ: the reference code's).

    Attributes:
        stm_capacity: Short-term pages kept; the oldest moves to mid-term beyond it.
        mtm_capacity: Mid-term segments kept; the coldest is evicted beyond it.
        theta: A page joins the best segment when cos + Jaccard >= theta.
        alpha: Heat weight of N_visit.
        beta: Heat weight of L_interaction.
        gamma: Heat weight of recency exp(−Δt/μ).
        mu: Recency time constant, seconds (24 h).
        tau: Heat at which a segment is promoted to long-term memory.
        top_m: Segments searched per retrieval.
        top_k: Mid-term pages returned per retrieval.
        segment_threshold: Minimum segment score (cos + Jaccard with the query) to search it.
        page_threshold: Minimum cosine of a page with the query to return it.
        lpm_capacity: Long-term entries kept (FIFO).
        lpm_top: Long-term facts returned per retrieval.
        fact_threshold: Minimum cosine of a fact with the query to return it.
        max_profile: Profile entries returned per retrieval (newest first).
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
    top_m: int = 5
    top_k: int = 5
    segment_threshold: float = 0.1
    page_threshold: float = 0.2
    lpm_capacity: int = 100
    lpm_top: int = 10
    fact_threshold: float = 0.2
    max_profile: int = 10
    max_promotions: int = 3
    max_text_chars: int = 20_000

    def __post_init__(self) -> None:
        for name in (
            "stm_capacity", "mtm_capacity", "top_m", "top_k", "lpm_capacity", "max_text_chars",
        ):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"{name} must be an int >= 1, got {value!r}"
                raise ValueError(msg)
        for name in ("lpm_top", "max_profile", "max_promotions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"{name} must be an int >= 0, got {value!r}"
                raise ValueError(msg)
        for name in (
            "theta", "alpha", "beta", "gamma", "mu", "tau",
            "segment_threshold", "page_threshold", "fact_threshold",
        ):  # fmt: skip
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
