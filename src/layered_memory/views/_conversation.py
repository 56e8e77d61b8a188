"""A read-only index over one conversation, seen by one person, built lazily per view.

Everything a view asks about a message (its sender, whether it is the person's own or
addressed to it, which AI message made a tool call, which results answer a call) is computed
on first use and cached for the rest of the call, so a windowed view over a long conversation
touches only the messages near its end. The two id maps that tie tool results to calls are
built only when a result is not right after its call (one pass, then O(log n) lookups), so
hostile layouts cannot make a view quadratic.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from layered_memory.views.routing import SYSTEM, USER, route_of


def call_ids(message: AIMessage) -> list[str | None]:
    """Ids of the tool calls an AI message makes, invalid ones included (they get results too)."""
    ids: list[str | None] = [call.get("id") for call in message.tool_calls]
    if message.invalid_tool_calls:
        ids.extend(call.get("id") for call in message.invalid_tool_calls)
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

    def message(self, index: int) -> BaseMessage:
        """The message at `index`, checked to be a LangChain message."""
        message = self.messages[index]
        if not isinstance(message, BaseMessage):
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
        if isinstance(message, ToolMessage):
            caller = self.caller(index)
            sender = None if caller is None else self.sender(caller)
        else:
            sender = route_of(message)[0]
            if sender is None:
                if isinstance(message, AIMessage):
                    sender = message.name or self.person
                elif isinstance(message, SystemMessage):
                    sender = SYSTEM
                else:
                    sender = USER
        self._senders[index] = sender
        return sender

    def mine(self, index: int) -> bool:
        """Whether the person sent it (its AI messages, the results of its tool calls)."""
        message = self.messages[index]
        if isinstance(message, ToolMessage) and self.caller(index) is None:
            return False
        return self.sender(index) == self.person

    def to_me(self, index: int) -> bool:
        """Whether it is addressed to the person (or to everyone)."""
        message = self.message(index)
        if isinstance(message, ToolMessage):
            return self.mine(index)
        recipients = route_of(message)[1]
        return recipients is None or (self.person is not None and self.person in recipients)

    # -- tool calls and their results -----------------------------------------------------------

    def _build_call_maps(self) -> None:
        ai_by_call: dict[str, list[int]] = {}
        tools_by_call: dict[str, list[int]] = {}
        for index, message in enumerate(self.messages):
            if isinstance(message, ToolMessage):
                tools_by_call.setdefault(message.tool_call_id, []).append(index)
            elif isinstance(message, AIMessage) and (
                message.tool_calls or message.invalid_tool_calls
            ):
                for call_id in dict.fromkeys(call_ids(message)):
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
            while previous >= 0 and isinstance(self.messages[previous], ToolMessage):
                previous -= 1
            candidate = self.messages[previous] if previous >= 0 else None
            if isinstance(candidate, AIMessage) and call_id in call_ids(candidate):
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
            while after < self.n and isinstance(self.messages[after], ToolMessage):
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
