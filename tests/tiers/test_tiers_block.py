"""The block spends its budget on evidence (issue 37): of a found page it shows the turns that
hold the match (both when both do, or when neither shares a word with the question), one
date line a day, and no markup per page or per tier."""

from __future__ import annotations

from langgraph.store.memory import InMemoryStore
from tiers_helpers import Clock

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import Page, Retrieval, ScoredPage, TieredMemory, render_retrieval
from layered_memory.tiers.middleware import FOOTER, HEADER

PAGES = [
    ("What should I cook for the party?", "A mushroom risotto with arborio rice serves ten."),
    ("My sister Clara moved to Lisbon.", "Lisbon is lovely in spring."),
    ("The train to Leeds was late again.", "Commuting can be rough."),
]


def _memory(clock: Clock) -> TieredMemory:
    memory = TieredMemory(
        InMemoryStore(), embeddings=LexicalEmbeddings(), clock=clock, stm_capacity=2
    )
    for query, response in PAGES * 2:
        memory.add_page("ada", query, response)
        clock.advance(60.0)
    return memory


def test_a_page_shows_only_the_turn_that_holds_the_match() -> None:
    memory = _memory(Clock())
    found = memory.retrieve("ada", "Which risotto rice did we pick?")
    block = render_retrieval(found, max_chars=100_000)
    assert "\nA: A mushroom risotto with arborio rice serves ten.\n" in block
    assert "What should I cook for the party?" not in block
    assert all(hit.matched == (False, True) for hit in found.pages)


def test_a_page_shows_both_turns_when_both_hold_the_match() -> None:
    memory = _memory(Clock())
    found = memory.retrieve("ada", "Does Clara like Lisbon?")
    block = render_retrieval(found, max_chars=100_000)
    assert "\nU: My sister Clara moved to Lisbon.\nA: Lisbon is lovely in spring.\n" in block


def test_a_page_matching_by_meaning_alone_is_shown_whole_and_dates_come_once_a_day() -> None:
    day = 1_714_000_000.0
    hits = tuple(
        ScoredPage(Page(f"p{i}", query, response, day + 60.0 * i), 1.0)
        for i, (query, response) in enumerate(PAGES)
    )
    block = render_retrieval(Retrieval(pages=hits), max_chars=100_000)
    body = "\n".join(f"U: {query}\nA: {response}" for query, response in PAGES)
    # The whole overhead: the header, one date line, the footer; "U: "/"A: " per turn.
    assert block == f"{HEADER}\n[2024-04-24]\n{body}\n{FOOTER}"
