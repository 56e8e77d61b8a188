"""Scenario 7: how per-call and load cost grow with the number of sources and of rules.

Two sweeps, each source 4 KB: 1 / 10 / 100 sources (10 rule files), and 10 / 100 / 1,000
rule files (6 sources). Per call should stay flat for ours (a cached block is reused whatever
its size) and grow with the bytes for deepagents (it re-formats everything); loading reads
every file, so it grows with the files for both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._fixtures import (
    RUNTIME,
    build_project,
    model_request,
    ours,
    theirs,
    touched_paths,
)
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, Samples, fmt_ns, interleaved
from layered_memory.process_state import clear_process_caches

SOURCE_BYTES = 4_000
FLAT = 1.5
"""Per-call growth across a sweep counts as flat up to this factor."""


def _cold(make: Callable[[], Any]) -> Any:
    """A middleware built after emptying the process-wide caches: a process's cold start."""
    clear_process_caches()
    return make()


def _handler(request: Any) -> Any:
    return request


def _cases(plan: Plan, root: Path, tag: str, n_sources: int, n_rules: int) -> list[list[Case]]:
    """([per-call cases], [load cases]) of one sweep point, named `<tag>:<case>`."""
    project = build_project(root, n_sources=n_sources, source_bytes=SOURCE_BYTES, n_rules=n_rules)
    backend = project.backend()
    mine, builtin = ours(project, backend), theirs(project, backend)
    state = dict(mine.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
    state["memory_touched_paths"] = sorted(touched_paths(plan.n_touched))
    their_state = dict(builtin.before_agent({"messages": []}, RUNTIME, {}) or {})  # type: ignore[arg-type]
    request, their_request = model_request(state), model_request(their_state)
    mine.wrap_model_call(request, _handler)  # the one render; later calls are cache hits
    calls = [
        Case(f"{tag}:ours_call", lambda _: mine.wrap_model_call(request, _handler)),
        Case(f"{tag}:builtin_call", lambda _: builtin.wrap_model_call(their_request, _handler)),
    ]
    loads = [
        Case(
            f"{tag}:ours_load",
            lambda mw: mw.before_agent({"messages": []}, RUNTIME),
            lambda: _cold(lambda: ours(project, backend)),
        ),
        Case(
            f"{tag}:builtin_load",
            lambda mw: mw.before_agent({"messages": []}, RUNTIME, {}),
            lambda: theirs(project, backend),
        ),
    ]
    return [calls, loads]


def _growth(first: float, last: float) -> str:
    return f"x{last / first:.2f}"


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Both sweeps; a growth table in the notes and one summary row per sweep and measure."""
    points = [("sources", n, n, plan.scale_rules[0]) for n in plan.scale_sources] + [
        ("rules", n, 6, n) for n in plan.scale_rules
    ]
    call_cases: list[Case] = []
    load_cases: list[Case] = []
    for sweep, size, n_sources, n_rules in points:
        calls, loads = _cases(
            plan, workdir / f"{sweep}_{size}", f"{sweep}{size}", n_sources, n_rules
        )
        call_cases += calls
        load_cases += loads
    # Every point in one interleaved run: a growth factor compares points measured side by
    # side, not minutes apart on a machine whose load changes.
    samples = {
        **interleaved(call_cases, rounds=plan.scale_calls, warmup=5),
        **interleaved(load_cases, rounds=plan.scale_load_rounds, collect=True),
    }
    sweeps: dict[str, list[tuple[int, dict[str, Samples]]]] = {"sources": [], "rules": []}
    for sweep, size, _, _ in points:
        prefix = f"{sweep}{size}:"
        sweeps[sweep].append(
            (size, {k.removeprefix(prefix): v for k, v in samples.items() if k.startswith(prefix)})
        )
    notes = [
        "| sweep | size | ours per call | deepagents per call | ours load | deepagents load |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for sweep, sweep_points in sweeps.items():
        for size, point in sweep_points:
            notes.append(
                f"| {sweep} | {size} | {fmt_ns(point['ours_call'].median)} | "
                f"{fmt_ns(point['builtin_call'].median)} | {fmt_ns(point['ours_load'].median)}"
                f" | {fmt_ns(point['builtin_load'].median)} |"
            )
    notes.append("")
    rows: list[Row] = []
    for sweep, sweep_points in sweeps.items():
        (small, first), (large, last) = sweep_points[0], sweep_points[-1]
        span = f"{small}→{large} {sweep}"
        call_growth = last["ours_call"].median / first["ours_call"].median
        rows.append(
            Row(
                f"7. per-call growth, {span}",
                None,
                None,
                f"ours flat (<= x{FLAT})",
                verdict(call_growth <= FLAT),
                ours_text=_growth(first["ours_call"].median, last["ours_call"].median),
                base_text=_growth(first["builtin_call"].median, last["builtin_call"].median),
                facts={"growth": call_growth},
            )
        )
        rows.append(
            Row(
                f"7. load growth, {span}",
                None,
                None,
                "info (grows with files read)",
                "info",
                ours_text=_growth(first["ours_load"].median, last["ours_load"].median),
                base_text=_growth(first["builtin_load"].median, last["builtin_load"].median),
            )
        )
        notes.append(
            f"{span}: ours per call {_growth(first['ours_call'].median, last['ours_call'].median)}"
            f", deepagents per call "
            f"{_growth(first['builtin_call'].median, last['builtin_call'].median)}; ours load "
            f"{_growth(first['ours_load'].median, last['ours_load'].median)}, deepagents load "
            f"{_growth(first['builtin_load'].median, last['builtin_load'].median)}"
            + (
                " (deepagents reads no rules: its numbers only show the noise)."
                if sweep == "rules"
                else "."
            )
        )
    return ScenarioResult("scale", "7. Scale", rows, notes)
