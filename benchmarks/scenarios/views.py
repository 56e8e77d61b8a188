"""Scenario 8: a message view on every model call of a long shared conversation.

One person's FOCUSED view (conversation pairs, last 20 messages, system messages kept) of a
10,000-message debate among three agents and a user, with parallel tool calls and addressed
messages, is timed against LangChain's own recipe for a bounded history on the same list:
`trim_messages(strategy="last", token_counter=len, max_tokens=20, start_on="human",
end_on=("human", "tool"), include_system=True)`. `token_counter=len` makes trim count
messages, as `max_messages` does, so both keep at most 20 (plus the system message).

Ours does more per call (the filter, pair alignment, tool-call repair, other agents' messages
rewritten as named input) and must still cost no more: target ratio <= 1.0, the median of
per-round ratios of interleaved samples. FULL (every message) is timed per model call of a
growing conversation and cold, and the run-end hook's graph node is counted in Python calls.
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Case, fmt_ns, interleaved, paired_ratio
from layered_memory.testing import ScriptedChatModel
from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    MessageViewMiddleware,
    _view,
    addressed,
    view_messages,
)

TARGET_RATIO = 1.0
WINDOW = 20
PERSON = "pessimist"
# plan name -> (messages in the conversation, timed rounds, rounds for the slow FULL view)
SIZES = {"full": (10_000, 300, 20), "quick": (10_000, 60, 5), "tiny": (400, 3, 1)}


def shared_conversation(size: int) -> list[BaseMessage]:
    """A debate of `size` messages ending with a request to the viewer (ids as add_messages
    would give them)."""
    messages: list[BaseMessage] = [SystemMessage("Debate rules: be brief, cite sources.")]
    speakers = ("optimist", PERSON, "researcher")
    turn = 0
    while len(messages) < size - 1:
        speaker = speakers[turn % 3]
        if turn % 7 == 0:
            messages.append(HumanMessage(f"Moderator note {turn}: stay on topic."))
        if turn % 5 == 0:  # two parallel tool calls, answered right after
            calls = [
                {"name": "search", "args": {"q": f"fares {turn}"}, "id": f"c{turn}a"},
                {"name": "search", "args": {"q": f"cities {turn}"}, "id": f"c{turn}b"},
            ]
            messages.append(AIMessage("", name=speaker, tool_calls=calls))
            messages += [ToolMessage(f"{c['id']} found", tool_call_id=c["id"]) for c in calls]
        reply = AIMessage(f"{speaker} argues point {turn}.", name=speaker)
        if turn % 11 == 0:
            reply = addressed(reply, sender=speaker, to=["optimist", PERSON])
        messages.append(reply)
        turn += 1
    messages = messages[: size - 1]
    messages.append(AIMessage("optimist: your move.", name="optimist"))
    for index, message in enumerate(messages):
        message.id = f"msg-{index}"
    return messages


class _WithoutRunEnd(MessageViewMiddleware[Any, Any]):
    """The same middleware without the run-end hook: what the `after_agent` node costs."""

    after_agent = AgentMiddleware.after_agent  # type: ignore[assignment]
    aafter_agent = AgentMiddleware.aafter_agent  # type: ignore[assignment]


def _run_end_node_calls() -> tuple[int, int]:
    """Python calls of one scripted turn with and without the run-end hook (deterministic)."""
    found = []
    for cls in (MessageViewMiddleware, _WithoutRunEnd):
        agent = create_agent(
            ScriptedChatModel(script=["ok", "ok"]),
            middleware=[cls(profile=MemoryProfile.FOCUSED)],
        )
        agent.invoke({"messages": [HumanMessage("warm up")]})
        profiler = cProfile.Profile()
        profiler.enable()
        agent.invoke({"messages": [HumanMessage("hello")]})
        profiler.disable()
        found.append(int(pstats.Stats(profiler).total_calls))  # type: ignore[attr-defined]
    return found[0], found[1]


def _handler(request: Any) -> Any:
    """A model that costs nothing: only the middleware's work is timed."""
    return request


def run(plan: Plan, workdir: Path) -> ScenarioResult:  # noqa: ARG001 (no files needed)
    """Time the FOCUSED view (function and middleware) against `trim_messages`."""
    size, rounds, full_rounds = SIZES.get(plan.name, SIZES["quick"])
    messages = shared_conversation(size)
    focused = MemoryProfileFactory.get_settings(MemoryProfile.FOCUSED)
    full = MemoryProfileFactory.get_settings(MemoryProfile.FULL)
    middleware = MessageViewMiddleware(person=PERSON, profile=MemoryProfile.FOCUSED)
    request = ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=list(messages),  # type: ignore[arg-type]
        system_message=SystemMessage("You argue against."),
        state={"messages": messages},  # type: ignore[arg-type]
    )

    def trim() -> list[BaseMessage]:
        return trim_messages(
            messages,
            strategy="last",
            token_counter=len,
            max_tokens=WINDOW + 1,  # + the system message, which trim counts
            start_on="human",
            end_on=("human", "tool"),
            include_system=True,
        )

    trim_case = Case("trim", lambda _: trim())
    cases = [
        Case("middleware", lambda _: middleware.wrap_model_call(request, _handler)),
        Case("view", lambda _: view_messages(messages, person=PERSON, settings=focused)),
        trim_case,
    ]
    samples = interleaved(cases, rounds=rounds, warmup=min(10, rounds))
    # FULL on every model call of a growing conversation: one message more than the last call
    # (a new list of the same message objects, as add_messages gives it), and cold (the first
    # call in a process, or after a checkpoint loaded new objects). Cold leaves 10,000
    # messages of garbage per call: timed apart, with a collection before each sample.
    grown = list(messages)

    def full_next_call(_: object) -> list[BaseMessage]:
        grown.append(AIMessage("optimist: and another thing.", name="optimist"))
        return view_messages(list(grown), person=PERSON, settings=full)

    def full_cold(_: object) -> list[BaseMessage]:
        _view.clear_cache()
        return view_messages(messages, person=PERSON, settings=full)

    warm_samples = interleaved(
        [Case("full", full_next_call), trim_case], rounds=rounds, warmup=min(10, rounds)
    )
    full_samples = interleaved(
        [Case("full_cold", full_cold), trim_case], rounds=full_rounds, collect=True
    )
    samples["full"] = warm_samples["full"]
    samples["full_cold"] = full_samples["full_cold"]
    node_calls = _run_end_node_calls()
    base = samples["trim"].median
    shown = view_messages(messages, person=PERSON, settings=focused)
    trimmed = trim()
    facts = {
        "messages": size,
        "rounds": rounds,
        "shown_by_view": len(shown),
        "kept_by_trim": len(trimmed),
        "shown_by_full": len(view_messages(messages, person=PERSON, settings=full)),
    }
    rows = []
    for key, label, target in (
        ("middleware", f"8. views: FOCUSED per model call vs trim_messages, {size:,} msgs", True),
        ("view", "8. views: `view_messages` FOCUSED alone vs trim_messages", True),
        ("full", "8. views: FULL per model call (1 message more than the last) vs trim", False),
        ("full_cold", "8. views: FULL, first call of a process (cold) vs trim_messages", False),
    ):
        baseline = {"full": warm_samples, "full_cold": full_samples}.get(key, samples)["trim"]
        ratio = paired_ratio(samples[key], baseline)
        rows.append(
            Row(
                label,
                samples[key].median,
                baseline.median,
                f"ratio <= {TARGET_RATIO}" if target else "info",
                verdict(ratio <= TARGET_RATIO) if target else "info",
                ratio=ratio,
                facts=dict(facts, p90=samples[key].p90),
            )
        )
    with_node, without_node = node_calls
    rows.append(
        Row(
            "8. views: run-end hook (`after_agent` node), Python calls per scripted turn",
            None,
            None,
            "info",
            "info",
            ours_text=f"{with_node:,} calls",
            base_text=f"{without_node:,} calls",
            ratio=with_node / without_node,
            facts={"with_node": with_node, "without_node": without_node},
        )
    )
    notes = [
        f"Baseline: `trim_messages(strategy='last', token_counter=len, max_tokens={WINDOW + 1}, "
        "start_on='human', end_on=('human', 'tool'), include_system=True)` on the same "
        f"{size:,}-message list (token_counter=len: trim counts messages, like max_messages; "
        "+1 for the system message, which the view keeps outside its count).",
        f"{rounds} interleaved rounds ({full_rounds} for FULL cold, garbage collected before "
        "each sample); ratios are medians of per-round ratios. Medians: "
        f"middleware {fmt_ns(samples['middleware'].median)}, view_messages "
        f"{fmt_ns(samples['view'].median)}, trim_messages {fmt_ns(base)}, FULL view per "
        f"call {fmt_ns(samples['full'].median)} (cold {fmt_ns(samples['full_cold'].median)}).",
        "FULL per call reuses the view of the unchanged prefix (checked by identity, message "
        "by message) and converts only the new messages; cold converts all of them.",
        "Run-end hook: `MessageViewMiddleware` defines `after_agent` for every profile (it "
        "marks where a GOLDFISH run ended), so LangChain adds a node to every agent using it. "
        f"One scripted `create_agent` turn with FOCUSED makes {with_node:,} Python calls, "
        f"{without_node:,} with that hook removed ({with_node / without_node - 1:+.0%}; "
        "nothing next to a real model call).",
        f"The FOCUSED view shows {len(shown)} messages (system + the request + 9 whole pairs, "
        f"other agents as named input, tool calls whole); trim keeps {len(trimmed)} with other "
        "agents' messages still shown as the model's own. FULL shows "
        f"{facts['shown_by_full']:,} and rewrites every other agent's message, so its first "
        "call in a process scales with the conversation.",
    ]
    return ScenarioResult("views", "8. Message views", rows, notes)
