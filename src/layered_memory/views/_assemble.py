"""From chosen indices to the messages a provider accepts, each speaker named.

Rules every provider shares (OpenAI, Anthropic, Gemini, Bedrock): each tool call of an AI
message is answered by exactly one tool result, right after that message and before any other
message; no tool result without its call; a conversation never starts with a tool result; the
model's own turns are only its own; system text only before the first turn (Anthropic), which
is the user's (Anthropic, Bedrock). So the person's AI messages go out with their results
pulled up right behind them (a shared conversation may have interleaved them), calls left
without a result are stripped from a copy, other agents' messages and later system messages
become human input naming who spoke, and a user turn opens a view that would start with the
model's. Everything else passes through as the very same objects.

Another agent's messages are shown to the model as input from a named speaker: a model must
never see another agent's words as its own (it would continue them, and providers reject
tool calls it did not make), so another agent's AI message becomes a `HumanMessage` that
names the speaker, with its tool calls folded into one line of text each; the results of its
tool calls, when the view shows them, become human messages too. The label is a convention
the model can read, not a proof of who spoke: an agent can write anything in its text, so
trust decisions must not rest on it. Labels and relayed text go through the package's
`drop_invisible`: another agent (prompt-injected, say) cannot pass on text that the person
reading the conversation does not see.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from layered_memory.core.defuse import drop_invisible
from layered_memory.views._conversation import (
    AI,
    SYSTEM_KIND,
    TOOL,
    Conversation,
    call_ids,
    kind,
)

SPEECH_FORMAT = "[{speaker}]: {text}"
SYSTEM_SPEAKER = "system"
SYSTEM_FROM = "system from {sender}"
OPENING = "[the conversation so far]"
"""The user turn put before a view that would start with the person's own message: Anthropic
and Bedrock reject a conversation whose first turn is the assistant's."""
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


def as_system_note(message: BaseMessage, sender: str | None) -> HumanMessage | None:
    """A system message that is not at the start, as input labelled `[system]: ...`.

    Why not in place: Anthropic accepts system text only before the first turn
    (langchain-anthropic raises "Received multiple non-consecutive system messages", or moves
    one to the top with a warning), Gemini's formatter moves it into the system instruction
    or drops it, and many OpenAI-compatible servers' chat templates refuse it. Why not merged
    into the leading system block: a per-turn prompt ("round 3: answer Bob") would become a
    rule for the whole conversation, contradicted by the next one, and the system prompt
    would change with every such message, so no provider's prompt cache could reuse it.
    DiPeO, too, sends the system's messages to a person as user turns. So it goes out where
    it was said, labelled as other speakers are, in one form for every model.
    """
    text = drop_invisible(text_of(message))
    if not text.strip():
        return None
    speaker = SYSTEM_SPEAKER
    if sender not in (None, SYSTEM_SPEAKER):
        speaker = SYSTEM_FROM.format(sender=label(sender))
    return HumanMessage(content=SPEECH_FORMAT.format(speaker=speaker, text=text), id=message.id)


_CALL_BLOCK_TYPES = frozenset({"tool_use", "tool_call"})


@dataclass(frozen=True, slots=True)
class Resume:
    """How far a view of every message is final, for a later call over the same prefix.

    The view of `conv.messages[:index]` is the first `out_length` messages of the output, and
    it depends on nothing but `conv.messages[:covered]` (a turn of the person's own pulls its
    results up from after it). Only a turn of the person with an unanswered call can change
    when messages are added (its result may still come), so `index` is the first such turn.

    Attributes:
        index: Messages before it are final in the view.
        out_length: How many output messages they make.
        used_ids: Call ids those messages used (a call id goes out once per request).
        covered: The prefix of the conversation that final part depends on.
    """

    index: int
    out_length: int
    used_ids: frozenset[str]
    covered: int


def assemble(conv: Conversation, indices: Iterable[int]) -> list[BaseMessage]:
    """The messages at `indices` (ascending), repaired for the provider and the speaker."""
    out: list[BaseMessage] = []
    _assemble_into(conv, indices, out, set())
    return out


def assemble_rest(
    conv: Conversation, start: int, out: list[BaseMessage], used_ids: frozenset[str]
) -> Resume:
    """Every message from `start` on, appended to `out`, which holds the view of the messages
    before `start` (that used `used_ids`); returns where a later call may resume."""
    return _assemble_into(conv, range(start, conv.n), out, set(used_ids))


def _assemble_into(
    conv: Conversation, indices: Iterable[int], out: list[BaseMessage], used_ids: set[str]
) -> Resume:
    resume: Resume | None = None
    covered = 0  # 1 + the furthest result an own turn before `resume` pulled up
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
                length = len(out)
                complete, furthest, answered = _own_turn(
                    conv, index, cast("AIMessage", message), out, used_ids
                )
                if len(out) > length and (not length or isinstance(out[length - 1], SystemMessage)):
                    # Nothing but the leading system messages before the person's own turn:
                    # only system messages before the first non-system one stay system
                    # messages, so out[length - 1] tells whether the turns have begun.
                    out.insert(length, HumanMessage(OPENING))
                if resume is None:
                    covered = max(covered, furthest + 1)
                    if not complete:
                        # Final up to here: the ids in use before this turn, not its own.
                        before = frozenset(used_ids.difference(answered))
                        resume = Resume(index, length, before, max(covered, index))
            else:
                spoken = as_speaker(cast("AIMessage", message), conv.sender(index))
                if spoken is not None:
                    out.append(spoken)
        elif message_kind == SYSTEM_KIND and not conv.leading_system(index):
            note = as_system_note(message, conv.sender(index))
            if note is not None:
                out.append(note)
        else:
            out.append(message)
    if resume is None:
        resume = Resume(conv.n, len(out), frozenset(used_ids), max(covered, conv.n))
    return resume


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
) -> tuple[bool, int, Iterable[str]]:
    """Append the person's turn with its results; return whether every call was answered,
    the index of the furthest result pulled up (`index` when none) and the ids it used."""
    ids = call_ids(message)
    if not ids:
        content = message.content
        # An empty turn says nothing, and Anthropic refuses one before the last turn
        # (langchain-anthropic drops it, leaving two user turns in a row): left out.
        if content and not (isinstance(content, str) and not content.strip()):
            out.append(message)
        return True, index, ()
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
    pulled = sorted(results[call_id] for call_id in answered)
    out.extend(conv.messages[j] for j in pulled)
    return complete, pulled[-1] if pulled else index, answered


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
