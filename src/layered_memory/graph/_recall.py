"""Entities in focus by relevance: the recall engine (`recall.ranking.rank`) over each entity's
name, type and observations, ranked against the latest user message.

The index is built once per graph version (`GraphSnapshot.recall_index`: snapshots are shared
by content digest), so a model call on an unchanged graph only scores the message's words
against the postings. No vectors: an entity is relevant only when it shares a content word
with the message (the engine's floor without a dense score), so an unrelated question brings
nothing, however much room is left.

Needs numpy (the `tiers` extra), as `recall.index` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from layered_memory.recall.index import RecallIndex
from layered_memory.recall.ranking import CONTEXT_GAP, rank
from layered_memory.recall.text import tokens

# Entities have no time and the file's order says nothing about which are related: rows are
# spaced further apart than `CONTEXT_GAP`, so the engine's neighbour term (the conversation
# around a hit) never lifts one entity for the entity written next to it.
_SPACING = 2 * CONTEXT_GAP


class EntityIndex:
    """The recall index of a graph's distinct entity names (immutable once built).

    Args:
        names: Each distinct entity name.
        texts: Each name's text: name, type and observations of every record of it.
    """

    __slots__ = ("_index", "names")

    def __init__(self, names: Sequence[str], texts: Sequence[str]) -> None:
        self.names = tuple(names)
        self._index = RecallIndex()
        self._index.append(
            [str(row) for row in range(len(self.names))],
            [row * _SPACING for row in range(len(self.names))],
            [Counter(tokens(text)) for text in texts],
        )

    def relevant(self, message: str, *, limit: int, exclude: Collection[str] = ()) -> list[str]:
        """Up to `limit` entity names most relevant to `message`, best first, none of `exclude`.

        Args:
            message: The latest user message.
            limit: Names returned at most.
            exclude: Names already in focus.

        Returns:
            The names (none when the message shares no content word with any entity).
        """
        words = tokens(message)
        if limit <= 0 or not words or not self.names:
            return []
        with self._index.lock:  # readers cache postings arrays in the index
            # relevance_z only calibrates dense scores: this index has no vectors.
            found = rank(self._index, words, None, top_k=limit + len(exclude), relevance_z=1.0)
        names = (self.names[int(row)] for row, _score in found.ranked)
        return [name for name in names if name not in exclude][:limit]
