"""Segment heat: H = α·N_visit + β·L_interaction + γ·exp(−Δt/μ) (MemoryOS, Eq. 4)."""

from __future__ import annotations

import math


def heat(
    *,
    n_visit: int,
    l_interaction: int,
    last_access: float,
    now: float,
    alpha: float,
    beta: float,
    gamma: float,
    mu: float,
) -> float:
    """A segment's heat at `now`.

    Args:
        n_visit: Retrievals that used the segment.
        l_interaction: Pages added since its last promotion (reset to 0 by a promotion).
        last_access: When it was last retrieved or extended (epoch seconds).
        now: The current time (epoch seconds); a clock running backwards counts as Δt = 0.
        alpha: Weight of visits.
        beta: Weight of interaction length.
        gamma: Weight of recency.
        mu: Recency time constant in seconds.
    """
    elapsed = max(0.0, now - last_access)
    return alpha * n_visit + beta * l_interaction + gamma * math.exp(-elapsed / mu)
