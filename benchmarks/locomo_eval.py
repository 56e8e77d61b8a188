"""LoCoMo evidence recall of the tiered memory against plain baselines on the same budget.

LoCoMo (Maharana et al. 2024, "Evaluating Very Long-Term Conversational Memory of LLM
Agents"): 10 long conversations between two people, 5,882 turns in 19-35 dated sessions each,
and questions with the ids of the turns that hold the answer (evidence). Questions of the
categories multi-hop (1), temporal (2), open-domain (3) and single-hop (4) with at least one
evidence turn are asked (1,535; the adversarial category 5 has no answer in the conversation).

Each conversation is fed page by page through `TieredMemory.add_page` (a page = two
consecutive turns of a session: one speaker's turn and the other's reply; the clock = the
session's date), then for every question `retrieve` + `render_retrieval(max_chars=B)`.
**Evidence recall** = the share of evidence turns (pooled over all questions) whose text is in
the rendered context. Baselines fill the same character budget:

- last-N turns: the newest turns that fit;
- BM25 over turns (`bm25s`, the package's tokenizer), best first, until the budget is full;
- BM25 over pages, the same over the pages the tiers get (the strongest plain baseline);
- flat dense over pages: cosine of the question with every page (the same embedding as the
  tiers), best first, until the budget is full;
- RRF hybrid over pages / over turns: reciprocal rank fusion (k = 60) of the BM25 and the dense
  rankings, best first;
- flat recipe over pages: the tiers' own scoring (0.6 · BM25 / best + 0.4 · calibrated dense +
  0.6 · best neighbouring page, the time bonus) over one flat index of every page, no tiers,
  no headers: what the tiers add beyond their search;
- flat recipe in the tiers' block: the same ranking rendered by `render_retrieval` (the
  matching turns of each page, dates once a day): what the tiers' rendering gives any index.

Next to recall, **evidence share**: the share of the injected characters (the whole rendered
context, headers and dates included) that are the text of turns from the evidence's sessions,
pooled over the questions: what the budget is spent on.

The data set is not in the repository: get `data/locomo10.zip` from the `snap-research/locomo`
repository (or a `locomo10.json`, the list of the 10 samples) and point `LOCOMO_PATH` at it.

Run: `LOCOMO_PATH=/path/locomo10.json .venv/bin/python benchmarks/locomo_eval.py
[--embedding tfidf|lexical|wordllama] [--joined] [--budgets 2000,4000]`. Needs the `bench`
extra (scikit-learn for the TF-IDF embedding).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bm25s
import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.memory import InMemoryStore

from layered_memory.recall.index import RecallIndex
from layered_memory.recall.periods import time_hint
from layered_memory.recall.ranking import DEFAULT_FLOOR_Z, matching_parts, rank
from layered_memory.recall.text import tokens
from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers import Page, Retrieval, ScoredPage, TieredMemory, render_retrieval

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BUDGETS = (2000, 4000)
ENV = "LOCOMO_PATH"
_DATE_RE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    timestamp: float

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True, slots=True)
class PageIn:
    """One page as fed to `add_page`: two consecutive turns of a session."""

    turns: tuple[Turn, ...]
    timestamp: float

    @property
    def query(self) -> str:
        return self.turns[0].line

    @property
    def response(self) -> str:
        return self.turns[1].line if len(self.turns) > 1 else ""


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # turn texts
    sessions: tuple[str, ...] = ()  # every turn text of the evidence's sessions


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    pages: list[PageIn]
    questions: list[Question]
    end: float


def _session_of(dia_id: str) -> str:
    """The session of a turn id ("D3:5": "D3")."""
    return dia_id.split(":", 1)[0]


def _session_time(text: str) -> float:
    match = _DATE_RE.search(text or "")
    if match is None:
        msg = f"unreadable session date {text!r}"
        raise ValueError(msg)
    hour, minute, half, day, month, year = match.groups()
    hours = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    moment = dt.datetime(
        int(year), _MONTHS[month.lower()], int(day), hours, int(minute), tzinfo=dt.UTC
    )
    return moment.timestamp()


def _samples(path: Path) -> list[dict[str, Any]]:
    """The 10 samples as in `locomo10.json` (`{"sample_id", "conversation", "qa"}`), read from
    that file or from the repository's `data/locomo10.zip` (one flat JSON per conversation)."""
    if path.suffix == ".zip":
        samples = []
        with zipfile.ZipFile(path) as archive:
            names = sorted(
                (n for n in archive.namelist() if n.endswith(".json")),
                key=lambda n: int(Path(n).stem) if Path(n).stem.isdigit() else 0,
            )
            for name in names:
                flat = json.loads(archive.read(name))
                conversation = {
                    k: v
                    for k, v in flat.items()
                    if k in ("speaker_a", "speaker_b")
                    or (k.startswith("session_") and not k.endswith(("_observation", "_summary")))
                }
                samples.append(
                    {
                        "sample_id": f"conv-{Path(name).stem}",
                        "conversation": conversation,
                        "qa": flat["qa"],
                    }
                )
        return samples
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(data)


def load(path: str | os.PathLike[str] | None = None) -> list[Conversation]:
    """The conversations of LoCoMo at `path` (default: `$LOCOMO_PATH`)."""
    where = path or os.environ.get(ENV)
    if not where:
        msg = (
            f"set {ENV} to LoCoMo's locomo10.json or locomo10.zip (the snap-research/locomo "
            "repository, data/locomo10.zip)"
        )
        raise SystemExit(msg)
    conversations = []
    for sample in _samples(Path(where)):
        conv = sample["conversation"]
        numbers = sorted(
            int(k.split("_")[1])
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
        )
        turns: list[Turn] = []
        pages: list[PageIn] = []
        for number in numbers:
            start = _session_time(conv[f"session_{number}_date_time"])
            session = [
                Turn(t["dia_id"], t["speaker"], t["text"], start + 30.0 * i)
                for i, t in enumerate(conv[f"session_{number}"])
            ]
            turns += session
            for i in range(0, len(session), 2):
                pair = tuple(session[i : i + 2])
                pages.append(PageIn(pair, pair[0].timestamp))
        by_id = {t.dia_id: t for t in turns}
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            ids = [e for x in qa.get("evidence", []) for e in re.split(r"[;,\s]+", x) if e]
            evidence = tuple(dict.fromkeys(by_id[e].text for e in ids if e in by_id))
            wanted = {_session_of(e) for e in ids if e in by_id}
            around = tuple(dict.fromkeys(t.text for t in turns if _session_of(t.dia_id) in wanted))
            if evidence:
                questions.append(Question(qa["question"], qa["category"], evidence, around))
        conversations.append(
            Conversation(sample["sample_id"], turns, pages, questions, turns[-1].timestamp)
        )
    return conversations


def joined(conversations: Sequence[Conversation]) -> Conversation:
    """All conversations as one history, one after the other in time (each shifted to start
    a day after the previous one ended), and all their questions."""
    turns: list[Turn] = []
    pages: list[PageIn] = []
    questions: list[Question] = []
    offset = 0.0
    for conv in conversations:
        if turns:
            offset = turns[-1].timestamp + 86400.0 - conv.turns[0].timestamp
        shift = offset

        def moved(turn: Turn, shift: float = shift) -> Turn:
            return Turn(turn.dia_id, turn.speaker, turn.text, turn.timestamp + shift)

        turns += [moved(t) for t in conv.turns]
        pages += [
            PageIn(tuple(moved(t) for t in page.turns), page.timestamp + shift)
            for page in conv.pages
        ]
        questions += conv.questions
    return Conversation("joined", turns, pages, questions, turns[-1].timestamp)


# --- embeddings ------------------------------------------------------------------------------


class TfidfEmbeddings(Embeddings):
    """scikit-learn TF-IDF fitted on one conversation's pages, as dense vectors."""

    def __init__(self, texts: Iterable[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(dtype=np.float32).fit(list(texts))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.vectorizer.transform(texts).toarray()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.vectorizer.transform([text]).toarray()[0]  # type: ignore[no-any-return]


def make_embeddings(kind: str, conv: Conversation) -> Embeddings:
    if kind == "tfidf":
        return TfidfEmbeddings(page_text(p) for p in conv.pages)
    if kind == "lexical":
        return LexicalEmbeddings()
    if kind == "wordllama":
        from wordllama import WordLlama

        model = WordLlama.load()

        class _WordLlama(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return model.embed(texts, norm=True)  # type: ignore[no-any-return]

            def embed_query(self, text: str) -> list[float]:
                return model.embed([text], norm=True)[0]  # type: ignore[no-any-return]

        return _WordLlama()
    msg = f"unknown embedding {kind!r}"
    raise SystemExit(msg)


def page_text(page: PageIn) -> str:
    return f"{page.query}\n{page.response}"


# --- the contexts each method builds -----------------------------------------------------------


def _fill(lines: Iterable[str], budget: int) -> str:
    """Whole lines in the given order while they fit `budget` characters (one that does not
    fit is skipped, the next may)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 <= budget:
            kept.append(line)
            used += len(line) + 1
    return "\n".join(kept)


def last_n(conv: Conversation, budget: int) -> Callable[[Question], str]:
    lines: list[str] = []
    used = 0
    for turn in reversed(conv.turns):
        if used + len(turn.line) + 1 > budget:
            break
        lines.append(turn.line)
        used += len(turn.line) + 1
    text = "\n".join(reversed(lines))
    return lambda _q: text


def bm25_turns(conv: Conversation, budget: int) -> Callable[[Question], str]:
    retriever = bm25s.BM25()
    retriever.index([tokens(t.line) for t in conv.turns], show_progress=False)

    def context(question: Question) -> str:
        scores = retriever.get_scores(tokens(question.text))
        order = np.argsort(-scores, kind="stable")
        return _fill((conv.turns[i].line for i in order), budget)

    return context


def bm25_pages(conv: Conversation, budget: int) -> Callable[[Question], str]:
    retriever = bm25s.BM25()
    retriever.index([tokens(page_text(p)) for p in conv.pages], show_progress=False)

    def context(question: Question) -> str:
        scores = retriever.get_scores(tokens(question.text))
        order = np.argsort(-scores, kind="stable")
        return _fill((page_text(conv.pages[i]) for i in order), budget)

    return context


def _unit_rows(emb: Embeddings, texts: list[str]) -> np.ndarray:
    matrix = np.asarray(emb.embed_documents(texts), np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    return matrix / norms[:, None]


def _unit_query(emb: Embeddings, text: str) -> np.ndarray:
    q = np.asarray(emb.embed_query(text), np.float32)
    return q / (np.linalg.norm(q) or 1.0)


def dense_pages(conv: Conversation, budget: int, emb: Embeddings) -> Callable[[Question], str]:
    matrix = _unit_rows(emb, [page_text(p) for p in conv.pages])

    def context(question: Question) -> str:
        order = np.argsort(-(matrix @ _unit_query(emb, question.text)), kind="stable")
        return _fill((page_text(conv.pages[i]) for i in order), budget)

    return context


RRF_K = 60


def rrf(texts: list[str], budget: int, emb: Embeddings) -> Callable[[Question], str]:
    """Reciprocal rank fusion of BM25 and dense over `texts` (k = 60; a text matching
    neither ranking is not fused in)."""
    retriever = bm25s.BM25()
    retriever.index([tokens(t) for t in texts], show_progress=False)
    matrix = _unit_rows(emb, texts)

    def context(question: Question) -> str:
        lexical = retriever.get_scores(tokens(question.text))
        dense = matrix @ _unit_query(emb, question.text)
        fused = np.zeros(len(texts))
        for scores in (lexical, dense):
            order = np.argsort(-scores, kind="stable")
            ranks = np.empty(len(texts))
            ranks[order] = np.arange(1, len(texts) + 1)
            fused += np.where(scores > 0, 1.0 / (RRF_K + ranks), 0.0)
        order = np.argsort(-fused, kind="stable")
        return _fill((texts[i] for i in order if fused[i] > 0), budget)

    return context


def flat_recipe(
    conv: Conversation,
    budget: int,
    emb: Embeddings,
    settings: dict[str, Any],
    *,
    block: bool = False,
) -> Callable[[Question], str]:
    """The tiers' scoring over one flat index of every page (`layered_memory.recall`), as
    plain text, or (`block`) rendered as the tiers render theirs: whatever the block gains,
    the flat index gains too."""
    relevance_z = float(settings.get("relevance_z", 1.0))
    floor_z = float(settings.get("floor_z", DEFAULT_FLOOR_Z))
    texts = [page_text(p) for p in conv.pages]
    matrix = _unit_rows(emb, texts)
    index = RecallIndex(matrix.shape[1])
    index.append(
        [str(i) for i in range(len(texts))],
        [p.timestamp for p in conv.pages],
        [Counter(tokens(t)) for t in texts],
        matrix,
    )
    now = conv.end + 3600.0

    def context(question: Question) -> str:
        found = rank(
            index,
            tokens(question.text),
            _unit_query(emb, question.text),
            top_k=len(texts),
            relevance_z=relevance_z,
            hint=time_hint(question.text, now),
            floor_z=floor_z,
        )
        if not block:
            return _fill((texts[int(pid)] for pid, _ in found.ranked), budget)
        hits = []
        for pid, score in found.ranked:
            page = conv.pages[int(pid)]
            parts = matching_parts(found, (page.query, page.response))
            hits.append(
                ScoredPage(
                    Page(pid, page.query, page.response, page.timestamp),
                    score,
                    (parts[0], parts[1]),
                )
            )
        return render_retrieval(Retrieval(pages=tuple(hits)), max_chars=budget)

    return context


@dataclass(slots=True)
class TiersRun:
    memory: TieredMemory
    clock: list[float]
    seconds: float
    user: str


def feed(
    conv: Conversation, emb: Embeddings, settings: dict[str, Any], *, model: Any = None
) -> TiersRun:
    now = [conv.turns[0].timestamp]
    memory = TieredMemory(
        InMemoryStore(), embeddings=emb, clock=lambda: now[0], model=model, **settings
    )
    start = time.perf_counter()
    for page in conv.pages:
        now[0] = page.timestamp
        memory.add_page(conv.sample_id, page.query, page.response)
    now[0] = conv.end + 3600.0
    return TiersRun(memory, now, time.perf_counter() - start, conv.sample_id)


def tiers(run: TiersRun, budget: int) -> Callable[[Question], str]:
    def context(question: Question) -> str:
        found = run.memory.retrieve(run.user, question.text)
        return render_retrieval(found, max_chars=budget)

    return context


# --- scoring ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Score:
    hits: dict[int, int] = field(default_factory=dict)
    total: dict[int, int] = field(default_factory=dict)
    questions: dict[int, int] = field(default_factory=dict)
    shares: dict[int, float] = field(default_factory=dict)
    chars: int = 0
    evidence_chars: int = 0
    seconds: float = 0.0
    asked: int = 0

    def add(self, question: Question, context: str) -> None:
        c = question.category
        self.chars += len(context)
        self.evidence_chars += sum(len(text) for text in question.sessions if text in context)
        self.total[c] = self.total.get(c, 0) + len(question.evidence)
        found = sum(text in context for text in question.evidence)
        self.hits[c] = self.hits.get(c, 0) + found
        self.questions[c] = self.questions.get(c, 0) + 1
        self.shares[c] = self.shares.get(c, 0.0) + found / len(question.evidence)

    def merge(self, other: Score) -> None:
        for c, n in other.total.items():
            self.total[c] = self.total.get(c, 0) + n
            self.hits[c] = self.hits.get(c, 0) + other.hits.get(c, 0)
            self.questions[c] = self.questions.get(c, 0) + other.questions.get(c, 0)
            self.shares[c] = self.shares.get(c, 0.0) + other.shares.get(c, 0.0)
        self.chars += other.chars
        self.evidence_chars += other.evidence_chars
        self.seconds += other.seconds
        self.asked += other.asked

    def evidence_share(self) -> float:
        """Per cent of the injected characters that are turns of the evidence's sessions."""
        return 100.0 * self.evidence_chars / self.chars if self.chars else 0.0

    def per_question_of(self, category: int) -> float:
        n = self.questions.get(category, 0)
        return 100.0 * self.shares.get(category, 0.0) / n if n else 0.0

    def per_question(self) -> float:
        n = sum(self.questions.values())
        return 100.0 * sum(self.shares.values()) / n if n else 0.0

    def recall(self, category: int | None = None) -> float:
        if category is None:
            total = sum(self.total.values())
            return 100.0 * sum(self.hits.values()) / total if total else 0.0
        n = self.total.get(category, 0)
        return 100.0 * self.hits.get(category, 0) / n if n else 0.0


METHODS = (
    "last-N turns",
    "BM25 over turns",
    "BM25 over pages",
    "flat dense over pages",
    "RRF hybrid over turns",
    "RRF hybrid over pages",
    "flat recipe over pages",
    "flat recipe in the tiers' block",
    "tiers",
)


def evaluate(
    conversations: Sequence[Conversation],
    *,
    embedding: str = "tfidf",
    budgets: Sequence[int] = BUDGETS,
    settings: dict[str, Any] | None = None,
    methods: Sequence[str] = METHODS,
    progress: Callable[[str], None] | None = None,
    per_conversation: dict[tuple[str, str, int], Score] | None = None,
) -> dict[tuple[str, int], Score]:
    """Evidence recall of every method at every budget, pooled over the conversations
    (`per_conversation`, if given, receives each conversation's scores too)."""
    scores = {(m, b): Score() for m in methods for b in budgets}
    for conv in conversations:
        emb = make_embeddings(embedding, conv)
        run = feed(conv, emb, settings or {}) if "tiers" in methods else None
        if progress and run is not None:
            progress(
                f"{conv.sample_id}: {len(conv.pages)} pages fed in {run.seconds:.1f} s, "
                f"{len(conv.questions)} questions"
            )
        for budget in budgets:
            builders: dict[str, Callable[[Question], str]] = {}
            if "last-N turns" in methods:
                builders["last-N turns"] = last_n(conv, budget)
            if "BM25 over turns" in methods:
                builders["BM25 over turns"] = bm25_turns(conv, budget)
            if "BM25 over pages" in methods:
                builders["BM25 over pages"] = bm25_pages(conv, budget)
            if "flat dense over pages" in methods:
                builders["flat dense over pages"] = dense_pages(conv, budget, emb)
            if "RRF hybrid over turns" in methods:
                builders["RRF hybrid over turns"] = rrf([t.line for t in conv.turns], budget, emb)
            if "RRF hybrid over pages" in methods:
                texts = [page_text(p) for p in conv.pages]
                builders["RRF hybrid over pages"] = rrf(texts, budget, emb)
            if "flat recipe over pages" in methods:
                builders["flat recipe over pages"] = flat_recipe(conv, budget, emb, settings or {})
            if "flat recipe in the tiers' block" in methods:
                builders["flat recipe in the tiers' block"] = flat_recipe(
                    conv, budget, emb, settings or {}, block=True
                )
            if run is not None:
                builders["tiers"] = tiers(run, budget)
            for method, build in builders.items():
                score = Score()
                for question in conv.questions:
                    started = time.perf_counter()
                    context = build(question)
                    score.seconds += time.perf_counter() - started
                    score.asked += 1
                    score.add(question, context)
                scores[method, budget].merge(score)
                if per_conversation is not None:
                    per_conversation[method, conv.sample_id, budget] = score
    return scores


def table(scores: dict[tuple[str, int], Score], budgets: Sequence[int]) -> str:
    """Per question (the mean of each question's share of its evidence found) overall and
    per category, pooled (evidence turns found over all evidence turns), the evidence share
    of the injected characters, and ms per question."""
    methods = list(dict.fromkeys(m for m, _ in scores))
    head = [
        "method",
        "budget",
        "per question",
        *CATEGORIES.values(),
        "pooled",
        "evidence share",
        "ms/question",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in methods:
        for budget in budgets:
            s = scores[method, budget]
            cells = [
                f"**{s.per_question():.1f}**",
                *(f"{s.per_question_of(c):.1f}" for c in CATEGORIES),
                f"{s.recall():.1f}",
                f"{s.evidence_share():.1f}",
                f"{1000 * s.seconds / max(s.asked, 1):.2f}",
            ]
            lines.append(f"| {method} | {budget:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def conversation_table(
    per_conversation: dict[tuple[str, str, int], Score], budgets: Sequence[int]
) -> str:
    """Per question recall of every method in every conversation."""
    methods = list(dict.fromkeys(m for m, _, _ in per_conversation))
    convs = list(dict.fromkeys(c for _, c, _ in per_conversation))
    head = ["method", "budget", *convs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in methods:
        for budget in budgets:
            cells = [f"{per_conversation[method, c, budget].per_question():.1f}" for c in convs]
            lines.append(f"| {method} | {budget:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help=f"LoCoMo data (default: ${ENV})")
    parser.add_argument("--embedding", default="tfidf", choices=("tfidf", "lexical", "wordllama"))
    parser.add_argument("--budgets", default="2000,4000")
    parser.add_argument("--joined", action="store_true", help="all conversations as one history")
    parser.add_argument("--only", default=None, help="conversation ids, comma-separated")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument(
        "--per-conversation", action="store_true", help="also each conversation's figures"
    )
    parser.add_argument(
        "--set", action="append", default=[], help="a TieredMemory setting, NAME=VALUE"
    )
    args = parser.parse_args(argv)
    conversations = load(args.path)
    if args.only:
        wanted = set(args.only.split(","))
        conversations = [c for c in conversations if c.sample_id in wanted]
    if args.joined:
        conversations = [joined(conversations)]
    settings: dict[str, Any] = {}
    for item in args.set:
        name, _, value = item.partition("=")
        settings[name] = json.loads(value)
    budgets = [int(b) for b in args.budgets.split(",")]
    started = time.perf_counter()
    per_conversation: dict[tuple[str, str, int], Score] = {}
    scores = evaluate(
        conversations,
        embedding=args.embedding,
        budgets=budgets,
        settings=settings,
        methods=args.methods.split(","),
        progress=lambda line: print(line, file=sys.stderr),
        per_conversation=per_conversation,
    )
    questions = sum(len(c.questions) for c in conversations)
    turns = sum(len(c.turns) for c in conversations)
    print(
        f"LoCoMo: {len(conversations)} histor{'y' if len(conversations) == 1 else 'ies'}, "
        f"{turns:,} turns, {questions:,} questions; embedding {args.embedding}; "
        f"settings {settings or 'package defaults'}; {time.perf_counter() - started:.0f} s"
    )
    print(table(scores, budgets))
    if args.per_conversation:
        print()
        print(conversation_table(per_conversation, budgets))


if __name__ == "__main__":
    main()
