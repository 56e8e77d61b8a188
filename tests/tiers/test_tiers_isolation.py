"""Users are isolated, whatever their ids; forgetting is non-destructive by default."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore
from tiers_helpers import call

from layered_memory.errors import TierItemError, TierUserIdError
from layered_memory.tiers.namespaces import user_namespace

HOSTILE = [
    "ada",
    "ada.x",
    "ada.",
    "ada/../bob",
    "*",
    "%",
    "ada\nbob",
    "\u202eada",
    "ada" * 300,
]


async def _fill(memory, use_async):
    for i, user in enumerate(HOSTILE):
        for turn in range(3):
            await call(
                memory,
                "add_page",
                user,
                f"secret{i} number{turn} of user{i}",
                f"ok {i}",
                use_async=use_async,
            )


async def test_hostile_user_ids_never_see_each_other(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1)
    await _fill(memory, use_async)
    for i, user in enumerate(HOSTILE):
        found = await call(
            memory,
            "retrieve",
            user,
            " ".join(f"secret{j} user{j}" for j in range(len(HOSTILE))),
            use_async=use_async,
        )
        seen = " ".join(
            [p.query for p in found.short_term]
            + [s.page.query for s in found.pages]
            + [s.fact.text for s in found.facts]
            + [f.text for f in found.profile]
        )
        assert f"secret{i}" in seen
        others = [j for j in range(len(HOSTILE)) if j != i and f"secret{j} " in seen]
        assert others == [], (user[:20], others)


def test_namespaces_are_fixed_length_hashes_that_cannot_prefix_each_other():
    spaces = {user_namespace(("p",), user) for user in HOSTILE}
    assert len(spaces) == len(HOSTILE)
    parts = [ns[-1] for ns in spaces]
    assert all(len(part) == 33 and part.isalnum() and "." not in part for part in parts)
    assert not any(a != b and b.startswith(a) for a in parts for b in parts)


def test_store_listing_by_prefix_does_not_mix_users(make_memory):
    store = InMemoryStore()
    memory = make_memory(store=store, stm_capacity=1)
    memory.add_page("ada", "one", "ok")
    memory.add_page("ada", "two", "ok")
    memory.add_page("ada.x", "three", "ok")
    ada = user_namespace(memory.namespace, "ada")
    listed = store.list_namespaces(prefix=ada)
    assert all(ns[: len(ada)] == ada for ns in listed)
    # state, mid_term, the moved page, its index block, its and its segment's vectors;
    # nothing of ada.x
    assert sorted(item.key for item in store.search(ada, limit=100)) == [
        "0",
        "mid_term",
        "p1",
        "p1",
        "s3",
        "state",
    ]


@pytest.mark.parametrize(
    "bad", [None, "", "   ", 42, "x" * 1025, "ada\x00bob", "\ud800lone-surrogate"]
)
def test_unusable_user_ids_are_refused_with_a_clear_error(make_memory, bad):
    # NUL and surrogates: PostgreSQL cannot store them (the state record keeps the id).
    memory = make_memory()
    with pytest.raises(TierUserIdError, match="invalid user id"):
        memory.add_page(bad, "q", "r")
    assert memory.store.list_namespaces(prefix=memory.namespace) == []


async def test_forget_hides_restore_shows_purge_deletes(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1)
    for text in ("My dentist is Dr Alvarez.", "My cat is Pixel.", "filler"):
        await call(memory, "add_page", "ada", text, "ok", use_async=use_async)
    segments = await call(memory, "segments", "ada", use_async=use_async)
    dentist = next(s for s in segments if "dentist" in s.keywords)
    page_id = dentist.pages[0].id

    await call(memory, "forget", "ada", page_id, use_async=use_async)
    found = await call(memory, "retrieve", "ada", "dentist alvarez", use_async=use_async)
    assert found.pages == ()
    await call(memory, "restore", "ada", page_id, use_async=use_async)
    found = await call(memory, "retrieve", "ada", "dentist alvarez", use_async=use_async)
    assert found.pages[0].page.id == page_id

    fact = next(
        f
        for f in await call(memory, "long_term_entries", "ada", use_async=use_async)
        if f.text == "My dentist is Dr Alvarez."
    )
    result = await call(memory, "forget", "ada", fact.id, use_async=use_async)
    assert (result.kind, result.purged) == ("fact", False)
    assert "My dentist is Dr Alvarez." not in await call(
        memory, "long_term", "ada", use_async=use_async
    )
    entries = await call(memory, "long_term_entries", "ada", use_async=use_async)
    assert any(f.id == fact.id and f.forgotten for f in entries)

    await call(memory, "forget", "ada", dentist.id, use_async=use_async)
    found = await call(memory, "retrieve", "ada", "dentist alvarez", use_async=use_async)
    assert found.pages == ()
    assert found.segments == ()
    await call(memory, "forget", "ada", dentist.id, purge=True, use_async=use_async)
    assert dentist.id not in {
        s.id for s in await call(memory, "segments", "ada", use_async=use_async)
    }
    with pytest.raises(TierItemError, match="no such segment"):
        await call(memory, "restore", "ada", dentist.id, use_async=use_async)

    stm_page = (await call(memory, "short_term", "ada", use_async=use_async))[0]
    await call(memory, "forget", "ada", stm_page.id, use_async=use_async)
    assert (await call(memory, "retrieve", "ada", "filler", use_async=use_async)).short_term == ()


@pytest.mark.parametrize("item_id", ["x1", "p", "p-1", "s1.2", "f１", "", "p1"])
def test_forget_of_an_unknown_id_is_a_clear_error(make_memory, item_id):
    memory = make_memory()
    with pytest.raises(TierItemError) as excinfo:
        memory.forget("ada", item_id)
    assert excinfo.value.item_id == item_id


def test_corrupt_records_are_a_logged_skip(make_memory, caplog):
    memory = make_memory(stm_capacity=1)
    memory.add_page("ada", "lisbon flat", "ok")
    memory.add_page("ada", "filler", "ok")
    ns = user_namespace(memory.namespace, "ada")
    value = dict(memory.store.get(ns, "state").value)
    value["stm"] = [{"no": "id"}, *value["stm"]]
    memory.store.put(ns, "state", value)
    mid = dict(memory.store.get(ns, "mid_term").value)
    mid["segments"] = [{**seg, "vector": "edited by hand"} for seg in mid["segments"]]
    memory.store.put(ns, "mid_term", mid)
    found = memory.retrieve("ada", "lisbon flat")
    assert [p.query for p in found.short_term] == ["filler"]
    assert [s.page.query for s in found.pages] == ["lisbon flat"]  # the index is intact
    assert "skipped a malformed short-term page" in caplog.text
    memory.segments("ada")
    assert "segment vectors unreadable" in caplog.text
    memory.add_page("ada", "more", "ok")  # and the memory keeps working
    vector = dict(memory.store.get((*ns, "vectors"), "p1").value)
    vector["vector"] = "not base64!"
    memory.store.put((*ns, "vectors"), "p1", vector)
    block = dict(memory.store.get((*ns, "index"), "0").value)
    # The in-process index trusts revisions: a writer draws a new one (and says what it grew
    # from, when it only appended).
    block["rev"], block["grown_from"] = "edited by hand", None
    memory.store.put((*ns, "index"), "0", block)
    caplog.clear()
    found = memory.retrieve("ada", "lisbon flat")
    assert [s.page.query for s in found.pages] == ["lisbon flat"]  # found by its words
    assert "vectors of page(s) p1 unreadable; searched by words only" in caplog.text
    block["terms"] = block["terms"][:1] + block["terms"]  # one more than it has pages
    block["rev"] = "edited by hand again"
    memory.store.put((*ns, "index"), "0", block)
    caplog.clear()
    found = memory.retrieve("ada", "lisbon flat")
    assert found.pages == ()
    assert "index block 0: unreadable" in caplog.text
    memory.add_page("ada", "even more", "ok")
    assert [p.query for p in memory.short_term("ada")] == ["even more"]


def test_huge_texts_are_capped_with_a_marker(make_memory, caplog):
    memory = make_memory(max_text_chars=100)
    page = memory.add_page("ada", "q" * 5000, "short")
    assert len(page.query) == 100
    assert page.query.endswith("more chars not kept]")
    assert page.response == "short"
    assert "query of 5000 chars cut to max_text_chars=100" in caplog.text


@pytest.mark.parametrize("meta", [{"x": object()}, {"x": float("nan")}, ["not", "a", "mapping"]])
def test_meta_must_be_json(make_memory, meta):
    memory = make_memory()
    with pytest.raises(TypeError, match="meta"):
        memory.add_page("ada", "q", "r", meta=meta)
    assert memory.short_term("ada") == []


@pytest.mark.parametrize("value", [float("nan"), "now", None])
def test_a_broken_clock_is_a_clear_error(make_memory, value):
    memory = make_memory(clock=lambda: value)
    with pytest.raises(ValueError, match="clock"):
        memory.add_page("ada", "q", "r")
