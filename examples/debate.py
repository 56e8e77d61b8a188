"""Debate: two agents argue in one shared conversation; a judge reads all of it.

The optimist and the pessimist are `create_agent` agents with FOCUSED views (the last 20
messages, as request/reply pairs); the judge has the FULL view. All three are nodes of one
LangGraph `StateGraph` whose `messages` is the single shared conversation: nothing is ever
removed from it, each agent only *sees* it differently, on each of its model calls. An
opponent's words reach a debater as input naming the speaker (`[pessimist]: ...`), never as
the debater's own.

The scripted models answer from what they were shown, so the printout shows each view: the
debaters' prompts stop growing at 20 messages while the judge reads every argument.

Run:  python examples/debate.py                                   (scripted models, no key)
      python examples/debate.py --rounds 3 --async                  (ainvoke)
      python examples/debate.py --model anthropic:claude-sonnet-4-5  (a real model, needs a key)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from layered_memory.cli.demo import model_failure
from layered_memory.testing import ScriptedChatModel
from layered_memory.views import MemoryProfile, MessageViewMiddleware

TOPIC = "Should every city make its public transport free?"
DEBATERS = ("optimist", "pessimist")
PROMPTS = {
    "optimist": f"You argue FOR this motion: {TOPIC} Answer the last argument in two sentences.",
    "pessimist": f"You argue AGAINST this motion: {TOPIC} Answer the last argument in two "
    "sentences.",
    "judge": f"You judge a debate on: {TOPIC} Weigh every argument, then name the winner.",
}


def _conversation(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def _speaker(message: BaseMessage) -> str:
    """Who said it, as the view labels it (`[name]: ...`), or "the user"."""
    if isinstance(message, HumanMessage) and message.text.startswith("["):
        return message.text[1 : message.text.find("]")]
    return "the user"


def debater_script(messages: list[BaseMessage]) -> str:
    """A scripted debater: says how much of the debate it sees and whom it answers."""
    seen = _conversation(messages)
    return f"I see {len(seen)} messages and answer {_speaker(seen[-1])}."


def judge_script(messages: list[BaseMessage]) -> str:
    """A scripted judge: counts the arguments it was shown, per speaker."""
    seen = _conversation(messages)
    counts = {name: sum(_speaker(m) == name for m in seen) for name in DEBATERS}
    return (
        f"I see {len(seen)} messages: {counts['optimist']} arguments for, "
        f"{counts['pessimist']} against. A scripted judge calls it a draw."
    )


def scripted_models(rounds: int) -> dict[str, Any]:
    """One scripted model per agent: each debater speaks once a round, the judge once."""
    return {
        **{name: ScriptedChatModel(script=[debater_script] * rounds) for name in DEBATERS},
        "judge": ScriptedChatModel(script=[judge_script]),
    }


def build_debate(models: dict[str, Any], *, rounds: int) -> Any:
    """The debate graph: optimist -> pessimist, `rounds` times, then the judge."""

    def agent(name: str, profile: MemoryProfile) -> Any:
        return create_agent(
            models[name],
            system_prompt=PROMPTS[name],
            name=name,  # names the agent's messages: that is how views tell speakers apart
            middleware=[MessageViewMiddleware(profile=profile)],
        )

    def next_speaker(state: MessagesState) -> str:
        spoken = sum(isinstance(m, AIMessage) and m.name == "pessimist" for m in state["messages"])
        return "optimist" if spoken < rounds else "judge"

    graph = StateGraph(MessagesState)
    graph.add_node("optimist", agent("optimist", MemoryProfile.FOCUSED))
    graph.add_node("pessimist", agent("pessimist", MemoryProfile.FOCUSED))
    graph.add_node("judge", agent("judge", MemoryProfile.FULL))
    graph.add_edge(START, "optimist")
    graph.add_edge("optimist", "pessimist")
    graph.add_conditional_edges("pessimist", next_speaker, ["optimist", "judge"])
    graph.add_edge("judge", END)
    return graph.compile()


def run(models: dict[str, Any], *, rounds: int, use_async: bool = False) -> dict[str, Any]:
    """Play the debate; return the final state (the whole shared conversation)."""
    debate = build_debate(models, rounds=rounds)
    start = {"messages": [HumanMessage(f"Debate: {TOPIC}")]}
    config = {"recursion_limit": 10 * rounds + 20}
    if use_async:
        return asyncio.run(debate.ainvoke(start, config))  # type: ignore[no-any-return]
    return debate.invoke(start, config)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line entry point; returns the final state for tests."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12, help="optimist/pessimist exchanges")
    parser.add_argument("--async", dest="use_async", action="store_true", help="use ainvoke")
    parser.add_argument("--model", help="a real model as provider:name (needs its API key)")
    args = parser.parse_args(argv)
    if args.model:
        from langchain.chat_models import init_chat_model

        models = dict.fromkeys(PROMPTS, init_chat_model(args.model))
    else:
        models = scripted_models(args.rounds)
    state = run(models, rounds=args.rounds, use_async=args.use_async)
    for message in state["messages"]:
        speaker = message.name if isinstance(message, AIMessage) else "user"
        print(f"{speaker:>10}: {message.text}")
    print(f"\nThe shared conversation holds {len(state['messages'])} messages; none was removed.")
    return state


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as exc:
        line = model_failure("debate.py", sys.argv[1:], exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
