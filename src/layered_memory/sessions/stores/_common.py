"""Pure helpers shared by the session store adapters: validation, encoding, URL redaction."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from typing import Any, cast

from layered_memory._logs import get_logger
from layered_memory.errors import SessionDataError, SessionStoreError
from layered_memory.sessions.stores._urls import driver_detail, password_hint, redact_url, scrub
from layered_memory.writeback.redaction import redact_json, redact_text

__all__ = [
    "MAX_KEY_BYTES",
    "Clock",
    "JsonDict",
    "check_key",
    "check_ttl",
    "clean_value",
    "compact_json",
    "decode_value",
    "driver_detail",
    "encode_value",
    "password_hint",
    "redact_url",
    "scrub",
    "wall_clock",
]

logger = get_logger(__name__)

JsonDict = dict[str, Any]
"""A session value: a JSON-serializable dict."""

Clock = Callable[[], float]
"""Returns the current time in seconds; stores take one so tests can move time without sleeping."""

wall_clock: Clock = time.time

MAX_KEY_BYTES = 1024
"""Longest session key, in UTF-8 bytes, that every adapter stores.

PostgreSQL's primary-key index refuses an entry over about 2,700 bytes; one limit below it,
checked before any I/O, makes every store refuse the same keys with the same message.
"""

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_key(key: object) -> str:
    """Return ``key`` if it can be stored by every adapter, else raise.

    Raises:
        SessionStoreError: Not a non-empty str, contains NUL (PostgreSQL text cannot hold it), a
            lone surrogate (not encodable as UTF-8), or is longer than `MAX_KEY_BYTES` in UTF-8.
    """
    if not isinstance(key, str) or not key:
        msg = f"a session key must be a non-empty str, got {key!r}"
        raise SessionStoreError(msg, key=key if isinstance(key, str) else None)
    if "\x00" in key:
        msg = "a session key must not contain NUL characters"
        raise SessionStoreError(msg, key=key)
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        msg = f"a session key must be valid UTF-8 text: {exc.reason}"
        raise SessionStoreError(msg, key=key) from None
    if size > MAX_KEY_BYTES:
        msg = (
            f"a session key must be at most {MAX_KEY_BYTES} bytes in UTF-8, got one of {size} "
            "bytes: shorten it (e.g. replace a long part with its hash)"
        )
        raise SessionStoreError(msg, key=key)
    return key


def check_ttl(ttl: float | None) -> float | None:
    """Return ``ttl`` (seconds) if it is None or a positive finite number, else raise ValueError."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        msg = f"ttl must be a number of seconds or None, got {type(ttl).__name__}"
        raise TypeError(msg)
    if not math.isfinite(ttl) or ttl <= 0:
        msg = f"ttl must be a positive number of seconds, got {ttl!r}"
        raise ValueError(msg)
    return float(ttl)


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def compact_json(key: str, value: object) -> str:
    """``value`` as compact JSON text that every store can hold, without redaction.

    NUL is written ``\\u0000`` (as ``json`` writes every control character) and a lone
    surrogate ``\\udXXX`` (``json`` would write it raw, and no UTF-8 encoder takes it), so the
    text is plain UTF-8 and reads back as the same str. One exception, JSON's own rule: a high
    surrogate followed by a low one reads back as the one character they encode.

    Raises:
        SessionStoreError: ``value`` is not a dict or is not JSON-serializable.
    """
    if not isinstance(value, dict):
        msg = f"a session value must be a dict, got {type(value).__name__}"
        raise SessionStoreError(msg, key=key)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"session value for key {key!r} is not JSON-serializable: {exc}"
        raise SessionStoreError(msg, key=key) from exc
    # `isascii` is O(1) on CPython: most values skip the scan. A surrogate can only be inside
    # a string (JSON's own characters are ASCII), so escaping it there is exact.
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text


def _redacted(key: str, value: JsonDict) -> JsonDict | None:
    """``value`` with its secrets redacted (one warning), or None when it holds none."""
    clean, found = redact_json(value)
    if not found.count:
        return None
    logger.warning(
        "redacted %d secret(s) (%s) from the session value for key %s before storing it",
        found.count,
        ", ".join(found.kinds),
        redact_text(key).text,
    )
    return dict(clean)


def clean_value(key: str, value: object) -> JsonDict:
    """``value`` checked like `encode_value` does, with its secrets redacted.

    For a store that writes one value to several tiers (`HybridSessionStore`): redacted once,
    so the tiers find nothing left to redact (and warn once, not once per tier).

    Raises:
        SessionStoreError: ``value`` is not a dict or is not JSON-serializable.
    """
    compact_json(key, value)
    checked = cast(JsonDict, value)  # a dict: `compact_json` checked it
    return _redacted(key, checked) or checked


def encode_value(key: str, value: object) -> str:
    """Serialize a session value to compact JSON text, secrets redacted.

    Serializing on every write also gives each store value semantics: the caller mutating its
    dict afterwards cannot change what is stored. Every string in the value, dict keys
    included, goes through `layered_memory.writeback.redaction.redact_json` first; the session key
    itself is the caller's identifier and is stored as given.

    Raises:
        SessionStoreError: ``value`` is not a dict or is not JSON-serializable.
    """
    text = compact_json(key, value)
    # Every adapter writes through here: no secret reaches a store, whoever calls `set`.
    clean = _redacted(key, cast(JsonDict, value))
    return text if clean is None else compact_json(key, clean)


def decode_value(key: str, text: str | bytes) -> JsonDict:
    """Parse stored JSON text back into a dict.

    Raises:
        SessionDataError: The stored text is not a JSON object (corrupt or foreign data).
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        msg = f"stored session value for key {key!r} is not valid JSON: {exc}"
        raise SessionDataError(msg, key=key) from exc
    if not isinstance(value, dict):
        msg = f"stored session value for key {key!r} is not a JSON object"
        raise SessionDataError(msg, key=key)
    return value
