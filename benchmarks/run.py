"""Run every benchmark of issue 6 in one process and print the results table.

Usage:
    .venv/bin/python benchmarks/run.py            # full (~1.5 min on 2 cores), writes RESULTS.md
    .venv/bin/python benchmarks/run.py --quick    # smoke run (~30 s), prints only
    .venv/bin/python benchmarks/run.py --only per_call,warm

Ours and deepagents' built-in `MemoryMiddleware` are sampled alternately in this one process,
so a busy machine slows both alike; the table shows medians and their ratio.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script (`python benchmarks/run.py`): make `benchmarks` importable as a package.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._plan import FULL, QUICK, Plan
from benchmarks._report import Row, ScenarioResult, results_markdown, table
from benchmarks.scenarios import (
    checkpoint,
    cold_load,
    consolidation,
    end_to_end,
    folder_layer,
    graph,
    mcp,
    nested,
    per_call,
    recall_layer,
    redaction,
    rule_matching,
    scale,
    tiers,
    views,
    warm,
    write_back,
)

Scenario = Callable[[Plan, Path], ScenarioResult]
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "per_call": ("1. Per model call", per_call.run),
    "cold_load": ("2. Cold load", cold_load.run),
    "warm": ("3. Warm invocation", warm.run),
    "rule_matching": ("4. Rule matching", rule_matching.run),
    "write_back": ("5. Write-back", write_back.run),
    "end_to_end": ("6. End to end", end_to_end.run),
    "scale": ("7. Scale", scale.run),
    "views": ("8. Message views", views.run),
    "graph": ("9. Knowledge graph", graph.run),
    "tiers": ("10. Tiered memory", tiers.run),
    "checkpoint": ("11. Checkpoint cache", checkpoint.run),
    "redaction": ("12. Redaction", redaction.run),
    "nested": ("13. Nested memory and imports", nested.run),
    "consolidation": ("14. Consolidation", consolidation.run),
    "mcp": ("15. MCP read_graph", mcp.run),
    "folder_layer": ("16. Folder layer", folder_layer.run),
    "recall_layer": ("17. Memory file over its share (recall)", recall_layer.run),
}
RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS.md"


def run_all(
    plan: Plan = FULL,
    *,
    only: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ScenarioResult]:
    """Run the scenarios (all, or those named in `only`) and return their results.

    A scenario that raises becomes one `ERROR` row naming the exception, so one broken
    scenario never hides the others' numbers.
    """
    results: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory(prefix="layered-memory-bench-") as folder:
        for key, (title, scenario) in SCENARIOS.items():
            if only and key not in only:
                continue
            started = time.perf_counter()
            workdir = Path(folder) / key
            workdir.mkdir()
            try:
                result = scenario(plan, workdir)
            except Exception as exc:
                detail = traceback.format_exc(limit=3)
                row = Row(title, None, None, "runs", "ERROR", ours_text=type(exc).__name__)
                result = ScenarioResult(key, title, [row], [f"```\n{detail}```"])
            results.append(result)
            if progress is not None:
                progress(f"{title}: {time.perf_counter() - started:.1f} s")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns 1 when a target is missed or a scenario failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only", default="", help=f"comma-separated scenarios: {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="write the results here (default: benchmarks/RESULTS.md for a full run of all "
        "scenarios, nothing for --quick or --only)",
    )
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    # Our library warns once per skipped file; a benchmark run should print only the table.
    logging.getLogger("layered_memory").setLevel(logging.ERROR)
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    results = run_all(
        plan, only=only, progress=lambda line: print(f"  done: {line}", file=sys.stderr)
    )
    seconds = time.perf_counter() - started
    print(table(results))
    for result in results:
        if result.notes:
            print(f"\n{result.title}")
            print("\n".join(f"  {line}" for line in result.notes))
    output = args.output or (RESULTS_PATH if not (args.quick or only) else None)
    if output is not None:
        command = ".venv/bin/python benchmarks/run.py" + (" --quick" if args.quick else "")
        output.write_text(
            results_markdown(results, mode=plan.name, seconds=seconds, command=command),
            encoding="utf-8",
        )
        print(f"\nwrote {output}")
    print(f"\n{plan.name} run: {seconds:.0f} s")
    failed = any(row.verdict in ("FAIL", "ERROR") for result in results for row in result.rows)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
