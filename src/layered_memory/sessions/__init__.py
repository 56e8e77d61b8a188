"""Session keys and LangGraph thread config helpers.

A session key names what ran: ``entity:{entity}:{phase}[:{sub_context}]``, e.g.
``entity:acme_corp:evaluation:quality_evaluator``. Keys are used as LangGraph ``thread_id``s, so
the checkpoints of one entity (or one entity and phase) can be listed by key prefix, and sessions
of different entities never collide.

Example:
    >>> build_session_key("ACME Corp", "Evaluation", "quality-evaluator")
    'entity:acme_corp:evaluation:quality_evaluator'
    >>> parse_session_key("entity:acme_corp:evaluation")
    SessionKey(entity='acme_corp', phase='evaluation', sub_context=None)
"""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from layered_memory.errors import SessionKeyError
from layered_memory.sessions.fanout import current_memory, fan_out, memory_context
from layered_memory.sessions.session_save import (
    SESSION_SAVE_HANDLER_NAME,
    default_session_formatter,
    register_session_save,
)

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = [
    "KEY_PREFIX",
    "SESSION_SAVE_HANDLER_NAME",
    "SessionKey",
    "alist_thread_ids",
    "build_session_key",
    "build_thread_config",
    "current_memory",
    "default_session_formatter",
    "fan_out",
    "list_thread_ids",
    "memory_context",
    "normalize_key_part",
    "parse_session_key",
    "register_session_save",
]

KEY_PREFIX = "entity"
"""The literal first segment of every session key."""

_SEPARATOR = ":"
_JOINER = "_"
# Kept besides letters, marks and digits: `_` (the joiner itself) and `.` (domains, versions).
_KEPT_PUNCTUATION = frozenset("_.")


@dataclass(frozen=True, slots=True)
class SessionKey:
    """The parsed parts of a session key.

    Attributes:
        entity: The normalized entity name.
        phase: The normalized phase name.
        sub_context: The normalized sub-context, or None when the key has none.
    """

    entity: str
    phase: str
    sub_context: str | None = None

    @property
    def key(self) -> str:
        """The key as a string, ``entity:{entity}:{phase}[:{sub_context}]``."""
        parts = [KEY_PREFIX, self.entity, self.phase]
        if self.sub_context is not None:
            parts.append(self.sub_context)
        return _SEPARATOR.join(parts)

    def __str__(self) -> str:
        return self.key


def normalize_key_part(value: str, *, part: str = "part") -> str:
    """Normalize one part of a session key.

    Unicode NFKC and casefold; runs of whitespace, ``_`` and dashes (``-`` and the other
    Unicode dash punctuation) become one ``_``, trimmed at both ends; letters, marks and digits
    of any script are kept, as are ``_`` and ``.``; every other character (``:``, ``/``,
    control characters, other punctuation and symbols) is dropped.

    Args:
        value: The raw text.
        part: The part's name (``entity``, ``phase``, ``sub_context``), used in errors.

    Returns:
        The normalized part, never empty.

    Raises:
        SessionKeyError: ``value`` is not a string or is empty after normalization.
    """
    if not isinstance(value, str):
        msg = f"{part} must be a str, got {type(value).__name__}"
        raise SessionKeyError(repr(value), msg)
    # Casefolding can produce text that is no longer NFKC (e.g. "ß" -> "ss" is fine, but some
    # ligatures decompose), so normalize again after it; this makes the function idempotent.
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())
    pieces: list[str] = []
    pending_joiner = False
    for char in text:
        if char.isspace() or char == _JOINER or unicodedata.category(char) == "Pd":
            pending_joiner = True
            continue
        if not _is_kept(char):
            continue
        if pending_joiner and pieces:
            pieces.append(_JOINER)
        pending_joiner = False
        pieces.append(char)
    normalized = "".join(pieces)
    if not normalized:
        msg = f"{part} is empty after normalization"
        raise SessionKeyError(value, msg)
    # A dropped character can leave a letter and a combining mark side by side ("e★\u0301"
    # -> "e\u0301"), which is not NFKC: normalize the result again until it is, or a key
    # built here would not parse, and a listing by the composed entity would miss it.
    if unicodedata.normalize("NFKC", normalized) != normalized:
        return normalize_key_part(normalized, part=part)
    return normalized


def _is_kept(char: str) -> bool:
    return unicodedata.category(char)[0] in "LMN" or char in _KEPT_PUNCTUATION


def build_session_key(
    entity: str,
    phase: str,
    sub_context: str | None = None,
    *,
    phases: Collection[str] | None = None,
) -> str:
    """Build a normalized session key.

    Args:
        entity: What the session is about (a company, a repository, a user).
        phase: The pipeline phase (``research``, ``evaluation``, ...).
        sub_context: An optional finer scope (a sub-agent, a document).
        phases: When given, the allowed phases; a phase outside it is rejected. Compared after
            normalization, so ``"Evaluation"`` matches ``"evaluation"``.

    Returns:
        ``entity:{entity}:{phase}`` or ``entity:{entity}:{phase}:{sub_context}``.

    Raises:
        SessionKeyError: A part is empty after normalization, or the phase is not allowed.

    Example:
        >>> build_session_key("Acme Corp", "evaluation", "quality evaluator")
        'entity:acme_corp:evaluation:quality_evaluator'
    """
    return _build(entity, phase, sub_context, phases=phases).key


def _build(
    entity: str,
    phase: str,
    sub_context: str | None,
    *,
    phases: Collection[str] | None,
) -> SessionKey:
    normalized_phase = normalize_key_part(phase, part="phase")
    if phases is not None:
        allowed = {normalize_key_part(p, part="phases item") for p in phases}
        if normalized_phase not in allowed:
            msg = f"phase {normalized_phase!r} is not one of {sorted(allowed)}"
            raise SessionKeyError(phase, msg)
    return SessionKey(
        entity=normalize_key_part(entity, part="entity"),
        phase=normalized_phase,
        sub_context=(
            None if sub_context is None else normalize_key_part(sub_context, part="sub_context")
        ),
    )


def parse_session_key(key: str, *, phases: Collection[str] | None = None) -> SessionKey:
    """Split a session key into its parts, rejecting anything `build_session_key` cannot produce.

    Args:
        key: A key such as ``entity:acme_corp:evaluation:quality_evaluator``.
        phases: When given, the allowed phases (as in `build_session_key`).

    Returns:
        The parts as a `SessionKey`.

    Raises:
        SessionKeyError: The key is malformed: wrong prefix, wrong number of parts, an empty or
            non-normalized part, or a phase outside ``phases``.
    """
    if not isinstance(key, str):
        msg = f"a session key must be a str, got {type(key).__name__}"
        raise SessionKeyError(repr(key), msg)
    parts = key.split(_SEPARATOR)
    if parts[0] != KEY_PREFIX or len(parts) not in (3, 4):
        msg = (
            f"expected '{KEY_PREFIX}:<entity>:<phase>[:<sub_context>]', "
            f"got {len(parts)} ':'-separated parts"
        )
        raise SessionKeyError(key, msg)
    names = ("entity", "phase", "sub_context")
    for name, raw in zip(names, parts[1:], strict=False):
        if not raw:
            msg = f"{name} is empty"
            raise SessionKeyError(key, msg)
        if normalize_key_part(raw, part=name) != raw:
            msg = f"{name} {raw!r} is not normalized (build keys with build_session_key)"
            raise SessionKeyError(key, msg)
    sub_context = parts[3] if len(parts) == 4 else None
    return _build(parts[1], parts[2], sub_context, phases=phases)


def build_thread_config(
    entity: str,
    phase: str,
    sub_context: str | None = None,
    *,
    config: RunnableConfig | None = None,
    phases: Collection[str] | None = None,
) -> RunnableConfig:
    """Build a LangGraph config whose ``thread_id`` is the session key.

    Args:
        entity: See `build_session_key`.
        phase: See `build_session_key`.
        sub_context: See `build_session_key`.
        config: An existing config to merge into. It is not modified: the result is a copy
            keeping every other top-level key and every other ``configurable`` entry.
        phases: See `build_session_key`.

    Returns:
        ``{"configurable": {"thread_id": key}}``, merged into a copy of ``config``.

    Example:
        >>> build_thread_config("acme", "research", config={"recursion_limit": 5})
        {'recursion_limit': 5, 'configurable': {'thread_id': 'entity:acme:research'}}
    """
    key = build_session_key(entity, phase, sub_context, phases=phases)
    # Shallow copies on purpose: configs carry callbacks and other objects that must stay shared.
    merged: dict[str, Any] = dict(config or {})
    configurable = dict(merged.get("configurable") or {})
    configurable["thread_id"] = key
    merged["configurable"] = configurable
    return cast("RunnableConfig", merged)


def _thread_filter(entity: str, phase: str | None) -> tuple[str, str | None]:
    """Return ``(prefix, exact)``: a thread id matches if it starts with prefix or equals exact."""
    normalized_entity = normalize_key_part(entity, part="entity")
    if phase is None:
        return f"{KEY_PREFIX}:{normalized_entity}:", None
    base = f"{KEY_PREFIX}:{normalized_entity}:{normalize_key_part(phase, part='phase')}"
    return f"{base}:", base


def _collect(item: CheckpointTuple, prefix: str, exact: str | None, found: set[str]) -> None:
    thread_id = item.config.get("configurable", {}).get("thread_id")
    if isinstance(thread_id, str) and (thread_id.startswith(prefix) or thread_id == exact):
        found.add(thread_id)


def list_thread_ids(
    checkpointer: BaseCheckpointSaver[Any], entity: str, phase: str | None = None
) -> list[str]:
    """List the thread ids of one entity (or one entity and phase) held by a checkpointer.

    Works with any LangGraph checkpointer (``InMemorySaver``, ``SqliteSaver``, ``PostgresSaver``,
    ...) through its public ``list()``; it reads every checkpoint once, so on a large database
    prefer a query on the checkpoint table's ``thread_id`` column.

    Args:
        checkpointer: The checkpointer holding the threads.
        entity: The entity, normalized as in `build_session_key`.
        phase: When given, only this phase's threads (with or without a sub-context).

    Returns:
        The matching thread ids, sorted.

    Example:
        >>> list_thread_ids(saver, "acme")  # doctest: +SKIP
        ['entity:acme:evaluation', 'entity:acme:research:web']
    """
    prefix, exact = _thread_filter(entity, phase)
    found: set[str] = set()
    for item in checkpointer.list(None):
        _collect(item, prefix, exact, found)
    return sorted(found)


async def alist_thread_ids(
    checkpointer: BaseCheckpointSaver[Any], entity: str, phase: str | None = None
) -> list[str]:
    """Async twin of `list_thread_ids`, through the checkpointer's ``alist()``.

    Use it with async-capable checkpointers (``InMemorySaver``, ``AsyncSqliteSaver``,
    ``AsyncPostgresSaver``); the sync ``SqliteSaver`` does not implement ``alist()``.

    Args:
        checkpointer: The saver holding the threads.
        entity: The entity whose threads to list (normalized as `build_session_key` does).
        phase: Only this phase's threads (None: every phase).

    Returns:
        The thread ids, sorted.
    """
    prefix, exact = _thread_filter(entity, phase)
    found: set[str] = set()
    tuples: AsyncIterable[CheckpointTuple] = checkpointer.alist(None)
    async for item in tuples:
        _collect(item, prefix, exact, found)
    return sorted(found)
