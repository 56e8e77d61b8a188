"""Worker processes of the concurrency tests: real processes (never threads), started from a
fork server (never plain `fork` from a process that runs threads), joined under a hang guard."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

HANG_GUARD_SECONDS = 300
"""Only stops a deadlocked run; nothing is timed."""


def forkserver(*preload: str) -> Any:
    """The `forkserver` context, with the heavy modules imported once in the server."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    return context


def run_processes(
    context: Any, jobs: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]
) -> list[int | None]:
    """Start one process per `(target, args)`, wait for all, and return their exit codes (a
    process still running after the hang guard is killed)."""
    processes = [context.Process(target=target, args=args) for target, args in jobs]
    for process in processes:
        process.start()
    for process in processes:
        process.join(HANG_GUARD_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()
    return [process.exitcode for process in processes]
