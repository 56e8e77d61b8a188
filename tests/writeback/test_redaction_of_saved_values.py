"""Secrets are redacted from every part of a saved value, whatever holds them.

`json.dumps` (and so every session store) writes a tuple as an array: a secret inside one is
persisted like one inside a list, and must be redacted like one.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import pytest

from layered_memory import FileSessionStore, HookEvent, HookRegistry, InMemorySessionStore
from layered_memory.safety.redaction import redact_json
from layered_memory.sessions.session_save import register_session_save

# Built in pieces so secret scanners do not flag this file.
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASSWORD = "Xk9m" + "Q2pL7vTz"


def test_secrets_inside_tuples_are_redacted_and_tuples_stay_tuples() -> None:
    value = {"notes": (f"token {TOKEN}",), "nested": {"k": ("x", [f"password={PASSWORD}"])}}

    clean, found = redact_json(value)

    assert clean == {
        "notes": ("token [REDACTED:github_token]",),
        "nested": {"k": ("x", ["password=[REDACTED:password]"])},
    }
    assert found.kinds == ("github_token", "password")
    assert found.count == 2


def test_other_sequences_are_walked_and_untouched_ones_kept_as_they_are() -> None:
    untouched = ("a", ("b", 1, None))
    clean, found = redact_json({"queue": deque([f"token {TOKEN}"]), "plain": untouched})

    assert clean["queue"] == ["token [REDACTED:github_token]"]
    assert clean["plain"] is untouched  # nothing changed: the very same object
    assert found.count == 1
    # Text and bytes are leaves, never walked character by character.
    assert redact_json(b"raw bytes") == (b"raw bytes", redact_json(1)[1])


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_session_save_stores_no_secret_held_in_a_tuple(
    tmp_path: Path, kind: str, use_async: bool
) -> None:
    store: Any = InMemorySessionStore() if kind == "memory" else FileSessionStore(tmp_path)
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    data = {
        "thread_id": "t",
        "notes": (f"token {TOKEN}",),
        "nested": {"k": ("x", (f"api_key={PASSWORD}",))},
    }
    if use_async:
        await registry.atrigger(HookEvent.PIPELINE_END, data)
    else:
        registry.trigger(HookEvent.PIPELINE_END, data)

    saved = repr(store.get("t"))
    assert TOKEN not in saved
    assert PASSWORD not in saved
    assert "[REDACTED:github_token]" in saved
    for path in tmp_path.rglob("*"):  # the file store's JSON on disk
        assert TOKEN not in path.read_text()
        assert PASSWORD not in path.read_text()


# --- The value of a secret-named key ------------------------------------------------------


def test_the_value_of_a_secret_named_key_is_redacted_whatever_its_shape() -> None:
    value = {
        "password": PASSWORD,
        "nested": {"k": ("x", {"DB_PASSWORD_PROD": "correct horse battery"})},
        "api_key": "sk-proj-" + "A1b2C3d4" * 4,  # also a vendor token: one secret, counted once
        "apiKey": "abcDEF123456",
    }

    clean, found = redact_json(value)

    assert clean == {
        "password": "[REDACTED:password]",
        "nested": {"k": ("x", {"DB_PASSWORD_PROD": "[REDACTED:password]"})},
        "api_key": "[REDACTED:secret_assignment]",
        "apiKey": "[REDACTED:secret_assignment]",
    }
    assert found.count == 4
    assert found.kinds == ("password", "secret_assignment")


def test_keys_that_only_look_secret_keep_their_values() -> None:
    value = {
        "token_count": "4000",
        "tokens": "Xk9mQ2pL7vTz is a word list",
        "key": "user_id",
        "monkey": "Xk9mQ2pL7vTz",
        "password_policy": "rotate quarterly",
        "password": "${DB_PASSWORD}",
        "secret": "<your-secret>",
        "token": "4000",
        "summary": "the password was rotated",
    }
    clean, found = redact_json(value)
    assert clean is value
    assert found.count == 0


def _session_saved(tmp_path: Path, data: dict[str, Any]) -> FileSessionStore:
    """A file store after `register_session_save` saved the final state `data`."""
    store = FileSessionStore(tmp_path)
    registry = HookRegistry()
    register_session_save(registry, store, strict=True)
    registry.trigger(HookEvent.PIPELINE_END, {"thread_id": "t", **data})
    return store


def test_the_reviewers_session_save_stores_neither_secret(tmp_path: Path) -> None:
    store = _session_saved(
        tmp_path, {"notes": (f"token {TOKEN}",), "nested": {"k": ("x", {"password": PASSWORD})}}
    )

    assert store.get("t") == {
        "notes": ["token [REDACTED:github_token]"],
        "nested": {"k": ["x", {"password": "[REDACTED:password]"}]},
    }
    saved = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert saved  # the session file (and the store's lock file)
    for path in saved:
        assert TOKEN not in path.read_text()
        assert PASSWORD not in path.read_text()


def test_a_key_redacted_before_does_not_make_its_value_a_secret() -> None:
    """A store with two tiers redacts the value once more: a marker key is no secret name."""
    value = {TOKEN: "a key that is itself a secret", "password": PASSWORD}
    once, _ = redact_json(value)
    twice, found = redact_json(once)

    assert once == {
        "[REDACTED:github_token]": "a key that is itself a secret",
        "password": "[REDACTED:password]",
    }
    assert twice == once
    assert found.count == 0


def test_a_number_under_a_secret_named_key_is_redacted(tmp_path: Path) -> None:
    """An account password or a numeric API token saved as a JSON number (issue 22)."""
    store = _session_saved(
        tmp_path,
        {
            "api_token": 881239047123,
            "nested": {"db_password": 20240917, "client_secret": 1234567890.5},
            "max_tokens": 4096,
            "token_count": 12345678,
            "password_min_length": 12,
            "token": 4000,
            "verified": True,
        },
    )
    assert store.get("t") == {
        "api_token": "[REDACTED:secret_assignment]",
        "nested": {
            "db_password": "[REDACTED:password]",
            "client_secret": "[REDACTED:secret_assignment]",
        },
        "max_tokens": 4096,
        "token_count": 12345678,
        "password_min_length": 12,
        "token": 4000,
        "verified": True,
    }
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert "881239047123" not in path.read_text()
            assert "20240917" not in path.read_text()
