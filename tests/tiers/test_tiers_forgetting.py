"""A forgotten page or segment reaches no prompt by any route: not its text, not its words
through segment keywords, summaries, the long-term profile or facts; it earns no heat; and
forgetting stays non-destructive (restoring shows everything again)."""

from __future__ import annotations

import json

from tiers_helpers import call

from layered_memory.testing import ScriptedChatModel
from layered_memory.tiers import render_retrieval

USER = "ada"
SECRET = "My oncologist confirmed the leukemia diagnosis"
WORDS = ("leukemia", "oncologist", "diagnosis")
PROBES = ("hello", "leukemia diagnosis", "oncologist", "what did my doctor confirm")


async def _everything_shown(memory, use_async) -> str:
    """Every prompt block a few queries get, the visible long-term entries, and what a later
    promotion or model call would take from the segments (their keywords and summaries; a
    forgotten segment is listed by `segments()` as it is, flagged, and used by nothing)."""
    blocks = [
        render_retrieval(await call(memory, "retrieve", USER, probe, use_async=use_async))
        for probe in PROBES
    ]
    for segment in await call(memory, "segments", USER, use_async=use_async):
        if not segment.forgotten:
            blocks.append(" ".join(segment.keywords) + " " + segment.summary)
    blocks += await call(memory, "long_term", USER, use_async=use_async)
    return "\n".join(blocks).casefold()


async def _add(memory, query, use_async, response="ok"):
    return await call(memory, "add_page", USER, query, response, use_async=use_async)


def _leaks(text: str) -> list[str]:
    return [word for word in WORDS if word in text]


async def test_a_page_forgotten_in_short_term_never_reaches_a_prompt(make_memory, use_async):
    memory = make_memory(stm_capacity=1)
    page = await _add(memory, SECRET, use_async, "Sorry to hear that.")
    await call(memory, "forget", USER, page.id, use_async=use_async)
    await _add(memory, "What should I cook tonight", use_async, "Try a risotto")
    for _ in range(4):
        found = await call(memory, "retrieve", USER, "leukemia diagnosis", use_async=use_async)
        assert found.pages == ()
    await _add(memory, "Any good films", use_async, "Watch Casablanca")
    (holder,) = [
        s
        for s in await call(memory, "segments", USER, use_async=use_async)
        if page.id in [p.id for p in s.pages]
    ]
    assert (holder.n_visit, holder.l_interaction, holder.promoted) == (0, 0, 0)
    assert await call(memory, "long_term", USER, use_async=use_async) == []
    assert _leaks(await _everything_shown(memory, use_async)) == []

    await call(memory, "restore", USER, page.id, use_async=use_async)
    found = await call(memory, "retrieve", USER, "leukemia diagnosis", use_async=use_async)
    assert found.pages[0].page.id == page.id
    segments = await call(memory, "segments", USER, use_async=use_async)
    (holder,) = [s for s in segments if s.id == holder.id]
    assert "leukemia" in holder.keywords
    assert holder.l_interaction == 1


async def test_a_forgotten_page_joining_a_segment_adds_nothing_to_it(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=4)
    await _add(memory, "My oncologist appointment is on Monday.", use_async)
    secret = await _add(memory, SECRET + " on Monday.", use_async)
    await call(memory, "forget", USER, secret.id, use_async=use_async)
    for text in ("Oncologist parking on Monday is free.", "My oncologist on Monday is kind.", "x"):
        await _add(memory, text, use_async)
    (segment,) = [
        s for s in await call(memory, "segments", USER, use_async=use_async) if len(s.pages) > 1
    ]
    assert secret.id in [p.id for p in segment.pages]  # kept, restorable
    # Promoted at 3 visible pages + recency 1 = τ; the forgotten page added no heat.
    assert (segment.promoted, segment.l_interaction) == (4, 0)
    shown = await _everything_shown(memory, use_async)
    assert "oncologist" in shown  # the visible pages' own word
    assert [w for w in ("leukemia", "diagnosis", "confirmed") if w in shown] == []


async def test_a_page_forgotten_in_mid_term_leaves_its_segment_and_long_term(
    make_memory, use_async
):
    memory = make_memory(stm_capacity=1, tau=3)
    await _add(memory, SECRET + " today.", use_async)
    await _add(memory, "The leukemia diagnosis came today.", use_async)
    await _add(memory, "filler", use_async)
    assert _leaks(await _everything_shown(memory, use_async))  # promoted: facts and profile
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    for page in segment.pages:
        await call(memory, "forget", USER, page.id, use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    visits = segment.n_visit  # earned while the pages were visible
    assert _leaks(await _everything_shown(memory, use_async)) == []
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert (segment.n_visit, segment.l_interaction) == (visits, 0)
    assert (segment.keywords, segment.summary) == ((), "")

    for page in segment.pages:
        await call(memory, "restore", USER, page.id, use_async=use_async)
    assert await call(memory, "long_term", USER, use_async=use_async)
    assert set(_leaks(await _everything_shown(memory, use_async))) == set(WORDS)


async def test_forgetting_one_page_hides_only_what_was_made_from_it(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=1)
    dentist = await _add(memory, "My dentist is Dr Alvarez.", use_async)
    await _add(memory, "I grow tomatoes in the garden.", use_async)
    await _add(memory, "filler", use_async)
    await call(memory, "forget", USER, dentist.id, use_async=use_async)
    texts = await call(memory, "long_term", USER, use_async=use_async)
    assert not any("dentist" in text.casefold() for text in texts)
    assert "I grow tomatoes in the garden." in texts
    entries = await call(memory, "long_term_entries", USER, use_async=use_async)
    assert any("dentist" in e.text.casefold() and e.forgotten for e in entries)  # listed, hidden


async def test_a_purged_page_takes_its_words_and_entries_along(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=2)
    await _add(memory, SECRET + " in March.", use_async)
    await _add(memory, "filler", use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    page_id = segment.pages[0].id
    await call(memory, "forget", USER, page_id, purge=True, use_async=use_async)
    assert _leaks(await _everything_shown(memory, use_async)) == []


async def test_a_forgotten_segment_earns_no_heat_and_shows_nothing(make_memory, use_async):
    memory = make_memory(stm_capacity=1, tau=2)
    await _add(memory, SECRET + " this week.", use_async)
    await _add(memory, "filler", use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.promoted == 1
    await call(memory, "forget", USER, segment.id, use_async=use_async)
    for _ in range(4):
        await call(memory, "retrieve", USER, "leukemia diagnosis", use_async=use_async)
    (segment,) = await call(memory, "segments", USER, use_async=use_async)
    assert segment.n_visit == 0
    assert _leaks(await _everything_shown(memory, use_async)) == []
    await call(memory, "restore", USER, segment.id, use_async=use_async)
    assert set(_leaks(await _everything_shown(memory, use_async))) == set(WORDS)


async def test_a_forgotten_page_is_never_sent_to_the_chat_model(make_memory, use_async):
    summary = json.dumps({"keywords": ["cooking"], "summary": "User cooks."})
    model = ScriptedChatModel(script=[], default=summary)
    memory = make_memory(model=model, stm_capacity=1, tau=100)
    page = await _add(memory, SECRET, use_async, "Sorry.")
    await call(memory, "forget", USER, page.id, use_async=use_async)
    for text in ("What should I cook tonight", "Any good films", "x"):
        await _add(memory, text, use_async)
    sent = "\n".join(message.text for prompt in model.prompts for message in prompt).casefold()
    assert "cook" in sent
    assert _leaks(sent) == []
