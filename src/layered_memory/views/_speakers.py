"""Another agent's messages, shown to the model as input from a named speaker.

A model must never see another agent's words as its own (it would continue them, and
providers reject tool calls it did not make), so another agent's AI message becomes a
`HumanMessage` that names the speaker, with its tool calls folded into one line of text each;
the results of its tool calls, when the view shows them, become human messages too. The label
is a convention the model can read, not a proof of who spoke: an agent can write anything in
its text, so trust decisions must not rest on it. Labels and relayed text go through the
package's `drop_invisible`: another agent (prompt-injected, say) cannot pass on text that the
person reading the conversation does not see.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from layered_memory.core._defuse import drop_invisible

SPEECH_FORMAT = "[{speaker}]: {text}"
TOOL_CALL_FORMAT = "[{speaker} called {tool}({args})]"
TOOL_RESULT_FORMAT = "[{tool} result for {speaker}]: {text}"
MAX_LABEL_CHARS = 64
MAX_ARGS_CHARS = 1000


def label(name: str | None) -> str:
    """A speaker name fit for a one-line label: no control characters, no brackets, bounded."""
    if not name:
        return "another agent"
    # Cut before the cache: a hostile megabyte-long name must not be kept as a cache key.
    return _label(name[: MAX_LABEL_CHARS * 4])


@functools.lru_cache(maxsize=512)  # a conversation has few speakers and tools
def _label(name: str) -> str:
    shown = drop_invisible(name)  # variation selectors and Hangul fillers are "printable"
    cleaned = "".join(" " if not ch.isprintable() or ch in "[]" else ch for ch in shown)
    cleaned = " ".join(cleaned.split())[:MAX_LABEL_CHARS]
    return cleaned or "another agent"


def text_of(message: BaseMessage) -> str:
    """The plain text of a message: text blocks only (no reasoning, tool or media blocks)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def _args_text(args: Any) -> str:
    try:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # circular or unsortable keys: still say something
        text = repr(args)
    if len(text) > MAX_ARGS_CHARS:
        text = text[:MAX_ARGS_CHARS] + "…"
    return drop_invisible(text)


def as_speaker(message: AIMessage, speaker: str | None) -> HumanMessage | None:
    """Another agent's AI message as input naming the speaker (None: nothing to show)."""
    who = label(speaker)
    lines: list[str] = []
    text = drop_invisible(text_of(message))
    if text.strip():
        lines.append(SPEECH_FORMAT.format(speaker=who, text=text))
    for call in [*message.tool_calls, *message.invalid_tool_calls]:
        lines.append(
            TOOL_CALL_FORMAT.format(
                speaker=who,
                tool=label(call.get("name") or "a tool"),
                args=_args_text(call.get("args")),
            )
        )
    if not lines:
        return None
    # The id stays: the view is deterministic and id-keyed middleware still recognise it.
    return HumanMessage(content="\n".join(lines), id=message.id)


def as_tool_report(message: ToolMessage, speaker: str | None, tool: str | None) -> HumanMessage:
    """The result of another agent's tool call as input naming whose call it was."""
    text = drop_invisible(text_of(message))
    if message.status == "error":
        text = f"(error) {text}"
    return HumanMessage(
        content=TOOL_RESULT_FORMAT.format(
            tool=label(message.name or tool or "tool"), speaker=label(speaker), text=text
        ),
        id=message.id,
    )
