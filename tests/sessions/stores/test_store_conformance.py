"""The one conformance suite every session store adapter runs (see the `case` fixture)."""

from __future__ import annotations

import asyncio
import math
import secrets
import threading

import pytest
from store_harness import StoreCase, call

from layered_memory.errors import SessionStoreError, StoreUnavailableError
from layered_memory.sessions.stores import (
    ConditionalSessionStore,
    ExpiryAwareSessionStore,
    ListableSessionStore,
    SessionStore,
)
from layered_memory.sessions.stores.base import MAX_KEY_BYTES

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])

KEY = "entity:acme_corp:evaluation:quality_evaluator"


def test_implements_the_protocols(case: StoreCase) -> None:
    assert isinstance(case.store, SessionStore)
    assert isinstance(case.store, ExpiryAwareSessionStore)
    assert isinstance(case.store, ConditionalSessionStore)
    assert isinstance(case.store, ListableSessionStore)


@USE_ASYNC
async def test_add_stores_only_when_missing_or_expired(case: StoreCase, use_async: bool) -> None:
    store = case.store
    assert await call(store, use_async, "add", KEY, {"v": 1}, ttl=10)
    assert not await call(store, use_async, "add", KEY, {"v": 2})
    assert await call(store, use_async, "get", KEY) == {"v": 1}
    case.advance(11)
    assert await call(store, use_async, "add", KEY, {"v": 3})
    entry = await call(store, use_async, "get_entry", KEY)
    assert entry.value == {"v": 3}
    assert entry.ttl is None


@USE_ASYNC
async def test_replace_only_while_the_value_is_unchanged(case: StoreCase, use_async: bool) -> None:
    store = case.store
    value = {"a": 1, "b": [1.5, "é", None], "c": {"d": True}, "e": "x\x00\ud800"}
    await call(store, use_async, "set", KEY, value)
    assert not await call(store, use_async, "replace", KEY, {"a": 2}, {"v": "x"})
    # Equal in Python (True == 1), not the same JSON: a change all the same.
    assert not await call(store, use_async, "replace", KEY, {**value, "a": True}, {"v": "x"})
    assert await call(store, use_async, "replace", KEY, value, {"v": "new"}, ttl=30)
    entry = await call(store, use_async, "get_entry", KEY)
    assert entry.value == {"v": "new"}
    assert 0 < entry.ttl <= 30
    assert not await call(store, use_async, "replace", "other", {"v": "new"}, {"v": "x"})
    assert await call(store, use_async, "get", "other") is None, "missing stays missing"
    assert await call(store, use_async, "replace", KEY, {"v": "new"}, None)
    assert await call(store, use_async, "get", KEY) is None, "None deletes"
    await call(store, use_async, "set", KEY, {"v": 1}, ttl=5)
    case.advance(6)
    assert not await call(store, use_async, "replace", KEY, {"v": 1}, {"v": 2})
    assert await call(store, use_async, "get", KEY) is None, "an expired entry stays expired"


def test_compare_and_set_loses_no_update_between_threads(case: StoreCase) -> None:
    store = case.store
    writers, rounds = 4, 10
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for round_ in range(rounds):
                while True:
                    current = store.get(KEY)
                    merged = {**(current or {}), f"{writer}-{round_}": round_}
                    if current is None and store.add(KEY, merged):
                        break
                    if current is not None and store.replace(KEY, current, merged):
                        break
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.get(KEY) == {f"{w}-{r}": r for w in range(writers) for r in range(rounds)}


@USE_ASYNC
async def test_set_get_delete_round_trip(case: StoreCase, use_async: bool) -> None:
    store = case.store
    value = {"summary": "done", "scores": [1, 2.5, None], "nested": {"ok": True}}

    assert await call(store, use_async, "get", KEY) is None
    await call(store, use_async, "set", KEY, value)
    assert await call(store, use_async, "get", KEY) == value

    await call(store, use_async, "set", KEY, {"other": 1})
    assert await call(store, use_async, "get", KEY) == {"other": 1}, "set replaces the whole value"

    await call(store, use_async, "delete", KEY)
    assert await call(store, use_async, "get", KEY) is None
    await call(store, use_async, "delete", KEY)  # deleting a missing key is not an error


@USE_ASYNC
async def test_keys_are_independent(case: StoreCase, use_async: bool) -> None:
    store = case.store
    await call(store, use_async, "set", "entity:a:x", {"v": "a"})
    await call(store, use_async, "set", "entity:b:x", {"v": "b"})
    await call(store, use_async, "delete", "entity:a:x")
    assert await call(store, use_async, "get", "entity:a:x") is None
    assert await call(store, use_async, "get", "entity:b:x") == {"v": "b"}


@USE_ASYNC
async def test_stored_value_is_isolated_from_the_callers_dicts(
    case: StoreCase, use_async: bool
) -> None:
    store = case.store
    value = {"items": ["a"]}
    await call(store, use_async, "set", KEY, value)
    value["items"].append("changed after set")
    read = await call(store, use_async, "get", KEY)
    assert read == {"items": ["a"]}
    read["items"].append("changed after get")
    assert await call(store, use_async, "get", KEY) == {"items": ["a"]}


@USE_ASYNC
async def test_entry_expires_after_its_ttl(case: StoreCase, use_async: bool) -> None:
    store = case.store
    await call(store, use_async, "set", KEY, {"v": 1}, ttl=10)
    await call(store, use_async, "set", "entity:forever:x", {"v": 2})

    case.advance(4)
    entry = await call(store, use_async, "get_entry", KEY)
    assert entry is not None
    assert entry.value == {"v": 1}
    assert 0 < entry.ttl <= 6 + 0.5  # Redis counts down on its own, so allow its slack

    case.advance(7)
    assert await call(store, use_async, "get", KEY) is None
    assert await call(store, use_async, "get_entry", KEY) is None
    assert await call(store, use_async, "get", "entity:forever:x") == {"v": 2}
    forever = await call(store, use_async, "get_entry", "entity:forever:x")
    assert forever is not None
    assert forever.ttl is None


@USE_ASYNC
async def test_overwrite_without_ttl_clears_the_expiry(case: StoreCase, use_async: bool) -> None:
    store = case.store
    await call(store, use_async, "set", KEY, {"v": 1}, ttl=5)
    await call(store, use_async, "set", KEY, {"v": 2})
    case.advance(3600)
    assert await call(store, use_async, "get", KEY) == {"v": 2}


@USE_ASYNC
async def test_fractional_ttl_expires(case: StoreCase, use_async: bool) -> None:
    store = case.store
    await call(store, use_async, "set", KEY, {"v": 1}, ttl=1.5)
    case.advance(2)
    assert await call(store, use_async, "get", KEY) is None


@USE_ASYNC
@pytest.mark.parametrize("ttl", [0, -1, math.nan, math.inf])
async def test_invalid_ttl_is_rejected(case: StoreCase, use_async: bool, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        await call(case.store, use_async, "set", KEY, {"v": 1}, ttl=ttl)
    assert await call(case.store, use_async, "get", KEY) is None


@USE_ASYNC
@pytest.mark.parametrize(
    "value",
    [["not", "a", "dict"], {"when": object()}, {"nan": math.nan}],
    ids=["list", "object", "nan"],
)
async def test_bad_value_is_rejected_and_old_value_kept(
    case: StoreCase, use_async: bool, value: object
) -> None:
    store = case.store
    await call(store, use_async, "set", KEY, {"v": "old"})
    with pytest.raises(SessionStoreError) as info:
        await call(store, use_async, "set", KEY, value)
    assert info.value.key == KEY
    assert await call(store, use_async, "get", KEY) == {"v": "old"}


@USE_ASYNC
@pytest.mark.parametrize("key", ["", "a\x00b", "\ud800"], ids=["empty", "nul", "surrogate"])
async def test_unstorable_key_is_rejected(case: StoreCase, use_async: bool, key: str) -> None:
    with pytest.raises(SessionStoreError):
        await call(case.store, use_async, "set", key, {"v": 1})


@USE_ASYNC
async def test_a_key_over_the_size_limit_is_refused_before_any_io(
    case: StoreCase, use_async: bool
) -> None:
    key = "é" * (MAX_KEY_BYTES // 2) + "x"  # 513 characters, 1,025 bytes
    with pytest.raises(SessionStoreError) as info:
        await call(case.store, use_async, "set", key, {"v": 1})
    assert not isinstance(info.value, StoreUnavailableError), "the key is the problem"
    assert f"at most {MAX_KEY_BYTES} bytes" in str(info.value)
    assert f"{MAX_KEY_BYTES + 1} bytes" in str(info.value)
    assert info.value.key == key


@USE_ASYNC
async def test_a_key_at_the_size_limit_round_trips(case: StoreCase, use_async: bool) -> None:
    # Random, so PostgreSQL cannot compress it below its index limit.
    key = secrets.token_hex(MAX_KEY_BYTES // 2)[: MAX_KEY_BYTES - 3] + "한"  # 1,021 + 3 bytes
    assert len(key.encode()) == MAX_KEY_BYTES
    await call(case.store, use_async, "set", key, {"v": 1})
    assert await call(case.store, use_async, "get", key) == {"v": 1}
    await call(case.store, use_async, "delete", key)
    assert await call(case.store, use_async, "get", key) is None


AWKWARD_VALUES = {
    "nul_in_text": {"a": "x\x00y"},
    "nul_in_name": {"x\x00": 1},
    "lone_surrogate": {"a": "\ud800"},
    "lone_surrogate_in_name": {"\udfff": "b"},
    "surrogate_beside_text": {"a": "é\udc80z"},
    "huge_float": {"a": 1e308},
    "float_written_with_exponent": {"a": 1e16, "b": 1.5e-7},
    "negative_zero": {"a": -0.0},
    "huge_int": {"a": 2**200},
    "whole_float": {"a": 1.0},
    "control_characters": {"a": "\x01\x1f\u2028\ufeff"},
}


@USE_ASYNC
@pytest.mark.parametrize("value", AWKWARD_VALUES.values(), ids=AWKWARD_VALUES.keys())
async def test_awkward_values_come_back_exactly(
    case: StoreCase, use_async: bool, value: dict[str, object]
) -> None:
    await call(case.store, use_async, "set", KEY, value)
    read = await call(case.store, use_async, "get", KEY)
    # repr tells 1e308 from its integer, -0.0 from 0.0 and shows every code point.
    assert repr(read) == repr(value)


UNICODE_KEYS = [
    "entity:삼성전자:평가",
    "entity:トヨタ自動車:評価:品質",
    "entity:مرحبا:مرحلة",
    "entity:emoji_🚀:phase",
    "entity:café:x",  # NFC é
    "entity:cafe\u0301:x",  # NFD e + combining acute: a different key
    "entity:Café:x",  # differs only in case: a different key (even on case-insensitive disks)
]


@USE_ASYNC
async def test_unicode_keys_are_distinct_and_round_trip(case: StoreCase, use_async: bool) -> None:
    store = case.store
    for index, key in enumerate(UNICODE_KEYS):
        await call(store, use_async, "set", key, {"index": index, "key": key, "text": "한국어 ✓"})
    for index, key in enumerate(UNICODE_KEYS):
        assert await call(store, use_async, "get", key) == {
            "index": index,
            "key": key,
            "text": "한국어 ✓",
        }


ESCAPE_KEYS = [
    "../escape",
    "../../../../../../tmp/layered-memory-escape",
    "/etc/passwd",
    "..",
    ".",
    "a/../../b",
    "..\\..\\windows",
    "C:\\temp\\x",
    "~/.ssh/id_rsa",
]


@USE_ASYNC
async def test_path_like_keys_are_plain_keys(case: StoreCase, use_async: bool) -> None:
    store = case.store
    for key in ESCAPE_KEYS:
        await call(store, use_async, "set", key, {"key": key})
    for key in ESCAPE_KEYS:
        assert await call(store, use_async, "get", key) == {"key": key}
        await call(store, use_async, "delete", key)
        assert await call(store, use_async, "get", key) is None


@USE_ASYNC
async def test_one_megabyte_value_round_trips(case: StoreCase, use_async: bool) -> None:
    chunk = 'memory ✓ 메모리 記憶 "quoted" \\ back\n'
    text = (chunk * (1024 * 1024 // len(chunk.encode()) + 1))[: 1024 * 1024]
    value = {"text": text, "list": list(range(1000))}
    assert len(text.encode()) >= 1024 * 1024 - 4
    await call(case.store, use_async, "set", KEY, value)
    assert await call(case.store, use_async, "get", KEY) == value


def _payload(writer: int, round_: int) -> dict[str, object]:
    # Large enough that a torn write would show, self-describing so a mix would be caught.
    return {"writer": writer, "round": round_, "body": f"{writer}-{round_}|" * 20_000}


def _is_intact(value: dict[str, object]) -> bool:
    return value == _payload(int(value["writer"]), int(value["round"]))  # type: ignore[call-overload]


def test_concurrent_writers_on_one_key_last_write_wins(case: StoreCase) -> None:
    store = case.store
    writers, rounds = 6, 4
    barrier = threading.Barrier(writers + 1)  # all writers and the reader start together
    errors: list[BaseException] = []
    seen: list[dict[str, object]] = []

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for round_ in range(rounds):
                store.set(KEY, _payload(writer, round_))
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            barrier.wait()
            for _ in range(writers * rounds):
                value = store.get(KEY)
                if value is not None:
                    seen.append(value)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    threads.append(threading.Thread(target=read))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert all(_is_intact(value) for value in seen), "a reader saw a torn value"
    final = store.get(KEY)
    assert final is not None
    assert _is_intact(final)
    store.set(KEY, _payload(99, 0))
    assert store.get(KEY) == _payload(99, 0), "the last write wins"


async def test_concurrent_async_writers_on_one_key(case: StoreCase) -> None:
    store = case.store
    await asyncio.gather(*(store.aset(KEY, _payload(w, 0)) for w in range(8)))
    final = await store.aget(KEY)
    assert final is not None
    assert _is_intact(final)
    await store.aset(KEY, _payload(42, 1))
    assert await store.aget(KEY) == _payload(42, 1)


# -- listing keys ----------------------------------------------------------------------------

# Keys a glob (Redis MATCH), a LIKE pattern (PostgreSQL) or a file name could misread.
HOSTILE_KEYS = [
    "entity:a*:x",
    "entity:a?:x",
    "entity:a[bc]:x",
    "entity:a\\:x",
    "entity:a%:x",
    "entity:a_:x",
    "entity:ab:x",
    "entity:a\n\t\x1b[31m:x",
    "entity:é\u202e:x",
    "../../etc/passwd",
    "x" * MAX_KEY_BYTES,
]


async def listed(store: ListableSessionStore, use_async: bool, prefix: str = "") -> list[str]:
    if use_async:
        return [key async for key in store.akeys(prefix)]
    return list(store.keys(prefix))


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pages of 3 keys, so a few keys cross several pages (the listing's bound)."""
    import layered_memory.sessions.stores.file as file_store
    import layered_memory.sessions.stores.memory as memory_store
    import layered_memory.sessions.stores.postgres as postgres_store
    import layered_memory.sessions.stores.redis as redis_store

    for module in (file_store, memory_store, postgres_store, redis_store):
        monkeypatch.setattr(module, "KEY_PAGE_SIZE", 3)
    return 3


@USE_ASYNC
async def test_keys_lists_every_live_key_and_only_those(
    case: StoreCase, use_async: bool, small_pages: int
) -> None:
    store = case.store
    for key in HOSTILE_KEYS:
        await call(store, use_async, "set", key, {"key": key})
    await call(store, use_async, "set", "entity:gone:x", {"v": 1}, ttl=5)
    await call(store, use_async, "set", "entity:deleted:x", {"v": 1})
    await call(store, use_async, "delete", "entity:deleted:x")
    case.advance(6)
    found = await listed(store, use_async)
    assert sorted(set(found)) == sorted(HOSTILE_KEYS)
    assert len(found) > small_pages


@USE_ASYNC
async def test_keys_under_a_prefix_match_it_literally(case: StoreCase, use_async: bool) -> None:
    store = case.store
    for key in HOSTILE_KEYS:
        await call(store, use_async, "set", key, {"key": key})
    assert set(await listed(store, use_async, "entity:a*")) == {"entity:a*:x"}
    assert set(await listed(store, use_async, "entity:a[")) == {"entity:a[bc]:x"}
    assert set(await listed(store, use_async, "entity:a%")) == {"entity:a%:x"}
    assert set(await listed(store, use_async, "entity:a_")) == {"entity:a_:x"}
    assert set(await listed(store, use_async, "entity:a\\")) == {"entity:a\\:x"}
    assert set(await listed(store, use_async, "entity:")) == {
        key for key in HOSTILE_KEYS if key.startswith("entity:")
    }
    assert await listed(store, use_async, "nothing:") == []


@USE_ASYNC
async def test_a_prefix_no_key_could_have_is_refused(case: StoreCase, use_async: bool) -> None:
    for prefix in ("a\x00", "x" * (MAX_KEY_BYTES + 1)):
        with pytest.raises(SessionStoreError):
            await listed(case.store, use_async, prefix)
