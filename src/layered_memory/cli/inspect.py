"""`layered-memory inspect`: what memory an agent gets, measured from the block it would receive.

Memory is loaded and rendered by `MemoryAssembler`, the engine the middleware runs (with
`--config`, the user's own middleware and assembler), so the block shown is byte for byte the
one a model call would carry; the per-layer sizes are measured on that block (`_measure`).
Loading: `_source`. Output: `_inspect_view`.
"""

from __future__ import annotations

import sys
from typing import Any

from layered_memory.cli._source import LOAD_ERRORS, loaded_memory, source_options
from layered_memory.cli._text import printable
from layered_memory.sessions.stores.urls import scrub

EXIT_OK, EXIT_USAGE = 0, 2


def run_inspect(args: Any, *, render: Any) -> int:
    """Run the subcommand; `render(report, args)` prints it. Errors: one line on stderr, 2."""
    failure: str | None = None
    try:
        with loaded_memory(source_options(args)) as loaded:
            report = loaded.report
    except LOAD_ERRORS as exc:
        failure = str(exc)
    if failure is not None:
        print(f"layered-memory inspect: {printable(scrub(failure, None))}", file=sys.stderr)
        return EXIT_USAGE
    render(report, args)
    return EXIT_OK
