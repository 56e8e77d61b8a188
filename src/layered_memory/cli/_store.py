"""`--store`: a `PostgresStore` namespace, shared by `inspect`, `sync`, `graph`, `review`, `tiers`.

Opening the store, namespaces, file items. Memory files live in the store exactly as
deepagents' `StoreBackend` keeps them: one item per file, keyed by its path (`/AGENTS.md`),
valued `{"content", "encoding", "created_at", "modified_at"}`; text is stored as `utf-8`,
anything else as `base64`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layered_memory.errors import (
    CliStoreError,
)
from layered_memory.sessions.stores.urls import driver_detail, password_hint, redact_url

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

CONNECT_TIMEOUT_SECONDS = 5
"""Added to the connection string unless it sets `connect_timeout` itself."""

PAGE_SIZE = 500

# The characters deepagents' StoreBackend allows in a namespace component, but `.`: the
# PostgresStore `--store` names joins components with it and refuses it in a label.
_COMPONENT_RE = re.compile(r"^[A-Za-z0-9\-_@+:~]+$")

INSTALL_HINT = "install the postgres extra: pip install 'layered-memory[postgres]'"


@dataclass(frozen=True, slots=True)
class FileItem:
    """One store item read as a file.

    Attributes:
        key: The item key (the file's backend path, e.g. `/AGENTS.md`).
        data: The file's bytes, or None when the item is not a file item.
        created_at: The item's `created_at`, kept when the file is updated.
    """

    key: str
    data: bytes | None
    created_at: str | None = None


def parse_namespace(text: str) -> tuple[str, ...]:
    """`a/b/c` -> `("a", "b", "c")`, checked as deepagents' `StoreBackend` checks it.

    Raises:
        CliStoreError: An empty component or a character the backend refuses.
    """
    parts = tuple(text.strip().strip("/").split("/"))
    for part in parts:
        if not part or not _COMPONENT_RE.match(part):
            msg = (
                f"invalid namespace {text!r}: use components of letters, digits and - _ @ + : ~ "
                "separated by '/' (e.g. org/acme/project; no '.': PostgresStore's separator)"
            )
            raise CliStoreError(msg)
    return parts


def _conninfo(url: str) -> str:
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError as exc:
        msg = f"--store needs psycopg: {INSTALL_HINT}"
        raise CliStoreError(msg) from exc
    hint = password_hint(url)
    if hint is not None:
        raise CliStoreError(f"invalid store URL {redact_url(url)}: {hint}")
    failure: CliStoreError | None = None
    try:
        if "connect_timeout" in conninfo_to_dict(url):
            return url
        return make_conninfo(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except Exception as exc:  # psycopg.ProgrammingError: a malformed URL
        reason = _first_line(exc, url)
        failure = CliStoreError(f"invalid store URL {redact_url(url)}: {reason}")
    # Raised outside the `except`: psycopg's exception quotes the whole URL, password included,
    # and must not even ride along as `__context__`.
    raise failure


def _first_line(exc: BaseException, url: str) -> str:
    text = str(exc).strip()
    return driver_detail(text.splitlines()[0], url) if text else type(exc).__name__


def store_failure(url: str, exc: BaseException) -> CliStoreError:
    """A one-line error naming the URL without its password and the driver's first line."""
    reason = _first_line(exc, url)
    if type(exc).__name__ == "UndefinedTable":
        reason = "it has no memory tables yet (run `layered-memory sync push` first)"
    return CliStoreError(f"cannot use the store at {redact_url(url)}: {reason}")


@contextmanager
def open_store(url: str) -> Iterator[BaseStore]:
    """A `PostgresStore` on `url`, closed on exit; driver errors become `CliStoreError`.

    Raises:
        CliStoreError: psycopg is missing, the URL is malformed, or the server does not answer
            (also when it fails later, inside the `with` block). Never chained to the driver's
            exception, whose text may hold the password.
    """
    try:
        import psycopg
        from langgraph.store.postgres import PostgresStore
    except ImportError as exc:
        msg = f"--store needs langgraph-checkpoint-postgres: {INSTALL_HINT}"
        raise CliStoreError(msg) from exc
    conninfo = _conninfo(url)
    failure: CliStoreError | None = None
    try:
        with PostgresStore.from_conn_string(conninfo) as store:
            yield store
    except psycopg.Error as exc:
        failure = store_failure(url, exc)
    if failure is not None:
        # Inside `with open_store(...)` the driver's exception is still being handled here, so
        # Python attaches it as `__context__` anyway; `from None` keeps it out of tracebacks.
        raise failure from None


def file_item(key: str, value: Any) -> FileItem:
    """Read a store value as deepagents' `StoreBackend` does (legacy list content included)."""
    if not isinstance(value, dict):
        return FileItem(key, None)
    content = value.get("content")
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        content = "\n".join(content)
    created = value.get("created_at")
    created_at = created if isinstance(created, str) else None
    if not isinstance(content, str):
        return FileItem(key, None, created_at)
    if value.get("encoding", "utf-8") == "base64":
        try:
            return FileItem(key, base64.standard_b64decode(content), created_at)
        except ValueError:
            return FileItem(key, None, created_at)
    return FileItem(key, content.encode("utf-8", "surrogatepass"), created_at)


def file_value(data: bytes, *, created_at: str | None = None) -> dict[str, Any]:
    """The store value for a file's bytes: `utf-8` text when it is text, else `base64`.

    Text with a NUL byte goes as base64 too: PostgreSQL's `jsonb` cannot hold `\\u0000`.
    """
    from deepagents.backends.utils import create_file_data

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        encoded = base64.standard_b64encode(data).decode("ascii")
        return dict(create_file_data(encoded, created_at=created_at, encoding="base64"))
    return dict(create_file_data(text, created_at=created_at, encoding="utf-8"))


def list_file_items(store: BaseStore, namespace: Sequence[str]) -> list[FileItem]:
    """Every item stored exactly in `namespace` (not in namespaces below it), by key.

    `BaseStore.search` matches a namespace prefix; PostgreSQL identifies a namespace by its
    components joined with `.`, so the comparison is made the same way.
    """
    wanted = ".".join(namespace)
    items: list[FileItem] = []
    offset = 0
    while True:
        page = store.search(tuple(namespace), limit=PAGE_SIZE, offset=offset)
        items.extend(
            file_item(str(item.key), item.value)
            for item in page
            if ".".join(item.namespace) == wanted
        )
        if len(page) < PAGE_SIZE:
            break
        offset += PAGE_SIZE
    return sorted(items, key=lambda item: item.key)
