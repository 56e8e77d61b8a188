"""Who said what to whom: the routing a view filters on, and a per-call index over it.

The sender is `message.name` for AI messages (LangChain's `create_agent(name=...)` sets it), the
person itself for an unnamed AI message, `"user"` for human messages and `"system"` for system
messages; a tool result belongs to whoever made the call. `addressed()` overrides the sender
and sets recipients; without recipients a message is for everyone.

Routing lives in `additional_kwargs[ROUTE_KEY]`: chat model integrations read only the keys
they know there, so it never reaches a provider, and checkpointers keep it with the message.

`Conversation` answers everything a view asks about a message (its sender, whether it is the
person's own or addressed to it, which AI message made a tool call, which results answer a
call), computed on first use and cached for the rest of the call, so a windowed view over a
long conversation touches only the messages near its end. The two id maps that tie tool
results to calls are built only when a result is not right after its call (one pass, then
O(log n) lookups), so hostile layouts cannot make a view quadratic.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
)

from layered_memory._logs import get_logger

logger = get_logger(__name__)

ROUTE_KEY = "layered_memory_route"
"""Key in `additional_kwargs` holding `{"sender": str, "to": [str, ...] | None}`."""
USER = "user"
"""Sender of human messages: a person may not take this name."""
SYSTEM = "system"
"""Sender of system messages: a person may not take this name."""
RESERVED_NAMES = frozenset({USER, SYSTEM})
_MAX_NAME_CHARS = 200

M = TypeVar("M", bound=BaseMessage)


def _check_name(value: Any, parameter: str) -> str:
    if not isinstance(value, str):
        msg = f"{parameter} must be a str, not {type(value).__name__}"
        raise TypeError(msg)
    if not value.strip():
        msg = f"{parameter} must be a non-empty name"
        raise ValueError(msg)
    if len(value) > _MAX_NAME_CHARS:
        msg = f"{parameter} is {len(value)} chars long; names are at most {_MAX_NAME_CHARS}"
        raise ValueError(msg)
    return value


def check_person(person: Any, parameter: str = "person") -> str | None:
    """A valid person name (or None: the anonymous agent whose messages are unnamed)."""
    if person is None:
        return None
    name = _check_name(person, parameter)
    if name in RESERVED_NAMES:
        msg = f"{parameter}={name!r} is reserved for {name} messages; name the agent otherwise"
        raise ValueError(msg)
    return name


def addressed(message: M, *, sender: str, to: str | Iterable[str] | None) -> M:
    """A copy of `message` carrying its sender and recipients (the original is untouched).

    Args:
        message: Any LangChain message.
        sender: Who said it (a person's name, or `"user"` / `"system"`).
        to: One recipient, several, or None for everyone.

    Returns:
        A shallow copy with the routing in `additional_kwargs` (content shared, not copied).

    Example:
        graph_state["messages"].append(
            addressed(AIMessage("Over to you."), sender="optimist", to="pessimist"))
    """
    if not isinstance(message, BaseMessage):
        msg = f"message must be a langchain BaseMessage, not {type(message).__name__}"
        raise TypeError(msg)
    _check_name(sender, "sender")
    recipients: list[str] | None
    if to is None:
        recipients = None
    elif isinstance(to, str):
        recipients = [_check_name(to, "to")]
    else:
        try:
            names = list(to)
        except TypeError:
            msg = f"to must be a name, an iterable of names or None, not {type(to).__name__}"
            raise TypeError(msg) from None
        recipients = [_check_name(name, f"to[{index}]") for index, name in enumerate(names)]
        if not recipients:
            msg = "to must name at least one recipient (None means everyone)"
            raise ValueError(msg)
    route = {"sender": sender, "to": recipients}
    return message.model_copy(
        update={"additional_kwargs": {**message.additional_kwargs, ROUTE_KEY: route}}
    )


def route_of(message: BaseMessage) -> tuple[str | None, frozenset[str] | None]:
    """`(sender, recipients)` set by `addressed()`; `(None, None)` when absent or malformed.

    Messages may come from anywhere (a checkpoint, another process): a malformed route is
    ignored with a debug log rather than trusted or raised on.
    """
    route = message.additional_kwargs.get(ROUTE_KEY)
    if route is None:
        return None, None
    if not isinstance(route, Mapping):
        logger.debug("message %s: ignoring malformed %s", message.id, ROUTE_KEY)
        return None, None
    sender = route.get("sender")
    if not isinstance(sender, str) or not sender:
        sender = None
    to = route.get("to")
    recipients: frozenset[str] | None = None
    if isinstance(to, list | tuple) and to and all(isinstance(name, str) for name in to):
        recipients = frozenset(to)
    elif to is not None:
        logger.debug("message %s: ignoring malformed recipients in %s", message.id, ROUTE_KEY)
    return sender, recipients


# Message kinds. `isinstance` on pydantic models goes through the model metaclass and costs
# several times a dict lookup by type; a view over 10,000 messages asks tens of thousands of
# times, so the kind of each message class is worked out once and cached.
AI, TOOL, SYSTEM_KIND, OTHER, NOT_A_MESSAGE = range(5)
_KINDS: dict[type, int] = {}
PLAIN_TYPES = frozenset(
    {AIMessage, AIMessageChunk, HumanMessage, HumanMessageChunk, ToolMessage, ToolMessageChunk}
)
"""The usual classes that are not system messages: a scan for system messages skips them."""


def kind(message: object) -> int:
    """AI, TOOL, SYSTEM_KIND, OTHER (human and the rest) or NOT_A_MESSAGE."""
    found = _KINDS.get(type(message))
    return kind_of_class(type(message)) if found is None else found


def kind_of_class(cls: type) -> int:
    """The kind of the messages of class `cls` (worked out once per class)."""
    found = _KINDS.get(cls)
    if found is None:
        if issubclass(cls, AIMessage):
            found = AI
        elif issubclass(cls, ToolMessage):
            found = TOOL
        elif issubclass(cls, SystemMessage):
            found = SYSTEM_KIND
        elif issubclass(cls, BaseMessage):
            found = OTHER
        else:
            found = NOT_A_MESSAGE
        _KINDS[cls] = found
    return found


def call_ids(message: AIMessage) -> list[str | None]:
    """Ids of the tool calls an AI message makes, invalid ones included (they get results too)."""
    calls, invalid = message.tool_calls, message.invalid_tool_calls
    if not calls and not invalid:
        return []
    ids: list[str | None] = [call.get("id") for call in calls]
    if invalid:
        ids.extend(call.get("id") for call in invalid)
    return ids


class Conversation:
    """The messages of one model call as one person sees them.

    Args:
        messages: The whole conversation, oldest first (never modified).
        person: The viewer's name; None for an agent whose own messages are unnamed.
    """

    __slots__ = (
        "_ai_by_call",
        "_callers",
        "_leading_systems",
        "_results",
        "_senders",
        "_tools_by_call",
        "messages",
        "n",
        "person",
    )

    def __init__(self, messages: Sequence[BaseMessage], person: str | None) -> None:
        self.messages = messages
        self.person = person
        self.n = len(messages)
        self._senders: dict[int, str | None] = {}
        self._callers: dict[int, int | None] = {}
        self._results: dict[int, dict[str, int]] = {}
        self._ai_by_call: dict[str, list[int]] | None = None
        self._tools_by_call: dict[str, list[int]] | None = None
        self._leading_systems: int | None = None

    def message(self, index: int) -> BaseMessage:
        """The message at `index`, checked to be a LangChain message."""
        message = self.messages[index]
        if kind(message) == NOT_A_MESSAGE:
            msg = (
                f"messages[{index}] is a {type(message).__name__}, not a langchain message; "
                "convert it first (langchain_core.messages.convert_to_messages)"
            )
            raise TypeError(msg)
        return message

    # -- who sent it, to whom -------------------------------------------------------------------

    def sender(self, index: int) -> str | None:
        """The sender's name (None: the anonymous person itself, or an orphan tool result)."""
        if index in self._senders:
            return self._senders[index]
        message = self.message(index)
        sender: str | None
        message_kind = kind(message)
        if message_kind == TOOL:
            caller = self.caller(index)
            sender = None if caller is None else self.sender(caller)
        else:
            sender = route_of(message)[0]
            if sender is None:
                if message_kind == AI:
                    sender = message.name or self.person
                elif message_kind == SYSTEM_KIND:
                    sender = SYSTEM
                else:
                    sender = USER
        self._senders[index] = sender
        return sender

    def mine(self, index: int) -> bool:
        """Whether the person sent it (its AI messages, the results of its tool calls)."""
        if kind(self.messages[index]) == TOOL and self.caller(index) is None:
            return False
        return self.sender(index) == self.person

    def to_me(self, index: int) -> bool:
        """Whether it is addressed to the person (or to everyone)."""
        message = self.message(index)
        if kind(message) == TOOL:
            return self.mine(index)
        recipients = route_of(message)[1]
        return recipients is None or (self.person is not None and self.person in recipients)

    def leading_system(self, index: int) -> bool:
        """Whether the message at `index` is one of the system messages the conversation starts
        with (before its first other message): the only ones a view sends as system messages.

        Decided by the position in the conversation, not in the view, so a message goes out
        in the same form on every call whatever the window shows before it.
        """
        if self._leading_systems is None:
            count = 0
            while count < self.n and kind(self.messages[count]) == SYSTEM_KIND:
                count += 1
            self._leading_systems = count
        return index < self._leading_systems

    # -- tool calls and their results -----------------------------------------------------------

    def _build_call_maps(self) -> None:
        ai_by_call: dict[str, list[int]] = {}
        tools_by_call: dict[str, list[int]] = {}
        for index, message in enumerate(self.messages):
            message_kind = kind(message)
            if message_kind == TOOL:
                result = cast("ToolMessage", message)
                tools_by_call.setdefault(result.tool_call_id, []).append(index)
            elif message_kind == AI:
                for call_id in dict.fromkeys(call_ids(cast("AIMessage", message))):
                    if call_id is not None:
                        ai_by_call.setdefault(call_id, []).append(index)
        self._ai_by_call, self._tools_by_call = ai_by_call, tools_by_call

    def caller(self, index: int) -> int | None:
        """Index of the AI message whose call a tool result answers (the nearest before it)."""
        if index in self._callers:
            return self._callers[index]
        message = self.message(index)
        found: int | None = None
        if isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            previous = index - 1
            while previous >= 0 and kind(self.messages[previous]) == TOOL:
                previous -= 1
            candidate = self.messages[previous] if previous >= 0 else None
            if kind(candidate) == AI and call_id in call_ids(cast("AIMessage", candidate)):
                found = previous
            else:
                if self._ai_by_call is None:
                    self._build_call_maps()
                assert self._ai_by_call is not None
                callers = self._ai_by_call.get(call_id, ())
                position = bisect_left(callers, index)
                found = callers[position - 1] if position else None
        self._callers[index] = found
        return found

    def results_of(self, index: int) -> dict[str, int]:
        """Call id -> index of its first result, for the calls of the AI message at `index`.

        Only results whose caller is this message count, so every result has one owner even
        when a (buggy or hostile) conversation reuses a call id.
        """
        if index in self._results:
            return self._results[index]
        message = self.message(index)
        found: dict[str, int] = {}
        if isinstance(message, AIMessage):
            wanted = {call_id for call_id in call_ids(message) if call_id is not None}
            after = index + 1
            while after < self.n and kind(self.messages[after]) == TOOL:
                call_id = self.messages[after].tool_call_id  # type: ignore[attr-defined]
                if call_id in wanted and call_id not in found:
                    found[call_id] = after
                after += 1
            if len(found) < len(wanted):
                self._find_distant_results(index, wanted - found.keys(), found)
        self._results[index] = found
        return found

    def _find_distant_results(self, index: int, missing: set[str], found: dict[str, int]) -> None:
        if self._ai_by_call is None:
            self._build_call_maps()
        assert self._ai_by_call is not None
        assert self._tools_by_call is not None
        for call_id in missing:
            callers = self._ai_by_call[call_id]
            position = bisect_left(callers, index) + 1
            # A later AI message reusing the id owns the results after it.
            until = callers[position] if position < len(callers) else self.n
            results = self._tools_by_call.get(call_id, ())
            first = bisect_left(results, index)
            if first < len(results) and results[first] < until:
                found[call_id] = results[first]
