"""`layered_memory.tiers` exports exactly these names (as httpx pins its namespace): a new
public name is a decision, and the names DESIGN.md promises are among them."""

from __future__ import annotations

import layered_memory.tiers as tiers

PUBLIC = [
    "Consolidation",
    "Fact",
    "Forgotten",
    "Page",
    "Retrieval",
    "ScoredFact",
    "ScoredPage",
    "Segment",
    "TierSettings",
    "TieredMemory",
    "TieredMemoryMiddleware",
    "TieredMemoryState",
    "render_retrieval",
]


def test_all_is_pinned_and_every_name_resolves():
    assert tiers.__all__ == PUBLIC
    assert all(getattr(tiers, name) is not None for name in PUBLIC)
    assert {"TieredMemory", "render_retrieval", "TieredMemoryMiddleware"} <= set(PUBLIC)
