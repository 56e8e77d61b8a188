"""Listing the users of tiered memory (`TieredMemory.users`): every user, from the store's own
layout (hashed namespaces, the id in each user's state record), page by page; a neighbouring
namespace or a state record naming someone else is no user."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import TieredMemory, _editing
from layered_memory.tiers.namespaces import user_namespace
from postgres_schema import Schema

# Ids a SQL pattern, a namespace separator or a terminal could misread.
USERS = ["ada", "ada.x", "a_a", "a%", "ümlaut", "x" * 1024, "line\nbreak\x1b[31m", "🚀"]


async def listed(memory: TieredMemory, use_async: bool) -> list[str]:
    if use_async:
        return [user async for user in memory.ausers()]
    return list(memory.users())


def _fill(store: Any, monkeypatch: pytest.MonkeyPatch) -> TieredMemory:
    monkeypatch.setattr(_editing, "USERS_PAGE", 3)  # several pages for a few users
    memory = TieredMemory(store, embeddings=LexicalEmbeddings())
    for user in USERS:
        memory.add_page(user, f"hello from {user}", "hi")
    # A neighbour under a longer prefix, a deeper namespace and a foreign item: not users.
    neighbour = TieredMemory(
        store, embeddings=LexicalEmbeddings(), namespace=("layered_memory", "tiersX")
    )
    neighbour.add_page("eve", "not a user of the default namespace", "ok")
    store.put(("layered_memory", "tiers", "notes"), "k", {"user_id": "mallory"})
    # A state record copied into another user's namespace names a user it does not belong to.
    copied = store.get(user_namespace(memory.namespace, "ada"), "state").value
    store.put(user_namespace(memory.namespace, "trudy"), "state", copied)
    return memory


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_users_lists_every_user_of_the_namespace(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    memory = _fill(InMemoryStore(), monkeypatch)
    with caplog.at_level(logging.WARNING, logger="layered_memory.tiers"):
        assert sorted(await listed(memory, use_async)) == sorted(USERS)
    trudy = user_namespace(memory.namespace, "trudy")[-1]
    assert any(trudy in r.getMessage() for r in caplog.records), "the copied record is named"


def test_users_of_a_postgres_store(
    postgres_schema: Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
        memory = _fill(store, monkeypatch)
        assert sorted(memory.users()) == sorted(USERS)


def test_no_users_is_an_empty_listing() -> None:
    assert list(TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings()).users()) == []
