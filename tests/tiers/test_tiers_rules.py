"""Every tier rule of MemoryOS, on `InMemoryStore`, sync and async: STM FIFO, θ, heat with an
injected clock, eviction of the coldest, promotion at τ and its reset, retrieval thresholds
and the visit counter, the long-term FIFO."""

from __future__ import annotations

import math

import pytest
from tiers_helpers import Clock, TableEmbeddings, call, unit_at

from layered_memory.tiers import TieredMemory
from layered_memory.tiers._heat import heat

USER = "ada"


async def test_stm_is_a_fifo_of_capacity_pages(make_memory, use_async):
    memory = make_memory(stm_capacity=3)
    for i in range(5):
        await call(
            memory,
            "add_page",
            USER,
            f"question {i} about topic{i}",
            f"answer {i}",
            use_async=use_async,
        )
    stm = await call(memory, "short_term", USER, use_async=use_async)
    assert [p.query for p in stm] == [f"question {i} about topic{i}" for i in (2, 3, 4)]
    moved = [p for s in await call(memory, "segments", USER, use_async=use_async) for p in s.pages]
    assert sorted(p.query for p in moved) == ["question 0 about topic0", "question 1 about topic1"]
    assert all(p.segment_id and p.keywords and p.summary for p in moved)


async def test_page_fields_and_timestamps_come_from_the_clock(make_memory, clock, use_async):
    memory = make_memory()
    page = await call(
        memory, "add_page", USER, "hello there", "hi", meta={"thread_id": "t1"}, use_async=use_async
    )
    assert (page.query, page.response, page.timestamp, dict(page.meta)) == (
        "hello there",
        "hi",
        clock.now,
        {"thread_id": "t1"},
    )


def _theta_memory(clock: Clock, angle: float, **kwargs) -> TieredMemory:
    # Two pages with no shared keyword: F_score = cos(angle) + 0.
    table = {"alpha": unit_at(0), "beta": unit_at(angle)}
    return TieredMemory(
        __import__("langgraph.store.memory").store.memory.InMemoryStore(),
        embeddings=TableEmbeddings(table),
        clock=clock,
        stm_capacity=1,
        **kwargs,
    )


@pytest.mark.parametrize(("angle", "joins"), [(50.0, True), (55.0, False)])
async def test_a_page_joins_the_best_segment_only_when_f_score_reaches_theta(
    clock, angle, joins, use_async
):
    # cos 50° = 0.643 >= 0.6 joins; cos 55° = 0.574 < 0.6 starts a new segment.
    memory = _theta_memory(clock, angle)
    for text in ("alpha", "beta", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    segments = await call(memory, "segments", USER, use_async=use_async)
    assert len(segments) == (1 if joins else 2)


async def test_jaccard_of_keywords_adds_to_the_cosine(clock, use_async):
    # cos 70° = 0.342 alone is below θ; shared keywords (Jaccard 0.5) lift F_score to 0.84.
    table = {"alpha": unit_at(0), "beta": unit_at(70)}
    memory = TieredMemory(
        __import__("langgraph.store.memory").store.memory.InMemoryStore(),
        embeddings=TableEmbeddings(table),
        clock=clock,
        stm_capacity=1,
    )
    await call(memory, "add_page", USER, "alpha lisbon", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "beta lisbon", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    assert len(await call(memory, "segments", USER, use_async=use_async)) == 1


def test_heat_formula():
    h = heat(
        n_visit=2,
        l_interaction=3,
        last_access=0.0,
        now=3600.0,
        alpha=1.0,
        beta=2.0,
        gamma=3.0,
        mu=7200.0,
    )
    assert h == pytest.approx(2 + 6 + 3 * math.exp(-0.5))
    # A clock running backwards counts as no time elapsed.
    assert (
        heat(n_visit=0, l_interaction=0, last_access=10.0, now=5.0, alpha=1, beta=1, gamma=1, mu=1)
        == 1.0
    )


async def test_segment_heat_follows_the_injected_clock(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=100)
    await call(memory, "add_page", USER, "lisbon trip planning", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "unrelated chess", "ok", use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert (segment.n_visit, segment.l_interaction) == (0, 1)
    assert segment.heat == pytest.approx(1 + 1.0)
    clock.advance(24 * 3600)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.heat == pytest.approx(1 + math.exp(-1))


async def test_retrieval_counts_visits_and_refreshes_recency(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=100)
    await call(
        memory, "add_page", USER, "my sister clara lives in lisbon", "ok", use_async=use_async
    )
    await call(memory, "add_page", USER, "chess openings", "ok", use_async=use_async)
    clock.advance(48 * 3600)
    found = await call(memory, "retrieve", USER, "where does clara live", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["my sister clara lives in lisbon"]
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.n_visit == 1
    assert segment.heat == pytest.approx(1 + 1 + 1.0)  # visit + page + recency reset to now
    await call(memory, "retrieve", USER, "what about the weather", use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.n_visit == 1  # a retrieval that found nothing in it is not a visit


async def test_a_visit_goes_to_each_searched_segment_with_a_page_above_the_threshold(
    clock, use_async
):
    # MemoryOS's reference code (`MidTermMemory.search_sessions`): N_visit + 1 for a searched
    # segment with a page >= the page threshold, before the top-k cut across segments; a
    # segment searched for its keywords alone gets none.
    table = {"alpha": unit_at(0), "beta": unit_at(10), "gamma": unit_at(85)}
    memory = TieredMemory(
        __import__("langgraph.store.memory").store.memory.InMemoryStore(),
        embeddings=TableEmbeddings(table),
        clock=clock,
        stm_capacity=1,
        theta=1.5,  # every page starts its own segment
        top_k=1,
        tau=100,
    )
    for text in ("alpha apple", "beta banana", "gamma grape", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "alpha gamma", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["alpha apple"]
    segments = {
        s.pages[0].query: s for s in await call(memory, "segments", USER, use_async=use_async)
    }
    assert {sid for sid, _ in found.segments} == {s.id for s in segments.values()}  # all searched
    # gamma's page: cos 85° = 0.09 < page_threshold; its segment was searched for "gamma".
    assert {q: s.n_visit for q, s in segments.items()} == {
        "alpha apple": 1,
        "beta banana": 1,  # above the threshold, cut by top_k=1: still a visit
        "gamma grape": 0,
    }


async def test_irrelevant_pages_are_never_returned(make_memory, use_async):
    memory = make_memory(stm_capacity=1)
    for text in ("my dentist is doctor alvarez", "the cat is called pixel", "chess on sundays"):
        await call(memory, "add_page", USER, text, "noted", use_async=use_async)
    found = await call(
        memory, "retrieve", USER, "quantum chromodynamics lecture", use_async=use_async
    )
    assert found.pages == ()
    assert found.facts == ()
    assert [p.query for p in found.short_term] == ["chess on sundays"]


async def test_top_k_and_page_threshold(make_memory, use_async):
    memory = make_memory(stm_capacity=1, top_k=2, tau=100)
    for i in range(5):
        await call(memory, "add_page", USER, f"garden tomatoes note{i}", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "garden tomatoes", use_async=use_async)
    assert len(found.pages) == 2
    assert found.pages[0].score >= found.pages[1].score >= memory.settings.page_threshold
    strict = make_memory(stm_capacity=1, page_threshold=0.99, store=memory.store)
    assert (
        await call(strict, "retrieve", USER, "garden tomatoes", use_async=use_async)
    ).pages == ()


async def test_top_m_limits_the_segments_searched(make_memory, use_async):
    memory = make_memory(stm_capacity=1, top_m=2, tau=100)
    for topic in (
        "apples pears plums",
        "boats sails oars",
        "cameras lenses films",
        "dragons wings lore",
    ):
        await call(memory, "add_page", USER, f"shared {topic}", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    assert len(await call(memory, "segments", USER, use_async=use_async)) == 4
    found = await call(memory, "retrieve", USER, "shared", use_async=use_async)
    assert len(found.segments) == 2
    assert {s.page.segment_id for s in found.pages} <= {sid for sid, _ in found.segments}


async def test_over_capacity_the_coldest_segment_is_evicted(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, mtm_capacity=2, tau=100)
    await call(memory, "add_page", USER, "apples orchard", "ok", use_async=use_async)
    await call(
        memory, "add_page", USER, "boats harbour", "ok", use_async=use_async
    )  # apples -> MTM
    await call(
        memory, "add_page", USER, "cameras lenses", "ok", use_async=use_async
    )  # boats -> MTM
    clock.advance(3600)
    await call(
        memory, "retrieve", USER, "apples orchard", use_async=use_async
    )  # apples gets warmer
    await call(
        memory, "add_page", USER, "dragons lore", "ok", use_async=use_async
    )  # cameras -> MTM
    kept = await call(memory, "segments", USER, use_async=use_async)
    assert sorted(p.query for s in kept for p in s.pages) == ["apples orchard", "cameras lenses"]
    # The evicted segment's pages are gone from the store too.
    found = await call(memory, "retrieve", USER, "boats harbour", use_async=use_async)
    assert found.pages == ()


async def test_promotion_at_tau_then_l_interaction_resets(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=5)
    statements = [
        "I moved to Lisbon in March.",
        "Lisbon in March is mild.",
        "My Lisbon flat since March has a balcony.",
        "Lisbon trams since March are my commute.",
    ]
    for text in statements:
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
        assert await call(memory, "long_term", USER, use_async=use_async) == []
    # The 4th Lisbon page reaches MTM: heat = 0 visits + 4 pages + recency 1 = 5 >= τ.
    await call(memory, "add_page", USER, "filler about nothing", "ok", use_async=use_async)
    long_term = await call(memory, "long_term", USER, use_async=use_async)
    assert "I moved to Lisbon in March." in long_term
    assert any(text.startswith("Talks about: ") and "lisbon" in text for text in long_term)
    (segment,) = [
        s for s in await call(memory, "segments", USER, use_async=use_async) if len(s.pages) == 4
    ]
    assert (segment.l_interaction, segment.promoted) == (0, 4)
    assert segment.heat == pytest.approx(1.0)
    # Promoted pages are not promoted twice.
    before = await call(memory, "long_term_entries", USER, use_async=use_async)
    await call(memory, "consolidate", USER, use_async=use_async)
    assert await call(memory, "long_term_entries", USER, use_async=use_async) == before


async def test_questions_are_not_promoted_as_facts(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=3)
    for text in ("is lisbon sunny?", "lisbon rain today?", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    entries = await call(memory, "long_term_entries", USER, use_async=use_async)
    assert [e.kind for e in entries] == ["profile"]


async def test_long_term_is_a_fifo_of_capacity_entries(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1, lpm_capacity=3)
    for i in range(6):
        await call(
            memory, "add_page", USER, f"Fact number{i} is topic{i}.", "ok", use_async=use_async
        )
    entries = await call(memory, "long_term_entries", USER, use_async=use_async)
    assert len(entries) == 3
    assert entries[-1].text == "Fact number4 is topic4."


async def test_relevant_long_term_facts_are_retrieved_and_profile_always(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1)
    for text in ("My dentist is Dr Alvarez.", "I grow tomatoes.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "who is my dentist", use_async=use_async)
    assert [s.fact.text for s in found.facts] == ["My dentist is Dr Alvarez."]
    assert {f.text for f in found.profile} == {
        "Talks about: dentist, dr, alvarez",
        "Talks about: grow, tomatoe",
    }


def test_settings_are_validated(make_memory):
    with pytest.raises(ValueError, match="stm_capacity"):
        make_memory(stm_capacity=0)
    with pytest.raises(ValueError, match="mu"):
        make_memory(mu=0)
    with pytest.raises(TypeError, match="unknown TieredMemory setting"):
        make_memory(capacity=3)
    with pytest.raises(TypeError, match="theta"):
        make_memory(theta="high")
    with pytest.raises(TypeError, match="embeddings"):
        make_memory(embeddings=object())
    with pytest.raises(ValueError, match="namespace part"):
        make_memory(namespace=("a.b",))
