"""The FULL view over a growing conversation: extended from the last call's, never stale."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from test_views_property import PEOPLE, PROPERTY_SETTINGS, Built, conversations

from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    _view,
    view_messages,
)
from layered_memory.views._conversation import Conversation
from layered_memory.views._view import assemble

FULL = MemoryProfileFactory.get_settings(MemoryProfile.FULL)


def _uncached(messages: list[BaseMessage], person: str | None) -> list[BaseMessage]:
    return assemble(Conversation(messages, person), range(len(messages)))


def _assert_same_view(shown: list[BaseMessage], messages: list[BaseMessage], person: Any) -> None:
    """Equal to the view built from scratch, and the very same objects where it passes the
    conversation's own messages through."""
    expected = _uncached(messages, person)
    assert shown == expected
    own = {id(message) for message in messages}
    for got, want in zip(shown, expected, strict=True):
        if id(want) in own:
            assert got is want


@PROPERTY_SETTINGS
@given(
    built=conversations(),
    person=st.sampled_from([*PEOPLE, None]),
    cuts=st.lists(st.integers(0, 60), max_size=4),
    replaced=st.one_of(st.none(), st.integers(0, 60)),
)
def test_a_view_extended_from_an_earlier_call_equals_one_built_from_scratch(
    built: Built, person: str | None, cuts: list[int], replaced: int | None
) -> None:
    messages = built.messages
    _view.clear_cache()
    for cut in [*sorted(cuts), len(messages)]:
        prefix = messages[:cut]
        _assert_same_view(view_messages(prefix, person=person, settings=FULL), prefix, person)
    if replaced is not None and replaced < len(messages):
        # A message replaced by another object (an edit, a checkpoint round trip): rebuilt.
        changed = list(messages)
        source = changed[replaced]
        changed[replaced] = source.model_copy(update={"content": f"edited {source.content}"})
        _assert_same_view(view_messages(changed, person=person, settings=FULL), changed, person)


def _debate(size: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for index in range(size):
        if index % 3 == 0:
            messages.append(HumanMessage(f"q{index}", id=f"h{index}"))
        else:
            messages.append(
                AIMessage(f"a{index}", name=["alice", "bob"][index % 2], id=f"a{index}")
            )
    return messages


def test_a_call_over_an_unchanged_prefix_converts_only_the_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conversions: list[str | None] = []
    real = _view.as_speaker

    def counting(message: AIMessage, speaker: str | None) -> Any:
        conversions.append(message.id)
        return real(message, speaker)

    monkeypatch.setattr(_view, "as_speaker", counting)
    _view.clear_cache()
    messages = _debate(3_000)
    first = view_messages(messages, person="alice", settings=FULL)
    assert len(conversions) == 1_000  # every message of bob's, once

    conversions.clear()
    messages = [*messages, AIMessage("new point", name="bob", id="late")]  # as add_messages
    second = view_messages(messages, person="alice", settings=FULL)

    assert conversions == ["late"]
    assert second[:-1] == first
    assert all(a is b for a, b in zip(first, second, strict=False))  # the same objects again
    assert second[-1].text == "[bob]: new point"


def test_a_replaced_message_is_never_served_from_the_cache() -> None:
    _view.clear_cache()
    messages = _debate(30)
    before = view_messages(messages, person="alice", settings=FULL)
    assert "[bob]: a1" in [m.text for m in before]

    # Same id, new object and content, as a reducer replacing a message by id gives it.
    messages = [messages[0], AIMessage("retracted", name="bob", id="a1"), *messages[2:]]
    after = view_messages(messages, person="alice", settings=FULL)

    assert [m.text for m in after] == [m.text for m in _uncached(messages, "alice")]
    assert "[bob]: retracted" in [m.text for m in after]
    assert "[bob]: a1" not in [m.text for m in after]


def test_an_own_turn_waiting_for_its_result_is_built_again_when_the_result_comes() -> None:
    _view.clear_cache()
    call = {"name": "search", "args": {}, "id": "c1"}
    asked = AIMessage("", name="alice", tool_calls=[call], id="ask")
    messages: list[BaseMessage] = [HumanMessage("go", id="h"), asked, HumanMessage("meanwhile")]

    waiting = view_messages(messages, person="alice", settings=FULL)
    assert [type(m).__name__ for m in waiting] == ["HumanMessage", "HumanMessage"]  # stripped

    messages = [*messages, ToolMessage("found", tool_call_id="c1", id="r")]
    answered = view_messages(messages, person="alice", settings=FULL)

    assert answered == _uncached(messages, "alice")
    assert answered[1] is asked  # the call with its result pulled up right behind it
    assert answered[2] is messages[-1]


def test_the_cache_holds_a_bounded_number_of_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    _view.clear_cache()
    monkeypatch.setattr(_view, "MAX_HELD_MESSAGES", 100)
    small, other, large = _debate(30), _debate(30), _debate(300)

    for messages in (small, other, large):
        assert view_messages(messages, person="alice", settings=FULL) == _uncached(
            messages, "alice"
        )

    assert _view._kept.held <= 100
    assert len(_view._kept.views) == 1  # the large one was not kept; the oldest made room
