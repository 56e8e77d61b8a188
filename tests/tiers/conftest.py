"""Fixtures of the tiered-memory tests (helpers live in `tiers_helpers.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from tiers_helpers import Clock

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import TieredMemory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_memory(clock: Clock) -> Callable[..., TieredMemory]:
    def make(**kwargs: Any) -> TieredMemory:
        kwargs.setdefault("embeddings", LexicalEmbeddings())
        kwargs.setdefault("clock", clock)
        store = kwargs.pop("store", None) or InMemoryStore()
        return TieredMemory(store, **kwargs)

    return make


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def use_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)
