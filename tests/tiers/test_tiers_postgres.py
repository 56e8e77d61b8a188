"""Tiered memory on the real PostgreSQL (`PostgresStore` / `AsyncPostgresStore`): what one
process records, another process retrieves; hostile user ids stay apart in SQL prefixes;
text PostgreSQL cannot store never loses a page."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from layered_memory.errors import TierUserIdError
from layered_memory.testing import LexicalEmbeddings, ScriptedChatModel
from layered_memory.tiers import TieredMemory
from layered_memory.tiers.namespaces import user_namespace
from postgres_schema import Schema

HANG_GUARD_SECONDS = 300  # only stops a hung subprocess; nothing is timed

WRITER = textwrap.dedent(
    """
    import json, sys
    from langgraph.store.postgres import PostgresStore
    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    conninfo, mode = sys.argv[1], sys.argv[2]
    clock = iter(range(1_700_000_000, 1_800_000_000, 60))
    with PostgresStore.from_conn_string(conninfo) as store:
        memory = TieredMemory(store, embeddings=LexicalEmbeddings(), clock=lambda: next(clock),
                              stm_capacity=2, tau=3)
        if mode == "write":
            for user in ("ada", "ada.x"):
                texts = ["My dentist is Dr Alvarez.", "Dentist visits are on Mondays.",
                         "I grow tomatoes.", "Tomatoes need sun.", "filler"]
                for i, text in enumerate(texts):
                    memory.add_page(user, f"({user}) {text}", f"answer {i}")
        else:
            found = memory.retrieve("ada", "who is my dentist")
            print(json.dumps({"pages": [s.page.query for s in found.pages],
                              "short_term": [p.query for p in found.short_term],
                              "facts": [s.fact.text for s in found.facts]}))
    """
)


@pytest.fixture
def conninfo(postgres_schema: Schema) -> str:
    """A conninfo whose `search_path` is a fresh schema with the store's tables."""
    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
    return postgres_schema.url


def _run(conninfo: str, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WRITER, conninfo, mode],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.postgres
async def test_memory_persists_across_processes(conninfo: str) -> None:
    _run(conninfo, "write")
    async with AsyncPostgresStore.from_conn_string(conninfo) as store:
        memory = TieredMemory(store, embeddings=LexicalEmbeddings(), stm_capacity=2, tau=3)
        stm = await memory.ashort_term("ada")
        assert [p.query for p in stm] == ["(ada) Tomatoes need sun.", "(ada) filler"]
        segments = await memory.asegments("ada")
        assert sorted(p.query for s in segments for p in s.pages) == [
            "(ada) Dentist visits are on Mondays.",
            "(ada) I grow tomatoes.",
            "(ada) My dentist is Dr Alvarez.",
        ]
        long_term = await memory.along_term("ada")
        assert "(ada) My dentist is Dr Alvarez." in long_term
        assert not any("(ada.x)" in text for text in long_term)
        # Both users' items are in the table, under namespaces that do not prefix each other.
        ada = user_namespace(memory.namespace, "ada")
        listed = await store.alist_namespaces(prefix=ada)
        assert listed
        assert all(ns[: len(ada)] == ada for ns in listed)
        await memory.aadd_page("ada", "My dentist moved to Porto.", "ok")

    found = json.loads(_run(conninfo, "read"))
    assert "(ada) My dentist is Dr Alvarez." in found["pages"]
    assert found["short_term"] == ["(ada) filler", "My dentist moved to Porto."]
    assert not any("(ada.x)" in text for texts in found.values() for text in texts)


@pytest.mark.postgres
async def test_nul_and_lone_surrogates_never_lose_a_page(conninfo: str, caplog) -> None:
    # PostgreSQL refuses both in JSON; the page used to be refused whole (in the middleware: a
    # warning, and the turn was not recorded). They become U+FFFD; summaries a model makes
    # from a `\u0000` in its answer too.
    summary = json.dumps({"keywords": ["log"], "summary": "A log line \u0000 pasted."})
    model = ScriptedChatModel(script=[], default=summary)
    async with AsyncPostgresStore.from_conn_string(conninfo) as store:
        memory = TieredMemory(store, embeddings=LexicalEmbeddings(), model=model, stm_capacity=1)
        first = await memory.aadd_page("ada", "pasted log line\x00with a NUL", "ok\x00")
        assert (first.query, first.response) == ("pasted log line\ufffdwith a NUL", "ok\ufffd")
        await memory.aadd_page("ada", "lone \ud800 surrogate", "ok", meta={"t\x00": "a\udc00"})
        await memory.aadd_page("ada", "a pair \ud83d\ude00 split", "ok")
        (segment,) = await memory.asegments("ada")
        assert [(p.query, p.summary) for p in segment.pages] == [
            ("pasted log line\ufffdwith a NUL", "A log line \ufffd pasted."),
            ("lone \ufffd surrogate", "A log line \ufffd pasted."),
        ]
        assert dict(segment.pages[1].meta) == {"t\ufffd": "a\ufffd"}
        assert [p.query for p in await memory.ashort_term("ada")] == ["a pair 😀 split"]
        found = await memory.aretrieve("ada", "pasted log line with a NUL")
        assert found.pages[0].page.id == first.id
    assert "1 NUL or lone surrogate character(s) in the query replaced by U+FFFD" in caplog.text


@pytest.mark.postgres
def test_a_user_id_with_nul_is_refused_before_any_write(conninfo: str) -> None:
    with PostgresStore.from_conn_string(conninfo) as store:
        memory = TieredMemory(store, embeddings=LexicalEmbeddings())
        for bad in ("a\x00b", "a\ud800b"):
            with pytest.raises(TierUserIdError, match="user_id contains"):
                memory.add_page(bad, "hello there", "hi")
        assert store.list_namespaces(prefix=memory.namespace) == []
