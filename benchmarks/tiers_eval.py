"""Evaluation of the tiered memory (issue 15): recall of planted facts and retrieval time.

A deterministic, offline long conversation (seeded generator, lexical test embedding, no
model): sessions of filler exchanges on everyday topics, with facts about the user planted
early ("My dentist is Dr Alvarez.") and asked about sessions later ("Who is my dentist?").
For every probe:

- tiered recall@5: the planted fact's answer word is in the 5 best retrieved mid-/long-term
  items (pages and facts ranked by cosine);
- baseline recall@5: it is in the last 5 exchanges (a last-N-messages window);
- recall at equal budget: it is in the injected text, the tiered block
  (`render_retrieval`, `max_chars`) against the last messages fitting the same characters.

Then per-turn retrieval time with 1,000 and 10,000 pages held (InMemoryStore, numpy, no
vector database). Run: `.venv/bin/python benchmarks/tiers_eval.py [--turns 240 --sessions 12]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from langgraph.store.memory import InMemoryStore

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import Retrieval, TieredMemory, render_retrieval

SEED = 15
USER = "eval-user"
SESSION_GAP = 2 * 24 * 3600.0
TURN_GAP = 90.0
BUDGET = 4000

TOPICS: dict[str, list[str]] = {
    "cooking": [
        "recipe",
        "pasta",
        "sauce",
        "garlic",
        "oven",
        "bake",
        "onion",
        "pepper",
        "salt",
        "dinner",
        "lunch",
        "soup",
        "stew",
    ],
    "travel": [
        "flight",
        "hotel",
        "luggage",
        "passport",
        "airport",
        "train",
        "beach",
        "museum",
        "itinerary",
        "booking",
    ],
    "work": [
        "meeting",
        "deadline",
        "project",
        "manager",
        "report",
        "slides",
        "colleague",
        "email",
        "office",
        "budget",
    ],
    "fitness": [
        "running",
        "gym",
        "workout",
        "stretching",
        "marathon",
        "squat",
        "cardio",
        "yoga",
        "sneakers",
        "pace",
    ],
    "movies": [
        "film",
        "cinema",
        "trailer",
        "director",
        "actor",
        "sequel",
        "popcorn",
        "review",
        "thriller",
        "comedy",
    ],
    "garden": [
        "seeds",
        "soil",
        "compost",
        "watering",
        "roses",
        "shovel",
        "greenhouse",
        "weeds",
        "mulch",
        "harvest",
    ],
    "coding": [
        "python",
        "bug",
        "compiler",
        "refactor",
        "tests",
        "deploy",
        "server",
        "database",
        "commit",
        "branch",
    ],
    "music": [
        "guitar",
        "concert",
        "album",
        "playlist",
        "chords",
        "drummer",
        "melody",
        "vinyl",
        "headphones",
        "lyrics",
    ],
    "weather": [
        "rain",
        "forecast",
        "sunny",
        "storm",
        "umbrella",
        "humidity",
        "wind",
        "snow",
        "temperature",
        "cloudy",
    ],
    "books": [
        "novel",
        "chapter",
        "author",
        "library",
        "poetry",
        "fiction",
        "paperback",
        "bookmark",
        "plot",
        "reading",
    ],
    "finance": [
        "savings",
        "mortgage",
        "invoice",
        "taxes",
        "pension",
        "stocks",
        "spending",
        "receipts",
        "bank",
        "loan",
    ],
    "home": [
        "kitchen",
        "sofa",
        "paint",
        "curtains",
        "plumber",
        "boiler",
        "furniture",
        "carpet",
        "shelves",
        "lamp",
    ],
}
OPENERS = ["I was thinking about", "Any tips on", "Today I dealt with", "Quick question on"]

# (statement planted, question asked later, the answer word that must come back)
FACTS: list[tuple[str, str, str]] = [
    ("My dentist is Dr Alvarez.", "Who is my dentist again?", "alvarez"),
    ("My cat is called Pixelbyte.", "What is my cat called?", "pixelbyte"),
    ("My sister Clarabel lives in Tromso.", "Where does my sister Clarabel live?", "tromso"),
    ("I am allergic to cashews.", "Which nuts am I allergic to?", "cashews"),
    ("My wifi password hint is blue heron.", "What was my wifi password hint?", "heron"),
    ("My son's school is Ridgemont Academy.", "Which school does my son attend?", "ridgemont"),
    ("My car is a green Skoda Octavia.", "What car do I drive?", "octavia"),
    ("My landlord is named Mr Okonkwo.", "What is my landlord's name?", "okonkwo"),
    ("I take my vitamins at 7am.", "When do I take my vitamins?", "7am"),
    ("My favourite tea is lapsang souchong.", "What is my favourite tea?", "souchong"),
    ("My bike lock code is 4471.", "What is my bike lock code?", "4471"),
    ("My manager is called Ingrid Solberg.", "Who is my manager?", "solberg"),
    ("My passport expires in October 2027.", "When does my passport expire?", "2027"),
    ("My mother's birthday is on June 3rd.", "When is my mother's birthday?", "june"),
    ("I park in spot B14 at the office.", "Where do I park at the office?", "b14"),
    ("My piano teacher is Mrs Vasquez-Lind.", "Who is my piano teacher?", "vasquez"),
    ("My gym membership number is GX-5520.", "What is my gym membership number?", "5520"),
    ("My daughter plays the oboe.", "Which instrument does my daughter play?", "oboe"),
    ("My insurance company is Helvetia Mutual.", "Which insurance company do I use?", "helvetia"),
    (
        "My neighbour Bartholomew owns a tortoise.",
        "What pet does my neighbour Bartholomew have?",
        "tortoise",
    ),
    ("My flight to Reykjavik is on Friday.", "When is my flight to Reykjavik?", "friday"),
    ("I keep the spare key under the blue planter.", "Where is the spare key?", "planter"),
    ("My blood type is AB negative.", "What is my blood type?", "ab"),
    ("My accountant is Priya Raman.", "Who is my accountant?", "raman"),
]


@dataclass(frozen=True, slots=True)
class Turn:
    session: int
    query: str
    response: str
    probe: int | None = None  # index into FACTS when this turn asks about a planted fact
    plants: int | None = None


@dataclass(slots=True)
class Recall:
    probes: int = 0
    tiered_at5: int = 0
    baseline_at5: int = 0
    tiered_budget: int = 0
    baseline_budget: int = 0
    misses: list[str] = field(default_factory=list)


def _filler(rng: random.Random) -> tuple[str, str]:
    topic = rng.choice(list(TOPICS))
    words = rng.sample(TOPICS[topic], 4)
    query = f"{rng.choice(OPENERS)} {words[0]} and {words[1]}, especially the {words[2]}."
    response = f"For {words[0]} and {words[3]}, keep it simple and plan ahead."
    return query, response


def conversation(turns: int = 240, sessions: int = 12, seed: int = SEED) -> list[Turn]:
    """`turns` exchanges in `sessions` sessions: facts planted in the first 60% of the
    sessions, each asked about once in the last 40%, the rest filler."""
    rng = random.Random(seed)
    per_session = turns // sessions
    plant_sessions = max(1, int(sessions * 0.6))
    facts = list(range(len(FACTS)))
    plants: dict[int, list[int]] = {s: [] for s in range(plant_sessions)}
    for index in facts:
        plants[index % plant_sessions].append(index)
    probes: dict[int, list[int]] = {s: [] for s in range(plant_sessions, sessions)}
    for n, index in enumerate(rng.sample(facts, len(facts))):
        probes[plant_sessions + n % (sessions - plant_sessions)].append(index)
    out: list[Turn] = []
    for session in range(sessions):
        specials = [("plant", i) for i in plants.get(session, [])]
        specials += [("probe", i) for i in probes.get(session, [])]
        slots = sorted(rng.sample(range(per_session), min(len(specials), per_session)))
        by_slot = dict(zip(slots, specials, strict=False))
        for slot in range(per_session):
            kind, index = by_slot.get(slot, ("filler", -1))
            if kind == "plant":
                out.append(
                    Turn(session, FACTS[index][0], "Got it, I'll remember that.", plants=index)
                )
            elif kind == "probe":
                out.append(Turn(session, FACTS[index][1], "Let me check my notes.", probe=index))
            else:
                out.append(Turn(session, *_filler(rng)))
    return out


def _clock() -> tuple[list[float], callable]:  # type: ignore[valid-type]
    now = [1_700_000_000.0]
    return now, lambda: now[0]


def _top5(found: Retrieval) -> str:
    ranked = [(s.score, f"{s.page.query} {s.page.response}") for s in found.pages]
    ranked += [(s.score, s.fact.text) for s in found.facts]
    ranked.sort(key=lambda pair: -pair[0])
    return " ".join(text for _, text in ranked[:5]).lower()


def _last_messages(history: list[Turn], budget: int) -> str:
    """The newest messages, whole, that fit `budget` characters (the baseline's prompt)."""
    kept: list[str] = []
    used = 0
    for turn in reversed(history):
        for message in (f"Assistant: {turn.response}", f"User: {turn.query}"):
            if used + len(message) + 1 > budget:
                return "\n".join(reversed(kept)).lower()
            kept.append(message)
            used += len(message) + 1
    return "\n".join(reversed(kept)).lower()


def evaluate_recall(turns: list[Turn], *, budget: int = BUDGET, **settings: object) -> Recall:
    """Play the conversation through `TieredMemory`, asking each probe before recording it."""
    now, clock = _clock()
    memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings(), clock=clock, **settings)
    result = Recall()
    history: list[Turn] = []
    session = 0
    for turn in turns:
        if turn.session != session:
            session = turn.session
            now[0] += SESSION_GAP
        now[0] += TURN_GAP
        if turn.probe is not None:
            answer = FACTS[turn.probe][2]
            found = memory.retrieve(USER, turn.query)
            block = render_retrieval(found, max_chars=budget).lower()
            last5 = " ".join(f"{t.query} {t.response}" for t in history[-5:]).lower()
            result.probes += 1
            result.tiered_at5 += answer in _top5(found)
            result.baseline_at5 += answer in last5
            result.tiered_budget += answer in block
            result.baseline_budget += answer in _last_messages(history, budget)
            if answer not in _top5(found):
                result.misses.append(turn.query)
        memory.add_page(USER, turn.query, turn.response)
        history.append(turn)
    return result


def _pages(count: int, seed: int) -> Iterator[tuple[str, str]]:
    rng = random.Random(seed)
    planted = 0
    for n in range(count):
        if n % 50 == 0:
            statement = FACTS[planted % len(FACTS)][0]
            planted += 1
            yield f"{statement} (note {n})", "Got it."
        else:
            yield _filler(rng)


def build(pages: int, *, seed: int = SEED, **settings: object) -> tuple[TieredMemory, float]:
    """A memory holding `pages` pages (capacity raised so none is evicted); seconds to build."""
    now, clock = _clock()
    settings.setdefault("mtm_capacity", 1_000_000)
    memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings(), clock=clock, **settings)
    start = time.perf_counter()
    for query, response in _pages(pages, seed):
        now[0] += TURN_GAP
        memory.add_page(USER, query, response)
    return memory, time.perf_counter() - start


def time_retrieval(
    memory: TieredMemory, *, turns: int = 50, seed: int = SEED
) -> tuple[list[float], list[float]]:
    """Milliseconds per `retrieve` (the visit write included) for `turns` probe/filler
    queries: wall time, and this process's CPU time (other processes on a shared machine
    inflate the wall time, not the CPU time)."""
    rng = random.Random(seed + 1)
    queries = [FACTS[i % len(FACTS)][1] if i % 2 else _filler(rng)[0] for i in range(turns)]
    memory.retrieve(USER, queries[0])  # warm-up
    wall, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        memory.retrieve(USER, query)
        cpu.append((time.process_time_ns() - start_cpu) / 1e6)
        wall.append((time.perf_counter_ns() - start) / 1e6)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=240)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    turns = conversation(args.turns, args.sessions)
    recall = evaluate_recall(turns)
    n = recall.probes
    print(f"{len(turns)} turns, {args.sessions} sessions, {n} probes of {len(FACTS)} planted facts")
    at5 = f"tiered {recall.tiered_at5 / n:.0%}, last-5-exchanges {recall.baseline_at5 / n:.0%}"
    print(f"recall@5: {at5}")
    print(
        f"recall within {BUDGET} chars: tiered {recall.tiered_budget / n:.0%}, "
        f"last messages {recall.baseline_budget / n:.0%}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        memory, seconds = build(size)
        wall, cpu = time_retrieval(memory, turns=100)
        segments = len(memory.segments(USER))
        print(
            f"{size} pages ({segments} segments, built in {seconds:.1f} s): retrieval "
            f"median {statistics.median(wall):.2f} ms wall (p90 "
            f"{statistics.quantiles(wall, n=10)[-1]:.2f}), {statistics.median(cpu):.2f} ms CPU "
            "per turn"
        )


if __name__ == "__main__":
    main()
