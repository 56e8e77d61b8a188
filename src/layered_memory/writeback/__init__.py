"""Writing what a run learned: hooks, MemoryWriter, insight sections, redaction, locks."""
