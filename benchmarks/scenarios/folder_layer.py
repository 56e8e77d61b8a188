"""Scenario 16: a folder layer (`Layer("memories", "/memories/")`, issue 28).

The same memory files configured two ways: as one folder layer (every `*.md` directly in
`/memories/`) and as a layer naming each file. Measured in one run:

- cold load: the backend calls of a first load (process caches cleared): the folder layer
  costs one listing more, and its files come in the same batched download as the others;
- per model call: `wrap_model_call` with the state each configuration loaded, interleaved;
  the target is the same cost (the block is rendered from state and cached either way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._fixtures import RUNTIME, CountingBackend, model_request
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved
from layered_memory import Layer, MemoryAssembler, MemoryMiddleware
from layered_memory.process_state import clear_process_caches

TARGET_RATIO = 1.1
FILES = 20


def _handler(request: Any) -> Any:
    return request


def _build(root: Path) -> list[str]:
    (root / "memories").mkdir(parents=True)
    (root / "AGENTS.md").write_text("# Project\nUse make test.\n" * 20)
    paths = []
    for index in range(FILES):
        name = f"note-{index:02d}.md"
        (root / "memories" / name).write_text(f"Lesson {index}: keep answers short.\n" * 20)
        paths.append(f"/memories/{name}")
    return paths


def _layers(folder: bool, paths: list[str]) -> list[Layer]:
    memories = "/memories/" if folder else paths
    return [Layer("project", "/AGENTS.md"), Layer("memories", memories, writable=True)]


def _cold_calls(root: Path, layers: list[Layer]) -> dict[str, int]:
    clear_process_caches()
    backend = CountingBackend(root)
    MemoryAssembler(backend=backend, layers=layers).load()
    return dict(backend.calls)


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Backend calls of a cold load and the median per-call cost, folder layer vs files."""
    root = workdir / "folder_layer"
    paths = _build(root)
    calls = {
        kind: _cold_calls(root, _layers(kind == "folder", paths)) for kind in ("folder", "files")
    }
    backend = CountingBackend(root)
    requests: dict[str, Any] = {}
    middlewares: dict[str, Any] = {}
    for kind in ("folder", "files"):
        middleware = MemoryMiddleware(backend=backend, layers=_layers(kind == "folder", paths))
        state = dict(middleware.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
        middlewares[kind], requests[kind] = middleware, model_request(state)
    same_block = (
        middlewares["folder"].modify_request(requests["folder"]).system_message.text
        == middlewares["files"].modify_request(requests["files"]).system_message.text
    )
    cases = [
        Case(kind, lambda _, m=middlewares[kind], r=requests[kind]: m.wrap_model_call(r, _handler))
        for kind in ("folder", "files")
    ]
    rounds = plan.per_call_calls * plan.per_call_rounds
    samples = interleaved(cases, rounds=rounds, warmup=min(50, plan.per_call_calls))
    folder_ns, files_ns = samples["folder"].median, samples["files"].median
    facts = {"cold_calls_folder": calls["folder"], "cold_calls_files": calls["files"]}
    rows = [
        Row(
            "16. cold load: backend calls, folder layer vs each file named",
            None,
            None,
            "one listing + one batched download",
            verdict(calls["folder"] == {"ls": 1, "download_files": 1}),
            ours_text=", ".join(f"{k} {v}" for k, v in sorted(calls["folder"].items())),
            base_text=", ".join(f"{k} {v}" for k, v in sorted(calls["files"].items())),
            facts=facts,
        ),
        Row(
            f"16. per model call: folder layer of {FILES} files vs the same files named",
            folder_ns,
            files_ns,
            f"ratio <= {TARGET_RATIO}",
            verdict(folder_ns / files_ns <= TARGET_RATIO and same_block),
            facts={**facts, "same_block": same_block},
        ),
    ]
    notes = [
        f"{rounds} calls each, interleaved: folder layer {fmt_ns(folder_ns)} "
        f"(p90 {fmt_ns(samples['folder'].p90)}), files named {fmt_ns(files_ns)} "
        f"(p90 {fmt_ns(samples['files'].p90)}); the blocks are "
        f"{'byte-identical' if same_block else 'DIFFERENT'}.",
    ]
    return ScenarioResult("folder_layer", "16. Folder layer", rows, notes)
