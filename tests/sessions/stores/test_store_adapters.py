"""Adapter-specific behaviour: what the shared conformance suite cannot see from outside."""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from store_harness import FakeClock, RedisClock

from layered_memory.errors import SessionStoreError, StoreUnavailableError
from layered_memory.sessions.stores import (
    MIGRATIONS,
    FileSessionStore,
    InMemorySessionStore,
    PostgresSessionStore,
    RedisSessionStore,
)
from layered_memory.sessions.stores.base import MAX_KEY_BYTES
from layered_memory.sessions.stores.file import LOCK_FILE_NAME
from layered_memory.sessions.stores.urls import redact_url
from postgres_schema import drop_schema, unique_schema_name

# -- in-memory ------------------------------------------------------------------------------


def test_memory_store_evicts_lazily_on_read_without_a_thread(clock: FakeClock) -> None:
    threads_before = threading.active_count()
    store = InMemorySessionStore(clock=clock)
    store.set("a", {"v": 1}, ttl=5)
    store.set("b", {"v": 2}, ttl=5)
    clock.advance(10)
    assert threading.active_count() == threads_before
    assert len(store) == 2, "nothing is evicted until read"
    assert store.get("a") is None
    assert len(store) == 1, "the expired entry read is evicted"
    assert store.purge_expired() == 1
    assert len(store) == 0


# -- file -----------------------------------------------------------------------------------


def _all_files(path: Path) -> list[Path]:
    """Every file under ``path`` but the store's lock file (one per folder, kept)."""
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name != LOCK_FILE_NAME)


@pytest.mark.parametrize(
    "key",
    [
        "../escape",
        "../../../../../../../../tmp/layered-memory-escape",
        "/etc/passwd",
        "..",
        "a/../../b",
        "..\\..\\x",
        "~/x",
        "con",
        "x" * MAX_KEY_BYTES,
    ],
)
def test_file_store_keeps_every_key_inside_its_folder(tmp_path: Path, key: str) -> None:
    root = tmp_path / "inner" / "sessions"
    store = FileSessionStore(root)
    store.set(key, {"key": key})

    files = _all_files(tmp_path)
    assert len(files) == 1
    assert files[0].parent == root
    assert len(files[0].name) <= 120
    assert store.path_for(key) == files[0]
    assert store.get(key) == {"key": key}
    store.delete(key)
    assert _all_files(tmp_path) == []


def test_file_store_writes_one_readable_json_file_per_session(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, clock=FakeClock(100.0))
    store.set("entity:acme:research", {"summary": "ok"}, ttl=50)
    store.set("entity:acme:evaluation", {"summary": "ok"})

    files = _all_files(tmp_path)
    assert len(files) == 2, "no temporary files are left behind"
    assert {p.name for p in tmp_path.iterdir()} - {f.name for f in files} == {LOCK_FILE_NAME}
    data = json.loads(store.path_for("entity:acme:research").read_text(encoding="utf-8"))
    assert data == {"key": "entity:acme:research", "expires_at": 150.0, "value": {"summary": "ok"}}
    assert store.path_for("entity:acme:research").name.startswith("entity_acme_research-")


def test_file_store_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileSessionStore(tmp_path)
    store.set("k", {"v": "old"})

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("layered_memory.sessions.stores.file.os.replace", broken_replace)
    with pytest.raises(SessionStoreError, match="No space left") as info:
        store.set("k", {"v": "new"})
    assert info.value.key == "k"
    monkeypatch.undo()
    assert store.get("k") == {"v": "old"}
    assert len(_all_files(tmp_path)) == 1, "the temporary file is removed"


def test_file_store_write_fails_loudly_while_another_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock

    monkeypatch.setattr("layered_memory.sessions.stores.file.LOCK_TIMEOUT_SECONDS", 0.05)
    store = FileSessionStore(tmp_path)
    store.set("k", {"v": "old"})
    holder = FileLock(str(tmp_path / LOCK_FILE_NAME), thread_local=False)
    errors: list[BaseException] = []

    def write() -> None:  # another thread: its own descriptor, so the lock is contended
        try:
            store.set("k", {"v": "new"})
        except BaseException as exc:
            errors.append(exc)

    with holder:
        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], SessionStoreError)
    assert "still held" in str(errors[0])
    assert LOCK_FILE_NAME in str(errors[0])
    assert store.get("k") == {"v": "old"}
    store.set("k", {"v": "new"})
    assert store.get("k") == {"v": "new"}


def test_file_store_reports_a_corrupt_file(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    store.path_for("k").write_text("{not json", encoding="utf-8")
    with pytest.raises(SessionStoreError, match="corrupt"):
        store.get("k")


def test_file_store_purges_expired_files(tmp_path: Path) -> None:
    clock = FakeClock()
    store = FileSessionStore(tmp_path, clock=clock)
    store.set("old", {"v": 1}, ttl=10)
    store.set("new", {"v": 2}, ttl=100)
    store.set("forever", {"v": 3})
    clock.advance(50)
    assert store.purge_expired() == 1
    assert not store.path_for("old").exists()
    assert store.get("new") == {"v": 2}
    assert store.get("forever") == {"v": 3}


def test_file_store_lists_its_own_files_and_skips_the_rest_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A planted FIFO or link, a corrupt, foreign or renamed file: skipped by name, never
    read past its head, never a hang."""
    store = FileSessionStore(tmp_path)
    store.set("entity:kept:x", {"v": 1})
    store.set("entity:copied:x", {"v": 2})
    os.mkfifo(tmp_path / store.path_for("fifo").name)  # reading it would block forever
    (tmp_path / store.path_for("link").name).symlink_to(store.path_for("entity:kept:x"))
    store.path_for("corrupt").write_text("{not json")
    (tmp_path / "notes.json").write_text("{}")
    store.path_for("renamed").write_bytes(store.path_for("entity:copied:x").read_bytes())
    (tmp_path / ".tmp-abc").write_text("half written")
    with caplog.at_level(logging.WARNING, logger="layered_memory.sessions.stores"):
        assert sorted(store.keys()) == ["entity:copied:x", "entity:kept:x"]
    # One warning for the listing (a million planted files cost one line), with the count;
    # a write in progress is no problem.
    [warned] = [r.getMessage() for r in caplog.records]
    assert "skipped 5 listed name(s)" in warned
    assert str(tmp_path) in warned


# -- Redis ----------------------------------------------------------------------------------


def test_redis_store_lists_only_its_prefix_and_skips_foreign_names(
    redis_store: tuple[RedisSessionStore, RedisClock], caplog: pytest.LogCaptureFixture
) -> None:
    store, redis_clock = redis_store
    store.set("entity:a:x", {"v": 1})
    client = redis_clock.client
    client.set(store.prefix.encode() + b"\xff\xfe-not-utf8", b"{}")
    client.set(store.prefix + "y" * (MAX_KEY_BYTES + 1), b"{}")
    client.set(store.prefix[:-1] + "-other:entity:a:x", b"{}")  # a neighbour's prefix
    with caplog.at_level(logging.WARNING, logger="layered_memory.sessions.stores"):
        assert list(store.keys()) == ["entity:a:x"]
    [warned] = [r.getMessage() for r in caplog.records]
    assert "skipped 2 listed name(s)" in warned
    client.delete(store.prefix[:-1] + "-other:entity:a:x")


def test_redis_store_uses_the_prefix_and_server_ttl(
    redis_store: tuple[RedisSessionStore, RedisClock],
) -> None:
    store, redis_clock = redis_store
    store.set("entity:acme:research", {"v": 1}, ttl=120)
    store.set("entity:acme:forever", {"v": 2})

    client = redis_clock.client
    name = f"{store.prefix}entity:acme:research"
    assert json.loads(client.get(name)) == {"v": 1}
    assert 0 < client.ttl(name) <= 120, "written with an expiry the server enforces"
    assert client.ttl(f"{store.prefix}entity:acme:forever") == -1


def test_redis_store_connects_lazily_and_names_the_url_without_password() -> None:
    store = RedisSessionStore.from_url("redis://:hunter2@127.0.0.1:1/0", retries=0)
    try:
        with pytest.raises(StoreUnavailableError) as info:
            store.get("k")
    finally:
        store.close()
    message = str(info.value)
    assert "redis://:***@127.0.0.1:1/0" in message
    assert "hunter2" not in message
    assert info.value.key == "k"


async def test_redis_store_async_unreachable() -> None:
    store = RedisSessionStore.from_url("redis://user:hunter2@127.0.0.1:1/0", retries=0)
    try:
        with pytest.raises(StoreUnavailableError, match=r"redis://user:\*\*\*@127\.0\.0\.1:1/0"):
            await store.aset("k", {"v": 1})
    finally:
        await store.aclose()


# -- PostgreSQL -----------------------------------------------------------------------------


def test_postgres_setup_applies_versioned_migrations_once(
    postgres_url: str, pg_schema: str
) -> None:
    import psycopg

    with PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store:
        store.setup()
        store.setup()  # idempotent
        store.set("k", {"v": 1})
    with psycopg.connect(postgres_url) as conn:
        versions = conn.execute(
            f'SELECT v FROM "{pg_schema}".layered_memory_session_migrations ORDER BY v'
        ).fetchall()
    assert [row[0] for row in versions] == list(range(len(MIGRATIONS)))


def test_postgres_ignores_expired_rows_and_purges_them(postgres_url: str, pg_schema: str) -> None:
    import psycopg

    # No injected clock: expiry follows the server's now().
    with PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store:
        store.setup()
        store.set("expired", {"v": 1}, ttl=3600)
        store.set("live", {"v": 2}, ttl=3600)
        store.set("forever", {"v": 3})
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            seconds = conn.execute(
                f"SELECT EXTRACT(EPOCH FROM expires_at - now()) "
                f'FROM "{pg_schema}".layered_memory_sessions WHERE key = %s',
                ("live",),
            ).fetchone()
            assert seconds is not None
            assert 3000 < seconds[0] <= 3600
            conn.execute(
                f'UPDATE "{pg_schema}".layered_memory_sessions '
                "SET expires_at = now() - interval '1 second' WHERE key = %s",
                ("expired",),
            )
        assert store.get("expired") is None
        assert store.get_entry("expired") is None
        assert store.purge_expired() == 1
        assert store.purge_expired() == 0
        assert store.get("live") == {"v": 2}
        assert store.get("forever") == {"v": 3}


async def test_postgres_async_purge(postgres_url: str, pg_schema: str) -> None:
    clock = FakeClock()
    store = PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema, clock=clock)
    try:
        store.setup()
        await store.aset("k", {"v": 1}, ttl=1)
        clock.advance(2)
        assert await store.apurge_expired() == 1
    finally:
        await store.aclose()


def test_postgres_schemas_are_isolated(postgres_url: str) -> None:
    first, second = unique_schema_name(), unique_schema_name()
    try:
        with (
            PostgresSessionStore.from_conn_string(postgres_url, schema=first) as a,
            PostgresSessionStore.from_conn_string(postgres_url, schema=second) as b,
        ):
            a.setup()
            b.setup()
            a.set("k", {"from": "a"})
            assert b.get("k") is None
    finally:
        drop_schema(postgres_url, first)
        drop_schema(postgres_url, second)


def test_postgres_without_setup_says_so(postgres_url: str, pg_schema: str) -> None:
    with (
        PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store,
        pytest.raises(SessionStoreError, match=r"setup\(\)"),
    ):
        store.get("k")


def test_postgres_unreachable_names_the_url_without_password() -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/sessions?sslmode=disable"
    with pytest.raises(StoreUnavailableError) as info:
        PostgresSessionStore.from_conn_string(url, connect_timeout=2)
    message = str(info.value)
    assert "postgresql://app:***@127.0.0.1:1/sessions" in message
    assert "hunter2" not in message
    assert "unreachable" in message


@pytest.mark.parametrize(
    ("timeout", "error"), [(0, ValueError), (math.inf, ValueError), ("5", TypeError)]
)
def test_postgres_timeout_must_be_positive_seconds(
    postgres_url: str, timeout: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="timeout"):
        PostgresSessionStore.from_conn_string(postgres_url, timeout=timeout)  # type: ignore[arg-type]


def test_postgres_setup_has_its_own_timeout(postgres_url: str, pg_schema: str) -> None:
    import psycopg

    with (
        PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store,
        psycopg.connect(postgres_url) as other_worker,
    ):
        # Another worker is migrating: it holds the lock setup() waits for.
        other_worker.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lm:{pg_schema}",))
        with pytest.raises(StoreUnavailableError, match="did not answer within 1 s"):
            store.setup(timeout=1)
        with pytest.raises(ValueError, match="timeout"):
            store.setup(timeout=0)
        other_worker.rollback()
        store.setup()
        store.set("k", {"v": 1})
        assert store.get("k") == {"v": 1}
        assert store.purge_expired(timeout=30) == 0


def test_postgres_data_over_a_server_limit_is_not_an_outage(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import layered_memory.sessions.stores.postgres as postgres_module

    # Past `check_key`, a long random key reaches the server, whose index refuses it
    # (SQLSTATE 54000, an OperationalError in psycopg): the data's fault, not the server's.
    monkeypatch.setattr(postgres_module, "check_key", lambda key: key)
    with PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store:
        store.setup()
        with pytest.raises(SessionStoreError, match="SQLSTATE 54000") as info:
            store.set(secrets.token_hex(4000), {"v": 1})
        assert not isinstance(info.value, StoreUnavailableError)
        assert "unreachable" not in str(info.value)
        store.set("k", {"v": 2})
        assert store.get("k") == {"v": 2}


def test_postgres_migration_keeps_values_written_as_jsonb(
    postgres_url: str, pg_schema: str
) -> None:
    import psycopg

    with PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema) as store:
        store.setup()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            # The table as the first three migrations left it, with a row written then.
            conn.execute(f'DELETE FROM "{pg_schema}".layered_memory_session_migrations WHERE v = 3')
            conn.execute(
                f'ALTER TABLE "{pg_schema}".layered_memory_sessions '
                "ALTER COLUMN value TYPE jsonb USING value::jsonb"
            )
            conn.execute(
                f'INSERT INTO "{pg_schema}".layered_memory_sessions (key, value) '
                """VALUES ('old', '{"summary": "kept", "n": [1, 2.5]}'::jsonb)"""
            )
        store.setup()
        assert store.get("old") == {"summary": "kept", "n": [1, 2.5]}
        store.set("new", {"a": "x\x00y", "b": 1e308})
        assert repr(store.get("new")) == repr({"a": "x\x00y", "b": 1e308})


def test_postgres_closed_store_raises_unavailable(postgres_url: str, pg_schema: str) -> None:
    store = PostgresSessionStore.from_conn_string(postgres_url, schema=pg_schema)
    store.setup()
    store.close()
    with pytest.raises(StoreUnavailableError):
        store.set("k", {"v": 1})


# -- shared helpers and packaging ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u&password=***"),
        ("host=h user=u password=pw dbname=db", "host=h user=u password=*** dbname=db"),
        ("host=h password='p w' dbname=db", "host=h password=*** dbname=db"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_stores_import_without_the_optional_drivers() -> None:
    code = (
        "import sys\n"
        "for name in ('redis', 'psycopg', 'psycopg_pool'):\n"
        "    sys.modules[name] = None\n"
        "import layered_memory.sessions.stores as stores\n"
        "try:\n"
        "    stores.RedisSessionStore.from_url('redis://localhost')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "try:\n"
        "    stores.PostgresSessionStore.from_conn_string('postgresql://localhost/x')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'layered-memory[redis]'" in result.stdout
    assert "pip install 'layered-memory[postgres]'" in result.stdout
