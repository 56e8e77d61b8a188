"""Which messages a view shows: the filter, the pins, the current turn and the window.

The result is a sorted list of indices into the conversation; `_assemble` turns it into the
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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import cast

from langchain_core.messages import AIMessage

from layered_memory.views._conversation import (
    AI,
    PLAIN_TYPES,
    SYSTEM_KIND,
    TOOL,
    Conversation,
    call_ids,
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
        pinned.update(_kept(conv, settings))
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


def _kept(conv: Conversation, settings: MemorySettings) -> Iterator[int]:
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
