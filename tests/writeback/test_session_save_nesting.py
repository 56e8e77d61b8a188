"""A result nested too deep for `json` is skipped with one warning, never a traceback.

Lives with the write-back tests because it tests the `PIPELINE_END` handlers' handling of bad
input; the session save's own tests are in `tests/sessions/test_session_save.py`.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from layered_memory import HookEvent, HookRegistry, InMemorySessionStore
from layered_memory.sessions.session_save import register_session_save

DEPTH = 5_000


def nested(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    current = top
    for _ in range(depth):
        current["a"] = {}
        current = current["a"]
    return top


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_too_deep_result_is_skipped_with_one_line_and_the_rest_saved(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemorySessionStore()
    registry = HookRegistry()
    register_session_save(registry, store)
    data = {"thread_id": "entity:acme:deploy", "deep": nested(DEPTH), "summary": "all green"}

    with caplog.at_level(logging.DEBUG):
        if use_async:
            await registry.atrigger(HookEvent.PIPELINE_END, data)
        else:
            registry.trigger(HookEvent.PIPELINE_END, data)

    assert store.get("entity:acme:deploy") == {"summary": "all green"}
    problems = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert [record.getMessage() for record in problems] == [
        "session save for thread entity:acme:deploy: skipped deep: nested too deep to save as JSON"
    ]
    assert problems[0].exc_info is None  # one line, no traceback
