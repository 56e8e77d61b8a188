"""The recall engine on its own: an index grown row by row and truncated ranks as one built
at once; the floor keeps a row without a lexical match and below the query's mean cosine out,
even next to a hit; a row from the named period counts as related."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from layered_memory.recall.index import RecallIndex
from layered_memory.recall.periods import TimeHint, time_hint
from layered_memory.recall.ranking import rank
from layered_memory.recall.text import tokens

TEXTS = [
    "my sourdough starter doubled overnight",
    "the cat sleeps on the radiator",
    "the bakery gave me a sourdough recipe",
    "football final lost on penalties",
    "fence painted dark green",
]


def _vectors(texts: list[str]) -> np.ndarray:
    vocabulary = sorted({w for t in texts for w in tokens(t)})
    rows = np.zeros((len(texts), len(vocabulary)), np.float32)
    for i, text in enumerate(texts):
        for word in tokens(text):
            rows[i, vocabulary.index(word)] += 1.0
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _index(texts: list[str], *, one_by_one: bool) -> RecallIndex:
    vectors = _vectors(TEXTS)
    index = RecallIndex(vectors.shape[1])
    rows = [(str(i), 60.0 * i, Counter(tokens(t)), vectors[i]) for i, t in enumerate(texts)]
    if one_by_one:
        for row_id, when, words, vector in rows:
            index.append([row_id], [when], [words], vector[None, :])
    else:
        index.append(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], vectors[: len(rows)]
        )
    return index


def test_grown_truncated_and_regrown_ranks_as_built_at_once() -> None:
    grown = _index(TEXTS, one_by_one=True)
    grown.truncate(2)
    vectors = _vectors(TEXTS)
    for i in range(2, len(TEXTS)):
        grown.append([str(i)], [60.0 * i], [Counter(tokens(TEXTS[i]))], vectors[i][None, :])
    whole = _index(TEXTS, one_by_one=False)
    query = tokens("sourdough recipe")
    first = rank(grown, query, vectors[2], top_k=5, relevance_z=1.0)
    second = rank(whole, query, vectors[2], top_k=5, relevance_z=1.0)
    assert [row for row, _ in first.ranked] == [row for row, _ in second.ranked]
    assert [score for _, score in first.ranked] == pytest.approx(
        [score for _, score in second.ranked]
    )
    assert {row for row, _ in first.ranked} == {"0", "2"}


def test_a_neighbour_without_a_match_and_below_the_floor_is_never_returned() -> None:
    index = _index(TEXTS, one_by_one=False)
    found = rank(index, tokens("sourdough"), None, top_k=5, relevance_z=1.0)
    assert {row for row, _ in found.ranked} == {"0", "2"}  # "1", "3" sit next to hits
    without_floor = rank(index, tokens("sourdough"), None, top_k=5, relevance_z=1.0, floor_z=-9)
    assert {row for row, _ in without_floor.ranked} == {"0", "2"}  # no vector: lexical only
    vectors = _vectors(TEXTS)
    query = vectors[0]
    floored = rank(index, tokens("sourdough"), query, top_k=5, relevance_z=1.0)
    unfloored = rank(index, tokens("sourdough"), query, top_k=5, relevance_z=1.0, floor_z=-9)
    assert {row for row, _ in floored.ranked} == {"0", "2"}
    assert {"1", "3"} <= {row for row, _ in unfloored.ranked}  # what the floor keeps out


def test_a_row_from_the_period_asked_about_counts_as_related() -> None:
    index = _index(TEXTS, one_by_one=False)
    hint = TimeHint(start=170.0, end=190.0)  # row 3 only
    found = rank(index, tokens("what happened then"), None, top_k=5, relevance_z=1.0, hint=hint)
    assert [row for row, _ in found.ranked] == ["3"]
    assert time_hint("What did I do on 2024-04-24?", 0.0).start is not None
