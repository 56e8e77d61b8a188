"""Scenario 1: the cost `wrap_model_call` adds to every model call.

Ours runs in its full layered form (6 layers, 200 rule files, 50 touched paths as match keys);
deepagents gets the same 6 sources. Both get the same request (a base prompt string and a few
turns of history) and a no-op handler, so only the middleware's own work is timed. Ours also
runs as a `sources=` drop-in, to show the saving does not depend on the layered features.

Each form is also timed against an ideal middleware (issue 23): one that appends its block,
precomputed once and byte-identical to ours, to the system message and calls the model. The
ratio is the price of everything ours does per call (reload check, cache lookup) beyond that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._fixtures import (
    RUNTIME,
    build_project,
    model_request,
    ours,
    ours_compat,
    theirs,
    touched_paths,
)
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved, time_once
from layered_memory.core.system_message import append_block

TARGET_RATIO = 0.5
IDEAL_TARGET_RATIO = 1.5


class IdealMiddleware:
    """The least a memory middleware can do per model call: append one precomputed block."""

    def __init__(self, block: str) -> None:
        self.block = block

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        system_message = append_block(request.system_message, self.block)
        return handler(request.override(system_message=system_message))


def _ideal_twin(middleware: Any, request: Any) -> IdealMiddleware:
    """An ideal middleware appending exactly the block `middleware` appends to `request`."""
    text = middleware.modify_request(request).system_message.content_blocks[-1]["text"]
    ideal = IdealMiddleware(text.removeprefix("\n\n"))
    mine = middleware.wrap_model_call(request, _handler).system_message
    assert ideal.wrap_model_call(request, _handler).system_message == mine, "not the same block"
    return ideal


def _handler(request: Any) -> Any:
    """A model that costs nothing: the request comes back as the response."""
    return request


def _block_chars(middleware: Any, request: Any) -> int:
    """Length of the memory block the middleware appends."""
    message = middleware.modify_request(request).system_message
    return len(message.content_blocks[-1]["text"])


def _call_case(name: str, middleware: Any, request: Any) -> Case:
    return Case(name, lambda _: middleware.wrap_model_call(request, _handler))


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time 1,000 interleaved calls of each middleware's `wrap_model_call`."""
    project = build_project(workdir / "per_call", n_rules=plan.n_rules)
    backend = project.backend()
    layered, compat = ours(project, backend), ours_compat(project, backend)
    builtin = theirs(project, backend)

    layered_state = dict(layered.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
    layered_state["memory_touched_paths"] = sorted(touched_paths(plan.n_touched))
    compat_state = dict(compat.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
    builtin_state = dict(builtin.before_agent({"messages": []}, RUNTIME, {}) or {})  # type: ignore[arg-type]
    requests = {
        "layered": model_request(layered_state),
        "compat": model_request(compat_state),
        "builtin": model_request(builtin_state),
    }
    # The first call parses the rules, matches them and renders; every later call is a hit.
    first_call_ns = time_once(lambda: layered.wrap_model_call(requests["layered"], _handler))
    match = layered.assembler.match_rules(
        layered_state["memory_loaded"]["rule_files"], layered_state["memory_touched_paths"]
    )

    cases = [
        _call_case("layered", layered, requests["layered"]),
        _call_case("compat", compat, requests["compat"]),
        _call_case("builtin", builtin, requests["builtin"]),
        _call_case("ideal_layered", _ideal_twin(layered, requests["layered"]), requests["layered"]),
        _call_case("ideal_compat", _ideal_twin(compat, requests["compat"]), requests["compat"]),
    ]
    samples = interleaved(
        cases,
        rounds=plan.per_call_calls * plan.per_call_rounds,
        warmup=min(50, plan.per_call_calls),
    )
    base = samples["builtin"].median
    calls = plan.per_call_calls * plan.per_call_rounds
    facts = {
        "calls": calls,
        "first_call_ns": first_call_ns,
        "rules_applied": len(match.applied) if match else 0,
        "rules_requested": len(match.requested) if match else 0,
        "block_chars_ours": _block_chars(layered, requests["layered"]),
        "block_chars_compat": _block_chars(compat, requests["compat"]),
        "block_chars_builtin": _block_chars(builtin, requests["builtin"]),
    }
    rows = []
    for key, label in (
        (
            "layered",
            f"1. per model call: layers + {project.n_rules} rules + {plan.n_touched} paths",
        ),
        ("compat", "1. per model call: `sources=` drop-in"),
    ):
        median = samples[key].median
        rows.append(
            Row(
                label,
                median,
                base,
                f"ratio <= {TARGET_RATIO}",
                verdict(median / base <= TARGET_RATIO),
                facts=dict(facts, p90_ours=samples[key].p90, p90_builtin=samples["builtin"].p90),
            )
        )
    for key, label in (
        ("layered", "1. per model call vs an ideal middleware: layers + rules + paths"),
        ("compat", "1. per model call vs an ideal middleware: `sources=` drop-in"),
    ):
        median, ideal = samples[key].median, samples[f"ideal_{key}"].median
        rows.append(
            Row(
                label,
                median,
                ideal,
                f"ratio <= {IDEAL_TARGET_RATIO}",
                verdict(median / ideal <= IDEAL_TARGET_RATIO),
                base_text=f"ideal {fmt_ns(ideal)}",
                facts={"p90_ours": samples[key].p90, "p90_ideal": samples[f"ideal_{key}"].p90},
            )
        )
    notes = [
        f"{calls} calls per middleware, interleaved one by one. Medians: layered "
        f"{fmt_ns(samples['layered'].median)} (p90 {fmt_ns(samples['layered'].p90)}), drop-in "
        f"{fmt_ns(samples['compat'].median)} (p90 {fmt_ns(samples['compat'].p90)}), deepagents "
        f"{fmt_ns(base)} (p90 {fmt_ns(samples['builtin'].p90)}); an ideal middleware appending "
        f"the same block, precomputed: {fmt_ns(samples['ideal_layered'].median)} (layered's "
        f"block), {fmt_ns(samples['ideal_compat'].median)} (the drop-in's).",
        f"Our first call (parse {project.n_rules} rule files, match {plan.n_touched} paths, "
        f"render) took {fmt_ns(first_call_ns)}; every later call reuses that block.",
        f"Memory block: layered {facts['block_chars_ours']:,} chars "
        f"({facts['rules_applied']} rules applied, {facts['rules_requested']} listed on "
        f"request; 48,000-char budget), drop-in {facts['block_chars_compat']:,} chars, "
        f"deepagents {facts['block_chars_builtin']:,} chars.",
    ]
    return ScenarioResult("per_call", "1. Per model call", rows, notes)
