"""Quickstart: a deep agent with layered memory, on local files, with no API key.

The quickstart ships inside the package as `layered-memory demo` (`layered_memory.cli.demo`),
so it also runs after a plain `pip install layered-memory`; this script is its runner for
`make demo` in a clone. What it shows, in its printed output:

1. the agent answers from the project's AGENTS.md layer;
2. it saves a user preference into its writable MEMORY.md with `edit_file`;
3. its very next model call already sees that edit;
4. AGENTS.md is changed on disk between two invocations of the same checkpointed thread, and
   the second invocation sees the change (deepagents' built-in memory keeps the stale copy).

Run:  python examples/quickstart.py                      (scripted model, no key needed)
      python examples/quickstart.py --model anthropic:claude-sonnet-4-5   (a real model)
"""

from __future__ import annotations

import sys

from layered_memory.cli.demo import build_agent, main, run, scripted_model, succeeded

__all__ = ["build_agent", "main", "run", "scripted_model"]

if __name__ == "__main__":
    sys.exit(0 if succeeded(main()) else 1)
