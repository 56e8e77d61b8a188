"""Writing what a run learned: the end-of-run hooks, MemoryWriter, insight sections,
consolidation with a model, the lesson hold and the review queue.

Users import `HookRegistry`, `MemoryWriter`, `MemoryConsolidator`... from `layered_memory`;
`__all__` lists the modules, one concept each.
"""

__all__ = [
    "consolidation",
    "consolidation_prompt",
    "hooks",
    "insights",
    "learned",
    "lesson_effects",
    "lesson_hold",
    "review_queue",
    "sections",
]
