"""Scenario 17: a memory file over its share, `Layer(..., recall=True)` (issue 37).

A file of 400 lessons (~40,000 characters) in a layer capped at 4,000 characters, shown two
ways: its entries most relevant to the latest user message (`recall=True`) and its head
(the default). Measured in one run:

- the block: the lesson the question is about (number 200, in the middle of the file) is in
  the recall layer's block, and not in the head's;
- per model call while memory and the latest message are unchanged: `wrap_model_call`
  interleaved, the target the same cost (the block comes from the middleware's last block;
  the entries' index is cached by content);
- a new question (the latest message changes, the memory does not): the choice is made
  again, from the cached index (reported, no target).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from benchmarks._fixtures import RUNTIME, model_request
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved
from layered_memory import Layer, MemoryMiddleware

TARGET_RATIO = 1.1
LESSONS = 400
SHARE = 4000
QUESTION = "Why does the sourdough deploy hang?"
ASKED = "Lesson 200: the sourdough starter service needs REDIS_TLS=1"


def _handler(request: Any) -> Any:
    return request


def lessons_text(count: int = LESSONS) -> str:
    """`count` lessons, one list item each; lesson 200 is the one the question is about."""
    lines = ["# Lessons learned", ""]
    for number in range(count):
        if number == 200:
            lines.append(f"- {ASKED} before its nightly migration, or the deploy hangs.")
        else:
            lines.append(
                f"- Lesson {number}: when touching module m{number}, rerun its fixtures and "
                f"check the m{number} changelog."
            )
    return "\n".join(lines) + "\n"


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """The block of each configuration and the median per-call cost, recall vs head."""
    root = workdir / "recall_layer"
    root.mkdir(parents=True, exist_ok=True)
    (root / "LESSONS.md").write_text(lessons_text())
    from deepagents.backends import FilesystemBackend

    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    middlewares: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    blocks: dict[str, str] = {}
    for kind in ("recall", "head"):
        layer = Layer("lessons", "/LESSONS.md", max_chars=SHARE, recall=kind == "recall")
        middleware = MemoryMiddleware(backend=backend, layers=[layer])
        state = dict(middleware.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
        state["messages"] = [HumanMessage(QUESTION)]
        middlewares[kind], requests[kind] = middleware, model_request(state)
        blocks[kind] = middleware.modify_request(requests[kind]).system_message.text
    found = ASKED in blocks["recall"] and ASKED not in blocks["head"]
    cases = [
        Case(kind, lambda _, m=middlewares[kind], r=requests[kind]: m.wrap_model_call(r, _handler))
        for kind in ("recall", "head")
    ]
    rounds = plan.per_call_calls * plan.per_call_rounds
    samples = interleaved(cases, rounds=rounds, warmup=min(50, plan.per_call_calls))
    recall_ns, head_ns = samples["recall"].median, samples["head"].median
    questions = [f"What about module m{n}?" for n in range(0, LESSONS, 7)]
    turn = {"i": 0}

    def new_question(_: object) -> None:
        turn["i"] += 1
        state = dict(requests["recall"].state)
        state["messages"] = [HumanMessage(questions[turn["i"] % len(questions)])]
        middlewares["recall"].wrap_model_call(model_request(state), _handler)

    fresh = interleaved([Case("new question", new_question)], rounds=max(20, rounds // 10))
    facts = {"asked_lesson_shown": found, "recall_ns": recall_ns, "head_ns": head_ns}
    rows = [
        Row(
            f"17. {LESSONS} lessons in {SHARE:,} chars: the lesson asked about is shown",
            None,
            None,
            "recall=True shows it, the head does not",
            verdict(found),
            ours_text="shown" if ASKED in blocks["recall"] else "missing",
            base_text="shown" if ASKED in blocks["head"] else "missing",
            facts=facts,
        ),
        Row(
            "17. per model call, memory and question unchanged: recall=True vs the head",
            recall_ns,
            head_ns,
            f"ratio <= {TARGET_RATIO}",
            verdict(recall_ns / head_ns <= TARGET_RATIO),
            facts=facts,
        ),
    ]
    notes = [
        f"{rounds} calls each, interleaved: recall {fmt_ns(recall_ns)}, head {fmt_ns(head_ns)}; "
        f"a model call after a new question (the entries chosen again from the cached index): "
        f"{fmt_ns(fresh['new question'].median)}.",
    ]
    return ScenarioResult("recall_layer", "17. Memory file over its share (recall)", rows, notes)
