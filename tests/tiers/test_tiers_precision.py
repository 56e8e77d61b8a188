"""Precision: with a budget that holds everything, the tiers inject no page that shares no
content word with the question and whose cosine is below the query's calibrated floor, in any
tier (short-term, mid-term, archived) and whatever lifts it (a neighbouring hit); a page from
the period the question names still counts (its date matches)."""

from __future__ import annotations

from langgraph.store.memory import InMemoryStore
from tiers_helpers import Clock

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import TieredMemory, render_retrieval

UNRELATED = [
    ("My cat Miso sleeps all day on the radiator.", "Cats love warm spots."),
    ("The train to Leeds was late again this morning.", "Commuting can be rough."),
    ("I repainted the fence a dark green colour.", "That sounds tidy."),
    ("Our football team lost the final on penalties.", "Unlucky, next season then."),
]
RELATED = ("My sourdough starter finally doubled overnight.", "Great, bake a loaf of bread!")


def _memory(clock: Clock, **settings: object) -> TieredMemory:
    return TieredMemory(
        InMemoryStore(),
        embeddings=LexicalEmbeddings(),
        clock=clock,
        stm_capacity=3,
        **settings,  # type: ignore[arg-type]
    )


def _feed(memory: TieredMemory, clock: Clock, pages: list[tuple[str, str]]) -> None:
    for query, response in pages:
        memory.add_page("ada", query, response)
        clock.advance(60.0)


def test_a_question_never_brings_unrelated_pages_whatever_the_budget() -> None:
    clock = Clock()
    memory = _memory(clock)
    # The sourdough page sits between unrelated ones: its neighbours, in time and in tiers
    # (some go to mid-term, the last ones stay short-term).
    pages = [*UNRELATED[:2], RELATED, *UNRELATED[2:], *UNRELATED]
    _feed(memory, clock, pages)
    found = memory.retrieve("ada", "How is my sourdough doing?")
    block = render_retrieval(found, max_chars=100_000)
    assert "sourdough starter finally doubled" in block
    for query, _ in UNRELATED:
        assert query not in block
    assert all("sourdough" in hit.page.query for hit in found.pages)


def test_a_question_matching_nothing_injects_nothing() -> None:
    clock = Clock()
    memory = _memory(clock)
    _feed(memory, clock, [*UNRELATED, *UNRELATED])
    found = memory.retrieve("ada", "Any tips for sourdough bread?")
    assert render_retrieval(found, max_chars=100_000) == ""


def test_a_page_from_the_period_asked_about_counts_as_related() -> None:
    clock = Clock(1_714_000_000.0)  # 2024-04-24
    memory = _memory(clock)
    _feed(memory, clock, UNRELATED[:1])
    clock.advance(10 * 86400.0)
    _feed(memory, clock, [*UNRELATED[1:], *UNRELATED])
    found = memory.retrieve("ada", "What did I do on April 24, 2024?")
    block = render_retrieval(found, max_chars=100_000)
    assert "My cat Miso sleeps all day" in block
    assert "train to Leeds" not in block
