"""What recording a page costs the store: the records and bytes one `add_page` writes and
reads do not grow with the history or, beyond its own vectors, with the embedding's
dimension; a store in the layout before vectors had records of their own is refused, never
overwritten; the process's copies of vectors are never older than the store."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterable
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.store.base import GetOp, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore
from tiers_helpers import Clock, call

from layered_memory.errors import TierStoreError
from layered_memory.testing import LexicalEmbeddings, ScriptedChatModel
from layered_memory.tiers import TieredMemory, TieredMemoryMiddleware, _flows, records
from layered_memory.tiers.namespaces import user_namespace
from layered_memory.tiers.records import read_vector, vector_record

USER = "ada"


class CountingStore(InMemoryStore):
    """An `InMemoryStore` that counts the records and JSON bytes written and read."""

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.written: list[tuple[tuple[str, ...], str, int]] = []
        self.read_bytes = 0
        self.read_keys: list[str] = []

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            if isinstance(op, PutOp):
                size = 0 if op.value is None else len(json.dumps(op.value))
                self.written.append((op.namespace[-1:], op.key, size))
        results = super().batch(ops)
        for op, result in zip(ops, results, strict=True):
            if isinstance(op, GetOp):
                self.read_keys.append(op.key)
            if isinstance(op, GetOp) and result is not None:
                self.read_bytes += len(json.dumps(result.value))  # type: ignore[union-attr]
        return results


def _page(i: int) -> tuple[str, str]:
    # Words of its own on every page: each starts a segment, so the mid-term tier fills up.
    return f"Note w{i}a w{i}b w{i}c w{i}f.", f"Reply w{i}d w{i}e."


class PaddedEmbeddings(LexicalEmbeddings):
    """`LexicalEmbeddings` of 256 dimensions padded with zeros to `dims`: the same cosines
    (so the same segments) at every dimension, only the vectors' bytes differ."""

    def __init__(self, dims: int) -> None:
        super().__init__(dimensions=256)
        self.padding = [0.0] * (dims - 256)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector + self.padding for vector in super().embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return super().embed_query(text) + self.padding


def _one_add(history: int, dims: int, **settings: Any) -> CountingStore:
    """The store's counts of the page added after `history` pages."""
    clock = Clock()
    store = CountingStore()
    embeddings = PaddedEmbeddings(dims)
    memory = TieredMemory(store, embeddings=embeddings, clock=clock, **settings)
    for i in range(history):
        clock.advance(60)
        memory.add_page(USER, *_page(i))
    clock.advance(60)
    store.reset()
    memory.add_page(USER, *_page(history))
    return store


def _vector_bytes(dims: int) -> int:
    return len(json.dumps(vector_record(PaddedEmbeddings(dims).embed_query("x"))[1]))  # type: ignore[arg-type]


def test_a_page_writes_its_own_vectors_only_whatever_the_dimension() -> None:
    # 60 segments in the mid-term tier and 60 rows in the open index block: written whole,
    # a page cost 120 vectors; now two, the page's leaving short-term memory and its segment's
    # (the state record names the dimension: a few digits more).
    small, large = _one_add(60, 256), _one_add(60, 2048)
    assert len(small.written) == len(large.written)
    grown = sum(size for *_, size in large.written) - sum(size for *_, size in small.written)
    assert grown <= 2 * (_vector_bytes(2048) - _vector_bytes(256)) + 10, large.written
    # Read: no vector this process already holds (the segments' are cached by revision).
    assert large.read_bytes - small.read_bytes < _vector_bytes(2048) - _vector_bytes(256)


def test_a_page_writes_and_reads_the_same_records_at_every_size(monkeypatch) -> None:
    # Small blocks, so a short history spans several: a segment per page, a full mid-term
    # tier, the same place in an index block and in an archive block in both.
    for module in (records, _flows):
        monkeypatch.setattr(module, "INDEX_ROWS", 16)
        monkeypatch.setattr(module, "ARCHIVE_ROWS", 8)
    early, late = _one_add(60, 256, mtm_capacity=20), _one_add(60 + 4 * 16, 256, mtm_capacity=20)
    assert [space for space, *_ in early.written] == [space for space, *_ in late.written]
    early_bytes = sum(size for *_, size in early.written)
    late_bytes = sum(size for *_, size in late.written)
    assert late_bytes <= 1.5 * early_bytes, (early.written, late.written)
    assert late.read_bytes <= 1.5 * early.read_bytes


def _filled(store: InMemoryStore, clock: Clock, pages: int = 12) -> TieredMemory:
    memory = TieredMemory(store, embeddings=LexicalEmbeddings(), clock=clock, stm_capacity=2)
    for i in range(pages):
        clock.advance(60)
        memory.add_page(USER, *_page(i))
    return memory


def _everything(store: InMemoryStore) -> dict[tuple[tuple[str, ...], str], Any]:
    return {(item.namespace, item.key): copy.deepcopy(item.value) for item in store.search(())}


@pytest.mark.parametrize("version", [1, 3])
async def test_a_store_of_another_layout_is_refused_and_left_as_it_is(use_async, version) -> None:
    store, clock = InMemoryStore(), Clock()
    memory = _filled(store, clock)
    ns = user_namespace(memory.namespace, USER)
    state = store.get(ns, "state").value  # type: ignore[union-attr]
    store.put(ns, "state", {**state, "version": version})
    before = _everything(store)
    calls = [
        ("add_page", (USER, "A new page.", "ok")),
        ("retrieve", (USER, "topic3")),
        ("segments", (USER,)),
        ("forget", (USER, "p1")),
    ]
    for name, args in calls:
        with pytest.raises(TierStoreError, match=f"layout version {version}") as excinfo:
            await call(memory, name, *args, use_async=use_async)
        assert "delete this user's namespace" in str(excinfo.value)
        assert excinfo.value.where == ns[-1]
    assert _everything(store) == before  # nothing lost, nothing overwritten


def test_segment_vectors_changed_by_another_process_are_read_again() -> None:
    store, clock = InMemoryStore(), Clock()
    memory = _filled(store, clock)
    ns = user_namespace(memory.namespace, USER)
    flow_ctx = memory._context(USER)
    loaded = memory._run(_flows.load(flow_ctx))
    segment = loaded.mid.segments[0]
    assert segment.id in loaded.mid.vectors  # read once: now in this process's copies
    # Another process (its own copies) gives the segment a new vector, as a writer does: a
    # new revision in the segment's record and in the mid-term record that lists it.
    other = LexicalEmbeddings().embed_query("something else entirely")
    rev, record = vector_record(other)  # type: ignore[arg-type]
    store.put((*ns, "vectors"), segment.id, record)
    mid = copy.deepcopy(store.get(ns, "mid_term").value)  # type: ignore[union-attr]
    for raw in mid["segments"]:
        if raw["id"] == segment.id:
            raw["vector"] = rev
    store.put(ns, "mid_term", mid)
    again = memory._run(_flows.load(flow_ctx))
    assert again.mid.vectors[segment.id].tolist() == pytest.approx(other)
    stored = read_vector(store.get((*ns, "vectors"), segment.id).value, rev=rev, dim=512)  # type: ignore[union-attr]
    assert stored is not None
    assert again.mid.vectors[segment.id].tolist() == stored.tolist()


async def test_an_agent_on_a_store_of_another_layout_is_told_why_and_the_store_kept(
    caplog, use_async
) -> None:
    store, clock = InMemoryStore(), Clock()
    memory = _filled(store, clock)
    ns = user_namespace(memory.namespace, USER)
    state = store.get(ns, "state").value  # type: ignore[union-attr]
    store.put(ns, "state", {**state, "version": 1})
    before = _everything(store)
    model = ScriptedChatModel(script=[], default="Noted.")
    agent = create_agent(model, tools=[], middleware=[TieredMemoryMiddleware(memory)])
    inputs = {"messages": [("user", "Where does Clara live?")]}
    with caplog.at_level(logging.WARNING):
        if use_async:
            await agent.ainvoke(inputs, context={"user_id": USER})
        else:
            agent.invoke(inputs, context={"user_id": USER})
    assert model.system_prompts  # the run went on
    for what in ("retrieval", "recording"):
        assert f"TieredMemoryMiddleware: {what} failed (tiered memory {ns[-1]}: written by " in (
            caplog.text
        )
    assert _everything(store) == before


def test_a_mid_term_tier_changed_by_another_process_is_read_again() -> None:
    store, clock = InMemoryStore(), Clock()
    memory = _filled(store, clock)  # this process now holds its mid-term tier as written
    ns = user_namespace(memory.namespace, USER)
    # Another process renames a segment's summary and writes the record, as a writer does:
    # a new revision.
    mid = copy.deepcopy(store.get(ns, "mid_term").value)  # type: ignore[union-attr]
    mid["segments"][0]["summary"] = "written by the other process"
    mid["rev"] = "another process's revision"
    store.put(ns, "mid_term", mid)
    clock.advance(60)
    memory.add_page(USER, "One more page.", "ok")
    summaries = [s["summary"] for s in store.get(ns, "mid_term").value["segments"]]  # type: ignore[union-attr]
    assert "written by the other process" in summaries  # not overwritten by a stale copy


def test_long_term_memory_is_read_only_when_it_changed_or_a_segment_is_promoted() -> None:
    store, clock = CountingStore(), Clock()
    memory = TieredMemory(
        store, embeddings=LexicalEmbeddings(), clock=clock, stm_capacity=1, tau=2.5
    )
    for text in ("My dentist is Dr Alvarez.", "Dentist Alvarez on Mondays.", "I grow kale."):
        clock.advance(60)
        memory.add_page(USER, text, "ok")
    facts = memory.long_term_entries(USER)
    assert facts  # promoted
    memory.retrieve(USER, "dentist alvarez")
    store.reset()
    found = memory.retrieve(USER, "dentist alvarez")
    assert found.facts
    assert "long_term" not in store.read_keys  # the state record names the revision held
    clock.advance(60)
    store.reset()
    memory.add_page(USER, "Unrelated words here.", "ok")  # promotes nothing
    assert "long_term" not in store.read_keys
    # Changed (here in this process; another process's write names a new revision alike):
    # read again, and what changed is what a retrieval shows.
    memory.forget(USER, found.facts[0].fact.id)
    store.reset()
    again = memory.retrieve(USER, "dentist alvarez")
    assert "long_term" in store.read_keys
    assert found.facts[0].fact.id not in [scored.fact.id for scored in again.facts]
