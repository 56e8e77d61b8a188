"""Shared checks for the views tests: what every provider demands of a message list."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from layered_memory.views._view import OPENING as OPENING_TEXT

OPENING = f"Human:{OPENING_TEXT}"
"""`texts()` of the user turn that opens a view which would start with the person's own turn."""


def call_ids(message: AIMessage) -> list[str | None]:
    return [c.get("id") for c in message.tool_calls] + [
        c.get("id") for c in message.invalid_tool_calls
    ]


def provider_problems(messages: Sequence[BaseMessage], *, person: str | None) -> list[str]:
    """Everything OpenAI / Anthropic / Gemini / Bedrock would reject, and other agents shown as the
    model.

    Returns an empty list for a valid list, else one line per problem.
    """
    problems: list[str] = []
    pending: set[str] = set()
    seen_results: set[str] = set()
    started = False
    for position, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                problems.append(f"#{position}: tool result {message.tool_call_id} without its call")
            pending.discard(message.tool_call_id)
            if message.tool_call_id in seen_results:
                problems.append(f"#{position}: second result for {message.tool_call_id}")
            seen_results.add(message.tool_call_id)
            if not started:
                problems.append(f"#{position}: the conversation starts with a tool result")
            continue
        if pending:
            problems.append(f"#{position}: calls {sorted(pending)} left without results")
            pending = set()
        if isinstance(message, SystemMessage):
            if started:
                problems.append(f"#{position}: a system message after the first other message")
        elif not started:
            started = True
            if isinstance(message, AIMessage):
                problems.append(f"#{position}: the first turn is the model's, not the user's")
        if isinstance(message, AIMessage):
            if message.name not in (None, person):
                problems.append(f"#{position}: {message.name}'s AI message shown as the model's")
            ids = call_ids(message)
            if any(call_id is None for call_id in ids) or len(set(ids)) != len(ids):
                problems.append(f"#{position}: missing or repeated call ids {ids}")
            pending = {call_id for call_id in ids if call_id is not None}
            if isinstance(message.content, list):
                block_ids = {
                    b.get("id")
                    for b in message.content
                    if isinstance(b, dict) and b.get("type") in ("tool_use", "tool_call")
                }
                if not block_ids <= pending:
                    problems.append(f"#{position}: tool_use blocks {block_ids} without calls")
            raw = message.additional_kwargs.get("tool_calls") or []
            if {c.get("id") for c in raw} - pending:
                problems.append(f"#{position}: raw OpenAI tool_calls without calls")
    if pending:
        problems.append(f"end: calls {sorted(pending)} left without results")
    return problems


def assert_provider_valid(messages: Sequence[BaseMessage], *, person: str | None) -> None:
    problems = provider_problems(messages, person=person)
    assert not problems, "\n".join(problems)


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    """`Type:text` per message: compact and readable in assertion diffs."""
    return [f"{type(m).__name__[:-7] or 'Base'}:{m.text}" for m in messages]
