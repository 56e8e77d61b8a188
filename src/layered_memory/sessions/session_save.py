"""The `PIPELINE_END` handler that saves a run's results into a session store.

The next run of the same thread (same session key) then sees them as its highest-precedence
memory layer (`MemoryMiddleware(session_store=...)`).

Example:
    >>> registry = HookRegistry()  # doctest: +SKIP
    >>> register_session_save(registry, store, ttl=7 * 24 * 3600)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from layered_memory._logs import get_logger
from layered_memory.core.run_data import is_dry_run, thread_id_of
from layered_memory.core.validation import check_bool, check_ttl
from layered_memory.errors import SessionStoreError
from layered_memory.safety.redaction import redact_json, redact_text
from layered_memory.sessions.stores.base import ConditionalSessionStore, JsonDict
from layered_memory.writeback.hooks import HookEvent

if TYPE_CHECKING:
    from layered_memory.sessions.stores import SessionStore
    from layered_memory.writeback.hooks import HookRegistry

__all__ = [
    "SESSION_SAVE_HANDLER_NAME",
    "SessionFormatter",
    "default_session_formatter",
    "register_session_save",
]

logger = get_logger(__name__)

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

    Args:
        final_state: The graph's state at the end of the run.

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
        if not self.merge:
            self.store.set(key, results, ttl=self.ttl)
        elif isinstance(self.store, ConditionalSessionStore):
            results = self._merge(key, results)
        else:  # a store of the user's own without add/replace: last writer wins
            results = {**(self.store.get(key) or {}), **results}
            self.store.set(key, results, ttl=self.ttl)
        logger.debug("session %s saved (%d entries)", key, len(results))

    def _merge(self, key: str, results: JsonDict) -> JsonDict:
        # Compare-and-set: a run ending in another process between our read and our write
        # makes the write fail, and we merge into its entry instead of overwriting it.
        store = cast("ConditionalSessionStore", self.store)
        for attempt in range(_MERGE_ATTEMPTS):
            if attempt:
                time.sleep(_backoff(attempt))
            current = store.get(key)
            merged = {**(current or {}), **results}
            if current is None:
                done = store.add(key, merged, ttl=self.ttl)
            else:
                done = store.replace(key, current, merged, ttl=self.ttl)
            if done:
                return merged
        raise _contended(key)

    async def acall(self, event: HookEvent, data: Any) -> None:
        planned = self._plan(data)
        if planned is None:
            return
        key, results = planned
        if not self.merge:
            await self.store.aset(key, results, ttl=self.ttl)
        elif isinstance(self.store, ConditionalSessionStore):
            results = await self._amerge(key, results)
        else:
            results = {**(await self.store.aget(key) or {}), **results}
            await self.store.aset(key, results, ttl=self.ttl)
        logger.debug("session %s saved (%d entries)", key, len(results))

    async def _amerge(self, key: str, results: JsonDict) -> JsonDict:
        store = cast("ConditionalSessionStore", self.store)
        for attempt in range(_MERGE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_backoff(attempt))
            current = await store.aget(key)
            merged = {**(current or {}), **results}
            if current is None:
                done = await store.aadd(key, merged, ttl=self.ttl)
            else:
                done = await store.areplace(key, current, merged, ttl=self.ttl)
            if done:
                return merged
        raise _contended(key)


_MERGE_ATTEMPTS = 100
"""Compare-and-set rounds before a merge gives up: each lost round is another writer's save."""

_BACKOFF_FIRST = 0.001
_BACKOFF_MOST = 0.05


def _backoff(attempt: int) -> float:
    """Seconds to wait before round ``attempt`` (1, 2, ...): random, growing, capped.

    Without it two writers in tight loops fall into step, and one lost 130 rounds in a row in
    a test (two processes, 200 saves each); the random wait breaks the step.
    """
    return random.uniform(0, min(_BACKOFF_MOST, _BACKOFF_FIRST * 2**attempt))


def _contended(key: str) -> SessionStoreError:
    msg = (
        f"session save for key {key!r} gave up after {_MERGE_ATTEMPTS} attempts: other writers "
        "changed the entry each time between its read and its write"
    )
    return SessionStoreError(msg, key=key)


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
            With a `ConditionalSessionStore` (every built-in store) the update is a
            compare-and-set, so saves from several processes into one entry all land; with
            another store it is a read, then a write (the last writer wins).
        priority: Handler priority (higher runs first; the memory write-back uses 85).
        strict: Let a failed save fail the run instead of only being logged by the registry.

    Raises:
        ValueError: A handler named ``session_save`` is already registered.
    """
    handler = _SessionSave(
        store=store,
        formatter=formatter or default_session_formatter,
        ttl=check_ttl(ttl),
        merge=check_bool(merge, parameter="merge"),
    )
    registry.register(
        HookEvent.PIPELINE_END,
        handler,
        name=SESSION_SAVE_HANDLER_NAME,
        priority=priority,
        strict=check_bool(strict, parameter="strict"),
        async_handler=handler.acall,
    )
