"""`view_messages`: one person's view of a shared conversation, as a pure function.

Use it in a hand-built `StateGraph` node before calling a model; `MessageViewMiddleware` calls
it on every model call of a `create_agent` / `create_deep_agent` agent.

The view of every message (FULL) is built once per conversation prefix and then extended.
A FULL view rewrites every other agent's message as named input, so building it costs time
in the conversation's length (about 150 ms at 10,000 messages), and an agent asks for it on
every model call while the conversation only grows. The view of a prefix stays the same when
messages are added after it, except for a turn of the person's own with an unanswered call
(its result may still come): `_assemble.Resume` says how far the view is final. Each call
checks that the conversation still starts with the very same message objects that final part
was built from (`is`, at C speed: about 0.4 ms at 10,000 messages), reuses it, and builds only
the rest.

Never stale: the cache holds the messages it was built from (strong references), so an `id`
cannot be reused by another object while it is cached, and a message that was replaced (an
edit, a removal, a checkpoint loaded into new objects) fails the identity check and the view
is built again. Like LangGraph's reducers, the cache takes messages as values that are
replaced, never changed in place.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from langchain_core.messages import BaseMessage

from layered_memory.views._assemble import assemble, assemble_rest
from layered_memory.views._conversation import Conversation, check_person
from layered_memory.views._select import select, shows_everything
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
    objects; only another agent's messages and later system messages (turned into input naming
    the speaker), the person's AI messages whose tool calls lost their results (those calls
    stripped) and the user turn opening a view that starts with the person's own are new
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
        it, no tool result without its call, the user's turn first, no other agent's AI
        message shown as the model's own, and system messages only where the conversation
        starts (a later one goes out as input labelled `[system]: ...`).

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
    if shows_everything(settings, run_start):
        return view_all(messages, person)  # extended from the last call's, when unchanged
    conversation = Conversation(messages, person)
    return assemble(conversation, select(conversation, settings, run_start))


MAX_CONVERSATIONS = 32
"""Conversations (per viewer) whose FULL view is kept."""
MAX_HELD_MESSAGES = 200_000
"""Message references kept across them: a bound on the memory the cache can hold alive."""
_KEY_MESSAGES = 3


@dataclass(frozen=True, slots=True)
class _Built:
    """A final view prefix and what it was built from."""

    sources: tuple[BaseMessage, ...]
    """`messages[:covered]`: the part of the conversation the final view depends on."""
    index: int
    out: tuple[BaseMessage, ...]
    """The view of `messages[:index]`."""
    used_ids: frozenset[str]

    @property
    def held(self) -> int:
        return len(self.sources) + len(self.out)


class _Kept:
    """The kept views, least recently used first, and the message references they hold."""

    def __init__(self) -> None:
        self.views: OrderedDict[tuple[object, ...], _Built] = OrderedDict()
        self.held = 0


_lock = threading.Lock()
_kept = _Kept()


def view_all(messages: Sequence[BaseMessage], person: str | None) -> list[BaseMessage]:
    """Every message as `person` sees it (the same list `assemble` gives for all indices)."""
    # The first messages name the conversation; a wrong guess only costs a rebuild.
    key = (person, *map(id, islice(messages, _KEY_MESSAGES)))
    with _lock:
        built = _kept.views.get(key)
        if built is not None:
            _kept.views.move_to_end(key)
    conversation = Conversation(messages, person)
    if built is not None and _still_starts_with(messages, built.sources):
        out = list(built.out)
        resume = assemble_rest(conversation, built.index, out, built.used_ids)
    else:
        out = []
        resume = assemble_rest(conversation, 0, out, frozenset())
    _keep(
        key,
        _Built(
            tuple(islice(messages, resume.covered)),
            resume.index,
            tuple(out[: resume.out_length]),
            resume.used_ids,
        ),
    )
    return out


def _still_starts_with(messages: Sequence[BaseMessage], sources: Sequence[BaseMessage]) -> bool:
    if len(messages) < len(sources):
        return False
    # Identity, not equality: an equal copy is another object, and the view hands out the
    # very objects of the conversation.
    return all(map(operator.is_, sources, messages))


def _keep(key: tuple[object, ...], built: _Built) -> None:
    with _lock:
        views = _kept.views
        old = views.pop(key, None)
        if old is not None:
            _kept.held -= old.held
        if built.held > MAX_HELD_MESSAGES:
            return
        views[key] = built
        _kept.held += built.held
        while len(views) > MAX_CONVERSATIONS or _kept.held > MAX_HELD_MESSAGES:
            _key, evicted = views.popitem(last=False)
            _kept.held -= evicted.held


def clear_cache() -> None:
    """Forget every kept view (tests and benchmarks of a cold process)."""
    with _lock:
        _kept.views.clear()
        _kept.held = 0
