"""The in-process copy of a user's page index: the store's `index/<n>` blocks and the pages'
`vectors/<id>` as one `recall.index.RecallIndex`, brought up to date by reading only the blocks
that changed and the vectors of the rows it lacks.

The copy (`INDEXES`) is keyed by the revisions of its blocks, which the `state` record lists
and every retrieval reads: it never serves a block older than its record, and only blocks
whose revision changed are read again (a new page: the last one, and only its new rows are
appended; the recall index grows its arrays by doubling, so a page costs its own row at
8,000 pages as at 1,000).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from layered_memory.recall.index import RecallIndex
from layered_memory.tiers.records import IndexBlock
from layered_memory.tiers.vectors import Vector

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    msg = "layered_memory.tiers needs numpy: pip install 'layered-memory[tiers]'"
    raise ImportError(msg) from exc

__all__ = ["INDEXES", "MAX_INDEX_BYTES", "PageIndex"]

MAX_INDEX_BYTES: Final = 256 * 2**20
"""The in-process index copies of all users together keep at most this many bytes of vectors
(least recently used users are dropped first and rebuilt from the store when they return)."""


@dataclass(slots=True)
class PageIndex:
    """One user's index in memory, block after block. A block that only grew (a new page) is
    extended by its new rows; any other change truncates the index to that block's first row
    and appends again from there."""

    dim: int
    rows: RecallIndex = field(init=False)
    revs: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.rows = RecallIndex(self.dim)

    def first_stale(self, revs: Sequence[str]) -> int:
        """The first block whose revision is not `revs`' (len(revs): none)."""
        for number, rev in enumerate(revs):
            if number >= len(self.revs) or self.revs[number] != rev:
                return number
        return len(revs)

    def truncate(self, block: int) -> None:
        """Drop the rows of `block` and every later block."""
        if block >= len(self.revs):
            return
        self.rows.truncate(self.starts[block])
        del self.revs[block:], self.starts[block:]

    def grown(self, number: int, block: IndexBlock) -> bool:
        """Whether `block` is this index's last block with pages appended, nothing else."""
        if number != len(self.revs) - 1 or block.grown_from != self.revs[number]:
            return False
        count = self.rows.n - self.starts[number]
        ids = self.rows.ids[self.starts[number] :]
        return len(block.ids) > count and block.ids[:count] == ids

    def first_new(self, number: int, block: IndexBlock) -> int:
        """The first row of `block` this index lacks (0 unless it only grew)."""
        if number < len(self.revs) and self.grown(number, block):
            return self.rows.n - self.starts[number]
        return 0

    def add(self, number: int, block: IndexBlock, vectors: Mapping[str, Vector | None]) -> None:
        """Append block `number` (or, when it only grew, its new rows); a page without a
        usable vector gets a zero row (searched by its words only; the reader warned)."""
        if number < len(self.revs):
            first = self.rows.n - self.starts[number]
            self.revs[number] = block.rev
        else:
            first = 0
            self.revs.append(block.rev)
            self.starts.append(self.rows.n)
        ids = block.ids[first:]
        zero = np.zeros(self.dim, np.float32)
        rows = [vectors.get(pid) for pid in ids]
        matrix = (
            np.vstack([zero if row is None else row for row in rows])
            if ids
            else np.zeros((0, self.dim), np.float32)
        )
        self.rows.append(
            ids,
            block.times[first:],
            [Counter(terms.split()) for terms in block.terms[first:]],
            matrix,
            [pid not in block.hidden for pid in ids],
        )


class _Indexes:
    """Every user's `PageIndex` in this process, by store (its `id`: two stores holding the
    same namespace must not take turns rebuilding one copy) and namespace; least recently
    used dropped past `MAX_INDEX_BYTES`."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[int, tuple[str, ...]], PageIndex] = OrderedDict()
        self._lock = threading.Lock()

    def stale_blocks(
        self, namespace: tuple[int, tuple[str, ...]], revs: Sequence[str], dim: int
    ) -> list[int]:
        """The blocks to read from the store so the index of `namespace` matches `revs`."""
        with self._lock:
            index = self._entries.get(namespace)
        if index is None or index.dim != dim:
            return list(range(len(revs)))
        with index.lock:
            return list(range(index.first_stale(revs), len(revs)))

    def new_rows(
        self,
        namespace: tuple[int, tuple[str, ...]],
        revs: Sequence[str],
        dim: int,
        blocks: Mapping[int, IndexBlock],
    ) -> list[str]:
        """The pages of the freshly read `blocks` whose vectors the index of `namespace`
        lacks (read them, then call `current`)."""
        with self._lock:
            index = self._entries.get(namespace)
        if index is None or index.dim != dim:
            return [pid for n in sorted(blocks) for pid in blocks[n].ids]
        with index.lock:
            stale = index.first_stale(revs)
            return [
                pid
                for n in sorted(blocks)
                if n >= stale
                for pid in blocks[n].ids[index.first_new(n, blocks[n]) if n == stale else 0 :]
            ]

    def current(
        self,
        namespace: tuple[int, tuple[str, ...]],
        revs: Sequence[str],
        dim: int,
        blocks: Mapping[int, IndexBlock],
        vectors: Mapping[str, Vector | None],
    ) -> PageIndex | None:
        """The index of `namespace` brought up to `revs` with the freshly read `blocks` and
        the `vectors` of their rows (None when another thread changed it meanwhile and a block
        or vector it needs was not read: ask for `stale_blocks` again)."""
        with self._lock:
            index = self._entries.get(namespace)
            if index is None or index.dim != dim:
                index = self._entries[namespace] = PageIndex(dim)
            self._entries.move_to_end(namespace)
        with index.lock:
            stale = index.first_stale(revs)
            if any(number not in blocks for number in range(stale, len(revs))):
                return None
            if stale < len(revs) and not index.grown(stale, blocks[stale]):
                index.truncate(stale)
            for number in range(stale, len(revs)):
                first = index.first_new(number, blocks[number]) if number == stale else 0
                if any(pid not in vectors for pid in blocks[number].ids[first:]):
                    return None
            for number in range(stale, len(revs)):
                index.add(number, blocks[number], vectors)
        if stale < len(revs):
            self._bound()  # only when it grew: the sum runs over every user's index
        return index

    def _bound(self) -> None:
        with self._lock:
            total = sum(index.rows.nbytes() for index in self._entries.values())
            while total > MAX_INDEX_BYTES and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                total -= dropped.rows.nbytes()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


INDEXES = _Indexes()
