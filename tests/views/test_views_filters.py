"""Each view, the window, the pins and the current turn, on one small shared debate."""

from __future__ import annotations

import copy

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from views_helpers import OPENING, assert_provider_valid, texts

from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    MemorySettings,
    MessageView,
    addressed,
    view_messages,
)

PRO_CHECK = '[optimist]: checking\n[optimist called search({"q": "x"})]'


def debate() -> list[BaseMessage]:
    return [
        SystemMessage("rules", id="0"),
        HumanMessage("topic", id="1"),
        AIMessage("pro 1", name="optimist", id="2"),
        AIMessage("con 1", name="pessimist", id="3"),
        AIMessage(
            "checking",
            name="optimist",
            id="4",
            tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c1"}],
        ),
        ToolMessage("42", tool_call_id="c1", name="search", id="5"),
        AIMessage("pro 2", name="optimist", id="6"),
        addressed(HumanMessage("note for the judge", id="7"), sender="user", to="judge"),
        AIMessage("con 2", name="pessimist", id="8"),
        AIMessage("pro 3", name="optimist", id="9"),
    ]


def seen(view: MessageView | str, *, person: str = "pessimist", **settings: object) -> list[str]:
    messages = debate()
    shown = view_messages(messages, person=person, settings=MemorySettings(view, **settings))  # type: ignore[arg-type]
    assert_provider_valid(shown, person=person)
    return texts(shown)


def test_all_messages_shows_everything_with_others_as_named_input() -> None:
    assert seen(MessageView.ALL_MESSAGES) == [
        "System:rules",
        "Human:topic",
        "Human:[optimist]: pro 1",
        "AI:con 1",
        f"Human:{PRO_CHECK}",
        "Human:[search result for optimist]: 42",
        "Human:[optimist]: pro 2",
        "Human:note for the judge",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]


@pytest.mark.parametrize("view", [MessageView.ALL_INVOLVED, MessageView.CONVERSATION_PAIRS])
def test_all_involved_and_pairs_leave_out_what_others_keep_between_them(view) -> None:
    assert seen(view) == [
        "System:rules",
        "Human:topic",
        "Human:[optimist]: pro 1",
        "AI:con 1",
        f"Human:{PRO_CHECK}",
        "Human:[optimist]: pro 2",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]


def test_sent_by_me_keeps_my_messages_and_the_request_i_answer() -> None:
    # A user turn opens a view that would start with the person's own message.
    assert seen(MessageView.SENT_BY_ME) == [
        OPENING,
        "AI:con 1",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]


def test_sent_to_me_keeps_what_others_sent_me() -> None:
    assert seen(MessageView.SENT_TO_ME) == [
        "System:rules",
        "Human:topic",
        "Human:[optimist]: pro 1",
        f"Human:{PRO_CHECK}",
        "Human:[optimist]: pro 2",
        "Human:[optimist]: pro 3",
    ]


def test_system_and_me() -> None:
    assert seen(MessageView.SYSTEM_AND_ME) == [
        "System:rules",
        OPENING,
        "AI:con 1",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]


def test_the_judge_sees_everything_addressed_to_it() -> None:
    shown = seen(MessageView.SENT_TO_ME, person="judge")

    assert "Human:note for the judge" in shown
    assert "Human:[pessimist]: con 2" in shown


def test_pairs_window_moves_by_whole_pairs() -> None:
    # Last 4: the request now (pro 3), the pair (pro 2 -> con 2), then pro 2's predecessor
    # "checking" alone; the pair (pro 1 -> con 1) would make 6.
    assert seen(MessageView.CONVERSATION_PAIRS, max_messages=4) == [
        "System:rules",
        f"Human:{PRO_CHECK}",
        "Human:[optimist]: pro 2",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]
    # With 3 the pair still fits; with 2 it does not, and the window ends there.
    assert seen(MessageView.CONVERSATION_PAIRS, max_messages=3)[1:] == [
        "Human:[optimist]: pro 2",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]
    assert seen(MessageView.CONVERSATION_PAIRS, max_messages=2) == [
        "System:rules",
        "Human:[optimist]: pro 3",
    ]


def test_message_window_keeps_the_last_n_after_filtering() -> None:
    assert seen(MessageView.ALL_INVOLVED, max_messages=3) == [
        "System:rules",
        "Human:[optimist]: pro 2",
        "AI:con 2",
        "Human:[optimist]: pro 3",
    ]


def test_system_messages_count_when_not_preserved() -> None:
    shown = seen(MessageView.ALL_INVOLVED, max_messages=3, preserve_system=False)

    assert shown == ["Human:[optimist]: pro 2", "AI:con 2", "Human:[optimist]: pro 3"]
    full = seen(MessageView.ALL_INVOLVED, max_messages=100, preserve_system=False)
    assert full[0] == "System:rules"  # still shown while it fits


def test_zero_shows_only_the_current_turn() -> None:
    assert seen(MessageView.ALL_INVOLVED, max_messages=0) == [
        "System:rules",
        "Human:[optimist]: pro 3",
    ]


def test_keep_pins_priority_messages_outside_the_count() -> None:
    shown = seen(MessageView.SENT_BY_ME, max_messages=1, keep=lambda m: m.text == "topic")

    # The topic is not the pessimist's, yet `keep` shows it, without using the one slot.
    assert shown == ["Human:topic", "Human:[optimist]: pro 3"]
    shown = seen(MessageView.ALL_INVOLVED, max_messages=2, keep=lambda m: m.id == "3")
    assert shown == ["System:rules", OPENING, "AI:con 1", "AI:con 2", "Human:[optimist]: pro 3"]


def test_keep_on_a_tool_result_brings_its_call() -> None:
    messages = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[{"name": "read", "args": {}, "id": "r1"}]),
        ToolMessage("the brief", tool_call_id="r1"),
        AIMessage("noted"),
        HumanMessage("next"),
        AIMessage("ok"),
        HumanMessage("and now?"),
    ]
    settings = MemorySettings(
        MessageView.ALL_INVOLVED, 1, keep=lambda m: isinstance(m, ToolMessage)
    )

    shown = view_messages(messages, person=None, settings=settings)

    assert shown[1:] == [messages[1], messages[2], messages[6]]
    assert texts(shown[:1]) == [OPENING]


def test_a_keep_predicate_that_raises_says_where() -> None:
    def fragile(message: BaseMessage) -> bool:
        return message.content.startswith("x")  # type: ignore[union-attr]

    messages = [HumanMessage("a"), HumanMessage([{"type": "text", "text": "b"}])]

    with pytest.raises(AttributeError) as error:
        view_messages(messages, person="a", settings=MemorySettings("sent_to_me", keep=fragile))
    assert "raised by MemorySettings.keep on messages[1]" in error.value.__notes__


def test_forgetting_earlier_runs() -> None:
    messages = [
        SystemMessage("rules"),
        HumanMessage("my name is Ada"),
        AIMessage("hello Ada"),
        HumanMessage("context of run 2"),  # run 2 starts here
        AIMessage("noted"),
        HumanMessage("what is my name?"),
    ]
    settings = MemorySettings(MessageView.ALL_INVOLVED, forget_earlier_runs=True)

    shown = view_messages(messages, person=None, settings=settings, run_start=3)

    assert shown == [messages[0], messages[3], messages[4], messages[5]]
    # Without a run start (first run) nothing is earlier; without the flag it is ignored.
    assert view_messages(messages, person=None, settings=settings) == messages
    plain = MemorySettings(MessageView.ALL_INVOLVED)
    assert view_messages(messages, person=None, settings=plain, run_start=3) == messages


def test_goldfish_keeps_only_the_current_request_of_a_new_run() -> None:
    messages = [
        HumanMessage("q1"),
        AIMessage("a1"),
        HumanMessage("q2"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "x"}]),
        ToolMessage("r", tool_call_id="x"),
    ]
    settings = MemoryProfileFactory.get_settings(MemoryProfile.GOLDFISH)

    shown = view_messages(messages, person=None, settings=settings, run_start=2)

    assert shown == messages[2:]  # the current turn stays whole, even over the limit of 2


def test_the_current_turn_survives_any_view_and_window() -> None:
    messages = [
        HumanMessage("old"),
        AIMessage("old answer"),
        HumanMessage("do the job"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "a"}]),
        ToolMessage("1", tool_call_id="a"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "b"}]),
        ToolMessage("2", tool_call_id="b"),
    ]
    for view in MessageView:
        shown = view_messages(messages, person=None, settings=MemorySettings(view, 0))
        assert shown == messages[2:], view


def test_a_request_for_someone_else_is_not_the_current_turn() -> None:
    messages = [
        HumanMessage("for all"),
        AIMessage("me"),
        addressed(HumanMessage("for the judge"), sender="user", to="judge"),
    ]

    shown = view_messages(messages, person=None, settings=MemorySettings("all_involved", 0))

    assert shown == []


def test_a_view_is_never_empty_because_one_block_is_too_big() -> None:
    messages = [
        HumanMessage("task"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": f"c{i}"} for i in range(3)]),
        *[ToolMessage(str(i), tool_call_id=f"c{i}") for i in range(3)],
        addressed(HumanMessage("for the judge"), sender="user", to="judge"),
    ]

    shown = view_messages(messages, person="me", settings=MemorySettings("sent_by_me", 1))

    # No current turn (the last message is not for "me"), and the newest block needs 4 slots.
    assert shown[1:] == messages[1:5]
    assert texts(shown[:1]) == [OPENING]


@pytest.mark.parametrize("view", list(MessageView))
@pytest.mark.parametrize("limit", [None, 0, 1, 3, 20])
def test_unchanged_messages_are_the_same_objects_and_output_is_stable(view, limit) -> None:
    messages = debate()
    before = copy.deepcopy(messages)
    settings = MemorySettings(view, limit)

    first = view_messages(messages, person="pessimist", settings=settings)
    second = view_messages(messages, person="pessimist", settings=settings)

    assert first == second
    assert messages == before  # the conversation is never edited
    by_id = {m.id: m for m in messages}
    for message in first:
        if texts([message]) == [OPENING]:
            continue
        source = by_id[message.id]
        if isinstance(source, HumanMessage | SystemMessage) or source.name == "pessimist":
            assert message is source  # passed through: the very object, no copy
        else:  # another agent's message or tool result: new input naming the speaker
            assert isinstance(message, HumanMessage)
            assert message is not source


def test_no_person_means_unnamed_ai_messages_are_mine() -> None:
    messages = [HumanMessage("hi"), AIMessage("hello"), AIMessage("I am bob", name="bob")]

    shown = view_messages(messages, person=None, settings=MemorySettings("all_messages"))

    assert texts(shown) == ["Human:hi", "AI:hello", "Human:[bob]: I am bob"]


def test_full_profile_on_a_plain_single_agent_thread_changes_nothing() -> None:
    messages = [
        HumanMessage("q"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "a"}]),
        ToolMessage("r", tool_call_id="a"),
        AIMessage("answer"),
        HumanMessage("q2"),
    ]
    settings = MemoryProfileFactory.get_settings(MemoryProfile.FULL)

    shown = view_messages(messages, person=None, settings=settings)

    assert shown == messages
    assert all(a is b for a, b in zip(shown, messages, strict=True))


def test_bad_arguments() -> None:
    settings = MemorySettings("all_messages")
    with pytest.raises(TypeError, match="settings must be a MemorySettings"):
        view_messages([], person="a", settings="full")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run_start must be an int"):
        view_messages([], person="a", settings=settings, run_start="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages must be a sequence"):
        view_messages("hello", person="a", settings=settings)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reserved"):
        view_messages([], person="system", settings=settings)
    with pytest.raises(TypeError, match=r"messages\[1\] is a dict"):
        view_messages([HumanMessage("a"), {"role": "user"}], person="a", settings=settings)  # type: ignore[list-item]
    assert view_messages([], person="a", settings=settings) == []
