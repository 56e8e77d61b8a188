"""The `layered-memory` console script: `lint`, `inspect` and `sync` subcommands."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script (subcommands are being written)."""
    print("layered-memory: no subcommands yet", file=sys.stderr)
    return 2
