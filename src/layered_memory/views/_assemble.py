"""From chosen indices to the messages a provider accepts.

Rules every provider shares (OpenAI, Anthropic, Gemini, Bedrock): each tool call of an AI
message is answered by exactly one tool result, right after that message and before any other
message; no tool result without its call; a conversation never starts with a tool result; the
model's own turns are only its own. So the person's AI messages go out with their results
pulled up right behind them (a shared conversation may have interleaved them), calls left
without a result are stripped from a copy, and other agents' messages become human input.
Everything else passes through as the very same objects.
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from layered_memory.views._conversation import AI, TOOL, Conversation, call_ids, kind
from layered_memory.views._speakers import as_speaker, as_tool_report

_CALL_BLOCK_TYPES = frozenset({"tool_use", "tool_call"})


def assemble(conv: Conversation, indices: list[int]) -> list[BaseMessage]:
    """The messages at `indices` (ascending), repaired for the provider and the speaker."""
    out: list[BaseMessage] = []
    used_ids: set[str] = set()  # a call id goes out once per request (Anthropic demands it)
    for index in indices:
        message = conv.message(index)
        message_kind = kind(message)
        if message_kind == TOOL:
            caller = conv.caller(index)
            if caller is None or conv.mine(index):
                continue  # an orphan, or the person's own result: it goes out with its call
            result = cast("ToolMessage", message)
            tool = _call_name(conv.messages[caller], result.tool_call_id)
            out.append(as_tool_report(result, conv.sender(caller), tool))
        elif message_kind == AI:
            if conv.mine(index):
                _own_turn(conv, index, cast("AIMessage", message), out, used_ids)
            else:
                spoken = as_speaker(cast("AIMessage", message), conv.sender(index))
                if spoken is not None:
                    out.append(spoken)
        else:
            out.append(message)
    return out


def _call_name(caller: BaseMessage, call_id: str) -> str | None:
    if isinstance(caller, AIMessage):
        for call in [*caller.tool_calls, *caller.invalid_tool_calls]:
            if call.get("id") == call_id:
                return call.get("name")
    return None


def _own_turn(
    conv: Conversation,
    index: int,
    message: AIMessage,
    out: list[BaseMessage],
    used_ids: set[str],
) -> None:
    ids = call_ids(message)
    if not ids:
        out.append(message)
        return
    results = conv.results_of(index)
    answered: dict[str, None] = {}  # ordered set: calls of huge hostile messages stay O(n)
    complete = True
    for call_id in ids:
        if call_id is None or call_id in answered or call_id in used_ids or call_id not in results:
            complete = False
        else:
            answered[call_id] = None
    used_ids.update(answered)
    if complete:
        out.append(message)
    else:
        stripped = _without_unanswered_calls(message, set(answered))
        if stripped is not None:
            out.append(stripped)
    out.extend(conv.messages[j] for j in sorted(results[call_id] for call_id in answered))


def _without_unanswered_calls(message: AIMessage, answered: set[str]) -> AIMessage | None:
    """A copy keeping only the answered calls (first of each id); None when nothing is left."""
    seen: set[str] = set()

    def keep(call: Any) -> bool:
        call_id = call.get("id") if isinstance(call, dict) else None
        if call_id in answered and call_id not in seen:
            seen.add(call_id)
            return True
        return False

    tool_calls = [call for call in message.tool_calls if keep(call)]
    invalid_tool_calls = [call for call in message.invalid_tool_calls if keep(call)]
    update: dict[str, Any] = {"tool_calls": tool_calls, "invalid_tool_calls": invalid_tool_calls}
    content = message.content
    if isinstance(content, list):
        # Anthropic-style `tool_use` / v1 `tool_call` blocks repeat the call: drop the same ones.
        content = [
            block
            for block in content
            if not (
                isinstance(block, dict)
                and block.get("type") in _CALL_BLOCK_TYPES
                and block.get("id") not in seen
            )
        ]
        update["content"] = content
    if "tool_calls" in message.additional_kwargs:
        # OpenAI-format calls here are sent when `tool_calls` is empty: keep them in step.
        raw_calls = message.additional_kwargs["tool_calls"]
        extra = dict(message.additional_kwargs)
        kept = [
            call
            for call in (raw_calls if isinstance(raw_calls, list) else [])
            if isinstance(call, dict) and call.get("id") in seen
        ]
        if kept:
            extra["tool_calls"] = kept
        else:
            del extra["tool_calls"]
        update["additional_kwargs"] = extra
    if not tool_calls and not invalid_tool_calls and not content:
        return None
    if isinstance(content, str) and not content.strip() and not seen:
        return None
    return message.model_copy(update=update)
