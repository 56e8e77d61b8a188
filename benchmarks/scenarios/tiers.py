"""Scenario 10: tiered conversational memory (MemoryOS): recall of planted facts and time.

The conversation, the probes and the measures are `benchmarks/tiers_eval.py`'s: recall@5 of
the planted facts (tiered top-5 retrieved items against the last 5 exchanges), recall within
the same prompt budget (tiered block against the last messages fitting it), and the time of
one retrieval with 1,000 and 10,000 pages held (goal: < 20 ms at 10,000 pages).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks.tiers_eval import (
    BUDGET,
    FACTS,
    USER,
    build,
    conversation,
    evaluate_recall,
    time_retrieval,
)

# (turns, sessions, page counts timed, retrievals timed per size), by plan name.
SIZES: dict[str, tuple[int, int, tuple[int, ...], int]] = {
    "full": (240, 12, (1_000, 10_000), 100),
    "quick": (240, 12, (1_000,), 30),
    "tiny": (60, 10, (100,), 5),
}
GOAL_MS = 20.0


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Play the planted-facts conversation, then time retrieval at each size."""
    del workdir  # everything lives in InMemoryStores
    turns, sessions, sizes, timed = SIZES.get(plan.name, SIZES["quick"])
    recall = evaluate_recall(conversation(turns, sessions))
    n = max(recall.probes, 1)
    rows = [
        Row(
            "10. recall@5 of planted facts",
            None,
            None,
            "> last-5 baseline",
            verdict(recall.tiered_at5 > recall.baseline_at5),
            ours_text=f"{recall.tiered_at5 / n:.0%}",
            base_text=f"{recall.baseline_at5 / n:.0%} (last 5 exchanges)",
            facts={
                "probes": recall.probes,
                "tiered": recall.tiered_at5,
                "baseline": recall.baseline_at5,
            },
        ),
        Row(
            f"10. recall within {BUDGET} prompt chars",
            None,
            None,
            "> last-N baseline",
            verdict(recall.tiered_budget > recall.baseline_budget),
            ours_text=f"{recall.tiered_budget / n:.0%}",
            base_text=f"{recall.baseline_budget / n:.0%} (last messages)",
        ),
    ]
    notes = [
        f"{turns} turns in {sessions} sessions, {len(FACTS)} facts planted in the first 60% of "
        f"the sessions and asked about in the rest ({recall.probes} probes); lexical test "
        "embedding, no model. Missed at 5: " + (", ".join(recall.misses) or "none") + "."
    ]
    for size in sizes:
        memory, seconds = build(size)
        samples, cpu = time_retrieval(memory, turns=timed)
        median, median_cpu = statistics.median(samples), statistics.median(cpu)
        p90 = sorted(samples)[int(0.9 * (len(samples) - 1))]
        segments = len(memory.segments(USER))
        rows.append(
            Row(
                f"10. retrieval per turn, {size:,} pages",
                median * 1e6,
                None,
                f"< {GOAL_MS:.0f} ms at 10,000" if size == 10_000 else "info",
                verdict(median < GOAL_MS) if size == 10_000 else "info",
                base_text="n/a",
                facts={
                    "p90_ms": p90,
                    "cpu_ms": median_cpu,
                    "segments": segments,
                    "build_s": seconds,
                },
            )
        )
        notes.append(
            f"{size:,} pages in {segments} segments (InMemoryStore, numpy, no vector database; "
            f"built by add_page in {seconds:.1f} s): retrieval median {median:.2f} ms wall "
            f"(p90 {p90:.2f} ms), {median_cpu:.2f} ms CPU, over {len(samples)} queries."
        )
    return ScenarioResult("tiers", "10. Tiered memory", rows, notes)
