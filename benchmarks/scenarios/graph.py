"""Scenario 8: knowledge-graph memory on a 10,000-entity / 30,000-relation graph.

`KnowledgeGraphMiddleware.wrap_model_call` (focus injection) is timed against deepagents'
built-in `MemoryMiddleware.wrap_model_call` on the usual six memory sources, both with a no-op
handler, interleaved: warm (the same user message, as within one invocation) and with a new
message naming three entities on every call (name matching and rendering each time). Also:
`search_nodes` on the whole graph, the first load (parse) of the file, and the same focus
injection on a graph ten times smaller, to show the cost does not grow with the graph.
During the warm calls, backend reads and parses are counted: both must be zero.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import HumanMessage, SystemMessage

from benchmarks._fixtures import (
    BASE_PROMPT,
    RUNTIME,
    backdate,
    build_project,
    history,
    model_request,
    theirs,
)
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved, time_once
from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware, knowledge_graph
from layered_memory.testing import ScriptedChatModel

# (entities, relations, timed calls) per plan; the graph size is the in full and quick.
SIZES: dict[str, tuple[int, int, int]] = {
    "full": (10_000, 30_000, 600),
    "quick": (10_000, 30_000, 150),
    "tiny": (200, 600, 10),
}
SMALL_FACTOR = 10
"""The growth check compares with a graph this many times smaller."""

WARM_TARGET = 1.5
"""Warm focus injection at most this many times a plain MemoryMiddleware call."""


def write_graph(path: Path, n_entities: int, n_relations: int, *, seed: int = 7) -> list[str]:
    """A graph file in the server's format; returns the entity names."""
    rng = random.Random(seed)
    kinds = ("person", "organization", "project", "city", "product")
    names = [f"{kinds[i % 5].title()}_{i:05d}" for i in range(n_entities)]
    lines = [
        json.dumps(
            {
                "type": "entity",
                "name": name,
                "entityType": kinds[i % 5],
                "observations": [
                    f"Fact {j} about {name}: value {rng.randint(0, 10**6)}" for j in range(3)
                ],
            },
            separators=(",", ":"),
        )
        for i, name in enumerate(names)
    ]
    seen: set[tuple[str, str, str]] = set()
    while len(seen) < n_relations:
        seen.add((rng.choice(names), rng.choice(names), rng.choice(("knows", "works_at", "owns"))))
    lines += [
        json.dumps(
            {"type": "relation", "from": a, "to": b, "relationType": r}, separators=(",", ":")
        )
        for a, b, r in sorted(seen)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return names


def _request(state: dict[str, Any], message: str) -> ModelRequest[Any]:
    return ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[*history(5), HumanMessage(message)],
        system_message=SystemMessage(BASE_PROMPT),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )


def _handler(request: Any) -> Any:
    return request


class _Counting(FilesystemBackend):
    downloads = 0

    def download_files(self, paths: list[str]) -> Any:
        type(self).downloads += 1
        return super().download_files(paths)


def _setup(root: Path, n_entities: int, n_relations: int) -> tuple[Any, dict[str, Any], list[str]]:
    names = write_graph(root / "memory.jsonl", n_entities, n_relations)
    backdate(root)
    middleware = KnowledgeGraphMiddleware(backend=_Counting(root_dir=root, virtual_mode=True))
    state: dict[str, Any] = {"messages": []}
    state.update(middleware.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    return middleware, state, names


def _messages(names: list[str], count: int) -> list[str]:
    rng = random.Random(11)
    return [
        f"Turn {i}: how are {' and '.join(n.replace('_', ' ') for n in rng.sample(names, 3))} "
        "related, and what changed since last week?"
        for i in range(count)
    ]


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time focus injection and search on a large graph; count warm reads and parses."""
    n_entities, n_relations, calls = SIZES.get(plan.name, SIZES["quick"])
    knowledge_graph.clear_caches()
    graph_root = workdir / "graph"
    middleware, state, names = _setup(graph_root, n_entities, n_relations)
    knowledge_graph.clear_caches()
    cold_ns = time_once(lambda: KnowledgeGraph(middleware.graph.backend).snapshot())
    state.update(middleware.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    small, small_state, small_names = _setup(
        workdir / "small", max(1, n_entities // SMALL_FACTOR), max(1, n_relations // SMALL_FACTOR)
    )

    project = build_project(workdir / "memory", n_rules=0)
    builtin = theirs(project, project.backend())
    builtin_state = dict(builtin.before_agent({"messages": []}, RUNTIME, {}) or {})  # type: ignore[arg-type]
    builtin_request = model_request(builtin_state)

    warm_message = _messages(names, 1)[0]
    warm_request = _request(state, warm_message)
    fresh = itertools.cycle([_request(state, m) for m in _messages(names, 4 * calls)])
    small_fresh = itertools.cycle(
        [_request(small_state, m) for m in _messages(small_names, 4 * calls)]
    )
    graph = middleware.graph
    queries = itertools.cycle(["fact 1 about person_00", "ORGANIZATION_0001", "value 99"])

    middleware.wrap_model_call(warm_request, _handler)  # the warm message's first render
    _Counting.downloads = 0
    parses: list[str] = []
    real_parse = knowledge_graph.parse
    knowledge_graph.parse = lambda text, digest: parses.append(digest) or real_parse(text, digest)  # type: ignore[assignment]
    try:
        samples = interleaved(
            [
                Case("builtin", lambda _: builtin.wrap_model_call(builtin_request, _handler)),
                Case("warm", lambda _: middleware.wrap_model_call(warm_request, _handler)),
                Case("fresh", lambda _: middleware.wrap_model_call(next(fresh), _handler)),
                Case("fresh_small", lambda _: small.wrap_model_call(next(small_fresh), _handler)),
            ],
            rounds=calls,
            warmup=min(20, calls),
        )
        reads, parsed = _Counting.downloads, len(parses)
        search = interleaved(
            [Case("search", lambda _: graph.search_nodes(next(queries)))],
            rounds=max(3, calls // 20),
            warmup=1,
        )["search"]
    finally:
        knowledge_graph.parse = real_parse  # type: ignore[assignment]

    base = samples["builtin"].median
    warm, fresh_median = samples["warm"].median, samples["fresh"].median
    growth = fresh_median / samples["fresh_small"].median
    size = f"{n_entities:,} entities / {n_relations:,} relations"
    block = middleware.modify_request(warm_request).system_message.content_blocks[-1]["text"]  # type: ignore[union-attr]
    facts = {
        "calls": calls,
        "warm_reads": reads,
        "warm_parses": parsed,
        "block_chars": len(block),
        "growth": growth,
        "entities": n_entities,
        "relations": n_relations,
    }
    rows = [
        Row(
            f"9. graph focus injection per model call, warm ({size})",
            warm,
            base,
            f"ratio <= {WARM_TARGET}",
            verdict(warm / base <= WARM_TARGET),
            facts=facts,
        ),
        Row(
            "9. graph focus injection, a new message naming 3 entities each call",
            fresh_median,
            base,
            "info",
            "info",
        ),
        Row(
            f"9. graph injection cost, {n_entities:,} vs {n_entities // SMALL_FACTOR:,} entities",
            None,
            None,
            "ratio <= 1.5 (flat)",
            verdict(growth <= 1.5),
            ours_text=f"{growth:.2f}x",
            facts=facts,
        ),
        Row(f"9. graph search_nodes ({size})", search.median, None, "info", "info"),
        Row(
            f"9. graph warm calls: file reads / parses in {calls * 3:,} calls",
            None,
            None,
            "0 / 0",
            verdict(reads == 0 and parsed == 0),
            ours_text=f"{reads} / {parsed}",
            facts=facts,
        ),
    ]
    notes = [
        f"Graph: {size}, {graph_root.joinpath('memory.jsonl').stat().st_size / 1e6:.1f} MB. "
        f"First load (read + parse, once per content version): {fmt_ns(cold_ns)}.",
        f"{calls} calls per case, interleaved. Medians: warm injection {fmt_ns(warm)} "
        f"(p90 {fmt_ns(samples['warm'].p90)}), new message each call {fmt_ns(fresh_median)} "
        f"(p90 {fmt_ns(samples['fresh'].p90)}), same on a {SMALL_FACTOR}x smaller graph "
        f"{fmt_ns(samples['fresh_small'].median)}, deepagents' MemoryMiddleware call "
        f"{fmt_ns(base)}; ratios warm {warm / base:.2f}x, new message {fresh_median / base:.2f}x.",
        f"search_nodes over the whole graph: {fmt_ns(search.median)} per call (a scan of every "
        "entity, as the server does, over lowercased text prepared once per content version).",
        f"Warm calls read the file {reads} times and parsed it {parsed} times; the injected "
        f"block was {len(block):,} chars (budget 6,000).",
    ]
    return ScenarioResult("graph", "9. Knowledge graph", rows, notes)
