"""Senders and recipients: `addressed()` and the defaults every message has."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from layered_memory.views import ROUTE_KEY, MemorySettings, MessageView, addressed, view_messages
from layered_memory.views._conversation import Conversation, route_of


def test_addressed_returns_a_copy_with_the_route() -> None:
    original = HumanMessage("go", id="m1", additional_kwargs={"other": 1})

    routed = addressed(original, sender="moderator", to=["optimist", "pessimist"])

    assert routed is not original
    assert original.additional_kwargs == {"other": 1}
    assert routed.additional_kwargs == {
        "other": 1,
        ROUTE_KEY: {"sender": "moderator", "to": ["optimist", "pessimist"]},
    }
    assert (routed.content, routed.id, type(routed)) == ("go", "m1", HumanMessage)
    assert route_of(routed) == ("moderator", frozenset({"optimist", "pessimist"}))


def test_addressed_to_one_name_or_everyone() -> None:
    assert route_of(addressed(AIMessage("x"), sender="a", to="b")) == ("a", frozenset({"b"}))
    assert route_of(addressed(AIMessage("x"), sender="a", to=None)) == ("a", None)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"sender": "", "to": None}, ValueError, "sender must be a non-empty"),
        ({"sender": 3, "to": None}, TypeError, "sender must be a str"),
        ({"sender": "a", "to": []}, ValueError, "at least one recipient"),
        ({"sender": "a", "to": ["b", None]}, TypeError, r"to\[1\] must be a str"),
        ({"sender": "a", "to": 5}, TypeError, "to must be a name"),
        ({"sender": "a" * 201, "to": None}, ValueError, "at most 200"),
    ],
)
def test_addressed_rejects_bad_routes(kwargs, error, words) -> None:
    with pytest.raises(error, match=words):
        addressed(HumanMessage("x"), **kwargs)


def test_addressed_rejects_non_messages() -> None:
    with pytest.raises(TypeError, match="BaseMessage"):
        addressed({"role": "user"}, sender="a", to=None)  # type: ignore[type-var]


@pytest.mark.parametrize(
    "route", ["not a dict", {"sender": 5, "to": "b"}, {"to": [1, 2]}, {"sender": "", "to": []}]
)
def test_malformed_routes_are_ignored(route) -> None:
    message = HumanMessage("x", additional_kwargs={ROUTE_KEY: route})

    assert route_of(message) == (None, None)
    assert Conversation([message], "a").sender(0) == "user"


def test_default_senders() -> None:
    messages = [
        SystemMessage("rules"),
        HumanMessage("hi", name="bob"),  # a human message is from the user, whatever its name
        AIMessage("", name="optimist", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1", name="t"),
        AIMessage("mine, unnamed"),
        ToolMessage("orphan", tool_call_id="nobody"),
    ]
    conv = Conversation(messages, "pessimist")

    assert [conv.sender(i) for i in range(5)] == [
        "system",
        "user",
        "optimist",
        "optimist",  # a tool result belongs to whoever made the call
        "pessimist",  # an unnamed AI message is the viewer's own
    ]
    assert [conv.mine(i) for i in range(6)] == [False, False, False, False, True, False]
    assert [conv.to_me(i) for i in range(5)] == [True, True, True, False, True]


def test_explicit_sender_overrides_the_name() -> None:
    message = addressed(AIMessage("x", name="optimist"), sender="judge", to=None)

    assert Conversation([message], "judge").mine(0)


def test_recipients_limit_who_is_involved() -> None:
    messages = [
        addressed(HumanMessage("for the judge only"), sender="user", to="judge"),
        addressed(HumanMessage("for both debaters"), sender="user", to=["optimist", "pessimist"]),
        HumanMessage("for everyone"),
    ]
    involved = MemorySettings(MessageView.ALL_INVOLVED)

    seen_by_optimist = view_messages(messages, person="optimist", settings=involved)
    seen_by_judge = view_messages(messages, person="judge", settings=involved)

    assert [m.text for m in seen_by_optimist] == ["for both debaters", "for everyone"]
    assert [m.text for m in seen_by_judge] == ["for the judge only", "for everyone"]
    # The routed messages pass through as the very objects stored.
    assert seen_by_optimist[0] is messages[1]


def test_routes_survive_a_checkpoint_round_trip() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    graph = StateGraph(MessagesState)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "routes"}}
    routed = addressed(AIMessage("verdict", name="judge"), sender="judge", to=["user"])

    app.invoke({"messages": [routed]}, config)
    stored = app.get_state(config).values["messages"][0]

    assert route_of(stored) == ("judge", frozenset({"user"}))
    shown = view_messages([stored], person="optimist", settings=MemorySettings("all_involved"))
    assert shown == []  # the verdict was for the user only


def test_a_huge_speaker_name_is_cut() -> None:
    shown = view_messages(
        [AIMessage("hi", name="x" * 1_000_000), HumanMessage("?")],
        person="a",
        settings=MemorySettings("all_messages"),
    )

    assert shown[0].text == "[" + "x" * 64 + "]: hi"
