"""Property tests: any conversation, any view, any window -> a list every provider accepts.

Conversations are generated with several named speakers and an unnamed one, parallel tool
calls answered at once, later (after other messages), twice or never, results for calls
nobody made, reused call ids, system messages anywhere and messages addressed to some people.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from views_helpers import OPENING, assert_provider_valid, texts

from layered_memory.views import MemorySettings, MessageView, addressed, view_messages

PEOPLE = ["alice", "bob", "carol"]
PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass
class Built:
    messages: list[BaseMessage] = field(default_factory=list)
    reused_ids: bool = False


@st.composite
def conversations(draw: st.DrawFn) -> Built:
    built = Built()
    deferred: list[tuple[int, ToolMessage]] = []  # (messages to wait, result)
    counter = 0

    def next_id() -> str:
        nonlocal counter
        counter += 1
        return f"m{counter}"

    def emit(message: BaseMessage) -> None:
        built.messages.append(message)
        still: list[tuple[int, ToolMessage]] = []
        for wait, result in deferred:
            if wait <= 0:
                built.messages.append(result)
            else:
                still.append((wait - 1, result))
        deferred[:] = still

    recipients = st.one_of(st.none(), st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=2))
    last_call_ids: list[str] = []
    if draw(st.booleans()):  # a pinned system prompt for everyone first
        emit(SystemMessage("standing rules", id=next_id()))
    for _ in range(draw(st.integers(0, 28))):
        kind = draw(st.sampled_from(["system", "human", "human", "ai", "ai", "ai", "orphan"]))
        if kind == "system":
            system = SystemMessage(f"rules {counter}", id=next_id())
            if draw(st.booleans()):  # a per-turn prompt the coordinator sends to some
                system = addressed(system, sender="system", to=draw(recipients))
            emit(system)
        elif kind == "human":
            message = HumanMessage(f"user says {counter}", id=next_id())
            to = draw(recipients)
            if to is not None or draw(st.booleans()):
                message = addressed(message, sender=draw(st.sampled_from(["user", *PEOPLE])), to=to)
            emit(message)
        elif kind == "orphan":
            emit(ToolMessage("orphan", tool_call_id=f"ghost{counter}", id=next_id()))
        else:
            speaker = draw(st.sampled_from([*PEOPLE, None]))
            calls = []
            for _ in range(draw(st.integers(0, 3))):
                if last_call_ids and draw(st.integers(0, 9)) == 0:
                    call_id = draw(st.sampled_from(last_call_ids))
                    built.reused_ids = True
                else:
                    call_id = f"c{counter}_{len(calls)}"
                calls.append({"name": "search", "args": {"n": len(calls)}, "id": call_id})
            last_call_ids = [c["id"] for c in calls] or last_call_ids
            text = draw(st.sampled_from(["", f"{speaker} speaks {counter}"]))
            message = AIMessage(text, name=speaker, tool_calls=calls, id=next_id())
            if speaker is not None and draw(st.integers(0, 4)) == 0:
                message = addressed(message, sender=speaker, to=draw(recipients))
            emit(message)
            immediate = []
            for tool_call in calls:
                fate = draw(st.sampled_from(["now", "now", "now", "later", "never", "twice"]))
                result = ToolMessage(
                    f"result {tool_call['id']}",
                    tool_call_id=tool_call["id"],
                    name="search",
                    id=next_id(),
                )
                if fate in ("now", "twice"):
                    immediate.append(result)
                if fate == "twice":
                    immediate.append(result.model_copy(update={"id": next_id()}))
                if fate == "later":
                    deferred.append((draw(st.integers(0, 3)), result))
            for result in immediate:
                built.messages.append(result)
    built.messages.extend(result for _, result in deferred)
    if draw(st.booleans()):
        built.messages.append(HumanMessage("the newest request", id=next_id()))
    return built


view_settings = st.builds(
    MemorySettings,
    view=st.sampled_from(list(MessageView)),
    max_messages=st.one_of(st.none(), st.integers(0, 8)),
    preserve_system=st.booleans(),
    keep=st.sampled_from([None, lambda m: str(m.id).endswith("7")]),
    forget_earlier_runs=st.booleans(),
)


@PROPERTY_SETTINGS
@given(
    built=conversations(),
    view=view_settings,
    person=st.sampled_from([*PEOPLE, None]),
    run_start=st.one_of(st.none(), st.integers(0, 40)),
)
def test_every_view_is_valid_stable_and_copy_free(
    built: Built, view: MemorySettings, person: str | None, run_start: int | None
) -> None:
    messages = built.messages
    before = copy.deepcopy(messages)

    shown = view_messages(messages, person=person, settings=view, run_start=run_start)

    assert_provider_valid(shown, person=person)
    assert messages == before, "the conversation was edited"
    assert shown == view_messages(messages, person=person, settings=view, run_start=run_start)
    positions = {id(m): i for i, m in enumerate(messages)}
    by_id = {m.id: m for m in messages}
    last_position = -1
    for message in shown:
        if id(message) in positions:  # passed through: same object, conversation order
            if not isinstance(message, ToolMessage):
                assert positions[id(message)] > last_position
                last_position = positions[id(message)]
            continue
        if message.id is None:  # the user turn opening a view that starts with the model's
            assert texts([message]) == [OPENING]
            assert last_position == -1 or isinstance(shown[0], SystemMessage)
            continue
        source = by_id[message.id]
        if isinstance(message, AIMessage):  # the person's own message, calls stripped
            assert isinstance(source, AIMessage)
            assert len(message.tool_calls) < len(source.tool_calls)
        elif isinstance(source, SystemMessage):  # a system message after the start, labelled
            assert isinstance(message, HumanMessage)
            assert message.text.startswith("[system")
        else:  # another agent's words or tool result, as input naming the speaker
            assert isinstance(message, HumanMessage)
            assert isinstance(source, AIMessage | ToolMessage)
        assert positions[id(source)] > last_position
        last_position = positions[id(source)]
    if messages and type(messages[-1]) is HumanMessage and not messages[-1].additional_kwargs:
        assert shown[-1] is messages[-1], "the newest request must always be shown"


@PROPERTY_SETTINGS
@given(
    built=conversations(),
    view=st.sampled_from(list(MessageView)),
    person=st.sampled_from([*PEOPLE, None]),
    limit=st.integers(0, 10),
)
def test_a_bigger_window_shows_a_superset(
    built: Built, view: MessageView, person: str | None, limit: int
) -> None:
    if built.reused_ids:
        return  # a reused id is stripped from whichever use comes second: sets may differ

    def shown_ids(max_messages: int | None) -> set[str | None]:
        settings = MemorySettings(view, max_messages)
        shown = view_messages(built.messages, person=person, settings=settings)
        return {m.id for m in shown if m.id is not None}  # not the user turn opening a view

    small, bigger, unlimited = shown_ids(limit), shown_ids(limit + 1), shown_ids(None)

    assert small <= bigger <= unlimited


@dataclass
class Rounds:
    messages: list[BaseMessage]
    replies: list[str]
    pinned: list[bool]
    """Per round, whether its request is shown whatever the window (the last: the current one)."""


@st.composite
def pinned_rounds(draw: st.DrawFn) -> Rounds:
    """1-60 rounds of a request to alice and her reply, then one more request; each request a
    per-turn system prompt (pinned by `preserve_system`), a message `keep` pins, or an
    unpinned message from bob; sometimes bob talks to carol in between."""
    rounds = draw(st.integers(1, 60))
    choices = draw(st.sampled_from([["system"], ["system", "kept"], ["system", "kept", "bob"]]))
    kinds = draw(st.lists(st.sampled_from(choices), min_size=rounds + 1, max_size=rounds + 1))
    built = Rounds([], [], [kind != "bob" for kind in kinds])
    for number, request_kind in enumerate(kinds):
        if request_kind == "system":
            request: BaseMessage = addressed(
                SystemMessage(f"Round {number}: your turn."), sender="system", to=["alice"]
            )
        elif request_kind == "kept":
            request = HumanMessage(f"Round {number}: your turn.", id=f"kept{number}")
        else:
            request = addressed(
                AIMessage(f"bob asks {number}", name="bob"), sender="bob", to=["alice"]
            )
        built.messages.append(request)
        if number == rounds:
            break  # the current request, unanswered
        if draw(st.booleans()):
            aside = AIMessage("aside", name="bob")
            built.messages.append(addressed(aside, sender="bob", to=["carol"]))
        built.replies.append(f"alice replies {number}")
        built.messages.append(AIMessage(built.replies[-1], name="alice"))
    return built


@PROPERTY_SETTINGS
@given(built=pinned_rounds(), limit=st.sampled_from([20, 5, 2]))
def test_a_pairs_window_shows_the_latest_replies_whatever_is_pinned(
    built: Rounds, limit: int
) -> None:
    settings = MemorySettings(
        MessageView.CONVERSATION_PAIRS, limit, keep=lambda m: str(m.id).startswith("kept")
    )

    shown = view_messages(built.messages, person="alice", settings=settings)

    # The window counts the current request unless it is pinned, then fills from the newest
    # reply back: a reply with its request (2), or alone when its request is pinned (1).
    expected, used = 0, 0 if built.pinned[-1] else 1
    for round_number in range(len(built.replies) - 1, -1, -1):
        used += 1 if built.pinned[round_number] else 2
        if used > limit:
            break
        expected += 1
    replies = [m.text for m in shown if isinstance(m, AIMessage)]
    assert replies == built.replies[len(built.replies) - expected :]
