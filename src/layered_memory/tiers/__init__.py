"""Tiered conversational memory with heat-based promotion (MemoryOS), per user.

- `TieredMemory`: short-term FIFO pages, mid-term topic segments with heat, a searchable
  archive of the cold ones, long-term personal memory; `add_page`, `retrieve`, `short_term`,
  `segments`, `long_term`, `forget`, `restore`, `consolidate`, `users` (and async twins).
- `TieredMemoryMiddleware`: retrieval before the model call, recording after the run.
"""

import importlib.util

if importlib.util.find_spec("numpy") is None:
    # Without the extra, `_flows` would fail first with a bare "No module named 'numpy'".
    msg = "layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    raise ModuleNotFoundError(msg, name="numpy")

from layered_memory.tiers.memory import TieredMemory
from layered_memory.tiers.middleware import (
    TieredMemoryMiddleware,
    TieredMemoryState,
    render_retrieval,
)
from layered_memory.tiers.settings import TierSettings
from layered_memory.tiers.values import (
    Consolidation,
    Fact,
    Forgotten,
    Page,
    Retrieval,
    ScoredFact,
    ScoredPage,
    Segment,
)

__all__ = [
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
