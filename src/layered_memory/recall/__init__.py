"""The one retrieval engine that the tiers, memory files over their budget and the graph's
search share: BM25 over content words, a calibrated dense score, the rows around a hit, time.

- `recall.text`: the tokenizer every index and query uses.
- `recall.entries`: the entries of a memory file (list items, sections under headings) chosen
  by relevance when the file does not fit its share of the budget (`Layer(..., recall=True)`);
  pure Python.
- `recall.index`, `recall.ranking`, `recall.periods`: the index of rows (postings, vectors),
  one query's hybrid ranking and what a query says about time; need numpy (the `tiers`
  extra), so this package imports none of them itself.
"""

from __future__ import annotations

from layered_memory.recall.entries import Entry, RecallQuery, choose_entries, split_entries
from layered_memory.recall.text import tokens

__all__ = ["Entry", "RecallQuery", "choose_entries", "split_entries", "tokens"]
