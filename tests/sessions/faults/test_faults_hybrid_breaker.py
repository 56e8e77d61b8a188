"""HybridSessionStore's bounds on L1 calls and its circuit breaker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from layered_memory.sessions.stores import HybridSessionStore, InMemorySessionStore
from layered_memory.sessions.stores.base import StoredSession
from layered_memory.sessions.stores.resilience import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class HangingL1(InMemorySessionStore):
    """An async L1 call that never returns (a frozen server without socket timeouts)."""

    async def aget_entry(self, key: str) -> StoredSession | None:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_async_l1_calls_are_cut_at_l1_timeout() -> None:
    clock = Clock()
    l2 = InMemorySessionStore(clock=clock)
    l2.set("k", {"v": "durable"})
    store = HybridSessionStore(HangingL1(clock=clock), l2, l1_timeout=0.05, clock=clock)
    assert await asyncio.wait_for(store.aget("k"), timeout=30) == {"v": "durable"}
    assert store.l1_state == "open"
    assert await asyncio.wait_for(store.aget("k"), timeout=30) == {"v": "durable"}


def test_a_slow_sync_l1_call_opens_the_breaker(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    l1, l2 = InMemorySessionStore(clock=clock), InMemorySessionStore(clock=clock)
    store = HybridSessionStore(l1, l2, clock=clock)
    store.set("k", {"v": 1})
    ticks = iter(range(0, 1000, 2))  # every L1 call appears to take 2 s
    monkeypatch.setattr("layered_memory.sessions.stores.hybrid.time.monotonic", lambda: next(ticks))
    assert store.get("k") == {"v": 1}
    assert store.l1_state == "open"


def test_the_breaker_lets_one_trial_through_and_backs_off() -> None:
    clock = Clock()
    breaker = CircuitBreaker("tier", retry_after=5, max_retry_after=20, clock=clock)
    assert breaker.allow()
    breaker.failed("down")
    assert breaker.state == "open"
    assert not breaker.allow()
    clock.advance(5)
    assert breaker.allow(), "the trial"
    assert breaker.state == "half-open"
    assert not breaker.allow(), "only one trial at a time"
    breaker.failed("still down")
    clock.advance(5)
    assert not breaker.allow(), "the wait doubled"
    clock.advance(5)
    assert breaker.allow()
    breaker.failed("still down")
    clock.advance(20)
    assert breaker.allow(), "capped at max_retry_after"
    assert breaker.succeeded()
    assert breaker.state == "closed"
    assert not breaker.succeeded(), "already closed"


def test_late_results_of_calls_started_before_the_breaker_opened_change_nothing() -> None:
    clock = Clock()
    breaker = CircuitBreaker("tier", retry_after=5, clock=clock)
    breaker.failed("down")
    breaker.failed("a second call that was already running")
    assert not breaker.succeeded(), "a late success does not close it"
    clock.advance(5)
    assert breaker.allow(), "and the wait did not double"


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"l1": "redis://localhost"}, TypeError, "l1 must be a session store"),
        ({"l2": {}}, TypeError, "l2 must be a session store"),
        ({"l1_timeout": 0}, ValueError, "l1_timeout must be a positive"),
        ({"l1_retry_after": "5"}, TypeError, "l1_retry_after must be a number"),
        ({"l1_check_interval": float("inf")}, ValueError, "l1_check_interval"),
    ],
)
def test_bad_arguments_name_the_parameter(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    arguments: dict[str, Any] = {"l1": InMemorySessionStore(), "l2": InMemorySessionStore()}
    arguments.update(options)
    with pytest.raises(error, match=words):
        HybridSessionStore(**arguments)
