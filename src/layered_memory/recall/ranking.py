"""One query against a `RecallIndex`: the hybrid score, the conversation around a hit, time,
and which rows are relevant at all.

- **Weighted fusion.** score = 0.6 · BM25 / (the query's best BM25) + 0.4 · dense, where
  dense = (cos − cut) / (best cos − cut), clipped to [0, 1]. Both parts are on [0, 1] for any
  query and any embedding. Reciprocal rank fusion (k = 60) was measured too: lower on LoCoMo
  (docs/benchmarks.md), and its flat scores leave no room for the context term below.
- **Relevance without one cosine cut.** A row counts as a lexical match when it shares a
  content word with the query (BM25 > 0), and as a dense match when its cosine is more than
  `relevance_z` standard deviations above the query's mean cosine over all rows (`cut`):
  TF-IDF puts unrelated rows at 0 and related ones at 0.1, WordLlama unrelated ones at 0.3; a
  fixed 0.2 fits neither. A query matching nothing returns nothing.
- **The floor.** A row with no lexical match whose cosine is below `floor_z` standard
  deviations above the mean is never returned, whatever else lifts it (a neighbouring hit):
  with a budget that holds everything, a question about sourdough must not bring "my cat
  Miso sleeps all day". `floor_z` sits below `relevance_z`: a row just under the dense cut
  may still come as the context of a hit. A row from the period the query names matches by
  its date (the date is part of what is shown). On LoCoMo (TF-IDF) the floor at 0 moves recall at
  2,000 and 4,000 characters by at most 0.1 point (docs/benchmarks.md).
- **The conversation around a hit.** Each row adds 0.6 × the score of its best neighbour
  (the rows one place before or after it in time, two places at half weight, within two
  hours): the answer is often in the reply to the turn that matches the question, or the
  turn after. MemoryOS links pages into dialogue chains (`pre_page` / `next_page`) for this.
- **Time-aware.** A query naming a period adds 0.25 to every row within it; one asking about
  the present up to 0.25 to the newest relevant rows (`recall.periods`).

Extra rows (the tiers' short-term pages: no vector yet, not in the index's order) are scored
lexically beside the index, in the same statistics.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from layered_memory.recall.bm25 import K1, B, bm25, idf
from layered_memory.recall.index import RecallIndex
from layered_memory.recall.periods import TimeHint
from layered_memory.recall.text import word_counts

__all__ = [
    "CONTEXT_GAP",
    "CONTEXT_WEIGHT",
    "DEFAULT_FLOOR_Z",
    "LEXICAL_WEIGHT",
    "TIME_BONUS",
    "Found",
    "LooseDoc",
    "cosines",
    "matching_parts",
    "rank",
    "score_extra",
    "unit",
]

LEXICAL_WEIGHT: Final = 0.6
"""Weight of the lexical score (BM25 over the query's best); the dense score has the rest."""
CONTEXT_WEIGHT: Final = 0.6
"""Share of its best neighbour's score a row gets (the conversation around a hit)."""
CONTEXT_GAP: Final = 2 * 3600.0
"""Rows further apart in time than this are not neighbours (another conversation)."""
TIME_BONUS: Final = 0.25
"""Added to every row within the period a query names (or, for a query about the present,
up to this much to the newest relevant row)."""
DEFAULT_FLOOR_Z: Final = 0.0
"""A row with no lexical match must have a cosine above the query's mean over all rows
(0 standard deviations above it) to be returned at all."""


@dataclass(frozen=True, slots=True)
class LooseDoc:
    """A row searched beside the index (lexically only: it has no vector yet).

    Attributes:
        id: Its id.
        words: Its content-word counts.
        timestamp: Its time (seconds).
    """

    id: str
    words: Counter[str]
    timestamp: float


@dataclass(slots=True)
class Found:
    """The ranking of one query, and the scales an extra item (a long-term entry) is put on.

    Attributes:
        ranked: (id, score), best first.
        max_lexical: The query's best BM25.
        dense_cut: The cosine a dense match must pass (inf: no dense search).
        dense_top: The best cosine.
        dense_floor: The cosine below which a row without a lexical match is never returned.
        idf: Each query word's IDF.
        avg_length: The average row length.
        last_score: The score an extra item must reach to be relevant: the last returned
            row's when `top_k` rows were found, else anything above 0.
    """

    ranked: list[tuple[str, float]]
    max_lexical: float
    dense_cut: float
    dense_top: float
    dense_floor: float
    idf: dict[str, float]
    avg_length: float
    last_score: float


def unit(vector: np.ndarray) -> np.ndarray:
    """`vector` scaled to length 1 (a zero vector as it is)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of every row of `matrix` with `query` (zero rows score 0)."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    result: np.ndarray = (matrix @ unit(query)) / norms
    return result


def _top(scores: np.ndarray, count: int) -> np.ndarray:
    """Indices of the `count` highest positive `scores`, best first (ties: lower index)."""
    candidates = np.nonzero(scores > 0)[0]
    if candidates.size > count:
        part = np.argpartition(-scores[candidates], count - 1)[:count]
        candidates = candidates[part]
    return candidates[np.lexsort((candidates, -scores[candidates]))]


def _lexical(
    index: RecallIndex | None, words: Sequence[str], loose: Sequence[LooseDoc]
) -> tuple[np.ndarray, dict[str, float], float]:
    """BM25 of every indexed then loose row, with IDF and the average length over the
    visible rows (a hidden row leaves no trace in the statistics)."""
    n = index.n if index is not None else 0
    visible = index.visible if index is not None else np.zeros(0, bool)
    shown = int(visible.sum()) + len(loose)
    lengths = [float(sum(doc.words.values())) for doc in loose]
    total = float(index.lengths[visible].sum()) if index is not None else 0.0
    avg_length = max((total + sum(lengths)) / shown, 1.0) if shown else 1.0
    scores = np.zeros(n + len(loose), dtype=np.float32)
    weights: dict[str, float] = {}
    for word in dict.fromkeys(words):
        docs = counts = None
        df = 0
        if index is not None and word in index.postings:
            docs, counts = index.postings[word].as_arrays()
            keep = visible[docs]
            docs, counts = docs[keep], counts[keep]
            df = int(docs.size)
        loose_counts = [doc.words.get(word, 0) for doc in loose]
        df += sum(1 for count in loose_counts if count)
        if not df:
            continue
        weights[word] = idf(shown, df)
        if index is not None and docs is not None and counts is not None and docs.size:
            norm = K1 * (1 - B + B * index.lengths[docs] / avg_length)
            scores[docs] += weights[word] * counts * (K1 + 1) / (counts + norm)
        for i, count in enumerate(loose_counts):
            if count:
                scores[n + i] += bm25(count, lengths[i], avg_length, weights[word])
    return scores, weights, avg_length


def _context(scores: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Each row's best neighbour score in its conversation: the rows one and two places
    before and after it (half weight), if no more than `CONTEXT_GAP` apart in time."""
    best = np.zeros_like(scores)
    for distance, weight in ((1, 1.0), (2, 0.5)):
        if scores.size <= distance:
            break
        near = np.abs(times[distance:] - times[:-distance]) <= CONTEXT_GAP
        best[distance:] = np.maximum(
            best[distance:], np.where(near, weight * scores[:-distance], 0)
        )
        best[:-distance] = np.maximum(
            best[:-distance], np.where(near, weight * scores[distance:], 0)
        )
    return best


def rank(
    index: RecallIndex | None,
    query_words: Sequence[str],
    query_vector: np.ndarray | None,
    loose: Sequence[LooseDoc] = (),
    *,
    top_k: int,
    relevance_z: float,
    hint: TimeHint | None = None,
    floor_z: float = DEFAULT_FLOOR_Z,
) -> Found:
    """The `top_k` relevant rows of the index and the loose rows, best first.

    Args:
        index: The index (None: only the loose rows).
        query_words: The query's content words (`recall.text.tokens`).
        query_vector: The query's vector (None: lexical search only).
        loose: Rows searched beside the index, lexically.
        top_k: Rows returned at most.
        relevance_z: Standard deviations above the mean cosine a dense match needs.
        hint: What the query says about time.
        floor_z: Standard deviations above the mean cosine a row without a lexical match
            needs to be returned at all.

    Returns:
        The ranking and its scales.
    """
    hint = hint or TimeHint()
    n = index.n if index is not None else 0
    lexical, weights, avg_length = _lexical(index, query_words, loose)
    max_lexical = float(lexical.max()) if lexical.size else 0.0
    score = LEXICAL_WEIGHT * lexical / max_lexical if max_lexical > 0 else lexical.copy()
    # Eligible: a lexical match, or (below) a cosine above the floor; nothing else is shown.
    eligible = lexical > 0
    cut, top, floor = math.inf, math.inf, math.inf
    matrix = index.matrix if index is not None else None
    if (
        index is not None
        and matrix is not None
        and query_vector is not None
        and n
        and index.visible.any()
    ):
        cos = matrix @ unit(np.asarray(query_vector, np.float32))
        seen = cos[index.visible]
        mean, spread = float(seen.mean()), float(seen.std())
        cut = max(mean + relevance_z * spread, mean + 1e-6)
        floor = mean + floor_z * spread
        top = float(seen.max())
        eligible[:n] |= cos > floor
        if top > cut:
            dense = np.clip((cos - cut) / (top - cut), 0.0, 1.0)
            score[:n] += (1 - LEXICAL_WEIGHT) * np.where(index.visible, dense, 0.0)
    times = np.concatenate(
        [
            index.times if index is not None else np.zeros(0),
            np.asarray([d.timestamp for d in loose], dtype=np.float64),
        ]
    )
    visible = np.concatenate(
        [index.visible if index is not None else np.zeros(0, bool), np.ones(len(loose), bool)]
    )
    if index is not None and n > 1:
        # Loose rows are not in the index's order: only indexed rows are neighbours.
        context = _context(score[:n], times[:n])
        score[:n] += CONTEXT_WEIGHT * np.where(index.visible, context, 0.0)
    if hint.start is not None and hint.end is not None:
        # A row from the period the query names matches it by its date (every rendered page
        # carries its date): relevant, as a shared word would make it.
        within = visible & (times >= hint.start) & (times < hint.end)
        score[within] += TIME_BONUS
        eligible |= within
    visible &= eligible
    relevant = (score > 0) & visible
    if hint.present and relevant.any():
        first, last = float(times[relevant].min()), float(times[relevant].max())
        if last > first:
            score[relevant] += TIME_BONUS * (times[relevant] - first) / (last - first)
    best = _top(np.where(visible, score, 0.0), top_k)
    best = best[np.lexsort((-times[best], -score[best]))]
    ids = index.ids if index is not None else []
    ranked = [
        (ids[row] if row < n else loose[row - n].id, float(score[row])) for row in best.tolist()
    ]
    return Found(
        ranked=ranked,
        max_lexical=max_lexical,
        dense_cut=cut,
        dense_top=top,
        dense_floor=floor,
        idf=weights,
        avg_length=avg_length,
        last_score=ranked[-1][1] if len(ranked) >= top_k else 0.0,
    )


def score_extra(found: Found, words: Counter[str], cosine: float | None) -> float:
    """The score an extra item (a long-term entry) gets on the rows' scale.

    Args:
        found: The ranking of the query.
        words: The item's content-word counts.
        cosine: The item's cosine with the query (None: no vector).

    Returns:
        Its score (0.0: relevant to neither ranking).
    """
    score = 0.0
    if found.max_lexical > 0:
        lexical = sum(
            bm25(count, float(sum(words.values())), found.avg_length, found.idf[word])
            for word, count in words.items()
            if word in found.idf
        )
        score += LEXICAL_WEIGHT * min(lexical / found.max_lexical, 1.0)
    if cosine is not None and cosine > found.dense_cut and found.dense_top > found.dense_cut:
        dense = min((cosine - found.dense_cut) / (found.dense_top - found.dense_cut), 1.0)
        score += (1 - LEXICAL_WEIGHT) * dense
    return score


def matching_parts(found: Found, parts: Sequence[str]) -> tuple[bool, ...]:
    """Which parts of a returned row (the turns of a page) hold the match: those sharing a
    content word with the query.

    A part with no such word is left out of what is shown, unless no part has one (the row
    came by meaning, by its date or as the context of a hit: nothing says which part
    matters). Weighing the words by IDF (a part needs half the better part's weight) was
    measured too: 6-8 points lower on LoCoMo (docs/benchmarks.md); a rare word the question
    shares is not the only one that tells where its answer is.

    Args:
        found: The ranking of the query (its words that occur in the rows).
        parts: The row's parts.

    Returns:
        One flag per part.
    """
    flags = tuple(any(word in found.idf for word in word_counts(part)) for part in parts)
    return flags if any(flags) else tuple(True for _ in parts)
