"""A store URL's password never shows: not in messages, reprs, tracebacks, logs or CLI output.

Drivers quote the URL in their errors (psycopg: ``... in URI: "postgresql://app:PW@[::1/test"``)
and split a password holding a raw ``@`` or ``/`` into pieces they then report as a host or
port. Every URL shape below, well-formed or not, with passwords of every awkward kind, goes
through the library and the CLI; no form of the password, nor any piece of it of four
characters or more, may appear anywhere a user would see it.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable
from urllib.parse import quote

import pytest

from layered_memory.cli import main
from layered_memory.errors import SessionStoreError, StoreUnavailableError
from layered_memory.sessions.stores import (
    HybridSessionStore,
    InMemorySessionStore,
    PostgresSessionStore,
    RedisSessionStore,
)

PASSWORDS = [
    "Hunter2Secret",
    "Xyz@Secret/Word:123",  # separators a parser splits at
    "quo'te\"dq Space",
    "пароль-тайна",
    "Hash#Query?Bracket[x]",
    "%41%42Percent",  # looks percent-encoded already
    "semi;colon&amp=eq",
]


def pg_shapes(password: str) -> dict[str, str]:
    encoded = quote(password, safe="")
    single_quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    no_space = password.replace(" ", "_")
    return {
        "malformed-ipv6": f"postgresql://app:{password}@[::1/test",
        "encoded-unreachable": f"postgresql://app:{encoded}@127.0.0.1:1/test",
        "raw-unreachable": f"postgresql://app:{password}@127.0.0.1:1/test",
        "bad-port": f"postgresql://app:{encoded}@127.0.0.1:notaport/test",
        "query-password": f"postgresql://app@127.0.0.1:1/test?password={encoded}&sslmode=disable",
        "query-typo": f"postgresql://app@127.0.0.1:1/test?passwrd={encoded}",
        "conninfo": f"host=127.0.0.1 port=1 user=app password='{single_quoted}'",
        "conninfo-missing-equals": f"host=127.0.0.1 port=1 password {no_space}",
        "conninfo-unterminated": f"host=127.0.0.1 port=1 password='{no_space}",
    }


def redis_shapes(password: str) -> dict[str, str]:
    encoded = quote(password, safe="")
    return {
        "malformed-ipv6": f"redis://:{password}@[::1/0",
        "encoded-unreachable": f"redis://app:{encoded}@127.0.0.1:1/0",
        "raw-unreachable": f"redis://:{password}@127.0.0.1:1/0",
        "bad-port": f"redis://:{encoded}@127.0.0.1:notaport/0",
        "query-password": f"redis://127.0.0.1:1/0?password={encoded}",
    }


def forms(password: str) -> set[str]:
    """Every way the password could be shown: whole, encoded, and its longer pieces."""
    found = {password, quote(password), quote(password, safe=""), password.replace(" ", "_")}
    for piece in re.split(r"[@/:?#\[\]&;=\s'\"]+", password):
        if len(piece) >= 4:
            found.add(piece)
    return found


def assert_hidden(password: str, *texts: str) -> None:
    text = "\n".join(texts)
    shown = sorted(form for form in forms(password) if form in text)
    assert not shown, f"password forms {shown} leaked in:\n{text}"


def failure_texts(error: BaseException) -> list[str]:
    return [str(error), repr(error), "".join(traceback.format_exception(error))]


CASES = [(password, shape) for password in PASSWORDS for shape in pg_shapes(password)]


@pytest.mark.parametrize(("password", "shape"), CASES)
def test_postgres_store_never_shows_the_password(password: str, shape: str) -> None:
    url = pg_shapes(password)[shape]
    with pytest.raises(SessionStoreError) as info:
        PostgresSessionStore.from_conn_string(url, connect_timeout=1)
    error = info.value
    assert_hidden(password, *failure_texts(error), getattr(error, "url", ""))
    assert error.__context__ is None, "the driver's exception is not even attached"
    assert error.__cause__ is None
    unencoded = shape == "raw-unreachable" and any(char in password for char in "@/?#[]")
    if unencoded or shape in ("malformed-ipv6", "conninfo-missing-equals", "conninfo-unterminated"):
        assert isinstance(error, ValueError), "a malformed URL is a ValueError (StoreURLError)"
    if unencoded:
        assert "percent-encode" in str(error), "and says how to fix it"


@pytest.mark.parametrize(("password", "shape"), CASES)
@pytest.mark.parametrize("command", ["inspect", "sync"])
def test_cli_never_shows_the_password(
    password: str, shape: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_shapes(password)[shape]
    if command == "inspect":
        status = main(["inspect", "--store", url, "--namespace", "org/acme"])
    else:
        status = main(["sync", "pull", "--store", url, "--namespace", "org/acme", "--root", "x"])
    out, err = capsys.readouterr()
    assert status == 2
    assert len(err.splitlines()) == 1, "one line on stderr"
    assert_hidden(password, out, err)


REDIS_CASES = [(password, shape) for password in PASSWORDS for shape in redis_shapes(password)]


@pytest.mark.parametrize(("password", "shape"), REDIS_CASES)
def test_redis_store_never_shows_the_password(password: str, shape: str) -> None:
    url = redis_shapes(password)[shape]
    errors: list[BaseException] = []
    try:
        store = RedisSessionStore.from_url(url, retries=0)
    except SessionStoreError as exc:
        errors.append(exc)
    else:
        assert_hidden(password, repr(store))
        with pytest.raises(StoreUnavailableError) as info:
            store.get("k")
        errors.append(info.value)
        store.close()
    for error in errors:
        assert_hidden(password, *failure_texts(error))
        assert error.__context__ is None


@pytest.mark.parametrize("password", PASSWORDS)
def test_the_hybrid_stores_warning_never_shows_the_l1_password(
    password: str, caplog: pytest.LogCaptureFixture
) -> None:
    l1 = RedisSessionStore.from_url(f"redis://:{quote(password, safe='')}@127.0.0.1:1/0", retries=0)
    store = HybridSessionStore(l1, InMemorySessionStore())
    with caplog.at_level(logging.DEBUG):
        store.set("k", {"v": 1})
        assert store.get("k") == {"v": 1}
    assert "failed" in caplog.text
    assert_hidden(password, caplog.text, repr(store))
    store.close()


def test_live_stores_name_their_url_without_the_password(postgres_url: str, redis_url: str) -> None:
    # The local PostgreSQL trusts local connections, so any password connects.
    with_password = postgres_url.replace("://postgres@", "://postgres:Hunter2Secret@")
    assert "Hunter2Secret" in with_password
    builders: list[Callable[[], object]] = [
        lambda: PostgresSessionStore.from_conn_string(with_password),
        lambda: RedisSessionStore.from_url(redis_url.replace("://", "://:Hunter2Secret@", 1)),
    ]
    for build in builders:
        store = build()
        try:
            assert "***" in repr(store)
            assert_hidden("Hunter2Secret", repr(store), str(store))
        finally:
            store.close()  # type: ignore[attr-defined]
