"""Quickstart: a deep agent with layered memory, on local files, with no API key.

The quickstart ships inside the package as `layered-memory demo` (`layered_memory.cli.demo`),
so it also runs after a plain `pip install layered-memory`; this script is its runner for
`make demo` in a clone. What it shows, in its printed output:

1. the agent answers from the project's AGENTS.md layer;
2. it saves a user preference into its writable MEMORY.md with `edit_file`;
3. its very next model call already sees that edit;
4. AGENTS.md is changed on disk between two invocations of the same checkpointed thread, and
   the second invocation sees the change (deepagents' built-in memory keeps the stale copy).

Run:  .venv/bin/python examples/quickstart.py             (scripted model, no key needed)
      .venv/bin/python examples/quickstart.py --model anthropic:claude-sonnet-4-5
It takes the options of `layered-memory demo` (`--json`, `--root DIR`, `--model`), exits as it
does (0 shown, 1 not shown, 2 a usage error such as a model that fails, in one line).
"""

from __future__ import annotations

import sys

from layered_memory.cli import main as cli_main
from layered_memory.cli.demo import build_agent, main, run, scripted_model

__all__ = ["build_agent", "main", "run", "scripted_model"]

if __name__ == "__main__":
    sys.exit(cli_main(["demo", *sys.argv[1:]]))
