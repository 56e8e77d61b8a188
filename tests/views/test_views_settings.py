"""Profiles, settings and their validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from layered_memory.views import (
    MemoryProfile,
    MemoryProfileFactory,
    MemorySettings,
    MessageView,
    MessageViewMiddleware,
)
from layered_memory.views.middleware import RUN_MARK_KEY
from layered_memory.views.settings import resolve_settings


@pytest.mark.parametrize(
    ("profile", "view", "max_messages", "forget"),
    [
        (MemoryProfile.FULL, MessageView.ALL_MESSAGES, None, False),
        (MemoryProfile.FOCUSED, MessageView.CONVERSATION_PAIRS, 20, False),
        (MemoryProfile.MINIMAL, MessageView.CONVERSATION_PAIRS, 5, False),
        (MemoryProfile.GOLDFISH, MessageView.CONVERSATION_PAIRS, 2, True),
        (MemoryProfile.ONLY_ME, MessageView.SENT_TO_ME, None, False),
        (MemoryProfile.ONLY_I_SENT, MessageView.SENT_BY_ME, None, False),
    ],
)
def test_profiles_match_the_seed(profile, view, max_messages, forget) -> None:
    settings = MemoryProfileFactory.get_settings(profile)

    assert settings == MemorySettings(view, max_messages, True, forget_earlier_runs=forget)
    assert settings.preserve_system is True
    assert settings.keep is None


def test_every_profile_but_custom_has_settings() -> None:
    for profile in MemoryProfile:
        if profile is MemoryProfile.CUSTOM:
            with pytest.raises(ValueError, match="CUSTOM"):
                MemoryProfileFactory.get_settings(profile)
        else:
            assert isinstance(MemoryProfileFactory.get_settings(profile), MemorySettings)


@pytest.mark.parametrize("name", ["FOCUSED", "focused", " Focused "])
def test_profiles_and_views_accept_their_names(name: str) -> None:
    assert MemoryProfileFactory.get_settings(name).max_messages == 20
    assert MemorySettings("CONVERSATION_PAIRS").view is MessageView.CONVERSATION_PAIRS
    assert MemorySettings("all_involved").view is MessageView.ALL_INVOLVED


def test_defaults_are_the_seed_signature() -> None:
    settings = MemorySettings(MessageView.ALL_INVOLVED)

    assert (settings.max_messages, settings.preserve_system) == (None, True)
    assert settings.forget_earlier_runs is False


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"view": "everything"}, ValueError, "view='everything' is not a MessageView"),
        ({"view": 3}, TypeError, "view must be a MessageView"),
        ({"view": "sent_by_me", "max_messages": -1}, ValueError, "max_messages must be >= 0"),
        ({"view": "sent_by_me", "max_messages": 2.5}, TypeError, "max_messages must be an int"),
        ({"view": "sent_by_me", "max_messages": True}, TypeError, "max_messages must be an int"),
        ({"view": "sent_by_me", "preserve_system": "yes"}, TypeError, "preserve_system"),
        ({"view": "sent_by_me", "keep": "important"}, TypeError, "keep must be a callable"),
        ({"view": "sent_by_me", "forget_earlier_runs": 1}, TypeError, "forget_earlier_runs"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs, error, words) -> None:
    with pytest.raises(error, match=words):
        MemorySettings(**kwargs)


def test_custom_builds_settings_as_dipeo_does() -> None:
    assert MemoryProfileFactory.custom("conversation_pairs", 10) == MemorySettings(
        MessageView.CONVERSATION_PAIRS, 10, True
    )
    assert MemoryProfileFactory.custom(MessageView.SENT_TO_ME, None, False) == MemorySettings(
        MessageView.SENT_TO_ME, None, preserve_system=False
    )
    with pytest.raises(ValueError, match="max_messages must be >= 0"):
        MemoryProfileFactory.custom("sent_to_me", -1)


def test_settings_are_frozen_values() -> None:
    settings = MemorySettings(MessageView.SENT_TO_ME, 3)

    with pytest.raises(AttributeError):
        settings.max_messages = 4  # type: ignore[misc]
    assert settings == MemorySettings(MessageView.SENT_TO_ME, 3)
    assert hash(settings) == hash(MemorySettings(MessageView.SENT_TO_ME, 3))


def test_resolving_profile_and_settings() -> None:
    custom = MemorySettings(MessageView.SENT_TO_ME, 3)

    assert resolve_settings(MemoryProfile.CUSTOM, custom) is custom
    assert resolve_settings(MemoryProfile.FULL, custom) is custom  # settings alone
    assert resolve_settings("minimal", None).max_messages == 5
    with pytest.raises(ValueError, match="profile=CUSTOM needs settings"):
        resolve_settings(MemoryProfile.CUSTOM, None)
    with pytest.raises(ValueError, match="profile=FOCUSED and settings= both given"):
        resolve_settings(MemoryProfile.FOCUSED, custom)
    with pytest.raises(TypeError, match="settings must be a MemorySettings"):
        resolve_settings(MemoryProfile.CUSTOM, {"view": "sent_to_me"})  # type: ignore[arg-type]


def test_middleware_validates_up_front() -> None:
    with pytest.raises(ValueError, match="'user' is reserved"):
        MessageViewMiddleware(person="user")
    with pytest.raises(ValueError, match="non-empty"):
        MessageViewMiddleware(person="  ")
    with pytest.raises(TypeError, match="person must be a str"):
        MessageViewMiddleware(person=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a MemoryProfile"):
        MessageViewMiddleware(profile="forgetful")
    with pytest.raises(ValueError, match="both given"):
        MessageViewMiddleware(profile="minimal", settings=MemorySettings("sent_to_me"))


@pytest.mark.parametrize("use_async", [False, True])
def test_every_profile_is_the_class_asked_for_and_only_forgetting_ones_mark_a_run(
    use_async: bool,
) -> None:
    # No hidden subclass: a middleware's type is what the user constructed.
    goldfish = MessageViewMiddleware(profile=MemoryProfile.GOLDFISH)
    focused = MessageViewMiddleware(profile=MemoryProfile.FOCUSED)
    custom = MessageViewMiddleware(
        profile="custom", settings=MemorySettings("sent_to_me", forget_earlier_runs=True)
    )
    state: Any = {"messages": [HumanMessage("hi", id="m1")]}

    def end(middleware: MessageViewMiddleware[Any, Any]) -> Any:
        if use_async:
            return asyncio.run(middleware.aafter_agent(state, None))  # type: ignore[arg-type]
        return middleware.after_agent(state, None)  # type: ignore[arg-type]

    assert type(goldfish) is type(focused) is type(custom) is MessageViewMiddleware
    assert end(focused) is None
    assert end(goldfish) == end(custom) == {RUN_MARK_KEY: {"last_id": "m1", "count": 1}}
    assert goldfish.name == focused.name == "MessageViewMiddleware"
