"""The knowledge graph's `search_nodes` (the MCP memory server's substring semantics) against
the recall engine on LoCoMo.

Each conversation becomes a graph of one entity per page (two consecutive turns), the turns
its observations. For every question (categories 1-4): is an evidence turn among the first
`k` entities returned by

- `search_nodes(question)`: the whole question as a substring (what the server does);
- `search_nodes(keyword)`: the question's rarest content word found in the graph (the best
  single keyword an agent could type; the server returns matches in file order);
- the recall engine (`layered_memory.recall.ranking.rank` over the entities' words: BM25,
  the neighbour context, the time hint), best first.

Run: `LOCOMO_PATH=/path/locomo10.zip .venv/bin/python benchmarks/graph_search_eval.py [--k 5]`.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.locomo_eval import load
from layered_memory.recall import ranking
from layered_memory.recall.text import tokens, word_counts

METHODS = ("substring: whole question", "substring: rarest keyword", "recall engine")


def run(path: str | None, k: int) -> tuple[Counter[str], Counter[str], int]:
    """(questions with evidence in the first `k`, questions with nothing found, questions)."""
    hits: Counter[str] = Counter()
    empty: Counter[str] = Counter()
    asked = 0
    for conv in load(path):
        entities = [[f"{t.speaker}: {t.text}" for t in page.turns] for page in conv.pages]
        turns = [{t.text for t in page.turns} for page in conv.pages]
        haystacks = ["\x00".join(observations).lower() for observations in entities]
        df = Counter(w for observations in entities for w in set(tokens(" ".join(observations))))
        docs = [
            ranking.LooseDoc(str(i), word_counts(" ".join(observations)), page.timestamp)
            for i, (observations, page) in enumerate(zip(entities, conv.pages, strict=True))
        ]
        for question in conv.questions:
            asked += 1
            words = [w for w in tokens(question.text) if df.get(w)]
            rare = min(words, key=lambda w: df[w]) if words else None
            found = ranking.rank(None, tokens(question.text), None, docs, top_k=k, relevance_z=1.0)
            results = {
                METHODS[0]: [i for i, h in enumerate(haystacks) if question.text.lower() in h],
                METHODS[1]: [i for i, h in enumerate(haystacks) if rare and rare in h],
                METHODS[2]: [int(pid) for pid, _ in found.ranked],
            }
            evidence = set(question.evidence)
            for method, rows in results.items():
                hits[method] += any(turns[i] & evidence for i in rows[:k])
                empty[method] += not rows
    return hits, empty, asked


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help="LoCoMo data (default: $LOCOMO_PATH)")
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args(argv)
    hits, empty, asked = run(args.path, args.k)
    for method in METHODS:
        print(
            f"{method}: evidence in the first {args.k} entities for "
            f"{100 * hits[method] / asked:.1f}% of {asked:,} questions; nothing found for "
            f"{100 * empty[method] / asked:.1f}%"
        )


if __name__ == "__main__":
    main()
