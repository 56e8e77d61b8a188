"""Pure helpers shared by the session store adapters: validation, encoding, URL redaction."""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from layered_memory.errors import SessionStoreError
from layered_memory.redaction import redact_json, redact_text

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
"""A session value: a JSON-serializable dict."""

Clock = Callable[[], float]
"""Returns the current time in seconds; stores take one so tests can move time without sleeping."""

wall_clock: Clock = time.time


def check_key(key: object) -> str:
    """Return ``key`` if it can be stored by every adapter, else raise.

    Raises:
        SessionStoreError: Not a non-empty str, contains NUL (PostgreSQL text cannot hold it) or
            a lone surrogate (not encodable as UTF-8).
    """
    if not isinstance(key, str) or not key:
        msg = f"a session key must be a non-empty str, got {key!r}"
        raise SessionStoreError(msg, key=key if isinstance(key, str) else None)
    if "\x00" in key:
        msg = "a session key must not contain NUL characters"
        raise SessionStoreError(msg, key=key)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"a session key must be valid UTF-8 text: {exc.reason}"
        raise SessionStoreError(msg, key=key) from None
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


def encode_value(key: str, value: object) -> str:
    """Serialize a session value to compact JSON text, secrets redacted.

    Serializing on every write also gives each store value semantics: the caller mutating its
    dict afterwards cannot change what is stored. Every string in the value, dict keys
    included, goes through `layered_memory.redaction.redact_json` first; the session key
    itself is the caller's identifier and is stored as given.

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
    # Every adapter writes through here: no secret reaches a store, whoever calls `set`.
    clean, found = redact_json(value)
    if not found.count:
        return text
    logger.warning(
        "redacted %d secret(s) (%s) from the session value for key %s before storing it",
        found.count,
        ", ".join(found.kinds),
        redact_text(key).text,
    )
    return json.dumps(clean, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def decode_value(key: str, text: str | bytes) -> JsonDict:
    """Parse stored JSON text back into a dict.

    Raises:
        SessionStoreError: The stored text is not a JSON object (corrupt or foreign data).
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        msg = f"stored session value for key {key!r} is not valid JSON: {exc}"
        raise SessionStoreError(msg, key=key) from exc
    if not isinstance(value, dict):
        msg = f"stored session value for key {key!r} is not a JSON object"
        raise SessionStoreError(msg, key=key)
    return value


_DSN_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``, fit for errors and logs.

    Handles ``scheme://user:password@host/...`` URLs, ``?password=`` query parameters and
    libpq ``key=value`` connection strings.
    """
    if "://" not in url:
        return _DSN_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostinfo = netloc.rpartition("@")
            user, has_password, _password = userinfo.partition(":")
            netloc = f"{user}:***@{hostinfo}" if has_password else netloc
        query = parts.query
        if query:
            pairs = [
                (name, "***" if name.lower() == "password" else value)
                for name, value in parse_qsl(query, keep_blank_values=True)
            ]
            query = urlencode(pairs, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        # An unparsable URL may hide a password anywhere; say nothing rather than leak it.
        return "<unparsable URL>"


def scrub(text: str, url: str) -> str:
    """Remove the password of ``url`` from ``text`` (a driver's error message)."""
    password = _password_of(url)
    return text.replace(password, "***") if password else text


def _password_of(url: str) -> str | None:
    if "://" not in url:
        match = _DSN_PASSWORD.search(url)
        return match.group(2).strip("'") if match else None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return parts.password
    for name, value in parse_qsl(parts.query):
        if name.lower() == "password" and value:
            return value
    return None
