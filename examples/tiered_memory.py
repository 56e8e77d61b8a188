"""Tiered conversational memory (MemoryOS): an agent that remembers a user across sessions.

Eleven short sessions with one user ("ada") and one with another ("bob"), each a new thread,
so the agent's own message history never carries anything over: what it knows of earlier
sessions comes from `TieredMemoryMiddleware` only.

- Early sessions plant facts ("My dentist is Dr Alvarez") among small talk.
- Pages move from short-term (7 pages) to mid-term topic segments; a segment whose heat reaches
  τ = 5 is promoted to long-term memory (without a model: its keywords and the user's
  statements; with `--model`: one extraction call).
- The last session asks about the facts; the scripted model answers from the `<tiered_memory>`
  block in its system prompt. Bob asks the same and gets nothing of Ada's.

Run:  python examples/tiered_memory.py                               (scripted model, no key)
      python examples/tiered_memory.py --async                       (ainvoke: async hooks)
      python examples/tiered_memory.py --model anthropic:claude-sonnet-4-5   (a real model)
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from layered_memory.cli.demo import model_failure
from layered_memory.testing import LexicalEmbeddings, ScriptedChatModel, system_text
from layered_memory.tiers import TieredMemory, TieredMemoryMiddleware

STOP = {"what", "who", "where", "is", "my", "the", "a", "and", "his", "her", "called", "me"}


def tokens(text: str) -> list[str]:
    """Lowercase words without the question words a scripted model should not match on."""
    return [word for word in re.findall(r"\w+", text.lower()) if word not in STOP]


SESSIONS: list[list[str]] = [
    ["Hi! My dentist is Dr Alvarez, remind me of that someday.", "Any tips for pasta sauce?"],
    ["My dentist Dr Alvarez moved his office to Rua Augusta.", "What should I cook tonight?"],
    ["I have a dentist appointment with Dr Alvarez next Tuesday.", "Is it going to rain?"],
    ["My dentist Dr Alvarez said to floss daily.", "Recommend a thriller film."],
    ["My cat Pixel hates the vacuum cleaner.", "How do I bake bread?"],
    ["Pixel the cat sleeps on my keyboard.", "Any hiking trails near Sintra?"],
    ["I bought Pixel a new cat tree.", "How long should I boil eggs?"],
    ["Pixel my cat turned five today.", "What's a good stretching routine?"],
    ["Remind me to call my sister Clara.", "Is tea healthier than coffee?"],
    ["Clara my sister lives in Porto.", "Suggest a podcast about history."],
    ["Who is my dentist and where is his office?", "What is my cat called?"],
]


def scripted_answer(messages: list[BaseMessage]) -> str:
    """Answer like a model reading its memory: quote the best matching remembered line."""
    prompt, question = system_text(messages), messages[-1].text
    if "<tiered_memory>" not in prompt:
        return "I don't remember anything about you yet."
    words = set(tokens(question))
    lines = [line for line in prompt.splitlines() if line.startswith(("U: ", "A: ", "- "))]
    best = max(lines, key=lambda line: len(words & set(tokens(line))), default="")
    if not words & set(tokens(best)):
        return "Noted."
    said = best[3:] if best.startswith(("U: ", "A: ")) else best
    return f"From memory: {said[:120]}"


def build_agent(model_name: str | None) -> tuple[Any, TieredMemory]:
    clock = iter(range(1_700_000_000, 1_800_000_000, 3 * 3600))
    memory = TieredMemory(
        InMemoryStore(), embeddings=LexicalEmbeddings(), clock=lambda: next(clock)
    )
    if model_name:
        from langchain.chat_models import init_chat_model

        model: Any = init_chat_model(model_name)
    else:
        model = ScriptedChatModel(script=[], default=None)
        model.script = [scripted_answer] * 100
    agent = create_agent(
        model, tools=[], middleware=[TieredMemoryMiddleware(memory, max_chars=4000)]
    )
    return agent, memory


async def run(model_name: str | None = None, *, use_async: bool = False) -> dict[str, Any]:
    """Play the sessions; return the answers of the last session and Bob's, and the tiers."""
    agent, memory = build_agent(model_name)
    answers: dict[str, list[str]] = {"ada": [], "bob": []}

    async def ask(user: str, text: str, thread: str) -> str:
        inputs = {"messages": [("user", text)]}
        config = {"configurable": {"thread_id": thread}}
        if use_async:
            result = await agent.ainvoke(inputs, config, context={"user_id": user})
        else:
            result = agent.invoke(inputs, config, context={"user_id": user})
        return str(result["messages"][-1].text)

    for number, session in enumerate(SESSIONS, start=1):
        for turn, text in enumerate(session):
            answer = await ask("ada", text, f"ada-session-{number}-{turn}")
            if number == len(SESSIONS):
                answers["ada"].append(answer)
                print(f"[ada, last session] {text}\n  -> {answer}")
    answer = await ask("bob", "Who is my dentist?", "bob-1")
    answers["bob"].append(answer)
    print(f"[bob] Who is my dentist?\n  -> {answer}")

    segments = memory.segments("ada")
    long_term = memory.long_term("ada")
    print(
        f"\nada's tiers: {len(memory.short_term('ada'))} short-term pages, {len(segments)} segments"
    )
    for segment in sorted(segments, key=lambda s: -s.heat):
        pages = len(segment.pages)
        print(f"  {segment.id}: heat {segment.heat:.2f}, {pages} pages, {segment.summary}")
    print("  long-term:")
    for text in long_term:
        print(f"    - {text}")
    return {"answers": answers, "segments": segments, "long_term": long_term}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real chat model, e.g. anthropic:claude-sonnet-4-5")
    parser.add_argument("--async", dest="use_async", action="store_true", help="use ainvoke")
    args = parser.parse_args(argv)
    asyncio.run(run(args.model, use_async=args.use_async))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        line = model_failure("tiered_memory.py", sys.argv[1:], exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
