"""No secret reaches a session store: every adapter of the conformance harness redacts on set."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from store_harness import StoreCase, call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])

KEY = "entity:acme_corp:deploy"
# Assembled at run time so that secret scanners never flag this file.
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PASSWORD = "Tr0ub" + "4dor&3x"
GITHUB = "ghp_" + "a1B2c3D4" * 5


def _value() -> dict[str, object]:
    return {
        "summary": f"deployed with DB_PASSWORD={PASSWORD}; all green",
        "steps": ["checkout", f"export STRIPE_KEY={STRIPE}", {"token note": f"use {GITHUB}"}],
        GITHUB: "a key that is itself a secret",
        "count": 3,
        "ok": True,
        "nothing": None,
    }


def _assert_clean(text: str) -> None:
    for secret in (STRIPE, PASSWORD, GITHUB):
        assert secret not in text


@USE_ASYNC
async def test_set_redacts_every_string_of_the_value(
    case: StoreCase, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="layered_memory.sessions.stores.base"):
        await call(case.store, use_async, "set", KEY, _value())
    stored = await call(case.store, use_async, "get", KEY)

    _assert_clean(repr(stored))
    assert stored == {
        "summary": "deployed with DB_PASSWORD=[REDACTED:password]; all green",
        "steps": [
            "checkout",
            "export STRIPE_KEY=[REDACTED:stripe_key]",
            {"token note": "use [REDACTED:github_token]"},
        ],
        "[REDACTED:github_token]": "a key that is itself a secret",
        "count": 3,
        "ok": True,
        "nothing": None,
    }
    # The log says what was removed, never the secret.
    assert "github_token" in caplog.text
    assert "stripe_key" in caplog.text
    _assert_clean(caplog.text)


@USE_ASYNC
async def test_clean_values_are_stored_unchanged(case: StoreCase, use_async: bool) -> None:
    value = {"summary": "the token budget is 4000; commit 9fceb02d0ae598e95dc970b74767f19372d61af8"}
    await call(case.store, use_async, "set", KEY, value)
    assert await call(case.store, use_async, "get", KEY) == value


@USE_ASYNC
async def test_keys_that_redact_alike_stay_apart(case: StoreCase, use_async: bool) -> None:
    other = "ghp_" + "Z9y8X7w6" * 5
    await call(case.store, use_async, "set", KEY, {GITHUB: 1, other: 2})
    stored = await call(case.store, use_async, "get", KEY)
    assert sorted(stored.values()) == [1, 2]
    assert set(stored) == {"[REDACTED:github_token]", "[REDACTED:github_token]#2"}


def test_nothing_secret_is_written_to_disk(case: StoreCase, tmp_path: Path) -> None:
    case.store.set(KEY, _value())
    for path in tmp_path.rglob("*"):
        if path.is_file():
            _assert_clean(path.read_text(encoding="utf-8", errors="replace"))
