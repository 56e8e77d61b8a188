"""Every profile's view, sent through the real provider formatters that run offline.

langchain-anthropic, langchain-openai (Chat Completions and Responses) and
langchain-google-genai build the request body a model call would send
(`_get_request_payload` / `_prepare_request`, the methods `invoke` calls before the network):
each must accept the view without an error or a warning, and the body must keep the rules
the providers' APIs enforce: no system text after the first turn, the first turn the user's,
every tool call answered right after it and nothing else in between, no empty turn, and no
message of the view lost or moved into the system prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_openai import ChatOpenAI
from test_views_property import PEOPLE, PROPERTY_SETTINGS, Built, conversations
from views_helpers import OPENING, texts

from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    MemorySettings,
    MessageView,
    addressed,
    view_messages,
)

AGENT_PROMPT = SystemMessage("You are one of the debaters.")
PROFILES = [profile for profile in MemoryProfile if profile is not MemoryProfile.CUSTOM]

ANTHROPIC = ChatAnthropic(model="claude-sonnet-4-5", api_key="offline")  # type: ignore[call-arg]
OPENAI = ChatOpenAI(model="gpt-4.1", api_key="offline")  # type: ignore[arg-type]
OPENAI_RESPONSES = ChatOpenAI(model="gpt-4.1", api_key="offline", use_responses_api=True)  # type: ignore[arg-type]
GEMINI = ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="offline")  # type: ignore[call-arg]


def debate(rounds: int) -> list[BaseMessage]:
    """A coordinator's debate: a pinned system prompt, then per round a system prompt to
    alice, her reply (a search every other round), a system prompt to bob and his reply."""
    messages: list[BaseMessage] = [SystemMessage("Debate rules: be brief, cite sources.")]
    for number in range(1, rounds + 1):
        messages.append(
            addressed(SystemMessage(f"Round {number}: argue for."), sender="system", to="alice")
        )
        if number % 2 == 0:
            call = {"name": "search", "args": {"q": f"round {number}"}, "id": f"s{number}"}
            messages.append(AIMessage("", name="alice", tool_calls=[call]))
            messages.append(ToolMessage(f"found {number}", tool_call_id=f"s{number}"))
        messages.append(AIMessage(f"alice argues {number}", name="alice"))
        messages.append(
            addressed(SystemMessage(f"Round {number}: argue against."), sender="system", to="bob")
        )
        messages.append(AIMessage(f"bob argues {number}", name="bob"))
    messages.append(
        addressed(SystemMessage(f"Round {rounds + 1}: argue for."), sender="system", to="alice")
    )
    for index, message in enumerate(messages):
        message.id = f"m{index}"
    return messages


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    return [block["text"] for block in content if block.get("type") == "text" and block["text"]]


def anthropic_problems(view: Sequence[BaseMessage]) -> list[str]:
    payload = ANTHROPIC._get_request_payload([AGENT_PROMPT, *view])
    turns = payload["messages"]
    problems = []
    if turns and turns[0]["role"] != "user":
        problems.append("the first turn is not the user's")
    for position, turn in enumerate(turns):
        content = turn["content"]
        if not content and position < len(turns) - 1:
            problems.append(f"#{position}: empty {turn['role']} turn")
        if position and turn["role"] == "user" == turns[position - 1]["role"]:
            problems.append(f"#{position}: two user turns in a row")  # the formatter merges them
        blocks = content if isinstance(content, list) else []
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        calls_before: list[str] = []
        if position and isinstance(turns[position - 1]["content"], list):
            before = turns[position - 1]
            calls_before = [b["id"] for b in before["content"] if b.get("type") == "tool_use"]
        if results and (
            sorted(results) != sorted(calls_before)
            or any(b.get("type") != "tool_result" for b in blocks[: len(results)])
        ):
            problems.append(f"#{position}: tool results {results} do not answer {calls_before}")
        calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if calls:
            after = turns[position + 1]["content"] if position + 1 < len(turns) else []
            answered = [b.get("tool_use_id") for b in after if isinstance(b, dict)]
            if sorted(calls) != sorted(answered[: len(calls)]):
                problems.append(f"#{position}: tool calls {calls} not answered right after")
    leading = _leading_system_texts(view)
    system = payload.get("system")
    if _texts(system) != [AGENT_PROMPT.text, *leading]:
        problems.append(f"system prompt {system!r} is not the agent's prompt + leading system")
    return problems


def openai_problems(view: Sequence[BaseMessage]) -> list[str]:
    turns = OPENAI._get_request_payload([AGENT_PROMPT, *view])["messages"]
    problems = []
    started = False
    pending: list[str] = []
    for position, turn in enumerate(turns):
        role = turn["role"]
        if role in ("system", "developer"):
            if started:
                problems.append(f"#{position}: {role} message after the first turn")
            continue
        started = True
        if role == "tool":
            if turn["tool_call_id"] not in pending:
                problems.append(f"#{position}: tool result without its call")
            else:
                pending.remove(turn["tool_call_id"])
            continue
        if pending:
            problems.append(f"#{position}: calls {pending} not answered")
        pending = [call["id"] for call in turn.get("tool_calls") or []]
    if pending:
        problems.append(f"end: calls {pending} not answered")
    return problems


def openai_responses_problems(view: Sequence[BaseMessage]) -> list[str]:
    items = OPENAI_RESPONSES._get_request_payload([AGENT_PROMPT, *view])["input"]
    problems = []
    started = False
    pending: list[str] = []
    for position, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call_output":
            if item["call_id"] not in pending:
                problems.append(f"#{position}: function output without its call")
            else:
                pending.remove(item["call_id"])
            continue
        if kind == "function_call":
            pending.append(item["call_id"])
            continue
        if pending:
            problems.append(f"#{position}: calls {pending} not answered")
            pending = []
        if item.get("role") in ("system", "developer"):
            if started:
                problems.append(f"#{position}: system message after the first turn")
        else:
            started = True
    if pending:
        problems.append(f"end: calls {pending} not answered")
    return problems


def gemini_problems(view: Sequence[BaseMessage]) -> list[str]:
    request = GEMINI._prepare_request([AGENT_PROMPT, *view])
    contents = request["contents"]
    instruction = request["config"].system_instruction
    problems = []
    shown = [part.text for part in instruction.parts or [] if part.text] if instruction else []
    if shown != [AGENT_PROMPT.text, *_leading_system_texts(view)]:
        problems.append(f"system instruction {shown} is not the agent's prompt + leading system")
    if contents and contents[0].role != "user":
        problems.append("the first turn is not the user's")
    for position, content in enumerate(contents):
        calls = [part.function_call for part in content.parts or [] if part.function_call]
        if not calls:
            continue
        after = contents[position + 1] if position + 1 < len(contents) else None
        responses = [p.function_response for p in (after.parts or [])] if after else []
        if after is None or after.role != "user" or len(responses) != len(calls):
            problems.append(f"#{position}: function calls not answered right after")
    sent = [part.text for content in contents for part in content.parts or [] if part.text]
    for message in view:
        if isinstance(message, SystemMessage | ToolMessage):
            continue  # in the system instruction (checked above), or a function response
        if message.text and message.text not in sent:
            problems.append(f"{message.text!r} was not sent")
    return problems


FORMATTERS = {
    "anthropic": anthropic_problems,
    "openai": openai_problems,
    "openai-responses": openai_responses_problems,
    "gemini": gemini_problems,
}


def _leading_system_texts(view: Sequence[BaseMessage]) -> list[str]:
    leading = []
    for message in view:
        if not isinstance(message, SystemMessage):
            break
        leading.append(message.text)
    return leading


@pytest.mark.parametrize("provider", list(FORMATTERS))
@pytest.mark.parametrize("rounds", [1, 5, 20])
@pytest.mark.parametrize("profile", PROFILES, ids=lambda profile: profile.name)
def test_every_profile_of_a_debate_with_per_turn_system_prompts_is_accepted(
    profile: MemoryProfile, rounds: int, provider: str
) -> None:
    settings = MemoryProfileFactory.get_settings(profile)

    view = view_messages(debate(rounds), person="alice", settings=settings)

    assert FORMATTERS[provider](view) == []
    # The round alice must answer now is shown, as input labelled as the system's.
    assert view[-1].text == f"[system]: Round {rounds + 1}: argue for."


def test_only_the_leading_system_messages_stay_system_messages() -> None:
    settings = MemoryProfileFactory.get_settings(MemoryProfile.FULL)

    view = view_messages(debate(2), person="alice", settings=settings)

    # The conversation's own first messages stay its system prompt; later ones are input,
    # where they were said (bob's per-turn prompts included: FULL shows everything). Alice
    # spoke first: a user turn opens the view.
    assert texts(view[:4]) == [
        "System:Debate rules: be brief, cite sources.",
        "System:Round 1: argue for.",
        OPENING,
        "AI:alice argues 1",
    ]
    assert [m.text for m in view if m.text.startswith("[system]")] == [
        "[system]: Round 1: argue against.",
        "[system]: Round 2: argue for.",
        "[system]: Round 2: argue against.",
        "[system]: Round 3: argue for.",
    ]


def test_a_system_message_from_a_named_sender_says_so() -> None:
    messages = [
        SystemMessage("rules"),
        AIMessage("hello", name="bob"),
        addressed(SystemMessage("wrap up"), sender="judge", to="alice"),
    ]
    settings = MemoryProfileFactory.get_settings(MemoryProfile.FULL)

    view = view_messages(messages, person="alice", settings=settings)

    assert view[-1].text == "[system from judge]: wrap up"


view_settings = st.one_of(
    st.sampled_from([MemoryProfileFactory.get_settings(profile) for profile in PROFILES]),
    st.builds(
        MemorySettings,
        view=st.sampled_from(list(MessageView)),
        max_messages=st.one_of(st.none(), st.integers(0, 8)),
        preserve_system=st.booleans(),
    ),
)


@PROPERTY_SETTINGS
@given(
    built=conversations(),
    settings=view_settings,
    person=st.sampled_from([*PEOPLE, None]),
    run_start=st.one_of(st.none(), st.integers(0, 40)),
)
def test_every_generated_view_is_accepted_by_every_provider(
    built: Built, settings: MemorySettings, person: str | None, run_start: int | None
) -> None:
    view = view_messages(built.messages, person=person, settings=settings, run_start=run_start)

    for provider, problems in FORMATTERS.items():
        assert problems(view) == [], provider
