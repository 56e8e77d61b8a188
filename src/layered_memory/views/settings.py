"""What a view shows: the six message views, the memory profiles and their settings.

The names and presets follow DiPeO's memory system (`MemoryView`, `MemoryProfile`,
`MemorySettings`, `MemoryProfileFactory`); `keep` and `forget_earlier_runs` are this package's
additions (priority messages, and GOLDFISH's reset between runs as a setting of its own).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

_E = TypeVar("_E", bound=enum.StrEnum)

KeepPredicate = Callable[[BaseMessage], bool]
"""`keep(message) -> bool`: True pins the message into every view (see `MemorySettings.keep`)."""


class MessageView(enum.StrEnum):
    """Which messages of the shared conversation a person sees.

    "Mine" means sent by the person: its AI messages (an unnamed AI message counts as the
    person's own) and the results of its tool calls. "To me" means addressed to the person or
    to everyone (a message without recipients, see `addressed`).
    """

    ALL_INVOLVED = "all_involved"
    """Sent by the person or to it."""
    SENT_BY_ME = "sent_by_me"
    """Only the person's own messages."""
    SENT_TO_ME = "sent_to_me"
    """Only messages others sent to the person (or to everyone)."""
    SYSTEM_AND_ME = "system_and_me"
    """System messages to the person and the person's own messages."""
    CONVERSATION_PAIRS = "conversation_pairs"
    """Messages to the person and its replies, windowed by whole request/reply pairs."""
    ALL_MESSAGES = "all_messages"
    """Everything, including what others said to each other and their tool results."""


class MemoryProfile(enum.StrEnum):
    """Ready-made settings for the usual jobs (see `MemoryProfileFactory.get_settings`)."""

    FULL = "full"
    """All messages, no limit: judges, coordinators, final reviewers."""
    FOCUSED = "focused"
    """Conversation pairs, last 20 messages: debates and ordinary dialogue."""
    MINIMAL = "minimal"
    """Conversation pairs, last 5 messages: quick reactions, classifiers."""
    GOLDFISH = "goldfish"
    """Conversation pairs, last 2 messages, and nothing from earlier runs of the thread."""
    ONLY_ME = "only_me"
    """Only what others sent to the person."""
    ONLY_I_SENT = "only_i_sent"
    """Only what the person sent."""
    CUSTOM = "custom"
    """Explicit `MemorySettings` (`MessageViewMiddleware(settings=...)`)."""


def _enum_member(kind: type[_E], value: Any, parameter: str) -> _E:
    """`value` as a member of `kind`: a member, its value or its name in any case."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        wanted = value.strip().lower()
        for member in kind:
            if wanted in (member.value, member.name.lower()):
                return member
        names = ", ".join(member.name for member in kind)
        msg = f"{parameter}={value!r} is not a {kind.__name__}: use one of {names}"
        raise ValueError(msg)
    msg = f"{parameter} must be a {kind.__name__} or its name, not {type(value).__name__}"
    raise TypeError(msg)


def as_view(value: Any, parameter: str = "view") -> MessageView:
    """A `MessageView` from a member, its value (`"conversation_pairs"`) or its name."""
    return _enum_member(MessageView, value, parameter)


def as_profile(value: Any, parameter: str = "profile") -> MemoryProfile:
    """A `MemoryProfile` from a member, its value (`"focused"`) or its name (`"FOCUSED"`)."""
    return _enum_member(MemoryProfile, value, parameter)


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """How one job sees the shared conversation.

    Args:
        view: Which messages are visible (a `MessageView`, or its name as a string).
        max_messages: Keep only the last N visible messages (None: no limit; 0: only the
            current turn). The window moves by whole units: a tool call never without its
            results, and under `CONVERSATION_PAIRS` a reply never without its request.
        preserve_system: Keep visible system messages outside the count.
        keep: Priority messages: `keep(message)` True shows the message whatever the view, the
            window and the run reset (outside the count). Must be a pure function of the message.
        forget_earlier_runs: Show nothing from earlier runs of the same thread (GOLDFISH);
            system messages and `keep` messages stay.

    Example:
        MemorySettings(view=MessageView.ALL_INVOLVED, max_messages=10,
                       keep=lambda m: m.id == brief_id)
    """

    view: MessageView
    max_messages: int | None = None
    preserve_system: bool = True
    keep: KeepPredicate | None = field(default=None, kw_only=True)
    forget_earlier_runs: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "view", as_view(self.view))
        limit = self.max_messages
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            msg = f"max_messages must be an int or None, not {type(limit).__name__}"
            raise TypeError(msg)
        if limit is not None and limit < 0:
            msg = f"max_messages must be >= 0 (or None for no limit), got {limit}"
            raise ValueError(msg)
        for name in ("preserve_system", "forget_earlier_runs"):
            if not isinstance(getattr(self, name), bool):
                msg = f"{name} must be a bool, not {type(getattr(self, name)).__name__}"
                raise TypeError(msg)
        if self.keep is not None and not callable(self.keep):
            kind = type(self.keep).__name__
            msg = f"keep must be a callable(message) -> bool or None, not {kind}"
            raise TypeError(msg)


class MemoryProfileFactory:
    """The settings behind each `MemoryProfile`, as DiPeO defines them."""

    _PROFILES: dict[MemoryProfile, MemorySettings] = {  # noqa: RUF012 (read-only table)
        MemoryProfile.FULL: MemorySettings(MessageView.ALL_MESSAGES),
        MemoryProfile.FOCUSED: MemorySettings(MessageView.CONVERSATION_PAIRS, 20),
        MemoryProfile.MINIMAL: MemorySettings(MessageView.CONVERSATION_PAIRS, 5),
        MemoryProfile.GOLDFISH: MemorySettings(
            MessageView.CONVERSATION_PAIRS, 2, forget_earlier_runs=True
        ),
        MemoryProfile.ONLY_ME: MemorySettings(MessageView.SENT_TO_ME),
        MemoryProfile.ONLY_I_SENT: MemorySettings(MessageView.SENT_BY_ME),
    }

    @classmethod
    def custom(
        cls,
        view: MessageView | str,
        max_messages: int | None = None,
        preserve_system: bool = True,
    ) -> MemorySettings:
        """Settings of your own, as DiPeO's `MemoryProfileFactory.custom` builds them (use them
        with `profile=CUSTOM`).

        Example:
            MessageViewMiddleware(profile="CUSTOM",
                                  settings=MemoryProfileFactory.custom("all_involved", 10))
        """
        return MemorySettings(as_view(view), max_messages, preserve_system)

    @classmethod
    def get_settings(cls, profile: MemoryProfile | str) -> MemorySettings:
        """The settings of a profile (`CUSTOM` has none: pass your own `MemorySettings`).

        Raises:
            ValueError: For `CUSTOM` or an unknown profile name.
        """
        member = as_profile(profile)
        if member is MemoryProfile.CUSTOM:
            msg = "profile CUSTOM has no preset settings: pass settings=MemorySettings(...)"
            raise ValueError(msg)
        return cls._PROFILES[member]


def resolve_settings(
    profile: MemoryProfile | str, settings: MemorySettings | None
) -> MemorySettings:
    """The settings a job runs with, from a profile and/or explicit settings.

    Explicit `settings` go with `CUSTOM` (or the default `FULL`, which they then replace);
    any other profile together with `settings` is ambiguous and refused.
    """
    member = as_profile(profile)
    if settings is None:
        if member is MemoryProfile.CUSTOM:
            msg = "profile=CUSTOM needs settings=MemorySettings(...)"
            raise ValueError(msg)
        return MemoryProfileFactory.get_settings(member)
    if not isinstance(settings, MemorySettings):
        msg = f"settings must be a MemorySettings or None, not {type(settings).__name__}"
        raise TypeError(msg)
    if member not in (MemoryProfile.CUSTOM, MemoryProfile.FULL):
        msg = (
            f"profile={member.name} and settings= both given: pass profile=CUSTOM with your "
            "settings, or the profile alone"
        )
        raise ValueError(msg)
    return settings
