"""HybridSessionStore never serves a value older than L2's: races, crashes, missed writes.

In-process tiers make the interleavings exact: an L2 that runs another worker's operation in
the middle of its own, an L2 that "crashes" right after a write, an L1 that is down for one
worker only, an L1 whose server generation changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from layered_memory.errors import StoreUnavailableError
from layered_memory.sessions.stores import HybridSessionStore, InMemorySessionStore
from layered_memory.sessions.stores.base import StoredSession

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Crash(BaseException):
    """The process dies here (nothing catches a BaseException on its way out)."""


class SteppedL2(InMemorySessionStore):
    """An L2 that runs a hook in the middle of its next read or write (another worker)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.after_read: Callable[[], None] | None = None
        self.before_write: Callable[[], None] | None = None
        self.after_write: Callable[[], None] | None = None

    @staticmethod
    def _run(hook: Callable[[], None] | None) -> None:
        if hook is not None:
            hook()

    def get_entry(self, key: str) -> StoredSession | None:
        entry = super().get_entry(key)
        if key == "k":  # not the hybrid's own bookkeeping entry
            hook, self.after_read = self.after_read, None
            self._run(hook)
        return entry

    def set(self, key: str, value: dict[str, Any], *, ttl: float | None = None) -> None:
        if key == "k":
            hook, self.before_write = self.before_write, None
            self._run(hook)
        super().set(key, value, ttl=ttl)
        if key == "k":
            hook, self.after_write = self.after_write, None
            self._run(hook)


class FlakyL1:
    """One worker's view of a shared L1: raises StoreUnavailableError while `down`."""

    def __init__(self, shared: InMemorySessionStore) -> None:
        self.shared = shared
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.shared, name)
        if not callable(attribute):
            return attribute

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                msg = "L1 unreachable"
                raise StoreUnavailableError(msg)
            return attribute(*args, **kwargs)

        return guarded

    # The protocols are checked on the class, so spell the methods out.
    def get(self, key: str) -> Any:
        return self.__getattr__("get")(key)

    def get_entry(self, key: str) -> Any:
        return self.__getattr__("get_entry")(key)

    def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.__getattr__("set")(key, value, ttl=ttl)

    def delete(self, key: str) -> None:
        self.__getattr__("delete")(key)

    def add(self, key: str, value: Any, *, ttl: float | None = None) -> bool:
        return bool(self.__getattr__("add")(key, value, ttl=ttl))

    def replace(self, key: str, expected: Any, value: Any, *, ttl: float | None = None) -> bool:
        return bool(self.__getattr__("replace")(key, expected, value, ttl=ttl))

    async def aget(self, key: str) -> Any:
        return self.get(key)

    async def aget_entry(self, key: str) -> Any:
        return self.get_entry(key)

    async def aset(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        self.set(key, value, ttl=ttl)

    async def adelete(self, key: str) -> None:
        self.delete(key)

    async def aadd(self, key: str, value: Any, *, ttl: float | None = None) -> bool:
        return self.add(key, value, ttl=ttl)

    async def areplace(
        self, key: str, expected: Any, value: Any, *, ttl: float | None = None
    ) -> bool:
        return self.replace(key, expected, value, ttl=ttl)


class RestartingL1(InMemorySessionStore):
    """An L1 whose server "restarts": `generation` changes, the data stays (an old snapshot)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.generation: str | None = "first"


async def call(store: Any, use_async: bool, op: str, *args: Any, **kwargs: Any) -> Any:
    if use_async:
        return await getattr(store, f"a{op}")(*args, **kwargs)
    return getattr(store, op)(*args, **kwargs)


def cached(l1: InMemorySessionStore, key: str) -> Any:
    raw = l1.get(key)
    return None if raw is None else raw.get("value")


# -- races and crashes ----------------------------------------------------------------------


@USE_ASYNC
async def test_a_reader_backfill_never_overwrites_a_newer_write(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), SteppedL2(clock)
    reader, writer = (
        HybridSessionStore(l1, l2, clock=clock),
        HybridSessionStore(l1, l2, clock=clock),
    )
    l2.set("k", {"v": "old"})
    # The reader misses L1 and reads "old" from L2; before it backfills, a writer writes "new".
    l2.after_read = lambda: writer.set("k", {"v": "new"})
    assert await call(reader, use_async, "get", "k") == {"v": "old"}
    assert cached(l1, "k") == {"v": "new"}
    assert await call(reader, use_async, "get", "k") == {"v": "new"}


@USE_ASYNC
async def test_a_writer_that_dies_between_l2_and_l1_leaves_no_stale_value(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), SteppedL2(clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    await call(store, use_async, "set", "k", {"v": "old"})

    def crash() -> None:
        raise Crash

    l2.after_write = crash
    with pytest.raises(Crash):
        await call(store, use_async, "set", "k", {"v": "new"})
    survivor = HybridSessionStore(l1, l2, clock=clock)
    assert await call(survivor, use_async, "get", "k") == {"v": "new"}


@USE_ASYNC
async def test_two_writers_racing_leave_l1_agreeing_with_l2(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), SteppedL2(clock)
    first, second = HybridSessionStore(l1, l2, clock=clock), HybridSessionStore(l1, l2, clock=clock)
    # `first` writes L2, then `second` writes L2 and L1, then `first` finishes with L1.
    l2.after_write = lambda: second.set("k", {"v": "second"})
    await call(first, use_async, "set", "k", {"v": "first"})
    assert l2.get("k") == {"v": "second"}
    assert await call(first, use_async, "get", "k") == {"v": "second"}
    assert await call(second, use_async, "get", "k") == {"v": "second"}


@USE_ASYNC
async def test_a_failed_l2_write_is_not_served_from_l1(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), SteppedL2(clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    await call(store, use_async, "set", "k", {"v": "old"})

    def fail() -> None:
        msg = "L2 down"
        raise StoreUnavailableError(msg)

    l2.before_write = fail
    with pytest.raises(StoreUnavailableError):
        await call(store, use_async, "set", "k", {"v": "new"})
    assert await call(store, use_async, "get", "k") == {"v": "old"}, "L2's value, via L2"


# -- missed writes, restarts ---------------------------------------------------------------


@USE_ASYNC
async def test_a_write_l1_missed_is_never_served_stale_by_any_worker(use_async: bool) -> None:
    clock = Clock()
    shared_l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    a_l1, b_l1 = FlakyL1(shared_l1), FlakyL1(shared_l1)
    worker_a = HybridSessionStore(a_l1, l2, clock=clock)  # type: ignore[arg-type]
    worker_b = HybridSessionStore(b_l1, l2, clock=clock)  # type: ignore[arg-type]
    await call(worker_a, use_async, "set", "k", {"v": 1})
    assert await call(worker_b, use_async, "get", "k") == {"v": 1}

    a_l1.down = True  # only worker A cannot reach L1 (a partition, a frozen connection)
    await call(worker_a, use_async, "set", "k", {"v": 2})
    assert cached(shared_l1, "k") == {"v": 1}, "L1 missed the write"
    assert await call(worker_a, use_async, "get", "k") == {"v": 2}

    # A worker that starts now reads the marker first.
    worker_c = HybridSessionStore(FlakyL1(shared_l1), l2, clock=clock)  # type: ignore[arg-type]
    assert await call(worker_c, use_async, "get", "k") == {"v": 2}
    assert cached(shared_l1, "k") == {"v": 2}, "and repairs L1"

    # Worker A once L1 is back: its own missed write is distrusted at once.
    a_l1.down = False
    shared_l1.set("k", {"lm": {"g": "", "t": clock.now - 60}, "value": {"v": 1}})
    clock.advance(6)
    assert await call(worker_a, use_async, "get", "k") == {"v": 2}
    assert worker_a.l1_state == "closed"

    # Worker B, busy elsewhere, re-reads the marker within l1_check_interval.
    shared_l1.set("k", {"lm": {"g": "", "t": clock.now - 60}, "value": {"v": 1}})
    assert await call(worker_b, use_async, "get", "k") == {"v": 2}


@USE_ASYNC
async def test_entries_of_an_older_l1_generation_are_checked_against_l2(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = RestartingL1(clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    await call(store, use_async, "set", "changed", {"v": "old"})
    await call(store, use_async, "set", "gone", {"v": "old"})
    await call(store, use_async, "set", "same", {"v": "same"})
    l2.set("changed", {"v": "new"})  # written while L1 was away
    l2.delete("gone")
    l1.generation = "second"  # L1 came back from a snapshot that predates those writes

    assert await call(store, use_async, "get", "changed") == {"v": "new"}
    assert await call(store, use_async, "get", "gone") is None
    assert await call(store, use_async, "get", "same") == {"v": "same"}
    assert cached(l1, "changed") == {"v": "new"}
    assert l1.get("gone") is None
    stamp = (l1.get("same") or {})["lm"]
    assert stamp["g"] == "second", "re-stamped: the next read is an L1 hit"


@USE_ASYNC
async def test_values_cached_by_an_older_version_are_checked_once(use_async: bool) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    l1.set("k", {"v": "unstamped"})  # written before L1 values had envelopes
    l2.set("k", {"v": "durable"})
    store = HybridSessionStore(l1, l2, clock=clock)
    assert await call(store, use_async, "get", "k") == {"v": "durable"}
    assert cached(l1, "k") == {"v": "durable"}


@USE_ASYNC
async def test_a_corrupt_l1_entry_is_dropped_and_l2_answers(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    l1._entries["k"] = ("{not json", None)
    l2.set("k", {"v": "durable"})
    store = HybridSessionStore(l1, l2, clock=clock)
    with caplog.at_level(logging.WARNING):
        assert await call(store, use_async, "get", "k") == {"v": "durable"}
    assert "L1 entry for key 'k' is unreadable" in caplog.text
    assert cached(l1, "k") == {"v": "durable"}
