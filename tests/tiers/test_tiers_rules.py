"""Every tier rule, on `InMemoryStore`, sync and async: STM FIFO, θ, heat with an injected
clock, archiving of the coldest (never deleting), promotion at τ without cooling the segment,
the visit counter, the long-term FIFO."""

from __future__ import annotations

import math

import pytest
from langgraph.store.memory import InMemoryStore
from tiers_helpers import Clock, TableEmbeddings, call, unit_at

from layered_memory.tiers import TieredMemory

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
        InMemoryStore(),
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
        InMemoryStore(),
        embeddings=TableEmbeddings(table),
        clock=clock,
        stm_capacity=1,
    )
    await call(memory, "add_page", USER, "alpha lisbon", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "beta lisbon", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    assert len(await call(memory, "segments", USER, use_async=use_async)) == 1


async def test_heat_counts_visits_pages_and_recency(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=100, alpha=2.0, beta=3.0, gamma=5.0, mu=7200.0)
    for text in ("lisbon tram tickets", "lisbon tram routes", "chess"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    clock.advance(3600)
    await call(memory, "retrieve", USER, "lisbon tram", use_async=use_async)
    clock.advance(3600)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert (segment.n_visit, len(segment.pages)) == (1, 2)
    assert segment.heat == pytest.approx(2 * 1 + 3 * 2 + 5 * math.exp(-0.5))
    clock.now -= 10 * 3600  # a clock running backwards counts as no time elapsed
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.heat == pytest.approx(2 + 6 + 5)


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


async def test_a_visit_goes_to_the_segments_of_the_returned_pages_only(clock, use_async):
    # Visits from real use: a segment is visited when a retrieval returns one of its pages
    # (MemoryOS's reference code counts every segment searched with a page above a cosine
    # cut, whether or not that page is used).
    table = {"alpha": unit_at(0), "beta": unit_at(10), "gamma": unit_at(85)}
    memory = TieredMemory(
        InMemoryStore(),
        embeddings=TableEmbeddings(table),
        clock=clock,
        stm_capacity=1,
        theta=1.5,  # every page starts its own segment
        top_k=1,
        tau=100,
    )
    for text in ("alpha apple", "beta banana", "gamma grape", "filler"):
        clock.advance(3 * 3600)  # not one conversation: no page is another's context
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "alpha", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["alpha apple"]
    segments = {
        s.pages[0].query: s for s in await call(memory, "segments", USER, use_async=use_async)
    }
    assert found.segments == ((segments["alpha apple"].id, found.pages[0].score),)
    assert {q: s.n_visit for q, s in segments.items()} == {
        "alpha apple": 1,
        "beta banana": 0,  # as similar, cut by top_k=1: no visit
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


async def test_top_k_pages_are_returned_from_any_number_of_segments(make_memory, use_async):
    # Candidates are not capped at a few segments: 30 one-page segments, 20 returned.
    memory = make_memory(stm_capacity=1, theta=5.0, tau=1000)
    for i in range(31):
        await call(memory, "add_page", USER, f"garden tomatoes note{i}", "ok", use_async=use_async)
    assert len(await call(memory, "segments", USER, use_async=use_async)) == 30
    found = await call(memory, "retrieve", USER, "garden tomatoes", use_async=use_async)
    assert len(found.pages) == memory.settings.top_k == 20
    assert len({s.page.segment_id for s in found.pages} - {None}) == 20
    scores = [s.score for s in found.pages]
    assert scores == sorted(scores, reverse=True)


async def test_the_dense_cut_is_calibrated_per_query(clock, use_async):
    # An embedding whose unrelated pages all sit at cosine 0.8 with the query (a fixed cut
    # of 0.2 would return every one): only the page standing out is returned.
    table = {"wanted": unit_at(0), "query": unit_at(1)}
    memory = TieredMemory(
        InMemoryStore(),
        embeddings=TableEmbeddings(table, default=unit_at(37)),
        clock=clock,
        stm_capacity=1,
    )
    for text in ("wanted page", "one", "two", "three", "four", "five", "six", "seven"):
        clock.advance(3 * 3600)
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "query", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["wanted page"]
    strict = make_memory_from(memory, relevance_z=100.0)
    assert (await call(strict, "retrieve", USER, "query", use_async=use_async)).pages == ()
    # A shared word is a lexical match whatever the embedding says.
    found = await call(strict, "retrieve", USER, "five", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["five"]


def make_memory_from(memory: TieredMemory, **settings) -> TieredMemory:
    return TieredMemory(memory.store, embeddings=memory.embeddings, clock=memory.clock, **settings)


async def test_the_conversation_around_a_hit_comes_with_it(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=1000)
    exchanges = [
        ("Guess what happened at the bakery today", "Tell me!"),
        ("They gave me the sourdough recipe", "Nice, what is the secret?"),
        ("Rye starter fed twice a day", "Good to know."),
        ("filler", "ok"),
    ]
    for query, response in exchanges:
        clock.advance(60)
        await call(memory, "add_page", USER, query, response, use_async=use_async)
    clock.advance(3 * 3600)
    await call(memory, "add_page", USER, "Unrelated chess talk", "ok", use_async=use_async)
    found = await call(
        memory, "retrieve", USER, "which recipe did the bakery give me", use_async=use_async
    )
    queries = [s.page.query for s in found.pages]
    assert set(queries[:2]) == {
        "They gave me the sourdough recipe",
        "Guess what happened at the bakery today",
    }
    assert "Unrelated chess talk" not in queries
    # The turn after shares no word with the question and its (lexical) vector is no closer
    # to it than the average page: below the floor, never shown, however close to the hit.
    assert "Rye starter fed twice a day" not in queries


async def test_the_turn_after_a_hit_comes_with_it_when_it_is_related(make_memory, clock, use_async):
    # The turn after is close to the question in meaning (above the floor, below the cut
    # that would make it a dense match by itself), and shares no word with it.
    vectors = {"bakery": [1.0, 0.0, 0.0], "recipe": [1.0, 0.0, 0.0], "rye": [0.8, 0.6, 0.0]}
    memory = make_memory(
        stm_capacity=1, tau=1000, embeddings=TableEmbeddings(vectors, [0.0, 0.0, 1.0])
    )
    exchanges = [
        ("Guess what happened at the bakery today", "Tell me!"),
        ("They gave me the sourdough recipe", "Nice, what is the secret?"),
        ("A rye starter fed twice a day, the baker said", "Good to know."),
        ("filler", "ok"),
        ("more filler", "ok"),
    ]
    for query, response in exchanges:
        clock.advance(60)
        await call(memory, "add_page", USER, query, response, use_async=use_async)
    found = await call(
        memory, "retrieve", USER, "which recipe did the bakery give me", use_async=use_async
    )
    queries = [s.page.query for s in found.pages]
    assert "A rye starter fed twice a day, the baker said" in queries


async def test_a_query_naming_a_period_prefers_pages_from_it(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=1000)
    clock.now = 1_678_000_000.0  # 2023-03-05
    await call(memory, "add_page", USER, "I went hiking with Sam", "fun", use_async=use_async)
    clock.now = 1_688_000_000.0  # 2023-06-29
    await call(memory, "add_page", USER, "I went hiking with Sam again", "fun", use_async=use_async)
    clock.now = 1_690_000_000.0
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    found = await call(
        memory, "retrieve", USER, "hiking with Sam in March 2023", use_async=use_async
    )
    assert found.pages[0].page.query == "I went hiking with Sam"
    found = await call(memory, "retrieve", USER, "hiking with Sam in June", use_async=use_async)
    assert found.pages[0].page.query == "I went hiking with Sam again"


async def test_a_question_about_the_present_prefers_the_latest_page(make_memory, clock, use_async):
    memory = make_memory(stm_capacity=1, tau=1000)
    await call(
        memory, "add_page", USER, "My favourite drink is green tea", "ok", use_async=use_async
    )
    clock.advance(30 * 86400)
    await call(
        memory,
        "add_page",
        USER,
        "These days my favourite drink is coffee",
        "ok",
        use_async=use_async,
    )
    clock.advance(86400)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    found = await call(
        memory, "retrieve", USER, "what is my favourite drink now", use_async=use_async
    )
    assert found.pages[0].page.query == "These days my favourite drink is coffee"


async def test_a_failing_query_embedding_leaves_the_lexical_search(make_memory, use_async):
    from tiers_helpers import FlakyEmbeddings

    embeddings = FlakyEmbeddings()
    memory = make_memory(embeddings=embeddings, stm_capacity=1)
    for text in ("my dentist is doctor alvarez", "chess on sundays"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    embeddings.broken = True
    found = await call(memory, "retrieve", USER, "dentist", use_async=use_async)
    assert [s.page.query for s in found.pages] == ["my dentist is doctor alvarez"]


async def test_over_capacity_the_coldest_segment_moves_to_the_archive_and_stays_searchable(
    make_memory, clock, use_async
):
    memory = make_memory(stm_capacity=1, mtm_capacity=2, tau=100)
    for text in ("apples orchard", "boats harbour", "cameras lenses"):
        clock.advance(3 * 3600)
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    clock.advance(3600)
    await call(memory, "retrieve", USER, "apples orchard", use_async=use_async)  # warmer
    report = await call(memory, "consolidate", USER, use_async=use_async)
    assert report.archived == 0
    await call(memory, "add_page", USER, "dragons lore", "ok", use_async=use_async)
    segments = await call(memory, "segments", USER, use_async=use_async)
    assert [(s.pages[0].query, s.archived) for s in segments] == [
        ("apples orchard", False),
        ("cameras lenses", False),
        ("boats harbour", True),  # the coldest: no visit, older
    ]
    found = await call(memory, "retrieve", USER, "boats harbour", use_async=use_async)
    assert found.pages[0].page.query == "boats harbour"  # never lost
    for i in range(300):  # a long history: every page stays searchable
        clock.advance(3 * 3600)
        await call(memory, "add_page", USER, f"note{i} topic{i}", "ok", use_async=use_async)
    for probe in ("boats harbour", "note0 topic0", "note150 topic150"):
        found = await call(memory, "retrieve", USER, probe, use_async=use_async)
        assert found.pages[0].page.query == probe


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
    (segment,) = [
        s for s in await call(memory, "segments", USER, use_async=use_async) if len(s.pages) == 4
    ]
    assert (segment.l_interaction, segment.promoted) == (0, 4)
    # The promotion starts a new count towards the next one; it does not cool the segment
    # (MemoryOS resets N_visit and L_interaction, making it the next one to go).
    assert segment.heat == pytest.approx(4 + 1.0)
    # Promoted pages are not promoted twice.
    before = await call(memory, "long_term_entries", USER, use_async=use_async)
    await call(memory, "consolidate", USER, use_async=use_async)
    assert await call(memory, "long_term_entries", USER, use_async=use_async) == before


async def test_questions_are_not_promoted_as_facts(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=3)
    for text in ("is lisbon sunny?", "lisbon rain today?", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    assert await call(memory, "long_term_entries", USER, use_async=use_async) == []


async def test_long_term_is_a_fifo_of_capacity_entries(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1, lpm_capacity=3)
    for i in range(6):
        await call(
            memory, "add_page", USER, f"Fact number{i} is topic{i}.", "ok", use_async=use_async
        )
    entries = await call(memory, "long_term_entries", USER, use_async=use_async)
    assert len(entries) == 3
    assert entries[-1].text == "Fact number4 is topic4."


async def test_long_term_entries_are_retrieved_only_when_relevant(make_memory, use_async):
    import json

    from layered_memory.testing import ScriptedChatModel

    answer = json.dumps(
        {"profile": ["Prefers trains to planes"], "facts": ["Dentist is Dr Alvarez in Porto"]}
    )
    summary = json.dumps({"keywords": ["dentist"], "summary": "About the dentist."})
    model = ScriptedChatModel(
        script=[summary, answer], default=json.dumps({"profile": [], "facts": []})
    )
    memory = make_memory(model=model, stm_capacity=1, tau=1)
    for text in ("My dentist is Dr Alvarez, I go by train to Porto.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    found = await call(memory, "retrieve", USER, "who is my dentist", use_async=use_async)
    assert [s.fact.text for s in found.facts] == ["Dentist is Dr Alvarez in Porto"]
    assert found.profile == ()
    found = await call(memory, "retrieve", USER, "trains or planes", use_async=use_async)
    assert [f.text for f in found.profile] == ["Prefers trains to planes"]
    found = await call(memory, "retrieve", USER, "quantum chromodynamics", use_async=use_async)
    assert (found.facts, found.profile, found.pages) == ((), (), ())


async def test_a_promotion_does_not_make_the_segment_the_next_one_archived(
    make_memory, clock, use_async
):
    memory = make_memory(stm_capacity=1, mtm_capacity=2, tau=4)
    for text in ("Lisbon trams are yellow.", "Lisbon trams are old.", "Lisbon trams are slow."):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    clock.advance(3 * 3600)
    await call(memory, "add_page", USER, "Chess openings matter.", "ok", use_async=use_async)
    clock.advance(3 * 3600)
    await call(memory, "add_page", USER, "Guitar chords hurt.", "ok", use_async=use_async)
    clock.advance(3 * 3600)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    segments = await call(memory, "segments", USER, use_async=use_async)
    lisbon = next(s for s in segments if len(s.pages) == 3)
    assert lisbon.promoted == 3
    assert not lisbon.archived
    assert [s.pages[0].query for s in segments if s.archived] == ["Chess openings matter."]


def test_settings_are_validated(make_memory):
    with pytest.raises(ValueError, match="stm_capacity"):
        make_memory(stm_capacity=0)
    with pytest.raises(ValueError, match="mu"):
        make_memory(mu=0)
    with pytest.raises(TypeError, match="unknown TieredMemory setting"):
        make_memory(capacity=3)
    with pytest.raises(TypeError, match="theta"):
        make_memory(theta="high")
    with pytest.raises(TypeError, match="unknown TieredMemory setting"):
        make_memory(top_m=5)  # MemoryOS's segment cap: every page is searched now
    with pytest.raises(TypeError, match="embeddings"):
        make_memory(embeddings=object())
    with pytest.raises(ValueError, match="namespace part"):
        make_memory(namespace=("a.b",))
