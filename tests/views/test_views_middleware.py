"""`MessageViewMiddleware` in real agents: create_agent, create_deep_agent and a subagent,
and `view_messages` in a hand-built StateGraph. The stored conversation is never touched."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from views_helpers import assert_provider_valid, texts

from layered_memory.testing import ScriptedChatModel, tool_call
from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    MemorySettings,
    MessageView,
    MessageViewMiddleware,
    addressed,
    view_messages,
)
from layered_memory.views.middleware import RUN_MARK_KEY, run_mark, run_start


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def shared_history(rounds: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("Debate: free public transport?")]
    for i in range(rounds):
        history.append(AIMessage(f"pro {i}", name="optimist"))
        history.append(AIMessage(f"con {i}", name="pessimist"))
    history.append(AIMessage("pro final", name="optimist"))
    return history


def invoke(agent: Any, payload: Any, config: Any = None, *, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(agent.ainvoke(payload, config))
    return agent.invoke(payload, config)


def conversation(prompt: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in prompt if not isinstance(m, SystemMessage)]


@pytest.mark.parametrize("use_async", [False, True])
def test_the_hook_changes_only_the_request(use_async: bool) -> None:
    middleware = MessageViewMiddleware(person="pessimist", profile=MemoryProfile.MINIMAL)
    messages = shared_history(6)
    state = {"messages": list(messages)}
    request = ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=list(messages),
        system_message=SystemMessage("argue against"),
        state=state,  # type: ignore[arg-type]
    )
    seen: list[ModelRequest[Any]] = []

    def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(req)
        return ModelResponse(result=[AIMessage("ok")])

    async def ahandler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        return handler(req)

    if use_async:
        asyncio.run(middleware.awrap_model_call(request, ahandler))
    else:
        middleware.wrap_model_call(request, handler)

    expected = view_messages(
        messages, person="pessimist", settings=MemoryProfileFactory.get_settings("minimal")
    )
    assert seen[0].messages == expected
    assert len(expected) == 5
    assert seen[0].system_message == request.system_message
    assert request.messages == messages  # the caller's request and the state are untouched
    assert state["messages"] == messages


@pytest.mark.parametrize("use_async", [False, True])
def test_create_agent_sees_its_view_and_the_state_keeps_everything(use_async: bool) -> None:
    model = ScriptedChatModel(script=["con final"])
    agent = create_agent(
        model,
        system_prompt="argue against",
        name="pessimist",
        middleware=[MessageViewMiddleware(profile=MemoryProfile.MINIMAL)],
    )
    history = shared_history(6)

    result = invoke(agent, {"messages": history}, use_async=use_async)

    prompt = model.prompts[0]
    assert prompt[0].text == "argue against"
    assert texts(conversation(prompt)) == [
        "Human:[optimist]: pro 4",
        "AI:con 4",
        "Human:[optimist]: pro 5",
        "AI:con 5",
        "Human:[optimist]: pro final",
    ]  # the agent's own name came from create_agent(name=...): its messages stay AI
    assert_provider_valid(prompt, person="pessimist")
    assert [m.text for m in result["messages"]] == [
        *(m.text for m in history),
        "con final",
    ]


@pytest.mark.parametrize("use_async", [False, True])
def test_goldfish_forgets_earlier_runs_of_the_thread(use_async: bool) -> None:
    model = ScriptedChatModel(
        script=[
            "Hello Ada.",
            tool_call("lookup", topic="names"),
            "I cannot know your name.",
        ]
    )
    agent = create_agent(
        model,
        tools=[lookup],
        middleware=[MessageViewMiddleware(profile=MemoryProfile.GOLDFISH)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "goldfish"}}

    invoke(agent, {"messages": [HumanMessage("My name is Ada.")]}, config, use_async=use_async)
    final = invoke(
        agent, {"messages": [HumanMessage("What is my name?")]}, config, use_async=use_async
    )

    second_run = [texts(conversation(prompt)) for prompt in model.prompts[1:]]
    assert second_run[0] == ["Human:What is my name?"]
    assert second_run[1][0] == "Human:What is my name?"  # the current turn stays whole
    assert second_run[1][1:] == ["AI:", "Tool:facts about names"]
    for prompt in model.prompts:
        assert_provider_valid(prompt, person=None)
    assert [m.text for m in final["messages"]][:2] == ["My name is Ada.", "Hello Ada."]
    assert len(final["messages"]) == 6  # nothing forgotten in the stored thread
    mark = agent.get_state(config).values[RUN_MARK_KEY]
    assert mark == {"last_id": final["messages"][-1].id, "count": 6}


def test_a_focused_agent_on_the_same_thread_remembers() -> None:
    model = ScriptedChatModel(script=["Hello Ada.", "You are Ada."])
    agent = create_agent(
        model,
        middleware=[MessageViewMiddleware(profile=MemoryProfile.FOCUSED)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "focused"}}

    agent.invoke({"messages": [HumanMessage("My name is Ada.")]}, config)
    agent.invoke({"messages": [HumanMessage("What is my name?")]}, config)

    assert texts(model.prompts[1]) == [
        "Human:My name is Ada.",
        "AI:Hello Ada.",
        "Human:What is my name?",
    ]


def test_run_marks() -> None:
    messages = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]

    assert run_start(messages, None) is None
    assert run_start(messages, run_mark(messages[:2])) == 2
    assert run_start(messages, {"last_id": "gone", "count": 1}) == 3  # forget, not remember
    assert run_start(messages, {"last_id": None, "count": 1}) == 1  # unnamed messages
    assert run_start(messages, {"last_id": None, "count": 9}) == 3
    assert run_start(messages, "garbage") is None
    assert run_mark([]) == {"last_id": None, "count": 0}


@pytest.mark.parametrize("use_async", [False, True])
def test_deep_agent_and_its_subagent_each_see_their_own_view(use_async: bool) -> None:
    main_model = ScriptedChatModel(
        script=[
            tool_call("task", description="Find facts on fares.", subagent_type="researcher"),
            "Summary sent.",
        ]
    )
    sub_model = ScriptedChatModel(
        script=[tool_call("lookup", topic="fares"), tool_call("lookup", topic="cities"), "Found."]
    )
    agent = create_deep_agent(
        model=main_model,
        tools=[lookup],
        name="lead",
        middleware=[MessageViewMiddleware(profile=MemoryProfile.MINIMAL)],
        subagents=[
            {
                "name": "researcher",
                "description": "Finds facts.",
                "system_prompt": "You research.",
                "model": sub_model,
                "tools": [lookup],
                "middleware": [MessageViewMiddleware(profile=MemoryProfile.GOLDFISH)],
            }
        ],
    )
    history: list[BaseMessage] = []
    for i in range(8):
        history += [HumanMessage(f"question {i}"), AIMessage(f"answer {i}", name="lead")]
    history.append(HumanMessage("Research fares, then summarize."))

    result = invoke(agent, {"messages": history}, use_async=use_async)

    first = conversation(main_model.prompts[0])
    assert texts(first) == [
        "Human:question 6",
        "AI:answer 6",
        "Human:question 7",
        "AI:answer 7",
        "Human:Research fares, then summarize.",
    ]
    after_task = conversation(main_model.prompts[1])
    assert texts(after_task)[-3:][0] == "Human:Research fares, then summarize."
    assert isinstance(after_task[-1], ToolMessage)
    # The subagent's GOLDFISH view keeps its whole current turn: the task and both lookups,
    # as its own AI messages (its name "researcher" came from the run, not from the setup).
    last_sub = conversation(sub_model.prompts[-1])
    assert texts(last_sub) == [
        "Human:Find facts on fares.",
        "AI:",
        "Tool:facts about fares",
        "AI:",
        "Tool:facts about cities",
    ]
    assert {m.name for m in last_sub if isinstance(m, AIMessage)} == {"researcher"}
    for prompt in [*main_model.prompts, *sub_model.prompts]:
        assert_provider_valid(prompt, person=prompt_owner(prompt))
    assert len(result["messages"]) == len(history) + 3


def prompt_owner(prompt: list[BaseMessage]) -> str | None:
    names = {m.name for m in prompt if isinstance(m, AIMessage)}
    return names.pop() if len(names) == 1 else None


@pytest.mark.parametrize("use_async", [False, True])
def test_view_messages_in_a_hand_built_state_graph(use_async: bool) -> None:
    models = {
        "optimist": ScriptedChatModel(script=["pro 1", "pro 2"]),
        "pessimist": ScriptedChatModel(script=["con 1", "con 2"]),
        "judge": ScriptedChatModel(script=["optimist wins"]),
    }
    views = {
        "optimist": MemoryProfileFactory.get_settings(MemoryProfile.FOCUSED),
        "pessimist": MemorySettings(MessageView.CONVERSATION_PAIRS, 2),
        "judge": MemoryProfileFactory.get_settings(MemoryProfile.FULL),
    }

    def node(name: str) -> Any:
        def speak(state: MessagesState) -> dict[str, Any]:
            seen = view_messages(state["messages"], person=name, settings=views[name])
            reply = models[name].invoke([SystemMessage(f"you are the {name}"), *seen])
            to = "user" if name == "judge" else None
            message = AIMessage(reply.text, name=name)
            return {"messages": [addressed(message, sender=name, to=to)]}

        async def aspeak(state: MessagesState) -> dict[str, Any]:
            return speak(state)

        return aspeak if use_async else speak

    graph = StateGraph(MessagesState)
    for name in ("optimist", "pessimist", "judge"):
        graph.add_node(name, node(name))
    graph.add_edge(START, "optimist")
    graph.add_edge("optimist", "pessimist")
    graph.add_conditional_edges(
        "pessimist",
        lambda s: "judge" if sum(m.name == "pessimist" for m in s["messages"]) >= 2 else "optimist",
        ["optimist", "judge"],
    )
    graph.add_edge("judge", END)

    final = invoke(graph.compile(), {"messages": [HumanMessage("topic")]}, use_async=use_async)

    assert [m.text for m in final["messages"]] == [
        "topic",
        "pro 1",
        "con 1",
        "pro 2",
        "con 2",
        "optimist wins",
    ]
    assert texts(conversation(models["judge"].prompts[0])) == [
        "Human:topic",
        "Human:[optimist]: pro 1",
        "Human:[pessimist]: con 1",
        "Human:[optimist]: pro 2",
        "Human:[pessimist]: con 2",
    ]
    # The pessimist's 2-message window: the pair (pro 1 -> con 1) would make 3 with pro 2.
    assert texts(conversation(models["pessimist"].prompts[1])) == ["Human:[optimist]: pro 2"]
    assert texts(conversation(models["optimist"].prompts[1])) == [
        "Human:topic",
        "AI:pro 1",
        "Human:[pessimist]: con 1",
    ]


@pytest.mark.parametrize("persistent", [False, True])
def test_forgetting_earlier_runs_in_a_subgraph_needs_its_own_checkpoints(persistent: bool) -> None:
    model = ScriptedChatModel(script=["a1", "a2"])
    agent = create_agent(
        model,
        name="bot",
        middleware=[
            MessageViewMiddleware(
                settings=MemorySettings(MessageView.ALL_INVOLVED, forget_earlier_runs=True)
            )
        ],
        checkpointer=True if persistent else None,
    )
    graph = StateGraph(MessagesState)
    graph.add_node("bot", agent)
    graph.add_edge(START, "bot")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sub"}}

    app.invoke({"messages": [HumanMessage("q1")]}, config)
    app.invoke({"messages": [HumanMessage("context 2"), HumanMessage("q2")]}, config)

    second = texts(model.prompts[1])
    if persistent:  # the subgraph kept its run mark: run 1 is forgotten
        assert second == ["Human:context 2", "Human:q2"]
    else:  # a fresh subgraph state on every call: no mark, nothing is "earlier"
        assert second == ["Human:q1", "AI:a1", "Human:context 2", "Human:q2"]
