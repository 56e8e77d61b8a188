"""What the tiered memory costs as a history grows: `add_page` and `retrieve` at 1,000 and
6,000 stored pages, against one `bm25s` query over the same pages plus one query embedding,
measured in the same run; and the store's growth per page.

The history is `benchmarks/synthetic.py`'s (300 sessions of 20 pages), the embedding
scikit-learn's TF-IDF fitted on it (the `bench` extra), the store an `InMemoryStore`. Timings
are medians of many calls, wall and CPU time of this process (the machine is shared: CPU time
moves less); every figure is a ratio of two numbers from this one run.

Run: `.venv/bin/python benchmarks/tiers_scale.py [--pages 6000]`.
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
from layered_memory.tiers import TieredMemory
from layered_memory.tiers._text import tokens

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


def run(
    pages: int = 6000, marks: Sequence[int] = (1000, 6000), window: int = 100
) -> dict[str, Any]:
    from benchmarks.locomo_eval import TfidfEmbeddings  # scikit-learn: the bench extra

    per_session = 20
    conv = conversation(sessions=pages // per_session, per_session=per_session, seed=6)
    texts = [p.text for p in conv.pages]
    embeddings = TfidfEmbeddings(texts)
    now = [conv.pages[0].timestamp]
    memory = TieredMemory(InMemoryStore(), embeddings=embeddings, clock=lambda: now[0])
    namespace = memory.namespace
    queries = [q.text for q in conv.questions]
    queries += [p.query for p in conv.pages[:: max(1, len(conv.pages) // 40)]][:40]
    results: dict[str, Any] = {"pages": len(conv.pages), "dim": len(embeddings.embed_query("x"))}
    adds: dict[int, list[tuple[float, float]]] = {}
    sizes: dict[int, int] = {}
    for n, page in enumerate(conv.pages, start=1):
        now[0] = page.timestamp
        timing = _timed(lambda page=page: memory.add_page(USER, page.query, page.response))
        for mark in marks:
            if mark - window < n <= mark:
                adds.setdefault(mark, []).append(timing)
        if n in marks:
            sizes[n] = store_bytes(memory.store, namespace)
            results[f"retrieve_{n}"] = _retrieval(memory, queries)
            results[f"interleaved_{n}"] = _interleaved(memory, conv, n, queries, now)
            results[f"bm25_{n}"], results[f"embed_{n}"] = _baseline(texts[:n], embeddings, queries)
    for mark, timings in adds.items():
        results[f"add_{mark}"] = {
            "wall_median": statistics.median(t[0] for t in timings),
            "wall_mean": statistics.fmean(t[0] for t in timings),
            "cpu_median": statistics.median(t[1] for t in timings),
            "cpu_mean": statistics.fmean(t[1] for t in timings),
        }
    first, last = marks[0], marks[-1]
    results["bytes_per_page"] = (sizes[last] - sizes[first]) / (last - first)
    results["store_bytes"] = sizes
    return results


def _retrieval(memory: TieredMemory, queries: Sequence[str]) -> dict[str, float]:
    memory.retrieve(USER, queries[0])  # the index brought up to date (a new page: its block)
    timings = [_timed(lambda q=q: memory.retrieve(USER, q)) for q in queries * 3]
    return {
        "wall_median": statistics.median(t[0] for t in timings),
        "cpu_median": statistics.median(t[1] for t in timings),
    }


def _interleaved(
    memory: TieredMemory, conv: Any, n: int, queries: Sequence[str], now: list[float]
) -> dict[str, float]:
    """One retrieval right after each of 20 new pages (its block read and extended)."""
    timings = []
    for i, query in enumerate(queries[:20]):
        now[0] += 60.0
        memory.add_page(USER, f"extra note {i} about {query}", "ok")
        timings.append(_timed(lambda q=query: memory.retrieve(USER, q)))
    return {
        "wall_median": statistics.median(t[0] for t in timings),
        "cpu_median": statistics.median(t[1] for t in timings),
    }


def _baseline(
    texts: Sequence[str], embeddings: Any, queries: Sequence[str]
) -> tuple[dict[str, float], dict[str, float]]:
    retriever = bm25s.BM25()
    retriever.index([tokens(t) for t in texts], show_progress=False)
    search = [
        _timed(lambda q=q: retriever.retrieve([tokens(q)], k=10, show_progress=False))
        for q in queries * 3
    ]
    embed = [_timed(lambda q=q: embeddings.embed_query(q)) for q in queries * 3]
    return (
        {
            "wall_median": statistics.median(t[0] for t in search),
            "cpu_median": statistics.median(t[1] for t in search),
        },
        {
            "wall_median": statistics.median(t[0] for t in embed),
            "cpu_median": statistics.median(t[1] for t in embed),
        },
    )


def report(results: dict[str, Any], marks: Sequence[int] = (1000, 6000)) -> list[str]:
    lines = [f"{results['pages']:,} pages, TF-IDF of {results['dim']} dimensions, InMemoryStore"]
    first, last = marks[0], marks[-1]
    for kind in ("wall", "cpu"):
        a, b = results[f"add_{first}"], results[f"add_{last}"]
        lines.append(
            f"add_page ({kind}): {a[f'{kind}_mean']:.2f} ms mean at {first:,} pages, "
            f"{b[f'{kind}_mean']:.2f} ms at {last:,}: ratio {b[f'{kind}_mean'] / a[f'{kind}_mean']:.2f} "
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
                f"retrieve at {mark:,} pages ({kind}): {r:.2f} ms; right after a new page "
                f"{i:.2f} ms; one bm25s query + one query embedding {base:.2f} ms: ratio "
                f"{r / base:.2f} (after a new page {i / base:.2f}; target <= 4)"
            )
    lines.append(
        f"store growth: {results['bytes_per_page']:,.0f} bytes per page between {first:,} and "
        f"{last:,} pages (JSON of every record; {results['store_bytes']})"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6000)
    args = parser.parse_args(argv)
    marks = (min(1000, args.pages), args.pages)
    results = run(args.pages, marks)
    print("\n".join(report(results, marks)))


if __name__ == "__main__":
    main()
