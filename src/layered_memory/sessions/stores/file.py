"""File session store: one JSON file per session in one folder, replaced atomically."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from layered_memory.core.files import LOCK_POLL_SECONDS, LOCK_TIMEOUT_SECONDS, atomic_write
from layered_memory.core.validation import check_bool, check_ttl
from layered_memory.errors import SessionDataError, SessionStoreError
from layered_memory.sessions.stores.base import (
    KEY_PAGE_SIZE,
    MAX_KEY_BYTES,
    Clock,
    JsonDict,
    PagedKeys,
    SkippedNames,
    StoredSession,
    ThreadedAsyncTwins,
    check_key,
    compact_json,
    encode_value,
    wall_clock,
)

__all__ = ["LOCK_FILE_NAME", "FileSessionStore"]

_SLUG_UNSAFE = re.compile(r"[^a-z0-9_]+")
_SLUG_MAX = 64
_TEMP_PREFIX = ".tmp-"
_FILE_NAME = re.compile(r"[a-z0-9_]{1,64}-[0-9a-f]{32}\.json")
_HEAD_START = '{"key":'
_HEAD_BYTES = 6 * MAX_KEY_BYTES + 256
"""Enough of a file to hold its key and expiry, written first (`_write`): the longest key
with every byte escaped as `\\u00XX`, and the expiry. A listing reads no more of a file."""

LOCK_FILE_NAME = ".session-store.lock"
"""The folder's write lock (never deleted: two writers could then lock two different files)."""


def file_name_for(key: str) -> str:
    """Return the file name of ``key``: a readable slug plus a hash of the exact key.

    The slug keeps only ``[a-z0-9_]`` so no key can produce a separator, ``..`` or a name that
    differs only in case (which would collide on case-insensitive file systems); the hash keeps
    distinct keys apart and bounds the name's length.
    """
    slug = _SLUG_UNSAFE.sub("_", key.lower()).strip("_")[:_SLUG_MAX] or "key"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    return f"{slug}-{digest}.json"


class FileSessionStore(PagedKeys, ThreadedAsyncTwins):
    """Stores each session as ``<root>/<slug>-<hash>.json``, written atomically.

    A write goes to a temporary file in the same folder, is flushed to disk and then renamed over
    the old file, so readers see the old or the new value, never a mix, and concurrent writers
    end with the last rename winning. Writes hold the folder's lock file (`LOCK_FILE_NAME`,
    `filelock`), so `add` and `replace` compare and write atomically across processes. The
    expiry is stored in the file (wall-clock seconds); expired files read as missing and are
    removed by `purge_expired`.

    Args:
        root: The folder; created when missing.
        clock: Wall-clock seconds (default ``time.time``); tests inject one.
        fsync: Flush each write to the disk before acknowledging it (default True).

    Example:
        >>> store = FileSessionStore("~/.cache/my-agent/sessions")  # doctest: +SKIP
        >>> store.set("entity:acme:research", {"summary": "..."}, ttl=86400)  # doctest: +SKIP
    """

    def __init__(
        self, root: str | os.PathLike[str], *, clock: Clock = wall_clock, fsync: bool = True
    ) -> None:
        self.root = Path(root).expanduser()
        self._clock = clock
        self._fsync = check_bool(fsync, parameter="fsync")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = f"cannot create session folder {str(self.root)!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg) from exc
        self._lock = FileLock(
            str(self.root / LOCK_FILE_NAME), timeout=LOCK_TIMEOUT_SECONDS, mode=0o600
        )

    @contextmanager
    def _writing(self, key: str) -> Iterator[None]:
        """Hold the folder's write lock: no other writer, in any process, runs meanwhile."""
        where = str(self.root / LOCK_FILE_NAME)
        try:
            self._lock.acquire(poll_interval=LOCK_POLL_SECONDS)
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            msg = (
                f"session folder lock {where!r} still held after {LOCK_TIMEOUT_SECONDS:g} s: "
                "another process holds it (stuck or stopped?)"
            )
            raise SessionStoreError(msg, key=key) from None
        except OSError as exc:
            msg = f"cannot lock session folder lock {where!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg, key=key) from exc
        try:
            yield
        finally:
            self._lock.release()

    def path_for(self, key: str) -> Path:
        """The file that holds ``key`` (always directly inside `root`)."""
        return self.root / file_name_for(check_key(key))

    def get_entry(self, key: str) -> StoredSession | None:
        """Return the value and its remaining TTL, or None when missing or expired."""
        return self._read(key, self.path_for(key))

    def _read(self, key: str, path: Path) -> StoredSession | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            msg = f"cannot read session file {str(path)!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg, key=key) from exc
        stored_key, expires_at, value = _parse_file(key, path, text)
        if stored_key != key:
            # Two keys sharing 128 hash bits is not expected; never hand one key's data to another.
            return None
        if expires_at is None:
            return StoredSession(value, None)
        remaining = expires_at - self._clock()
        return StoredSession(value, remaining) if remaining > 0 else None

    def get(self, key: str) -> JsonDict | None:
        """Return the value under ``key``, or None when missing or expired."""
        entry = self.get_entry(key)
        return None if entry is None else entry.value

    def set(self, key: str, value: JsonDict, *, ttl: float | None = None) -> None:
        """Atomically replace the file of ``key`` with ``value``, expiring after ``ttl`` s."""
        path = self.path_for(key)
        seconds = check_ttl(ttl)
        value_text = encode_value(key, value)
        with self._writing(key):
            self._write(key, path, value_text, seconds)

    def add(self, key: str, value: JsonDict, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is missing or expired; True when stored."""
        path = self.path_for(key)
        seconds = check_ttl(ttl)
        value_text = encode_value(key, value)
        with self._writing(key):
            if self._read(key, path) is not None:
                return False
            self._write(key, path, value_text, seconds)
        return True

    def replace(
        self, key: str, expected: JsonDict, value: JsonDict | None, *, ttl: float | None = None
    ) -> bool:
        """Replace the value only if it still equals ``expected`` (None: delete); True if done."""
        path = self.path_for(key)
        seconds = check_ttl(ttl)
        expected_text = compact_json(key, expected)
        value_text = None if value is None else encode_value(key, value)
        with self._writing(key):
            entry = self._read(key, path)
            if entry is None or compact_json(key, entry.value) != expected_text:
                return False
            if value_text is None:
                self._unlink(key, path)
            else:
                self._write(key, path, value_text, seconds)
        return True

    def _write(self, key: str, path: Path, value_text: str, seconds: float | None) -> None:
        expires_at = None if seconds is None else self._clock() + seconds
        # The value is spliced in as already-encoded JSON: a 1 MB value is encoded only once.
        text = (
            f'{{"key":{json.dumps(key, ensure_ascii=False)},'
            f'"expires_at":{json.dumps(expires_at)},"value":{value_text}}}'
        )
        self._write_atomically(key, path, text)

    def _write_atomically(self, key: str, path: Path, text: str) -> None:
        try:
            atomic_write(
                path,
                text.encode("utf-8"),
                mode=0o600,
                durable=self._fsync,
                temp_prefix=_TEMP_PREFIX,
            )
        except OSError as exc:
            msg = f"cannot write session file {str(path)!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg, key=key) from exc

    def delete(self, key: str) -> None:
        """Remove the file of ``key`` if present."""
        path = self.path_for(key)
        with self._writing(key):
            self._unlink(key, path)

    def _unlink(self, key: str, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            msg = f"cannot delete session file {str(path)!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg, key=key) from exc

    def _key_pages(self, prefix: str) -> Generator[list[str]]:
        # One flat folder, read entry by entry (never listed whole): a page ends after
        # `KEY_PAGE_SIZE` entries, session files or not, so a folder of millions of files is
        # walked in bounded memory and no worker-thread hop reads more than a page of it.
        now = self._clock()
        skipped = SkippedNames(f"folder {str(self.root)!r}")
        try:
            entries = os.scandir(self.root)
        except OSError as exc:
            msg = f"cannot list session folder {str(self.root)!r}: {exc.strerror or exc}"
            raise SessionStoreError(msg) from exc
        with entries:
            page: list[str] = []
            seen = 0
            for entry in entries:
                seen += 1
                key = self._listed(entry, now, skipped)
                if key is not None and key.startswith(prefix):
                    page.append(key)
                if seen == KEY_PAGE_SIZE:
                    yield page
                    page, seen = [], 0
            if page:
                yield page
        skipped.report()

    def _listed(self, entry: os.DirEntry[str], now: float, skipped: SkippedNames) -> str | None:
        """The live key of one folder entry, or None (counted in `skipped` unless it is the
        lock or a write in progress)."""
        name = entry.name
        if name == LOCK_FILE_NAME or name.startswith(_TEMP_PREFIX):
            return None
        if not _FILE_NAME.fullmatch(name):
            skipped.add(repr(name), "not a file name this store writes")
            return None
        head = _read_head(entry.path)
        found = None if head is None else _parse_head(head)
        if found is None:
            skipped.add(repr(name), "not a regular file starting with a session key (corrupt?)")
            return None
        key = skipped.key(found[0])
        if key is None:
            return None
        if file_name_for(key) != name:
            skipped.add(repr(name), "its key belongs to another file name (copied or renamed?)")
            return None
        expires_at = found[1]
        return key if expires_at is None or expires_at > now else None

    def purge_expired(self) -> int:
        """Delete the files of expired sessions; returns how many were deleted.

        A session rewritten between this method's read and its delete is lost, so run it when
        no writer is active (e.g. from a maintenance job).
        """
        now = self._clock()
        purged = 0
        for path in self.root.glob("*.json"):
            if path.name.startswith(_TEMP_PREFIX):
                continue
            try:
                _, expires_at, _ = _parse_file(path.name, path, path.read_text(encoding="utf-8"))
            except (OSError, SessionStoreError):
                continue
            if expires_at is not None and expires_at <= now:
                path.unlink(missing_ok=True)
                purged += 1
        return purged


def _read_head(path: str) -> str | None:
    """The start of a regular file (never a FIFO, a device or a link), or None."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "ignore")  # a cut multi-byte character at the end only


def _parse_head(head: str) -> tuple[object, float | None] | None:
    """`(key, expires_at)` from the start of a session file as `_write` lays it out."""
    if not head.startswith(_HEAD_START):
        return None
    decoder = json.JSONDecoder()
    try:
        key, end = decoder.raw_decode(head, len(_HEAD_START))
        marker = ',"expires_at":'
        if not head.startswith(marker, end):
            return None
        expires_at, _ = decoder.raw_decode(head, end + len(marker))
    except ValueError:
        return None
    if expires_at is not None and (
        isinstance(expires_at, bool) or not isinstance(expires_at, int | float)
    ):
        return None
    return key, expires_at


def _parse_file(key: str, path: Path, text: str) -> tuple[str, float | None, JsonDict]:
    try:
        data = json.loads(text)
        stored_key = data["key"]
        expires_at = data["expires_at"]
        value = data["value"]
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"session file {str(path)!r} is corrupt: {exc}"
        raise SessionDataError(msg, key=key) from exc
    if not isinstance(value, dict) or not isinstance(stored_key, str):
        msg = f"session file {str(path)!r} is corrupt: unexpected layout"
        raise SessionDataError(msg, key=key)
    if expires_at is not None and not isinstance(expires_at, int | float):
        msg = f"session file {str(path)!r} is corrupt: bad expires_at"
        raise SessionDataError(msg, key=key)
    return stored_key, expires_at, value
