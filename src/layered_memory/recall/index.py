"""The recall index: rows of text (content-word counts, an optional unit vector, a time, a
visibility flag) and the postings of their words, grown one row at a time.

BM25 is written here, not taken from `bm25s`: bm25s scores eagerly (IDF and length
normalization baked into a sparse matrix when indexing), so each new row would rebuild the
whole index (~200 ms at 6,000 pages) while a conversation adds a page every turn. Here the
index keeps postings and computes IDF at query time, as Lucene does across its segments:
appending a row costs its own words, whatever the size of the index. Vectors are kept in a
matrix that grows by doubling, so appending one is amortized O(dim), not a copy of the
whole matrix.

Needs numpy (the `tiers` extra); `layered_memory.recall.entries` does not.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the tiers extra installs it
    msg = "layered_memory.recall.index needs numpy: pip install 'layered-memory[tiers]'"
    raise ImportError(msg) from exc

__all__ = ["RecallIndex"]


@dataclass(slots=True)
class _Postings:
    docs: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    arrays: tuple[int, np.ndarray, np.ndarray] | None = None

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self.arrays is None or self.arrays[0] != len(self.docs):
            self.arrays = (
                len(self.docs),
                np.asarray(self.docs, dtype=np.int64),
                np.asarray(self.counts, dtype=np.float32),
            )
        return self.arrays[1], self.arrays[2]


class _Growing:
    """A numpy array that grows along its first axis by doubling (amortized appends)."""

    __slots__ = ("_data", "_n")

    def __init__(self, shape: tuple[int, ...], dtype: type) -> None:
        self._data: np.ndarray = np.zeros((0, *shape), dtype=dtype)
        self._n = 0

    @property
    def view(self) -> np.ndarray:
        return self._data[: self._n]

    def extend(self, rows: np.ndarray) -> None:
        need = self._n + rows.shape[0]
        if need > self._data.shape[0]:
            grown = np.zeros((max(need, 2 * self._data.shape[0], 16), *self._data.shape[1:]))
            grown = grown.astype(self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n : need] = rows
        self._n = need

    def truncate(self, n: int) -> None:
        self._n = min(self._n, n)


@dataclass(slots=True, init=False)
class RecallIndex:
    """Searchable rows: ids, content-word counts, times, visibility and (with `dim`) unit
    vectors; the postings of every word.

    Not thread-safe by itself: a reader and a writer of one index hold `lock`.

    Args:
        dim: Vector dimensions (None: a lexical index, rows carry no vector).
    """

    dim: int | None
    ids: list[str]
    words: list[Counter[str]]
    postings: dict[str, _Postings]
    lock: threading.Lock
    _matrix: _Growing | None
    _times: _Growing
    _lengths: _Growing
    _visible: _Growing

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim
        self.ids = []
        self.words = []
        self.postings = {}
        self.lock = threading.Lock()
        self._matrix = _Growing((dim,), np.float32) if dim else None
        self._times = _Growing((), np.float64)
        self._lengths = _Growing((), np.float32)
        self._visible = _Growing((), np.bool_)

    @property
    def n(self) -> int:
        """Rows in the index."""
        return len(self.ids)

    @property
    def matrix(self) -> np.ndarray | None:
        """The rows' unit vectors (None for a lexical index)."""
        return None if self._matrix is None else self._matrix.view

    @property
    def times(self) -> np.ndarray:
        """Each row's time (seconds)."""
        return self._times.view

    @property
    def lengths(self) -> np.ndarray:
        """Each row's length in content words."""
        return self._lengths.view

    @property
    def visible(self) -> np.ndarray:
        """Whether each row may be found (a hidden row leaves no trace in the statistics)."""
        return self._visible.view

    def append(
        self,
        ids: Sequence[str],
        times: Sequence[float],
        words: Sequence[Counter[str]],
        vectors: np.ndarray | None = None,
        visible: Sequence[bool] | None = None,
    ) -> None:
        """Add rows at the end.

        Args:
            ids: One id per row.
            times: One time per row.
            words: Each row's content-word counts (`recall.text.word_counts`).
            vectors: One unit vector per row, `dim` wide (required when `dim` is set).
            visible: Whether each row may be found (default: all).
        """
        start = self.n
        for offset, counts in enumerate(words):
            for word, count in counts.items():
                postings = self.postings.get(word)
                if postings is None:
                    postings = self.postings[word] = _Postings()
                postings.docs.append(start + offset)
                postings.counts.append(count)
        self.ids += ids
        self.words += words
        if self._matrix is not None:
            rows = np.zeros((len(ids), self.dim or 1), np.float32) if vectors is None else vectors
            self._matrix.extend(np.asarray(rows, np.float32).reshape(len(ids), self.dim or 1))
        self._times.extend(np.asarray(times, dtype=np.float64))
        self._lengths.extend(np.asarray([sum(c.values()) for c in words], dtype=np.float32))
        shown = [True] * len(ids) if visible is None else list(visible)
        self._visible.extend(np.asarray(shown, dtype=bool))

    def truncate(self, start: int) -> None:
        """Drop row `start` and every later row."""
        if start >= self.n:
            return
        for word in {word for row in self.words[start:] for word in row}:
            postings = self.postings[word]
            # Rows are appended in order, so the dropped rows' postings are the last ones.
            while postings.docs and postings.docs[-1] >= start:
                postings.docs.pop()
                postings.counts.pop()
            if not postings.docs:
                del self.postings[word]
        del self.ids[start:], self.words[start:]
        for column in (self._matrix, self._times, self._lengths, self._visible):
            if column is not None:
                column.truncate(start)

    def nbytes(self) -> int:
        """Bytes of the vectors (what bounds a process's copies)."""
        matrix = self.matrix
        return 0 if matrix is None else int(matrix.nbytes)
