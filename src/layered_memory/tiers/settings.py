"""Every tunable of the tiers (`TierSettings`), checked when the memory is made."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TierSettings"]


@dataclass(frozen=True, slots=True)
class TierSettings:
    """Every tunable of the tiers. Capacities, θ, heat weights and τ are the paper's (μ: the
    reference code's); retrieval is this package's (measured on LoCoMo: docs/tiers.md,
    "Evaluation").

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
        floor_z: A page without a lexical match (no content word shared with the query)
            whose cosine is less than this many standard deviations above the query's mean
            is never returned, whatever else lifts it (a neighbouring hit, the period the
            query names): a budget that holds everything is not filled with unrelated pages.
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
    floor_z: float = 0.0
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
        for name in ("theta", "alpha", "beta", "gamma", "mu", "tau", "relevance_z", "floor_z"):
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
