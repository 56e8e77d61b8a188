"""The session store port: what every adapter implements, and what they share.

The protocols (`SessionStore` and the capabilities `HybridSessionStore` uses), the checks of
keys and values every adapter makes before any I/O (so every store refuses the same input with
the same message), the encoding with secrets redacted, and the async twins of a blocking store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from layered_memory._logs import get_logger
from layered_memory.errors import SessionDataError, SessionStoreError
from layered_memory.safety.redaction import redact_json, redact_text

__all__ = [
    "KEY_PAGE_SIZE",
    "MAX_KEY_BYTES",
    "Clock",
    "ConditionalSessionStore",
    "ExpiryAwareSessionStore",
    "GenerationalSessionStore",
    "JsonDict",
    "ListableSessionStore",
    "PagedKeys",
    "SessionStore",
    "SkippedNames",
    "StoredSession",
    "ThreadedAsyncTwins",
    "aread_entry",
    "check_key",
    "check_prefix",
    "clean_value",
    "compact_json",
    "decode_value",
    "encode_value",
    "read_entry",
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

KEY_PAGE_SIZE = 500
"""Keys one listing round trip returns at most (a SCAN's COUNT, a SELECT's LIMIT, directory
entries read per worker-thread hop): a store of millions of keys is listed in bounded memory,
page by page, and an event loop is never held for more than one page."""

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


def check_prefix(prefix: object) -> str:
    """Return ``prefix`` (a key prefix to list under) if every adapter can match it, else raise.

    Raises:
        SessionStoreError: Not a str, or one `check_key` would refuse (the empty prefix lists
            every key).
    """
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        msg = f"a session key prefix must be a str, got {prefix!r}"
        raise SessionStoreError(msg)
    return check_key(prefix)


class SkippedNames:
    """What one listing skipped: counted, the first one named, told in one warning at its end.

    A store shared with other programs (a Redis database, a folder) may hold names this
    package never wrote: they are skipped, never passed on to fail later, and a million of
    them cost one log line, not a million.

    Args:
        where: The store, as the warning names it (no password).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.count = 0
        self.first: tuple[str, str] | None = None

    def add(self, name: str, reason: str) -> None:
        """Count a skipped name (the first one is named in the warning)."""
        self.count += 1
        if self.first is None:
            self.first = (name, reason)

    def key(self, name: object) -> str | None:
        """`name` if it is a session key, else None (counted)."""
        try:
            return check_key(name)
        except SessionStoreError as exc:
            self.add(repr(name)[:200], str(exc))
            return None

    def report(self) -> None:
        """One warning when anything was skipped."""
        if self.first is None:
            return
        name, reason = self.first
        logger.warning(
            "session store %s: skipped %d listed name(s) that are no sessions of this store, "
            "first %s: %s; remove them, or give the store a place of its own",
            self.where,
            self.count,
            name,
            reason,
        )


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
    included, goes through `layered_memory.safety.redaction.redact_json` first; the session key
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


@runtime_checkable
class SessionStore(Protocol):
    """A key-value store of session data: JSON-serializable dicts with an optional TTL.

    ``get`` returns None for a missing or expired key; ``set`` replaces the whole value (last
    write wins); ``delete`` of a missing key is not an error. Each method has an async twin.
    """

    def get(self, key: str) -> JsonDict | None:
        """Return the value stored under ``key``, or None when missing or expired.

        Args:
            key: The session key (`build_session_key` makes one).

        Returns:
            The stored dict, or None.
        """
        ...

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, expiring after ``ttl`` seconds (None: never).

        Args:
            key: The session key.
            value: A JSON-serializable dict; it replaces the whole stored value.
            ttl: Seconds until the entry expires (None: never).
        """
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error.

        Args:
            key: The session key.
        """
        ...

    async def aget(self, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        ...

    async def aset(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        ...

    async def adelete(self, key: str) -> None:
        """Async twin of `delete`."""
        ...


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A stored value with its remaining lifetime.

    Attributes:
        value: The stored dict.
        ttl: Seconds until it expires, or None when it never does.
        generation: The store's `GenerationalSessionStore.generation`, read atomically with
            the value (None: the store does not say).
    """

    value: JsonDict
    ttl: float | None
    generation: str | None = None


@runtime_checkable
class ExpiryAwareSessionStore(SessionStore, Protocol):
    """A store that can also tell how long an entry has left to live.

    `HybridSessionStore` uses it to backfill L1 with the entry's remaining lifetime, so L1 never
    serves a value L2 has already expired. Every built-in adapter implements it.
    """

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None when missing or expired.

        Args:
            key: The session key.

        Returns:
            The value with its remaining lifetime, or None.
        """
        ...

    async def aget_entry(self, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        ...


def read_entry(store: SessionStore, key: str) -> StoredSession | None:
    """The entry at `key` with its remaining lifetime when the store can tell it
    (`ExpiryAwareSessionStore`), else with none.

    Args:
        store: Any session store.
        key: The session key.

    Returns:
        The stored entry, or None when missing or expired.
    """
    if isinstance(store, ExpiryAwareSessionStore):
        return store.get_entry(key)
    value = store.get(key)
    return None if value is None else StoredSession(value, None)


async def aread_entry(store: SessionStore, key: str) -> StoredSession | None:
    """Async twin of `read_entry`."""
    if isinstance(store, ExpiryAwareSessionStore):
        return await store.aget_entry(key)
    value = await store.aget(key)
    return None if value is None else StoredSession(value, None)


@runtime_checkable
class ConditionalSessionStore(SessionStore, Protocol):
    """A store with atomic conditional writes (memcached's ``add``, a compare-and-set).

    `HybridSessionStore` uses them on its L1 so a reader's backfill can never overwrite a
    writer's newer value, and a stale entry is replaced only if nobody changed it meanwhile;
    `register_session_save` merges with them, so writers in several processes lose no update.
    Every built-in store implements it (atomically across processes; `HybridSessionStore` as
    its L2 does).
    """

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired.

        Args:
            key: The session key.
            value: A JSON-serializable dict.
            ttl: Seconds until the entry expires (None: never).

        Returns:
            True when stored, False when the key held a live value.
        """
        ...

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected``.

        Args:
            key: The session key.
            expected: The value the caller read; nothing changes if the store holds another.
            value: The new value (None: delete the key).
            ttl: Seconds until the new entry expires (None: never).

        Returns:
            True when replaced (or deleted), False when the stored value was not ``expected``.
        """
        ...

    async def aadd(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        ...

    async def areplace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Async twin of `replace`."""
        ...


@runtime_checkable
class GenerationalSessionStore(Protocol):
    """A store whose server may come back with older data, and that can tell when it did.

    ``generation`` names the history of the data the store serves (Redis: the server's
    replication id, ``master_replid``). It changes whenever that data may have lost writes it
    acknowledged: the server restarted (possibly from an older snapshot), a replica was
    promoted, or an old primary was demoted, resynced and promoted again (a failback; its
    ``run_id`` stays, so the ``run_id`` is not enough). An entry stamped with another generation
    may be older than its source. A connection survives a role change, so the store reports
    the generation with each entry it reads (`StoredSession.generation`); the property is the
    last one seen. None until the first connection, or when the server does not say.
    """

    @property
    def generation(self) -> str | None:
        """The current server instance's id, or None when unknown."""
        ...


@runtime_checkable
class ListableSessionStore(SessionStore, Protocol):
    """A store that can list the keys it holds (every built-in store can).

    Listing is paged (`KEY_PAGE_SIZE` keys per round trip), so a store of millions of keys is
    listed in bounded memory; a key written while a listing runs may or may not be listed,
    and one may be listed twice (a Redis SCAN): callers act on each key idempotently.
    `layered_memory.forget` lists the keys to search this way.
    """

    def keys(self, prefix: str = "") -> Iterator[str]:
        """The live keys that start with ``prefix`` (expired entries left out).

        Args:
            prefix: Only keys starting with it (the empty prefix: every key).

        Returns:
            An iterator over the keys, in no particular order.

        Raises:
            SessionStoreError: A prefix no key could start with (as `check_key` refuses).
        """
        ...

    def akeys(self, prefix: str = "") -> AsyncIterator[str]:
        """Async twin of `keys`."""
        ...


class _Paged(Protocol):
    def _key_pages(self, prefix: str) -> Generator[list[str]]: ...


class PagedKeys:
    """`keys` over a store's `_key_pages(prefix)`: pages of at most `KEY_PAGE_SIZE` keys."""

    def keys(self: _Paged, prefix: str = "") -> Iterator[str]:
        """The live keys that start with ``prefix`` (see `ListableSessionStore.keys`)."""
        pages = self._key_pages(check_prefix(prefix))
        with contextlib.closing(pages):
            for page in pages:
                yield from page


# -- the async twins of a store whose I/O blocks (files; psycopg's sync pool): each runs the
# sync method in a worker thread, so an event loop never waits on the disk or the network.


class _Blocking(Protocol):
    def get_entry(self, key: str) -> StoredSession | None: ...
    def get(self, key: str) -> JsonDict | None: ...
    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None: ...
    def delete(self, key: str) -> None: ...
    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool: ...
    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool: ...


class ThreadedAsyncTwins:
    """`aget_entry`, `aget`, `aset`, `adelete`, `aadd`, `areplace`, `akeys` over the sync
    methods."""

    async def aget_entry(self: _Blocking, key: str) -> StoredSession | None:
        """Async twin of `get_entry`."""
        return await asyncio.to_thread(self.get_entry, key)

    async def aget(self: _Blocking, key: str) -> JsonDict | None:
        """Async twin of `get`."""
        return await asyncio.to_thread(self.get, key)

    async def aset(self: _Blocking, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Async twin of `set`."""
        await asyncio.to_thread(self.set, key, value, ttl=ttl)

    async def adelete(self: _Blocking, key: str) -> None:
        """Async twin of `delete`."""
        await asyncio.to_thread(self.delete, key)

    async def aadd(self: _Blocking, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Async twin of `add`."""
        return await asyncio.to_thread(self.add, key, value, ttl=ttl)

    async def areplace(
        self: _Blocking,
        key: str,
        expected: JsonDict,
        value: JsonDict | None,
        *,
        ttl: float | None = None,
    ) -> bool:
        """Async twin of `replace`."""
        return await asyncio.to_thread(self.replace, key, expected, value, ttl=ttl)

    async def akeys(self: _Paged, prefix: str = "") -> AsyncIterator[str]:
        """Async twin of `keys`: each page is read in a worker thread."""
        pages = self._key_pages(check_prefix(prefix))  # a generator: nothing runs yet
        try:
            while (page := await asyncio.to_thread(next, pages, None)) is not None:
                for key in page:
                    yield key
        finally:
            # Closing runs the generator's cleanup (a directory handle, a cursor): off the loop.
            await asyncio.to_thread(pages.close)
