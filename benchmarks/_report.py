"""Result rows, the Markdown table, and `RESULTS.md`."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmarks._timing import fmt_ns

Verdict = Literal["PASS", "FAIL", "info", "unavailable", "ERROR"]


@dataclass(slots=True)
class Row:
    """One line of the results table.

    Attributes:
        scenario: What was measured.
        ours_ns: Our median, in nanoseconds (None: not timed).
        base_ns: deepagents' median on the same input (None: no equivalent).
        target: The target in words.
        verdict: PASS / FAIL against the target, `info` without one, or `unavailable`.
        ours_text: Shown instead of `ours_ns` (counts, not times).
        base_text: Shown instead of `base_ns`.
        ratio: ours / baseline (None: no baseline).
        facts: Numbers behind the verdict (call counts, sizes), for notes and tests.
    """

    scenario: str
    ours_ns: float | None
    base_ns: float | None
    target: str
    verdict: Verdict
    ours_text: str = ""
    base_text: str = ""
    ratio: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ratio is None and self.ours_ns is not None and self.base_ns:
            self.ratio = self.ours_ns / self.base_ns


@dataclass(slots=True)
class ScenarioResult:
    """What one scenario reports: its table rows and free-form lines (growth tables, notes)."""

    key: str
    title: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


def verdict(passed: bool) -> Verdict:
    """PASS or FAIL."""
    return "PASS" if passed else "FAIL"


def table(results: Sequence[ScenarioResult]) -> str:
    """The Markdown results table."""
    lines = [
        "| scenario | ours (median) | deepagents (median) | ratio | target | result |",
        "|---|---:|---:|---:|---|---|",
    ]
    for result in results:
        for row in result.rows:
            ours = row.ours_text or (fmt_ns(row.ours_ns) if row.ours_ns is not None else "—")
            base = row.base_text or (fmt_ns(row.base_ns) if row.base_ns is not None else "—")
            ratio = f"{row.ratio:.2f}" if row.ratio is not None else "—"
            lines.append(
                f"| {row.scenario} | {ours} | {base} | {ratio} | {row.target} | {row.verdict} |"
            )
    return "\n".join(lines)


def machine() -> str:
    """Date, cores, Python and library versions: what a reader needs to weigh the numbers."""

    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}\n"
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()} "
        f"{platform.release()}\n"
        f"- Python {sys.version.split()[0]} ({platform.python_implementation()})\n"
        f"- deepagents {version('deepagents')}, langchain {version('langchain')}, "
        f"langgraph {version('langgraph')}, layered-memory {version('layered-memory')}"
    )


def results_markdown(
    results: Sequence[ScenarioResult], *, mode: str, seconds: float, command: str
) -> str:
    """The whole `RESULTS.md`."""
    parts = [
        "# Benchmark results",
        "",
        f"`{command}` ({mode} run, {seconds:.0f} s). Medians of interleaved samples: ours and "
        "deepagents' built-in `MemoryMiddleware` alternate in one process, so a busy machine "
        "slows both alike and the ratio stays meaningful.",
        "",
        machine(),
        "",
        table(results),
        "",
    ]
    for result in results:
        if result.notes:
            parts += [f"## {result.title}", "", *result.notes, ""]
    return "\n".join(parts)
