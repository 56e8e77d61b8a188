"""The memory engine: layers, loading, rendering, the assembler and the read-only guard."""
