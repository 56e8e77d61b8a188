"""A chat worker whose conversations live in PostgreSQL, with hot sessions answered from Redis.

The Eco² chat worker's setup: `AsyncPostgresSaver` keeps every thread for good, and a
`CachedCheckpointSaver` in front of it (Redis L1) answers hot sessions. The thread id is the
session key (`build_thread_config`), so one user's sessions are listed by prefix. Two workers
(two savers on the same Redis and PostgreSQL, as two processes would be) share the session: the
second one carries on where the first stopped.

Without PostgreSQL it falls back to `InMemorySaver`; without Redis, to no cache. It says so,
and how to start the missing server, and runs anyway.

Run:  python examples/chat_worker.py                               (scripted model)
      python examples/chat_worker.py --model openai:gpt-4o-mini     (a real model)
      python examples/chat_worker.py --keep                         (keep the thread)
Servers: $LAYERED_MEMORY_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test),
         $LAYERED_MEMORY_REDIS_URL (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from layered_memory.cli.demo import model_failure

POSTGRES_URL = os.environ.get(
    "LAYERED_MEMORY_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("LAYERED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
SYSTEM_PROMPT = "You answer questions about sorting household waste for recycling."
QUESTIONS = [
    "How do I throw away a PET bottle?",
    "And the label?",
    "What about the cap?",
    "Remind me: what did I ask first?",
]
HOW_TO_START_POSTGRES = """\
PostgreSQL does not answer at {url} ({reason}).
  Conversations are kept in memory for this run only (InMemorySaver).
  To keep them: docker run --rm -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test \\
      -p 5432:5432 postgres:16   (or set LAYERED_MEMORY_POSTGRES_URL)"""
HOW_TO_START_REDIS = """\
Redis does not answer at {url} ({reason}).
  Checkpoints go straight to the saver, without the Redis cache.
  To cache hot sessions: docker run --rm -p 6379:6379 redis:7   (or set LAYERED_MEMORY_REDIS_URL)"""


def scripted_model() -> Any:
    """Answers that use the conversation so far, as a real model would."""
    from langchain_core.messages import BaseMessage, HumanMessage

    from layered_memory.testing import ScriptedChatModel

    answers = {
        "PET bottle": "Rinse it, squash it and put it in the clear-PET bin.",
        "label": "Peel the label off: it goes with general plastic, not with the bottle.",
        "cap": "Caps are a different plastic: collect them separately.",
    }

    def answer(messages: list[BaseMessage]) -> str:
        asked = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        last = asked[-1]
        if last.startswith("Remind me"):
            return f"Your first question was: {asked[0]!r} ({len(asked)} questions so far)."
        for word, text in answers.items():
            if word in last:
                return text
        return "Check your local sorting guide."

    return ScriptedChatModel(script=[answer] * len(QUESTIONS))


async def _postgres_reason() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install 'layered-memory[postgres]'"
    try:
        conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, connect_timeout=3)
    except psycopg.Error as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    await conn.close()
    return None


def _redis_reason() -> str | None:
    try:
        import redis
    except ImportError:
        return "redis is not installed: pip install 'layered-memory[redis]'"
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    except ValueError as exc:  # not a Redis URL (`localhost:6379` without `redis://`)
        return f"not a Redis URL: {exc}"
    try:
        client.ping()
    except redis.RedisError as exc:
        return str(exc)
    finally:
        client.close()
    return None


@asynccontextmanager
async def open_saver(stack: AsyncExitStack) -> AsyncIterator[Any]:
    """The durable saver: PostgreSQL when it answers, else memory."""
    from layered_memory.sessions.stores.urls import redact_url

    reason = await _postgres_reason()
    if reason is None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(POSTGRES_URL))
        await saver.setup()
        yield saver
        return
    print(HOW_TO_START_POSTGRES.format(url=redact_url(POSTGRES_URL), reason=reason))
    from langgraph.checkpoint.memory import InMemorySaver

    yield InMemorySaver()


def workers(saver: Any, *, prefix: str, count: int) -> list[Any]:
    """``count`` workers' checkpointers: a Redis L1 in front of ``saver`` when Redis answers."""
    from layered_memory.checkpoint import CachedCheckpointSaver
    from layered_memory.sessions.stores.urls import redact_url

    reason = _redis_reason()
    if reason is not None:
        print(HOW_TO_START_REDIS.format(url=redact_url(REDIS_URL), reason=reason))
        return [saver] * count
    return [CachedCheckpointSaver(saver, redis_url=REDIS_URL, prefix=prefix) for _ in range(count)]


def describe(checkpointer: Any) -> str:
    inner = getattr(checkpointer, "saver", None)
    if inner is None:
        return type(checkpointer).__name__
    return f"{type(checkpointer).__name__} (Redis L1) in front of {type(inner).__name__}"


def build_agent(model: Any, checkpointer: Any) -> Any:
    from langchain.agents import create_agent

    return create_agent(model, tools=[], system_prompt=SYSTEM_PROMPT, checkpointer=checkpointer)


async def turn(agent: Any, config: Any, question: str) -> str:
    result = await agent.ainvoke({"messages": [{"role": "user", "content": question}]}, config)
    return str(result["messages"][-1].content)


async def run(model_name: str | None, *, keep: bool) -> int:
    from layered_memory import build_thread_config

    user = f"eco2 user {uuid.uuid4().hex[:6]}"  # a fresh session on every run
    config = build_thread_config(user, "chat")
    thread_id = config["configurable"]["thread_id"]
    prefix = "layered_memory:examples:chat_worker:"

    def model() -> Any:
        if model_name is None:
            return scripted_model()
        from langchain.chat_models import init_chat_model

        return init_chat_model(model_name)

    async with AsyncExitStack() as stack:
        saver = await stack.enter_async_context(open_saver(stack))
        # Two workers on the same servers, as two processes would be.
        first, second = workers(saver, prefix=prefix, count=2)
        for worker in (first, second):
            if worker is not saver:
                stack.push_async_callback(worker.aclose)
        print(f"checkpointer: {describe(first)}")
        print(f"session: {thread_id}")

        agents = [build_agent(model(), first), build_agent(model(), second)]
        for index, question in enumerate(QUESTIONS):
            worker = 0 if index < len(QUESTIONS) // 2 else 1
            reply = await turn(agents[worker], config, question)
            print(f"[worker {worker + 1}] user: {question}")
            print(f"[worker {worker + 1}] assistant: {reply}")

        state = await agents[1].aget_state(config)
        print(f"messages in the session: {len(state.values['messages'])}")
        if not keep:
            await first.adelete_thread(thread_id)
            print(f"deleted {thread_id} (pass --keep to keep it)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a real chat model, e.g. openai:gpt-4o-mini")
    parser.add_argument("--keep", action="store_true", help="keep the session's checkpoints")
    args = parser.parse_args(argv)
    return asyncio.run(run(args.model, keep=args.keep))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        line = model_failure("chat_worker.py", sys.argv[1:], exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
