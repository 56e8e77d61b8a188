"""Scenario 3: the second invocation of a checkpointed thread, nothing changed on disk.

Both agents are real `create_deep_agent` graphs with an `InMemorySaver` and a scripted model.
Each round starts a new thread, invokes it once (untimed) and times the second invocation.
During one extra second invocation the backend calls and the expensive steps are counted: ours
re-reads (one listing + one batched download, so a file changed on disk is seen) but parses
and renders nothing; deepagents reads nothing (which is why it keeps a stale copy for the
thread's life) and formats its block again on every model call.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.memory import MemoryMiddleware as DeepagentsMemoryMiddleware
from langgraph.checkpoint.memory import InMemorySaver

import layered_memory.core.assembler as assembler_module
import layered_memory.core.render_cache as render_cache_module
from benchmarks._fixtures import CountingBackend, Project, build_project, counting_calls, ours
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, interleaved
from layered_memory.testing import ScriptedChatModel

PARSE_STEPS = ("parse_rule_file", "build_rule_set")
"""The rule-set cache's parse steps (core/render_cache.py)."""
RENDER_STEPS = ("render_memory_report", "render_rules")
"""The assembler's render steps; a warm invocation must call none of these four."""
COUNTED_STEPS = PARSE_STEPS + RENDER_STEPS

_threads = itertools.count()
_INPUT = {"messages": [{"role": "user", "content": "What is the test command?"}]}


def agent(project: Project, backend: Any, *, builtin: bool) -> Any:
    """A deep agent answering "ok" to everything, with ours or the built-in memory."""
    model = ScriptedChatModel(script=[], default="ok")
    if builtin:
        return create_deep_agent(
            model=model, backend=backend, memory=project.sources, checkpointer=InMemorySaver()
        )
    return create_deep_agent(
        model=model,
        backend=backend,
        memory=[],
        middleware=[ours(project, backend)],
        checkpointer=InMemorySaver(),
    )


def _first_invocation(graph: Any) -> dict[str, Any]:
    """A new thread, invoked once; returns its config for the timed second invocation."""
    config = {"configurable": {"thread_id": f"warm-{next(_threads)}"}}
    graph.invoke(_INPUT, config)
    return config


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time second invocations and count what they read, parse and render."""
    project = build_project(workdir / "warm", n_rules=plan.n_rules)
    backend = CountingBackend(project.root)
    graphs = {
        "ours": agent(project, backend, builtin=False),
        "builtin": agent(project, backend, builtin=True),
    }
    samples = interleaved(
        [
            Case(
                name,
                lambda config, g=graph: g.invoke(_INPUT, config),
                lambda g=graph: _first_invocation(g),
            )
            for name, graph in graphs.items()
        ],
        rounds=plan.warm_rounds,
        collect=True,
    )

    counted: dict[str, dict[str, Any]] = {}
    for name, graph in graphs.items():
        config = _first_invocation(graph)
        backend.reset()
        with (
            counting_calls(render_cache_module, *PARSE_STEPS) as parses,
            counting_calls(assembler_module, *RENDER_STEPS) as renders,
            counting_calls(DeepagentsMemoryMiddleware, "_format_agent_memory") as formats,
        ):
            graph.invoke(_INPUT, config)
        counted[name] = {
            "backend": dict(backend.calls),
            "steps": {step: (parses + renders)[step] for step in COUNTED_STEPS},
            "formats": formats["_format_agent_memory"],
        }
    ours_steps = sum(counted["ours"]["steps"].values())
    ours_calls = sum(counted["ours"]["backend"].values())
    builtin_calls = sum(counted["builtin"]["backend"].values())
    rows = [
        Row(
            f"3. warm 2nd invocation (checkpointed thread, {project.n_rules} rules)",
            samples["ours"].median,
            samples["builtin"].median,
            "info (ours re-reads; deepagents goes stale)",
            "info",
        ),
        Row(
            "3. warm: parse + render calls / backend calls",
            None,
            None,
            "0 parse, 0 render",
            verdict(ours_steps == 0),
            ours_text=f"{ours_steps} / {ours_calls}",
            base_text=f"{counted['builtin']['formats']} / {builtin_calls}",
            facts={"counted": counted},
        ),
    ]
    notes = [
        "Counted during one second invocation: ours "
        + ", ".join(f"{k}: {v}" for k, v in counted["ours"]["steps"].items())
        + "; backend "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counted["ours"]["backend"].items()))
        + ". deepagents: `_format_agent_memory` "
        + f"{counted['builtin']['formats']} (once per model call); backend "
        + (
            ", ".join(f"{k}: {v}" for k, v in sorted(counted["builtin"]["backend"].items()))
            or "none"
        )
        + ".",
        "Ours re-reads on purpose: one `glob` of the rule folder and one batched download per "
        "invocation is what lets a file edited between invocations show up; an unchanged "
        "digest then means no state update, no parse and no render.",
    ]
    return ScenarioResult("warm", "3. Warm invocation", rows, notes)
