"""The benchmarks run end to end at a tiny size (behaviour only: no timing assertions)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

# `benchmarks/` is not an installed package: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._plan import TINY
from benchmarks.run import SCENARIOS, run_all

pytestmark = pytest.mark.slow  # many processes or a whole benchmark run: CI runs it


def test_every_scenario_runs_and_reports_numbers() -> None:
    results = {result.key: result for result in run_all(TINY)}

    assert list(results) == list(SCENARIOS)
    for result in results.values():
        assert result.rows, result.key
        for row in result.rows:
            assert row.verdict != "ERROR", (row.scenario, result.notes)
            if row.ours_ns is not None:
                assert math.isfinite(row.ours_ns)
                assert row.ours_ns > 0
            else:
                assert row.ours_text

    cold = results["cold_load"].rows[-1].facts["calls_by_rule_count"]
    assert len({sum(calls.values()) for calls in cold.values()}) == 1  # rule count changes nothing
    # One batched download; rule folders on a stock local FilesystemBackend are listed with one
    # scandir walk of their own (issue 35: bounded work per folder), not the backend's glob.
    assert set(next(iter(cold.values()))) == {"download_files"}

    warm = results["warm"].rows[-1].facts["counted"]
    assert sum(warm["ours"]["steps"].values()) == 0  # no re-parse, no re-render
    assert warm["builtin"]["formats"] >= 1  # deepagents formats its block on every call

    graph = results["graph"].rows[-1]
    assert graph.facts["warm_reads"] == 0  # warm model calls never read the graph file
    assert graph.facts["warm_parses"] == 0

    write_back = results["write_back"].rows
    if write_back[0].verdict != "unavailable":
        assert write_back[-1].facts["lost"] == 0

    recall = results["recall_layer"].rows
    assert recall[0].facts["asked_lesson_shown"]  # recall=True: the lesson asked about

    consolidation = results["consolidation"].rows
    assert consolidation[-1].verdict == "PASS", consolidation[-1].facts  # the oracle's history
    assert consolidation[-1].facts["stored_injections"] == 0
