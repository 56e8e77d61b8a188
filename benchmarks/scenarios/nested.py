"""Scenario 13: nested memory and `@imports`, cold and warm.

A project with nested `AGENTS.md` files in a folder tree, the agent working in a few deep
folders, and memory files importing others three levels deep:

- cold: the first load of a new assembler (process caches cleared): how many backend calls
  (the target: one batched download, then one per import depth; no listing) and how long,
  against the same project loaded without nested discovery and imports;
- warm: a second load and render with nothing changed: no import parsed, nothing rendered,
  and its time against the plain configuration's warm load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import layered_memory.core._discovery as discovery_module
import layered_memory.core.assembler as assembler_module
from benchmarks._fixtures import CountingBackend, backdate, counting_calls
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, interleaved
from layered_memory import Layer, MemoryAssembler

SIZES = {"full": (6, 4, 9), "quick": (4, 3, 3), "tiny": (3, 2, 1)}
"""(folder depth, folders per level, rounds)."""

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
        follow_imports=extras,
    )


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    depth, width, rounds = SIZES.get(plan.name, SIZES["full"])
    root = workdir / "nested"
    touched = build(root, depth, width)

    backend = CountingBackend(root)
    assembler_module.clear_process_caches()
    cold = _assembler(backend, extras=True)
    snapshot = cold.load(touched=touched)
    cold_calls = dict(backend.calls)
    found_nested, found_imports = len(snapshot.extras.nested), len(snapshot.extras.imports)

    def cold_case(extras: bool) -> Case:
        def setup() -> MemoryAssembler:
            assembler_module.clear_process_caches()
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
    notes = [
        f"Cold load backend calls: {dict(sorted(cold_calls.items()))}; "
        f"{len(touched)} touched files in {depth}-deep folders, {width} per level.",
        "The baseline is the same assembler without `nested=` and with imports off.",
    ]
    return ScenarioResult("nested", "13. Nested memory and imports", rows, notes)
