"""Writing what a run learned: the end-of-run hooks, MemoryWriter, insight sections and
consolidation with a model.

Users import `HookRegistry`, `MemoryWriter`, `MemoryConsolidator`... from `layered_memory`;
`__all__` lists the modules, one concept each.
"""

__all__ = ["consolidation", "hooks", "insights", "sections"]
