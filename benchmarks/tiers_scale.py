"""What the tiered memory costs as a history grows: `add_page` and `retrieve` at 1,000 and
8,000 stored pages, against one `bm25s` query over the same pages plus one query embedding
and against one RRF hybrid query (BM25 + the same dense, k = 60) over the same turns,
measured in the same run; and the store's growth per page.

The history is `benchmarks/synthetic.py`'s (300 sessions of 20 pages), the embedding
scikit-learn's TF-IDF fitted on it (the `bench` extra), the store an `InMemoryStore`. Timings
are medians of many calls, wall and CPU time of this process (the machine is shared: CPU time
moves less); every figure is a ratio of two numbers from this one run.

Run: `.venv/bin/python benchmarks/tiers_scale.py [--pages 8000]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bm25s
from langgraph.store.memory import InMemoryStore

from benchmarks.synthetic import conversation
from layered_memory.recall.text import tokens
from layered_memory.tiers import TieredMemory

USER = "scale-user"


def _timed(call: Callable[[], Any]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    call()
    return (time.perf_counter_ns() - wall) / 1e6, (time.process_time_ns() - cpu) / 1e6


def store_bytes(store: InMemoryStore, prefix: tuple[str, ...]) -> int:
    """The size of every record under `prefix`, as JSON (what PostgresStore would keep)."""
    total, offset = 0, 0
    while True:
        items = store.search(prefix, limit=1000, offset=offset)
        total += sum(len(json.dumps(item.value)) for item in items)
        if len(items) < 1000:
            return total
        offset += 1000


def _build(conv: Any, count: int, embeddings: Any) -> tuple[TieredMemory, list[float]]:
    now = [conv.pages[0].timestamp]
    memory = TieredMemory(InMemoryStore(), embeddings=embeddings, clock=lambda: now[0])
    for page in conv.pages[:count]:
        now[0] = page.timestamp
        memory.add_page(USER, page.query, page.response)
    return memory, now


def _medians(timings: Sequence[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_median": statistics.median(t[0] for t in timings),
        "cpu_median": statistics.median(t[1] for t in timings),
        "wall_mean": statistics.fmean(t[0] for t in timings),
        "cpu_mean": statistics.fmean(t[1] for t in timings),
    }


def run(
    pages: int = 8000, marks: Sequence[int] = (1000, 8000), rounds: int = 100
) -> dict[str, Any]:
    """Build one memory per mark, then time them in turns (add, retrieve, the baseline), so a
    busy machine slows every side alike."""
    from benchmarks.locomo_eval import RRF_K, TfidfEmbeddings  # scikit-learn: the bench extra

    per_session = 20
    conv = conversation(sessions=pages // per_session + 10, per_session=per_session, seed=6)
    texts = [p.text for p in conv.pages]
    embeddings = TfidfEmbeddings(texts)
    queries = [q.text for q in conv.questions]
    queries += [p.query for p in conv.pages[:: max(1, len(conv.pages) // 40)]][:40]
    built = {mark: _build(conv, mark, embeddings) for mark in marks}
    results: dict[str, Any] = {"pages": pages, "dim": len(embeddings.embed_query("x"))}
    results["store_bytes"] = {
        mark: store_bytes(memory.store, memory.namespace) for mark, (memory, _) in built.items()
    }
    retrievers = {}
    hybrids = {}
    for mark in marks:
        retriever = bm25s.BM25()
        retriever.index([tokens(t) for t in texts[:mark]], show_progress=False)
        retrievers[mark] = retriever
        turns = [t for p in conv.pages[:mark] for t in (p.query, p.response)]
        hybrids[mark] = _rrf(turns, embeddings, RRF_K)
    adds: dict[int, list[tuple[float, float]]] = {mark: [] for mark in marks}
    steady: dict[int, list[tuple[float, float]]] = {mark: [] for mark in marks}
    after_add: dict[int, list[tuple[float, float]]] = {mark: [] for mark in marks}
    search: dict[int, list[tuple[float, float]]] = {mark: [] for mark in marks}
    hybrid: dict[int, list[tuple[float, float]]] = {mark: [] for mark in marks}
    embed: list[tuple[float, float]] = []
    for i in range(rounds):
        query = queries[i % len(queries)]
        for mark, (memory, now) in built.items():
            page = conv.pages[mark + i]  # pages that follow the history, one per round
            now[0] = page.timestamp
            adds[mark].append(
                _timed(lambda m=memory, p=page: m.add_page(USER, p.query, p.response))
            )
            after_add[mark].append(_timed(lambda m=memory, q=query: m.retrieve(USER, q)))
            steady[mark].append(_timed(lambda m=memory, q=query: m.retrieve(USER, q)))
            retriever = retrievers[mark]
            search[mark].append(
                _timed(
                    lambda r=retriever, q=query: r.retrieve([tokens(q)], k=10, show_progress=False)
                )
            )
            hybrid[mark].append(_timed(lambda h=hybrids[mark], q=query: h(q)))
        embed.append(_timed(lambda q=query: embeddings.embed_query(q)))
    for mark in marks:
        results[f"add_{mark}"] = _medians(adds[mark])
        results[f"retrieve_{mark}"] = _medians(steady[mark])
        results[f"interleaved_{mark}"] = _medians(after_add[mark])
        results[f"bm25_{mark}"] = _medians(search[mark])
        results[f"embed_{mark}"] = _medians(embed)
        results[f"rrf_{mark}"] = _medians(hybrid[mark])
    first, last = marks[0], marks[-1]
    results["bytes_per_page"] = (results["store_bytes"][last] - results["store_bytes"][first]) / (
        last - first
    )
    return results


def _rrf(texts: list[str], embeddings: Any, k: int) -> Callable[[str], list[int]]:
    """One RRF hybrid query over `texts`: bm25s scores and the dense cosines, each ranked,
    fused by 1 / (k + rank); the 20 best."""
    import numpy as np

    retriever = bm25s.BM25()
    retriever.index([tokens(t) for t in texts], show_progress=False)
    matrix = np.asarray(embeddings.embed_documents(texts), np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    matrix /= norms[:, None]

    def query(text: str) -> list[int]:
        q = np.asarray(embeddings.embed_query(text), np.float32)
        fused = np.zeros(len(texts))
        for scores in (retriever.get_scores(tokens(text)), matrix @ q):
            ranks = np.empty(len(texts))
            ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(texts) + 1)
            fused += np.where(scores > 0, 1.0 / (k + ranks), 0.0)
        return np.argsort(-fused, kind="stable")[:20].tolist()  # type: ignore[no-any-return]

    return query


def report(results: dict[str, Any], marks: Sequence[int] = (1000, 8000)) -> list[str]:
    lines = [f"{results['pages']:,} pages, TF-IDF of {results['dim']} dimensions, InMemoryStore"]
    first, last = marks[0], marks[-1]
    for kind in ("wall", "cpu"):
        a, b = results[f"add_{first}"], results[f"add_{last}"]
        ratio = b[f"{kind}_mean"] / a[f"{kind}_mean"]
        lines.append(
            f"add_page ({kind}): {a[f'{kind}_mean']:.2f} ms mean at {first:,} pages, "
            f"{b[f'{kind}_mean']:.2f} ms at {last:,}: ratio {ratio:.2f} "
            f"(target <= 1.5); medians {a[f'{kind}_median']:.2f} / {b[f'{kind}_median']:.2f}"
        )
    for mark in marks:
        for kind in ("wall", "cpu"):
            r = results[f"retrieve_{mark}"][f"{kind}_median"]
            i = results[f"interleaved_{mark}"][f"{kind}_median"]
            base = (
                results[f"bm25_{mark}"][f"{kind}_median"]
                + results[f"embed_{mark}"][f"{kind}_median"]
            )
            lines.append(
                f"retrieve at {mark:,} pages ({kind} median): {r:.2f} ms; right after a new page "
                f"{i:.2f} ms; one bm25s query + one query embedding {base:.2f} ms: ratio "
                f"{r / base:.2f} (after a new page {i / base:.2f}; target <= 4)"
            )
            hybrid = results[f"rrf_{mark}"][f"{kind}_median"]
            lines.append(
                f"retrieve at {mark:,} pages ({kind} median) against one RRF hybrid query over "
                f"the same {2 * mark:,} turns ({hybrid:.2f} ms): ratio {r / hybrid:.2f} "
                "(target <= 1.5)"
            )
    lines.append(
        f"store growth: {results['bytes_per_page']:,.0f} bytes per page between {first:,} and "
        f"{last:,} pages (JSON of every record; {results['store_bytes']})"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8000)
    args = parser.parse_args(argv)
    marks = (min(1000, args.pages), args.pages)
    results = run(args.pages, marks)
    print("\n".join(report(results, marks)))


if __name__ == "__main__":
    main()
