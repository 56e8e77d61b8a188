"""Who sent a message and to whom: the routing a view filters on.

The sender is `message.name` for AI messages (LangChain's `create_agent(name=...)` sets it), the
person itself for an unnamed AI message, `"user"` for human messages and `"system"` for system
messages; a tool result belongs to whoever made the call. `addressed()` overrides the sender
and sets recipients; without recipients a message is for everyone.

Routing lives in `additional_kwargs[ROUTE_KEY]`: chat model integrations read only the keys
they know there, so it never reaches a provider, and checkpointers keep it with the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

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
