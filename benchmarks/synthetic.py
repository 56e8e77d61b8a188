"""A generator of long multi-session conversations with known answers, for the tiers' recall.

Deterministic (seeded), offline, no data set: one user talks with an assistant over many
dated sessions of small talk on everyday topics. Planted among it, each with a question asked
after the last session and the page(s) holding the answer (its evidence):

- **facts told over two turns**: "You won't believe what my sister did." then "She moved to
  Porto." (the second turn never names the sister: found through the conversation around the
  first) - "Where does my sister live?";
- **preference changes**: "My favourite drink is green tea." early, "I switched, my
  favourite drink is coffee now." later - "What is my favourite drink now?" (the evidence is
  the latest statement only; the old one is a distractor);
- **dated events**: "I went to the dentist today." in one session, other dentist talk
  elsewhere - "What did I do on March 14, 2024?" (only the page's date answers it).

Filler shares the planted topics' words, so a plain search meets distractors. Evidence
recall is measured as in `benchmarks/locomo_eval.py`: the share of evidence pages whose text
is in the context given to the model, on the same character budget for every method.

`conversation(sessions, per_session, seed)` returns the pages and the questions; run this
module to print recall of the tiers against BM25 over pages and the last pages (`--sessions
80 --per-session 20` makes 1,600 pages).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

START = dt.datetime(2024, 1, 8, 18, 0, tzinfo=dt.UTC).timestamp()
DAY = 86400.0

TOPICS: dict[str, list[str]] = {
    "cooking": ["recipe", "pasta", "sauce", "garlic", "oven", "soup", "onion", "dinner"],
    "travel": ["flight", "hotel", "luggage", "train", "museum", "beach", "booking", "airport"],
    "work": ["meeting", "deadline", "project", "manager", "report", "slides", "office"],
    "fitness": ["running", "gym", "workout", "yoga", "stretching", "sneakers", "cardio"],
    "family": ["sister", "brother", "mother", "cousin", "nephew", "birthday", "visit"],
    "health": ["dentist", "doctor", "appointment", "vitamins", "sleep", "checkup"],
    "drinks": ["tea", "coffee", "juice", "drink", "cafe", "mug", "kettle"],
    "home": ["kitchen", "sofa", "paint", "plumber", "boiler", "shelves", "garden"],
    "music": ["guitar", "concert", "album", "playlist", "piano", "lyrics", "band"],
}
QUERIES = (
    "I spent the evening sorting out the {a}.",
    "Any thoughts on the {a} before the weekend?",
    "The {a} took longer than expected today.",
    "I keep putting off the {a}, to be honest.",
    "Quick update: the {a} is done.",
    "Do you think the {a} matters that much?",
)
REPLIES = (
    "Sounds productive! How did the {b} turn out?",
    "It usually gets easier with practice.",
    "Good to hear, one thing less to worry about.",
    "Maybe start small and see how it goes.",
    "That happens to everyone now and then.",
)

# (setup turn, answer turn, question, filler-safe) told over two pages in one session.
TWO_TURN_FACTS = [
    ("You won't believe what my sister did last month.", "She moved to Porto for a new job.",
     "Where does my sister live?"),
    ("I have news about my brother.", "He is getting married to Ines in September.",
     "Who is my brother marrying?"),
    ("Remember my old neighbour from the garden club?", "Bartholomew adopted a tortoise.",
     "What pet did my old neighbour from the garden club adopt?"),
    ("My manager finally gave me feedback on the project.", "Ingrid said the report was "
     "the best this quarter.", "What did my manager say about the project?"),
    ("I finally picked a new doctor.", "Dr Okafor at the Riverside clinic.",
     "Which doctor did I pick?"),
    ("My cousin called me about the band.", "They booked the Blue Lantern for the concert.",
     "Where is my cousin's band playing the concert?"),
]  # fmt: skip

# (old statement, new statement, question)
PREFERENCES = [
    ("My favourite drink is green tea.", "I switched, my favourite drink is coffee now.",
     "What is my favourite drink now?"),
    ("I usually go running in the morning.", "These days I do yoga instead of running.",
     "What exercise do I do these days?"),
    ("For dinner I mostly cook pasta.", "Lately I cook soup for dinner most nights.",
     "What do I cook for dinner lately?"),
    ("I listen to jazz albums on my playlist.", "My playlist is all piano music now.",
     "What is on my playlist now?"),
]  # fmt: skip

# (event told on its day, a distractor on the same topic told another day)
EVENTS = [
    ("I went to the dentist today, two fillings.", "I should book the dentist sometime."),
    ("We had the big project meeting with the client today.", "Another project meeting soon."),
    ("I repainted the kitchen shelves today.", "The kitchen shelves need paint one day."),
    ("I took the train to the museum today.", "Museums are nice, maybe by train."),
    ("I ran my first 10k race today.", "Running a race sounds hard."),
]


@dataclass(frozen=True, slots=True)
class PageIn:
    query: str
    response: str
    timestamp: float

    @property
    def text(self) -> str:
        return f"{self.query}\n{self.response}"


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    kind: str  # "two-turn", "preference", "date"
    evidence: tuple[str, ...]  # the user turns that must be in the context


@dataclass(frozen=True, slots=True)
class Conversation:
    pages: list[PageIn]
    questions: list[Question]
    end: float


def _filler(rng: random.Random) -> tuple[str, str]:
    """Small talk naming one or two words of a topic (as people do: not a keyword list)."""
    a, b = rng.sample(TOPICS[rng.choice(list(TOPICS))], 2)
    return rng.choice(QUERIES).format(a=a), rng.choice(REPLIES).format(b=b)


def _when(timestamp: float) -> str:
    moment = dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)
    return f"{moment:%B} {moment.day}, {moment.year}"


def conversation(sessions: int = 40, per_session: int = 15, seed: int = 24) -> Conversation:
    """`sessions` sessions of `per_session` pages, 1-4 days apart; planted items go into the
    first 80% of the sessions (preference changes: the old statement in the first half, the
    new one in the second), the questions are asked after the last session."""
    rng = random.Random(seed)
    plan: dict[int, list[tuple[str, ...]]] = {s: [] for s in range(sessions)}
    early, late = max(1, int(sessions * 0.4)), max(2, int(sessions * 0.8))
    for fact in TWO_TURN_FACTS:
        plan[rng.randrange(late)].append(("two-turn", *fact))
    for old, new, _ in PREFERENCES:
        plan[rng.randrange(early)].append(("say", old))
        plan[rng.randrange(early, late)].append(("say", new))
    event_sessions = rng.sample(range(late), len(EVENTS))
    for (event, distractor), session in zip(EVENTS, event_sessions, strict=True):
        plan[session].append(("event", event))
        other = rng.choice([s for s in range(late) if s != session])
        plan[other].append(("say", distractor))
    pages: list[PageIn] = []
    questions: list[Question] = []
    event_days: dict[str, float] = {}
    now = START
    for session in range(sessions):
        now += rng.randint(1, 4) * DAY
        units: list[list[tuple[str, str]]] = []  # a two-turn fact is one unit of two pages
        for kind, *texts in plan[session]:
            if kind == "two-turn":
                units.append([(texts[0], "Oh? Tell me more."), (texts[1], "That's big news!")])
            else:
                units.append([(texts[0], "Noted, thanks for telling me.")])
                if kind == "event":
                    event_days[texts[0]] = now
        fillers = max(0, per_session - sum(map(len, units)))
        units += [[_filler(rng)] for _ in range(fillers)]
        rng.shuffle(units)
        for slot, (query, response) in enumerate(page for unit in units for page in unit):
            pages.append(PageIn(query, response, now + 60.0 * slot))
    for _, answer, question in TWO_TURN_FACTS:
        questions.append(Question(question, "two-turn", (answer,)))
    for _, new, question in PREFERENCES:
        questions.append(Question(question, "preference", (new,)))
    for event, _ in EVENTS:
        questions.append(
            Question(f"What did I do on {_when(event_days[event])}?", "date", (event,))
        )
    return Conversation(pages, questions, pages[-1].timestamp + DAY)


# --- methods on the same budget ------------------------------------------------------------------


def _fill(texts: Sequence[str], budget: int) -> str:
    kept, used = [], 0
    for text in texts:
        if used + len(text) + 1 <= budget:
            kept.append(text)
            used += len(text) + 1
    return "\n".join(kept)


def bm25_pages(conv: Conversation, budget: int) -> Callable[[Question], str]:
    """BM25 (`bm25s`, the package's tokenizer) over the pages, best first, filling the budget."""
    import bm25s
    import numpy as np

    from layered_memory.recall.text import tokens

    retriever = bm25s.BM25()
    retriever.index([tokens(p.text) for p in conv.pages], show_progress=False)

    def context(question: Question) -> str:
        scores = retriever.get_scores(tokens(question.text))
        order = np.argsort(-scores, kind="stable")
        return _fill([conv.pages[i].text for i in order], budget)

    return context


def last_pages(conv: Conversation, budget: int) -> Callable[[Question], str]:
    text = _fill([p.text for p in reversed(conv.pages)], budget)
    return lambda _q: text


def tiers(conv: Conversation, budget: int, **settings: object) -> Callable[[Question], str]:
    """The tiered memory with the package's lexical test embedding, fed page by page."""
    from langgraph.store.memory import InMemoryStore

    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory, render_retrieval

    now = [conv.pages[0].timestamp]
    memory = TieredMemory(
        InMemoryStore(), embeddings=LexicalEmbeddings(), clock=lambda: now[0], **settings
    )
    for page in conv.pages:
        now[0] = page.timestamp
        memory.add_page("user", page.query, page.response)
    now[0] = conv.end

    def context(question: Question) -> str:
        return render_retrieval(memory.retrieve("user", question.text), max_chars=budget)

    return context


def recall(conv: Conversation, context: Callable[[Question], str]) -> dict[str, float]:
    """Evidence recall per question kind and overall, in %."""
    hits: dict[str, list[int]] = {}
    for question in conv.questions:
        text = context(question)
        for evidence in question.evidence:
            hits.setdefault(question.kind, []).append(evidence in text)
            hits.setdefault("overall", []).append(evidence in text)
    return {kind: 100.0 * sum(found) / len(found) for kind, found in hits.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=80)
    parser.add_argument("--per-session", type=int, default=20)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    conv = conversation(args.sessions, args.per_session, args.seed)
    print(f"{len(conv.pages):,} pages, {len(conv.questions)} questions, {args.budget:,} chars")
    for name, method in (
        ("last pages", last_pages(conv, args.budget)),
        ("BM25 over pages", bm25_pages(conv, args.budget)),
        ("tiers", tiers(conv, args.budget)),
    ):
        scores = recall(conv, method)
        print(f"{name:>16}: " + ", ".join(f"{k} {v:.0f}%" for k, v in sorted(scores.items())))


if __name__ == "__main__":
    main()
