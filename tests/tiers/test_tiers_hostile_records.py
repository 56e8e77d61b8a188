"""Tier records that are not what `TieredMemory` wrote (a hostile or corrupted store): each
malformed part is skipped with a warning naming the user's namespace, the record and the
reason; nothing else is lost, and a new page is always stored."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
from tiers_helpers import call

from layered_memory.testing import LexicalEmbeddings
from layered_memory.tiers.namespaces import user_namespace

USER = "ada"

Patch = Callable[[dict[str, Any]], None]


def _set(key: str, value: object) -> Patch:
    def patch(record: dict[str, Any]) -> None:
        record[key] = value

    return patch


def _set_in(key: str, field: str, value: object) -> Patch:
    def patch(record: dict[str, Any]) -> None:
        record[key][0][field] = value

    return patch


def _visits(record: dict[str, Any]) -> None:
    sid = next(iter(record["segments"]))
    record["segments"][sid] = [10**400, 10**400]


# (record key, change, words of the warning)
CASES: dict[str, tuple[str, Patch, str]] = {
    "stm-int": ("state", _set("stm", 5), "'stm' is a int, not a list"),
    "segments-int": ("mid_term", _set("segments", 7), "'segments' is a int, not a list"),
    "segments-bool": ("mid_term", _set("segments", True), "'segments' is a bool, not a list"),
    "index-int": ("state", _set("index", 3), "'index' is a int, not a list"),
    "index-entry": ("state", _set("index", [5]), "a malformed entry of 'index'"),
    "archive-str": ("state", _set("archive", "x"), "'archive' is a str, not a list"),
    "facts-int": ("long_term", _set("facts", 3), "'facts' is a int, not a list"),
    "page-timestamp": (
        "state",
        _set_in("stm", "timestamp", 10**400),
        "'timestamp' is not a finite number",
    ),
    "segment-last-access": (
        "mid_term",
        _set_in("segments", "last_access", 10**400),
        "'last_access' is not a finite number",
    ),
    "segment-l-interaction": (
        "mid_term",
        _set_in("segments", "l_interaction", 10**400),
        "'l_interaction' is not an int",
    ),
    "dim-huge": ("state", _set("dim", 10**12), "'dim' 1000000000000 is over 65536; ignored"),
    "dim-overflow": ("state", _set("dim", 10**400), "'dim' is not an int"),
    "fact-timestamp": (
        "long_term",
        _set_in("facts", "timestamp", 10**400),
        "'timestamp' is not a finite number",
    ),
    "visits-overflow": ("visits", _visits, ""),
    "index-block-ids": ("index/0", _set("ids", 7), "index block 0: unreadable"),
    "index-block-times": ("index/0", _set("times", [1.0]), "index block 0: unreadable"),
    "index-block-terms": ("index/0", _set("terms", ["a b"]), "index block 0: unreadable"),
    "archive-block": ("archive/0", _set("segments", {"a": 1}), "'segments' is a dict"),
}


async def _filled(make_memory, use_async):
    memory = make_memory(stm_capacity=2, tau=2, mtm_capacity=1)
    texts = (
        "My dentist is Dr Alvarez.",
        "Dentist visits are on Mondays.",
        "I grow tomatoes.",
        "Chess openings on Sundays.",
        "Lisbon trams are yellow.",
    )
    for text in texts:
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    await call(memory, "retrieve", USER, "dentist alvarez", use_async=use_async)
    return memory


@pytest.mark.parametrize("case", CASES)
async def test_a_malformed_record_is_skipped_with_a_warning_and_nothing_crashes(
    make_memory, caplog, use_async, case
):
    key, patch, words = CASES[case]
    memory = await _filled(make_memory, use_async)
    ns = user_namespace(memory.namespace, USER)
    where, _, key = key.rpartition("/")
    space = (*ns, where) if where else ns
    record = copy.deepcopy(memory.store.get(space, key).value)
    patch(record)
    memory.store.put(space, key, record)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await call(memory, "retrieve", USER, "dentist alvarez", use_async=use_async)
        await call(memory, "segments", USER, use_async=use_async)
        await call(memory, "long_term_entries", USER, use_async=use_async)
        page = await call(memory, "add_page", USER, "Still recorded.", "ok", use_async=use_async)
    stm = await call(memory, "short_term", USER, use_async=use_async)
    assert page.id in [p.id for p in stm]
    found = await call(memory, "retrieve", USER, "still recorded", use_async=use_async)
    assert "Still recorded." in [p.query for p in found.short_term]
    if words:
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(words in w and ns[-1] in w for w in warnings), warnings


async def test_the_new_page_never_takes_the_id_of_a_kept_one(make_memory, caplog, use_async):
    # An unusable `seq` must not restart ids at 1: `p1` would overwrite the kept mid-term page.
    memory = make_memory(stm_capacity=1, tau=100)
    for text in ("lisbon flat balcony", "chess openings"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    ns = user_namespace(memory.namespace, USER)
    record = copy.deepcopy(memory.store.get(ns, "state").value)
    record["seq"] = "seven"
    memory.store.put(ns, "state", record)
    await call(memory, "add_page", USER, "garden tomatoes", "ok", use_async=use_async)
    await call(memory, "add_page", USER, "filler", "ok", use_async=use_async)
    queries = sorted(
        p.query for s in await call(memory, "segments", USER, use_async=use_async) for p in s.pages
    )
    assert queries == ["chess openings", "garden tomatoes", "lisbon flat balcony"]
    ids = [p.id for s in await call(memory, "segments", USER, use_async=use_async) for p in s.pages]
    assert len(set(ids)) == 3
    assert "'seq' is not an int" in caplog.text


class _WiderEntries(LexicalEmbeddings):
    """An embedding service whose model changed: long-term entries (one line each, where a
    page's text has a newline) come back one dimension longer."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = super().embed_documents(texts)
        return [v if "\n" in t else [*v, 0.5] for t, v in zip(texts, vectors, strict=True)]


async def test_long_term_entries_survive_a_change_of_embedding_dimension(make_memory, use_async):
    # Entries of 2 dimensions used to make the record's dimension 0, and the write dropped
    # every entry.
    memory = make_memory(stm_capacity=1, tau=1)
    for text in ("My dentist is Dr Alvarez.", "filler"):
        await call(memory, "add_page", USER, text, "ok", use_async=use_async)
    before = await call(memory, "long_term", USER, use_async=use_async)
    assert "My dentist is Dr Alvarez." in before
    wider = make_memory(embeddings=_WiderEntries(), store=memory.store, stm_capacity=1, tau=1)
    for text in ("I grow tomatoes in the garden.", "filler"):
        await call(wider, "add_page", USER, text, "ok", use_async=use_async)
    after = await call(wider, "long_term", USER, use_async=use_async)
    assert set(before) < set(after)
