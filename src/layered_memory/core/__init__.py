"""The memory engine: layers, loading, rendering, the assembler and the read-only guard.

Users import the engine's names from `layered_memory` (`MemoryAssembler`, `Layer`,
`protect`...). The modules below are the engine's parts, one concept each, public to the
package's other parts and layered one above another (pyproject.toml, import-linter): a module
imports only those under it. `__all__` lists them.
"""

__all__ = [
    "assembler",
    "disk_cache",
    "files",
    "guard",
    "imports",
    "internals",
    "layers",
    "loading",
    "nested",
    "path_access",
    "places",
    "protection",
    "put_back",
    "render",
    "render_cache",
    "report",
    "run_data",
    "shared_memory",
    "snapshot",
    "staleness",
    "state",
    "system_message",
    "tokens",
    "tool_calls",
    "unrestored",
    "validation",
]
