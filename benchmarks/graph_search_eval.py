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

Then the focus as `KnowledgeGraphMiddleware` shows it (`focus(message=question)`, default
`max_entities` and `max_chars`), on a graph of the same page entities plus one `person` entity
per speaker with a `took_part_in` relation to each of their pages (a question usually names a
speaker): is an evidence page among the entities in focus, and is an evidence turn's text in
the block as shown, with focus by name only (`recall=False`) and by name then recall.

Run: `LOCOMO_PATH=/path/locomo10.zip .venv/bin/python benchmarks/graph_search_eval.py [--k 5]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deepagents.backends import FilesystemBackend

from benchmarks.locomo_eval import load
from layered_memory.graph import KnowledgeGraphMiddleware
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


FOCUS = ("focus by name only", "focus by name, then recall")


def focus_as_shown(
    path: str | None,
) -> tuple[Counter[str], Counter[str], Counter[str], Counter[str], int]:
    """(questions with an evidence page in focus, with an evidence turn in the block, entities
    in focus summed, seconds spent in `focus` (the recall index built once per conversation
    included), questions), per focus."""
    seconds: Counter[str] = Counter()
    in_focus: Counter[str] = Counter()
    in_block: Counter[str] = Counter()
    entities: Counter[str] = Counter()
    asked = 0
    for conv in load(path):
        lines: list[dict[str, object]] = []
        speakers: dict[str, None] = {}
        for i, page in enumerate(conv.pages):
            lines.append(
                {
                    "type": "entity",
                    "name": f"page {i}",
                    "entityType": "conversation page",
                    "observations": [t.line for t in page.turns],
                }
            )
            for turn in page.turns:
                speakers.setdefault(turn.speaker, None)
        lines += [
            {"type": "entity", "name": name, "entityType": "person", "observations": []}
            for name in speakers
        ]
        lines += [
            {"type": "relation", "from": speaker, "to": f"page {i}", "relationType": "took_part_in"}
            for i, page in enumerate(conv.pages)
            for speaker in dict.fromkeys(t.speaker for t in page.turns)
        ]
        pages = {f"page {i}": {t.text for t in page.turns} for i, page in enumerate(conv.pages)}
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "memory.jsonl").write_text(
                "\n".join(json.dumps(line, ensure_ascii=False) for line in lines)
            )
            backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
            middlewares = {
                FOCUS[0]: KnowledgeGraphMiddleware[object, object](backend=backend, recall=False),
                FOCUS[1]: KnowledgeGraphMiddleware[object, object](backend=backend),
            }
            for question in conv.questions:
                asked += 1
                evidence = set(question.evidence)
                shown = [
                    json.dumps(t.line[:200], ensure_ascii=False)[:-1]
                    for page in conv.pages
                    for t in page.turns
                    if t.text in evidence
                ]
                for method, middleware in middlewares.items():
                    start = time.perf_counter()
                    names, block = middleware.focus(message=question.text)
                    seconds[method] += time.perf_counter() - start
                    entities[method] += len(names)
                    in_focus[method] += any(pages.get(name, set()) & evidence for name in names)
                    in_block[method] += any(line in block for line in shown)
    return in_focus, in_block, entities, seconds, asked


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
    in_focus, in_block, entities, seconds, asked = focus_as_shown(args.path)
    for method in FOCUS:
        print(
            f"{method}: evidence page in focus for {100 * in_focus[method] / asked:.1f}%, "
            f"evidence turn in the block as shown for {100 * in_block[method] / asked:.1f}% of "
            f"{asked:,} questions; {entities[method] / asked:.1f} entities in focus on average; "
            f"{1000 * seconds[method] / asked:.2f} ms per question "
            f"({seconds[method] / seconds[FOCUS[0]]:.2f}x focus by name)"
        )


if __name__ == "__main__":
    main()
