"""`view_messages`: one person's view of a shared conversation, as a pure function.

Use it in a hand-built `StateGraph` node before calling a model; `MessageViewMiddleware` calls
it on every model call of a `create_agent` / `create_deep_agent` agent.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from layered_memory.views._assemble import assemble
from layered_memory.views._conversation import Conversation
from layered_memory.views._select import select
from layered_memory.views.routing import check_person
from layered_memory.views.settings import MemorySettings


def view_messages(
    messages: Sequence[BaseMessage],
    *,
    person: str | None,
    settings: MemorySettings,
    run_start: int | None = None,
) -> list[BaseMessage]:
    """What `person` sees of `messages` under `settings`, ready to send to a model.

    The conversation is never changed. Messages shown as they are come back as the very same
    objects; only another agent's messages (turned into input naming the speaker) and the
    person's AI messages whose tool calls lost their results (those calls stripped) are new
    objects. The same input always gives an equal output.

    Args:
        messages: The shared conversation, oldest first.
        person: The viewer (an agent's name). None: an agent whose own AI messages are unnamed.
        settings: The view, window and pins (`MemoryProfileFactory.get_settings(...)`).
        run_start: Index of the first message of the current run; with
            `settings.forget_earlier_runs` nothing before it is shown (except system and
            `keep` messages). None: every message belongs to the current run.

    Returns:
        The messages to send, valid for every provider: each tool call answered right after
        it, no tool result without its call, never a tool result first, no other agent's AI
        message shown as the model's own.

    Example:
        seen = view_messages(state["messages"], person="optimist",
                             settings=MemoryProfileFactory.get_settings(MemoryProfile.FOCUSED))
        reply = model.invoke([SystemMessage(prompt), *seen])
    """
    person = check_person(person)
    if not isinstance(settings, MemorySettings):
        msg = f"settings must be a MemorySettings, not {type(settings).__name__}"
        raise TypeError(msg)
    if run_start is not None and (isinstance(run_start, bool) or not isinstance(run_start, int)):
        msg = f"run_start must be an int index or None, not {type(run_start).__name__}"
        raise TypeError(msg)
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        msg = f"messages must be a sequence of messages, not {type(messages).__name__}"
        raise TypeError(msg)
    conversation = Conversation(messages, person)
    return assemble(conversation, select(conversation, settings, run_start))
