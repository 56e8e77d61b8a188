"""How big each scenario runs: the full issue-6 sizes, a quick smoke run, a tiny test run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Plan:
    """Sizes and repetitions for one run of all scenarios."""

    name: str
    n_rules: int = 200
    n_touched: int = 50
    per_call_calls: int = 1000
    per_call_rounds: int = 3
    cold_rule_counts: tuple[int, ...] = (10, 200, 1000)
    cold_rounds: int = 9
    warm_rounds: int = 10
    match_rules: int = 1000
    match_paths: int = 100
    match_runs: int = 50
    write_runs: int = 200
    write_processes: int = 8
    write_per_process: int = 25
    e2e_turns: int = 20
    e2e_reps: int = 41
    scale_sources: tuple[int, ...] = (1, 10, 100)
    scale_rules: tuple[int, ...] = (10, 100, 1000)
    scale_calls: int = 500
    scale_load_rounds: int = 7
    consolidation_rounds: int = 60


FULL = Plan("full")
QUICK = Plan(
    "quick",
    per_call_calls=300,
    per_call_rounds=1,
    cold_rounds=4,
    warm_rounds=3,
    match_runs=15,
    write_runs=40,
    write_per_process=5,
    e2e_reps=2,
    scale_calls=100,
    scale_load_rounds=3,
    consolidation_rounds=15,
)
TINY = Plan(
    "tiny",
    n_rules=12,
    n_touched=6,
    per_call_calls=20,
    per_call_rounds=1,
    cold_rule_counts=(2, 6, 12),
    cold_rounds=1,
    warm_rounds=1,
    match_rules=50,
    match_paths=10,
    match_runs=2,
    write_runs=3,
    write_processes=2,
    write_per_process=2,
    e2e_turns=3,
    e2e_reps=1,
    scale_sources=(1, 3),
    scale_rules=(2, 6),
    scale_calls=10,
    scale_load_rounds=1,
    consolidation_rounds=2,
)
"""For the smoke test: every code path, no meaningful timing."""
