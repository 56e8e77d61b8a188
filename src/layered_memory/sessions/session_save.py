"""The `PIPELINE_END` handler that saves a run's results into a session store.

The next run of the same thread (same session key) then sees them as its highest-precedence
memory layer (`MemoryMiddleware(session_store=...)`).

Example:
    >>> registry = HookRegistry()  # doctest: +SKIP
    >>> register_session_save(registry, store, ttl=7 * 24 * 3600)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layered_memory.core._run_data import is_dry_run, thread_id_of
from layered_memory.sessions.stores._common import JsonDict, check_ttl
from layered_memory.writeback.hooks import HookEvent
from layered_memory.writeback.redaction import redact_json, redact_text

if TYPE_CHECKING:
    from layered_memory.sessions.stores import SessionStore
    from layered_memory.writeback.hooks import HookRegistry

__all__ = [
    "SESSION_SAVE_HANDLER_NAME",
    "SessionFormatter",
    "default_session_formatter",
    "register_session_save",
]

logger = logging.getLogger(__name__)

SESSION_SAVE_HANDLER_NAME = "session_save"

SessionFormatter = Callable[[Mapping[str, Any]], JsonDict | None]
"""`formatter(final_state) -> dict | None`: what to save; None saves nothing."""

# Keys the middleware adds to the event data, and state that is memory or plumbing, not results.
_NOT_RESULTS = frozenset(
    {"config", "runtime_context", "thread_id", "messages", "memory_contents", "files", "dry_run"}
)


def default_session_formatter(final_state: Mapping[str, Any]) -> JsonDict | None:
    """Pick the run's results out of the final state.

    With a ``messages`` list: ``{"last_message": <text of the last AI message>}``. Without one
    (a hand-built graph): every top-level entry that is JSON-serializable, except plumbing keys
    (``config``, ``runtime_context``, ``thread_id``, ``memory_contents``, ``files``,
    ``dry_run``) and keys starting with ``_``; an entry nested too deep for `json` is skipped
    with one warning naming the thread and the key.

    Returns:
        The dict to save, or None when there is nothing to save.
    """
    messages = final_state.get("messages")
    if isinstance(messages, list) and messages:
        text = _last_ai_text(messages)
        return {"last_message": text} if text else None
    results: JsonDict = {}
    for key, value in final_state.items():
        if not isinstance(key, str) or key in _NOT_RESULTS or key.startswith("_"):
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # not JSON (a message object, a client...): plumbing, not a result
        except RecursionError:
            # Nested deeper than `json` recurses: no store could save it either. Skipped
            # with one line rather than failing the whole save with a traceback.
            logger.warning(
                "session save for thread %s: skipped %s: nested too deep to save as JSON",
                _shown(thread_id_of(final_state)),
                _shown(key),
            )
            continue
        results[key] = value
    return results or None


def _shown(name: str | None) -> str:
    """A key or thread id as logged: redacted (it comes from the run's data)."""
    return "(none)" if name is None else redact_text(name).text


def _last_ai_text(messages: list[Any]) -> str | None:
    for message in reversed(messages):
        if getattr(message, "type", None) == "ai":
            text = getattr(message, "text", None)
            return (text.strip() or None) if isinstance(text, str) else None
    return None


def session_key_of(data: Mapping[str, Any]) -> str | None:
    """The session key of a `PIPELINE_END` event: ``thread_id``, else the config's thread_id."""
    return thread_id_of(data)


@dataclass(frozen=True, slots=True)
class _SessionSave:
    store: SessionStore
    formatter: SessionFormatter
    ttl: float | None
    merge: bool

    def _plan(self, data: Any) -> tuple[str, JsonDict] | None:
        if not isinstance(data, Mapping) or is_dry_run(data):
            return None
        key = session_key_of(data)
        if key is None:
            logger.debug("session save skipped: the run has no thread_id")
            return None
        results = self.formatter(data)
        if not results:
            return None
        # Redacted here too, not only by the built-in stores: a user's own `SessionStore`
        # gets no secret either.
        clean, found = redact_json(results)
        if found.count:
            logger.warning(
                "session save: redacted %d secret(s) (%s) before saving",
                found.count,
                ", ".join(found.kinds),
            )
        return key, clean

    def __call__(self, event: HookEvent, data: Any) -> None:
        planned = self._plan(data)
        if planned is None:
            return
        key, results = planned
        if self.merge:
            results = {**(self.store.get(key) or {}), **results}
        self.store.set(key, results, ttl=self.ttl)
        logger.debug("session %s saved (%d entries)", key, len(results))

    async def acall(self, event: HookEvent, data: Any) -> None:
        planned = self._plan(data)
        if planned is None:
            return
        key, results = planned
        if self.merge:
            results = {**(await self.store.aget(key) or {}), **results}
        await self.store.aset(key, results, ttl=self.ttl)
        logger.debug("session %s saved (%d entries)", key, len(results))


def register_session_save(
    registry: HookRegistry,
    store: SessionStore,
    *,
    formatter: SessionFormatter | None = None,
    ttl: float | None = None,
    merge: bool = True,
    priority: int = 80,
    strict: bool = False,
) -> None:
    """Register the `PIPELINE_END` handler ``session_save``.

    On `PIPELINE_END` it saves ``formatter(data)`` under the run's session key (the event's
    ``thread_id``, else ``config["configurable"]["thread_id"]``). Nothing is saved when the run
    has no thread id, the formatter returns nothing, or ``dry_run`` is true in the state,
    ``runtime_context`` or ``config["configurable"]``. `trigger` runs the sync form, `atrigger`
    the native async one.

    Args:
        registry: The registry to add the handler to.
        store: Where to save.
        formatter: `formatter(final_state) -> dict | None`; default `default_session_formatter`.
        ttl: Seconds the saved entry lives (None: until deleted).
        merge: Update the stored dict with the new entries (True) instead of replacing it.
        priority: Handler priority (higher runs first; the memory write-back uses 85).
        strict: Let a failed save fail the run instead of only being logged by the registry.

    Raises:
        ValueError: A handler named ``session_save`` is already registered.
    """
    handler = _SessionSave(
        store=store,
        formatter=formatter or default_session_formatter,
        ttl=check_ttl(ttl),
        merge=merge,
    )
    registry.register(
        HookEvent.PIPELINE_END,
        handler,
        name=SESSION_SAVE_HANDLER_NAME,
        priority=priority,
        strict=strict,
        async_handler=handler.acall,
    )
