"""`view_messages`: one person's view of a shared conversation, as a pure function.

Use it in a hand-built `StateGraph` node before calling a model; `MessageViewMiddleware` calls
it on every model call of a `create_agent` / `create_deep_agent` agent.

The view of every message (FULL) is built once per conversation prefix and then extended.
A FULL view rewrites every other agent's message as named input, so building it costs time
in the conversation's length (`benchmarks/RESULTS.md`, scenario 8), and an agent asks for it on
every model call while the conversation only grows. The view of a prefix stays the same when
messages are added after it, except for a turn of the person's own with an unanswered call
(its result may still come): `Resume` says how far the view is final. Each call
checks that the conversation still starts with the very same message objects that final part
was built from (`is`, at C speed), reuses it, and builds only the rest.

Never stale: the cache holds the messages it was built from (strong references), so an `id`
cannot be reused by another object while it is cached, and a message that was replaced (an
edit, a removal, a checkpoint loaded into new objects) fails the identity check and the view
is built again. Like LangGraph's reducers, the cache takes messages as values that are
replaced, never changed in place.

**Selecting.** Which messages a view shows: the filter, the pins, the current turn and the window.

The result is a sorted list of indices into the conversation; `assemble` (below) turns it into the
messages the model gets. Three things are shown whatever the view and the window:

- the current turn: the latest message addressed to the person that it has not answered yet,
  and everything the person did since (its tool calls and their results). A view limits what
  an agent remembers from before, never what it is doing now; DiPeO, too, always appends the
  incoming prompt to the filtered history.
- system messages the view shows, when `preserve_system` (outside the count);
- messages `keep` picks (outside the count).

The window then fills the remaining `max_messages` from the newest visible message backwards,
one unit at a time: a tool call with all its results, and under `CONVERSATION_PAIRS` a request
with the reply that answers it. A unit that does not fit ends the window (it stays a suffix).

**Assembling.** From chosen indices to the messages a provider accepts, each speaker named.

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
trust decisions must not rest on it. Labels and relayed text are defused like memory text
(`safety.defuse`): another agent (prompt-injected, say) cannot pass on text that the person
reading the conversation does not see, nor a chat-template token (`<|im_start|>system`,
`[INST]`), a closing turn tag (`</system>`) or a tool-call tag that the model or its runtime
would read as a turn or a call of its own.
"""

from __future__ import annotations

import functools
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from layered_memory.safety.defuse import defuse, drop_invisible
from layered_memory.views._conversation import (
    AI,
    PLAIN_TYPES,
    SYSTEM_KIND,
    TOOL,
    Conversation,
    call_ids,
    check_person,
    kind,
    kind_of_class,
)
from layered_memory.views.settings import MemorySettings, MessageView


def _all(conv: Conversation, index: int) -> bool:  # noqa: ARG001 (one signature for all)
    return True


def _involved(conv: Conversation, index: int) -> bool:
    return conv.mine(index) or conv.to_me(index)


def _sent_by_me(conv: Conversation, index: int) -> bool:
    return conv.mine(index)


def _sent_to_me(conv: Conversation, index: int) -> bool:
    return not conv.mine(index) and conv.to_me(index)


def _system_and_me(conv: Conversation, index: int) -> bool:
    if conv.mine(index):
        return True
    return kind(conv.messages[index]) == SYSTEM_KIND and conv.to_me(index)


Visible = Callable[[Conversation, int], bool]
VISIBLE: dict[MessageView, Visible] = {
    MessageView.ALL_MESSAGES: _all,
    MessageView.ALL_INVOLVED: _involved,
    MessageView.CONVERSATION_PAIRS: _involved,
    MessageView.SENT_BY_ME: _sent_by_me,
    MessageView.SENT_TO_ME: _sent_to_me,
    MessageView.SYSTEM_AND_ME: _system_and_me,
}


def current_turn(conv: Conversation) -> tuple[int, int | None]:
    """`(start, request)`: the person's trailing messages start at `start`; `request` is the
    message they answer (None when the message before them is not addressed to the person)."""
    start = conv.n
    while start > 0 and conv.mine(start - 1):
        start -= 1
    before = start - 1
    if before >= 0 and kind(conv.message(before)) != TOOL and conv.to_me(before):
        return start, before
    return start, None


def _block(conv: Conversation, index: int, chosen: set[int]) -> list[int]:
    """The person's message at `index` with the results of its tool calls (not yet chosen)."""
    unit = [index]
    message = conv.messages[index]
    if kind(message) == AI and call_ids(cast("AIMessage", message)):
        unit.extend(j for j in conv.results_of(index).values() if j not in chosen)
    return unit


def _single_units(
    conv: Conversation, visible: Visible, low: int, high: int, chosen: set[int]
) -> Iterator[list[int]]:
    """Newest first: one message each, a tool call together with its results."""
    for index in range(high - 1, low - 1, -1):
        if index in chosen or not visible(conv, index):
            continue
        if kind(conv.messages[index]) == TOOL and conv.mine(index):
            continue  # shown with the call that asked for it
        if conv.mine(index):
            yield _block(conv, index, chosen)
        else:
            yield [index]


def _pair_units(
    conv: Conversation, visible: Visible, low: int, high: int, chosen: set[int]
) -> Iterator[list[int]]:
    """Newest first: the person's reply with the request it answers; other messages alone.

    A reply's request is the nearest visible message before it that is not the person's own.
    When that request is already shown (a pinned system prompt, a `keep` message), the reply
    is a unit of its own: walking past the request to the reply before it would merge every
    reply of a conversation whose requests are all pinned into one unit, which stops fitting
    the window after 20 rounds and then shows none of them.
    """
    index = high - 1
    while index >= low:
        if index in chosen or not visible(conv, index):
            index -= 1
            continue
        if not conv.mine(index):
            yield [index]
            index -= 1
            continue
        unit: list[int] = []
        while index >= low:
            if not visible(conv, index):
                index -= 1
                continue
            if not conv.mine(index):
                if index not in chosen:
                    unit.append(index)  # the request this reply answers
                    index -= 1
                break
            if index not in chosen and kind(conv.messages[index]) != TOOL:
                unit.extend(_block(conv, index, chosen))
            index -= 1
        yield unit


def shows_everything(settings: MemorySettings, run_start: int | None) -> bool:
    """Whether the view shows every message (FULL): no filter, no window, no run reset."""
    if settings.view is not MessageView.ALL_MESSAGES or settings.max_messages is not None:
        return False
    return not (settings.forget_earlier_runs and run_start is not None)


def select(conv: Conversation, settings: MemorySettings, run_start: int | None) -> list[int]:
    """Indices of the messages the view shows, in conversation order."""
    n = conv.n
    forget = settings.forget_earlier_runs and run_start is not None
    if shows_everything(settings, run_start):
        return list(range(n))
    shown_by_view = VISIBLE[settings.view]

    def visible(conv: Conversation, index: int) -> bool:
        # A tool result no call asked for can never be shown validly: no view includes it.
        if kind(conv.message(index)) == TOOL and conv.caller(index) is None:
            return False
        return shown_by_view(conv, index)

    start, request = current_turn(conv)
    history_end = start if request is None else request

    turn = set(range(start, n))
    if request is not None:
        turn.add(request)
    pinned: set[int] = set()
    if settings.preserve_system:
        # Up to `start`: a system message the person is answering is outside the count too.
        pinned.update(index for index in _system_positions(conv, start) if visible(conv, index))
    if settings.keep is not None:
        pinned.update(_keep_picks(conv, settings))
    chosen = turn | pinned
    for index in list(chosen):
        if kind(conv.message(index)) == TOOL and conv.mine(index):
            caller = conv.caller(index)
            if caller is not None:  # a result is only ever shown with its call
                chosen.add(caller)

    low = 0
    if forget:
        assert run_start is not None
        low = min(max(run_start, 0), history_end)
    limit = settings.max_messages
    if limit is None:
        chosen.update(
            index
            for index in range(low, history_end)
            if index not in chosen and visible(conv, index)
        )
        return sorted(chosen)

    used = len(chosen - pinned)
    units = _pair_units if settings.view is MessageView.CONVERSATION_PAIRS else _single_units
    for unit in units(conv, visible, low, history_end, chosen):
        if used + len(unit) > limit:
            if used == 0 and limit > 0:
                chosen.update(unit)  # never an empty view because one tool block is too big
            break
        chosen.update(unit)
        used += len(unit)
    return sorted(chosen)


def _system_positions(conv: Conversation, end: int) -> list[int]:
    """Indices of the system messages before `end`.

    This is the one pass over the whole conversation a windowed view makes, so it runs at C
    speed: the classes of all messages in one `map`, then `list.index` hops from one system
    message to the next instead of a Python-level test of every message.
    """
    classes = list(map(type, islice(conv.messages, end)))
    positions: list[int] = []
    for cls in set(classes) - PLAIN_TYPES:
        if kind_of_class(cls) != SYSTEM_KIND:
            continue
        position = -1
        while True:
            try:
                position = classes.index(cls, position + 1)
            except ValueError:
                break
            positions.append(position)
    return positions


def _keep_picks(conv: Conversation, settings: MemorySettings) -> Iterator[int]:
    keep = settings.keep
    assert keep is not None
    for index, message in enumerate(conv.messages):
        try:
            wanted = keep(message)
        except Exception as exc:
            exc.add_note(f"raised by MemorySettings.keep on messages[{index}]")
            raise
        if wanted:
            yield index


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
    return defuse(cleaned) or "another agent"


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
    return defuse(text)


def as_speaker(message: AIMessage, speaker: str | None) -> HumanMessage | None:
    """Another agent's AI message as input naming the speaker (None: nothing to show)."""
    who = label(speaker)
    lines: list[str] = []
    text = defuse(text_of(message))
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
    text = defuse(text_of(message))
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
    text = defuse(text_of(message))
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


def view_messages(
    messages: Sequence[BaseMessage],
    *,
    person: str | None,
    settings: MemorySettings,
    run_start: int | None = None,
) -> list[BaseMessage]:
    """What `person` sees of `messages` under `settings`, ready to send to a model.

    The conversation is never changed. Messages shown as they are come back as the very same
    objects; only another agent's messages and later system messages (turned into input naming
    the speaker), the person's AI messages whose tool calls lost their results (those calls
    stripped) and the user turn opening a view that starts with the person's own are new
    objects. The same input always gives an equal output.

    Args:
        messages: The shared conversation, oldest first.
        person: The viewer (an agent's name). None: an agent whose own AI messages are unnamed.
        settings: The view, window and pins (`MemoryProfileFactory.get_settings(...)`).
        run_start: Index of the first message of the current run; with
            `settings.forget_earlier_runs` nothing before it is shown (except system and
            `keep` messages). None: every message belongs to the current run.

    Returns:
        The messages to send, valid for every provider: each tool call answered right after
        it, no tool result without its call, the user's turn first, no other agent's AI
        message shown as the model's own, and system messages only where the conversation
        starts (a later one goes out as input labelled `[system]: ...`).

    Example:
        seen = view_messages(state["messages"], person="optimist",
                             settings=MemoryProfileFactory.get_settings(MemoryProfile.FOCUSED))
        reply = model.invoke([SystemMessage(prompt), *seen])
    """
    person = check_person(person)
    if not isinstance(settings, MemorySettings):
        msg = f"settings must be a MemorySettings, not {type(settings).__name__}"
        raise TypeError(msg)
    if run_start is not None and (isinstance(run_start, bool) or not isinstance(run_start, int)):
        msg = f"run_start must be an int index or None, not {type(run_start).__name__}"
        raise TypeError(msg)
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        msg = f"messages must be a sequence of messages, not {type(messages).__name__}"
        raise TypeError(msg)
    if shows_everything(settings, run_start):
        return view_all(messages, person)  # extended from the last call's, when unchanged
    conversation = Conversation(messages, person)
    return assemble(conversation, select(conversation, settings, run_start))


MAX_CONVERSATIONS = 32
"""Conversations (per viewer) whose FULL view is kept."""
MAX_HELD_MESSAGES = 200_000
"""Message references kept across them: a bound on the memory the cache can hold alive."""
_KEY_MESSAGES = 3


@dataclass(frozen=True, slots=True)
class _Built:
    """A final view prefix and what it was built from."""

    sources: tuple[BaseMessage, ...]
    """`messages[:covered]`: the part of the conversation the final view depends on."""
    index: int
    out: tuple[BaseMessage, ...]
    """The view of `messages[:index]`."""
    used_ids: frozenset[str]

    @property
    def held(self) -> int:
        return len(self.sources) + len(self.out)


class _Kept:
    """The kept views, least recently used first, and the message references they hold."""

    def __init__(self) -> None:
        self.views: OrderedDict[tuple[object, ...], _Built] = OrderedDict()
        self.held = 0


_lock = threading.Lock()
_kept = _Kept()


def view_all(messages: Sequence[BaseMessage], person: str | None) -> list[BaseMessage]:
    """Every message as `person` sees it (the same list `assemble` gives for all indices)."""
    # The first messages name the conversation; a wrong guess only costs a rebuild.
    key = (person, *map(id, islice(messages, _KEY_MESSAGES)))
    with _lock:
        built = _kept.views.get(key)
        if built is not None:
            _kept.views.move_to_end(key)
    conversation = Conversation(messages, person)
    if built is not None and _still_starts_with(messages, built.sources):
        out = list(built.out)
        resume = assemble_rest(conversation, built.index, out, built.used_ids)
    else:
        out = []
        resume = assemble_rest(conversation, 0, out, frozenset())
    _keep(
        key,
        _Built(
            tuple(islice(messages, resume.covered)),
            resume.index,
            tuple(out[: resume.out_length]),
            resume.used_ids,
        ),
    )
    return out


def _still_starts_with(messages: Sequence[BaseMessage], sources: Sequence[BaseMessage]) -> bool:
    if len(messages) < len(sources):
        return False
    # Identity, not equality: an equal copy is another object, and the view hands out the
    # very objects of the conversation.
    return all(map(operator.is_, sources, messages))


def _keep(key: tuple[object, ...], built: _Built) -> None:
    with _lock:
        views = _kept.views
        old = views.pop(key, None)
        if old is not None:
            _kept.held -= old.held
        if built.held > MAX_HELD_MESSAGES:
            return
        views[key] = built
        _kept.held += built.held
        while len(views) > MAX_CONVERSATIONS or _kept.held > MAX_HELD_MESSAGES:
            _key, evicted = views.popitem(last=False)
            _kept.held -= evicted.held


def clear_cache() -> None:
    """Forget every kept view (tests and benchmarks of a cold process)."""
    with _lock:
        _kept.views.clear()
        _kept.held = 0
