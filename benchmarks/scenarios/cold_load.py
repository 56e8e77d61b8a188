"""Scenario 2: a cold `before_agent` (fresh middleware, fresh thread) on FilesystemBackend.

Measured at several rule-file counts to show the number of backend calls does not depend on
it: ours makes one `glob` per rule folder and one batched `download_files` for every layer and
rule file together. deepagents loads the same 6 sources (it has no rules). The first model
call after a cold load is timed too, since that is where ours parses the rules and renders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._fixtures import (
    RUNTIME,
    CountingBackend,
    Project,
    build_project,
    model_request,
    ours,
    theirs,
    touched_paths,
)
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, interleaved
from layered_memory.process_state import clear_process_caches


def _cold(make: Callable[[], Any]) -> Any:
    """A middleware built after emptying the process-wide caches: a process's cold start."""
    clear_process_caches()
    return make()


def _fresh_state() -> dict[str, Any]:
    return {"messages": []}


def _counted_load(project: Project, *, builtin: bool) -> dict[str, int]:
    """Backend calls of one cold `before_agent`, by operation."""
    backend = CountingBackend(project.root)
    if builtin:
        theirs(project, backend).before_agent(_fresh_state(), RUNTIME, {})  # type: ignore[arg-type]
    else:
        ours(project, backend).before_agent(_fresh_state(), RUNTIME)  # type: ignore[arg-type]
    return dict(backend.calls)


def _first_call(middleware: Any, update: dict[str, Any] | None, touched: list[str]) -> None:
    state = {**_fresh_state(), **(update or {})}
    if touched and "memory_loaded" in state:
        state["memory_touched_paths"] = touched
    middleware.modify_request(model_request(state))


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time cold loads at each rule count and count their backend calls."""
    rows: list[Row] = []
    notes: list[str] = []
    counts: dict[int, dict[str, int]] = {}
    builtin_counts: dict[str, int] = {}
    touched = sorted(touched_paths(plan.n_touched))
    for n_rules in plan.cold_rule_counts:
        project = build_project(workdir / f"cold_{n_rules}", n_rules=n_rules)
        backend = project.backend()
        counts[n_rules] = _counted_load(project, builtin=False)
        builtin_counts = _counted_load(project, builtin=True)
        samples = interleaved(
            [
                Case(
                    "ours",
                    lambda mw: mw.before_agent(_fresh_state(), RUNTIME),
                    lambda p=project, b=backend: _cold(lambda: ours(p, b)),
                ),
                Case(
                    "builtin",
                    lambda mw: mw.before_agent(_fresh_state(), RUNTIME, {}),
                    lambda p=project, b=backend: theirs(p, b),
                ),
                Case(
                    "ours_first_call",
                    lambda mw: _first_call(mw, mw.before_agent(_fresh_state(), RUNTIME), touched),
                    lambda p=project, b=backend: _cold(lambda: ours(p, b)),
                ),
                Case(
                    "builtin_first_call",
                    lambda mw: _first_call(mw, mw.before_agent(_fresh_state(), RUNTIME, {}), []),
                    lambda p=project, b=backend: theirs(p, b),
                ),
            ],
            # Loads of 1,000 files take a tenth of a second; fewer rounds keep the run short.
            rounds=plan.cold_rounds if n_rules <= 200 else max(1, plan.cold_rounds // 3),
            collect=True,
        )
        rows.append(
            Row(
                f"2. cold before_agent: 6 sources + {n_rules} rule files",
                samples["ours"].median,
                samples["builtin"].median,
                "info (deepagents reads no rules)",
                "info",
                facts={"backend_calls": counts[n_rules]},
            )
        )
        rows.append(
            Row(
                f"2. cold before_agent + first model call ({n_rules} rules)",
                samples["ours_first_call"].median,
                samples["builtin_first_call"].median,
                "info",
                "info",
            )
        )
    totals = [sum(c.values()) for c in counts.values()]
    per_count = " / ".join(str(total) for total in totals)
    rows.append(
        Row(
            "2. cold load backend calls at "
            + " / ".join(str(n) for n in plan.cold_rule_counts)
            + " rule files",
            None,
            None,
            "independent of rule count",
            verdict(len(set(totals)) == 1),
            ours_text=per_count,
            base_text=" / ".join(str(sum(builtin_counts.values())) for _ in totals),
            facts={"calls_by_rule_count": counts, "builtin_calls": builtin_counts},
        )
    )
    by_op = ", ".join(f"{op}: {n}" for op, n in sorted(next(iter(counts.values())).items()))
    notes.append(
        f"Backend calls per cold load, ours: {by_op} (same at every rule count: "
        f"{per_count}); deepagents: "
        + ", ".join(f"{op}: {n}" for op, n in sorted(builtin_counts.items()))
        + " (it reads no rule files)."
    )
    notes.append(
        "Load time grows with the bytes read (every rule file is read, so a changed one is "
        "seen); the number of backend calls does not. The first model call after a cold load "
        "is where ours parses the rule files, matches the touched paths and renders once."
    )
    return ScenarioResult("cold_load", "2. Cold load", rows, notes)
