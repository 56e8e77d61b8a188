"""Scenario 13: nested memory and `@imports`, cold and warm.

A project with nested `AGENTS.md` files in a folder tree, the agent working in a few deep
folders, and memory files importing others three levels deep:

- cold: the first load of a new assembler (process caches cleared): how many backend calls
  (the target: one batched download, then one per import depth; no listing) and how long,
  against the same project loaded without nested discovery and imports;
- warm: a second load and render with nothing changed: no import parsed, nothing rendered,
  and its time against the plain configuration's warm load;
- the run-start snapshot (issue 22): a cold `before_agent` with 1,000 rule files and 50 nested
  files in folders not touched yet (each importing a note), which loads memory AND snapshots
  read-only memory (a walk of the tree, digests of the nested files and their imports),
  against the same cold load without the snapshot (what `before_agent` did before it): the
  target is at most 1.2x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import layered_memory.core.assembler as assembler_module
import layered_memory.core.loading as discovery_module
from benchmarks._fixtures import (
    RUNTIME,
    SIX_SOURCES,
    CountingBackend,
    backdate,
    build_project,
    counting_calls,
)
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, interleaved
from layered_memory import Layer, MemoryAssembler, MemoryMiddleware, MemoryOptions
from layered_memory.core.state import snapshot_update
from layered_memory.process_state import clear_process_caches

SIZES = {"full": (6, 4, 9), "quick": (4, 3, 3), "tiny": (3, 2, 1)}
"""(folder depth, folders per level, rounds)."""

SNAPSHOT_SIZES = {"full": (1000, 50, 9), "quick": (1000, 50, 3), "tiny": (12, 3, 1)}
"""Run-start snapshot: (rule files, nested files, rounds)."""

IMPORT_DEPTH = 3


def build(root: Path, depth: int, width: int) -> list[str]:
    """A folder tree with an AGENTS.md in every folder and a three-level import chain;
    returns the files the agent touched (one per deepest folder)."""
    (root / "docs").mkdir(parents=True)
    (root / "AGENTS.md").write_text("# Project\nRead @docs/style-0.md first.\n" * 20)
    for level in range(IMPORT_DEPTH):
        nxt = f"See @style-{level + 1}.md." if level + 1 < IMPORT_DEPTH else "End."
        (root / "docs" / f"style-{level}.md").write_text(f"Style rule {level}. {nxt}\n" * 20)
    touched: list[str] = []
    folders = [root]
    for level in range(depth):
        folders = [
            folder / f"d{level}-{index}" for folder in folders[:width] for index in range(width)
        ]
        for folder in folders:
            folder.mkdir(parents=True)
            (folder / "AGENTS.md").write_text(f"Rules of {folder.name}. See @../shared.md\n" * 5)
            (folder / "shared.md").write_text(f"Shared notes of {folder.name}.\n")
    for folder in folders[: width * 2]:
        (folder / "code.py").write_text("print('x')\n")
        touched.append("/" + (folder / "code.py").relative_to(root).as_posix())
    backdate(root)
    return touched


def _assembler(backend: Any, *, extras: bool) -> MemoryAssembler:
    return MemoryAssembler(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md")],
        nested=("AGENTS.md", "CLAUDE.md") if extras else (),
        options=MemoryOptions(imports=extras),
    )


def build_snapshot_project(root: Path, n_rules: int, n_nested: int) -> None:
    """Six sources, `n_rules` rule files and `n_nested` folders each holding an AGENTS.md that
    imports a note."""
    build_project(root, n_rules=n_rules)
    for index in range(n_nested):
        folder = root / "pkg" / f"module{index:02d}"
        folder.mkdir(parents=True)
        (folder / "AGENTS.md").write_text(f"Module {index}: small functions. See @notes.md\n" * 5)
        (folder / "notes.md").write_text(f"Notes of module {index}.\n" * 3)
        (folder / "code.py").write_text("x = 1\n")
    backdate(root)


def _snapshot_middleware(root: Path) -> MemoryMiddleware:
    """A fresh middleware in a cold process: nested memory on, rules read-only."""
    clear_process_caches()
    discovery_module._references.cache_clear()
    return MemoryMiddleware(
        backend=CountingBackend(root),
        layers=[
            Layer(name, path, writable=path.endswith("MEMORY.md")) for name, path in SIX_SOURCES
        ],
        rules=["/rules"],
        nested=("AGENTS.md",),
    )


def _snapshot_row(plan: Plan, workdir: Path) -> tuple[Row, str]:
    n_rules, n_nested, rounds = SNAPSHOT_SIZES.get(plan.name, SNAPSHOT_SIZES["full"])
    root = workdir / "snapshot"
    build_snapshot_project(root, n_rules, n_nested)

    def fresh() -> MemoryMiddleware:
        return _snapshot_middleware(root)

    def load_only(middleware: MemoryMiddleware) -> None:
        # What `before_agent` did before the snapshot: load, then the state update.
        snapshot_update({"messages": []}, middleware.assembler.load(), [])

    samples = interleaved(
        [
            Case("snapshot", lambda mw: mw.before_agent({"messages": []}, RUNTIME), fresh),
            Case("load", load_only, fresh),
        ],
        rounds=rounds,
    )
    counted = fresh()
    update = counted.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    calls = dict(counted.assembler.backend.calls)
    start = (update or {}).get("memory_loaded", {}).get("run_start", {})
    digests = len(start.get("digests", {}))
    ratio = samples["snapshot"].median / samples["load"].median
    row = Row(
        f"13. run-start snapshot: cold before_agent, {n_rules} rule files + {n_nested} nested "
        "files not yet touched, vs the same cold load without the snapshot",
        samples["snapshot"].median,
        samples["load"].median,
        "<= 1.2x",
        verdict(ratio <= 1.2),
        facts={"calls": calls, "digests": digests},
    )
    note = (
        f"Run-start snapshot: {digests} digests kept in state (nested files and their imports); "
        f"backend calls of one cold before_agent: {dict(sorted(calls.items()))}."
    )
    return row, note


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    depth, width, rounds = SIZES.get(plan.name, SIZES["full"])
    root = workdir / "nested"
    touched = build(root, depth, width)

    backend = CountingBackend(root)
    clear_process_caches()
    cold = _assembler(backend, extras=True)
    snapshot = cold.load(touched=touched)
    cold_calls = dict(backend.calls)
    found_nested, found_imports = len(snapshot.extras.nested), len(snapshot.extras.imports)

    def cold_case(extras: bool) -> Case:
        def setup() -> MemoryAssembler:
            clear_process_caches()
            discovery_module._references.cache_clear()
            return _assembler(CountingBackend(root), extras=extras)

        return Case(
            "nested" if extras else "plain",
            lambda assembler: assembler.render(assembler.load(touched=touched), keys=touched),
            setup,
        )

    cold_samples = interleaved([cold_case(True), cold_case(False)], rounds=rounds)

    warm_nested = _assembler(CountingBackend(root), extras=True)
    warm_plain = _assembler(CountingBackend(root), extras=False)
    for assembler in (warm_nested, warm_plain):
        assembler.render(assembler.load(touched=touched), keys=touched)
    warm_samples = interleaved(
        [
            Case(
                name,
                lambda _ignored, a=assembler: a.render(a.load(touched=touched), keys=touched),
            )
            for name, assembler in (("nested", warm_nested), ("plain", warm_plain))
        ],
        rounds=rounds * 5,
    )
    with (
        counting_calls(discovery_module, "find_imports") as parsed,
        counting_calls(assembler_module, "render_memory_report") as rendered,
    ):
        warm_nested.render(warm_nested.load(touched=touched), keys=touched)
    downloads = cold_calls.get("download_files", 0)
    rows = [
        Row(
            f"13. cold load: {found_nested} nested files, {found_imports} imports "
            f"({IMPORT_DEPTH} deep) vs the project file alone",
            cold_samples["nested"].median,
            cold_samples["plain"].median,
            "backend calls = 1 + import depth, no listing",
            verdict(downloads == 1 + IMPORT_DEPTH and "glob" not in cold_calls),
            facts={"calls": cold_calls},
        ),
        Row(
            "13. warm load + render, nothing changed",
            warm_samples["nested"].median,
            warm_samples["plain"].median,
            "0 import parses, 0 renders",
            verdict(parsed["find_imports"] == 0 and rendered["render_memory_report"] == 0),
            facts={"parsed": parsed["find_imports"], "rendered": rendered["render_memory_report"]},
        ),
    ]
    snapshot_row, snapshot_note = _snapshot_row(plan, workdir)
    rows.append(snapshot_row)
    notes = [
        f"Cold load backend calls: {dict(sorted(cold_calls.items()))}; "
        f"{len(touched)} touched files in {depth}-deep folders, {width} per level.",
        "The baseline is the same assembler without `nested=` and with imports off.",
        snapshot_note,
    ]
    return ScenarioResult("nested", "13. Nested memory and imports", rows, notes)
