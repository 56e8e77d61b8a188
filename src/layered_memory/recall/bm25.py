"""BM25 (Okapi, Lucene's IDF): the lexical score of every index of the recall engine, one
formula for the numpy index of `recall.index` and the pure-Python one of `recall.entries`."""

from __future__ import annotations

import math
from typing import Final

__all__ = ["K1", "B", "bm25", "idf"]

K1: Final = 1.5
"""BM25's term-frequency saturation."""
B: Final = 0.75
"""BM25's length normalization."""


def bm25(tf: float, length: float, avg_length: float, idf_value: float) -> float:
    """One word's BM25 score in one text.

    Args:
        tf: How often the word occurs in the text.
        length: The text's length in content words.
        avg_length: The average length over the texts searched.
        idf_value: The word's `idf`.

    Returns:
        The score (0.0 when `tf` is 0).
    """
    return idf_value * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg_length))


def idf(total: int, df: int) -> float:
    """BM25's inverse document frequency (Lucene's, never negative).

    Args:
        total: Texts searched.
        df: Texts holding the word.

    Returns:
        The word's weight.
    """
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))
