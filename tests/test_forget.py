"""Forget a subject everywhere: memory files, the review queue, graphs, tiers, session stores."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import (
    FileSessionStore,
    InMemorySessionStore,
    MemoryWriter,
    PostgresSessionStore,
    RedisSessionStore,
    forget,
)
from layered_memory.graph import KnowledgeGraph
from layered_memory.writeback.review_queue import (
    Provenance,
    Queue,
    advance_generation,
    commit_generation,
    new_change,
    queue_binding,
    queue_text,
    read_queue,
    review_key,
)

SUBJECT = "Acme Corp"
NAMING = [
    "- 2025-06-01: [acme_corp] Acme Corp pays late",
    "- ACME corp wants invoices in PDF",
    "- \uff21\uff43\uff4d\uff45 Corp (full-width) prefers email",  # NFKC: Acme Corp
    "- Ac\u200bme  Corp, hidden joiner and two spaces",
    "- the account manager of acme corp. is Kim",
]
KEPT = [
    "# Notes",
    "- AcmeCorp is another company",
    "- Acme Corporation is another company too",
    "- the user likes tea",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "MEMORY.md").write_text("\n".join([KEPT[0], *NAMING, *KEPT[1:]]) + "\n")
    (tmp_path / "AGENTS.md").write_text("Our biggest client is Acme Corp.\n")
    (tmp_path / "TEAM.md").write_text("Nothing about that client here.\n")
    (tmp_path / "MEMORY.pending.json").write_text(
        _sealed_queue(tmp_path, ["Acme Corp asked for a discount", "the user likes green tea"])
    )
    return tmp_path


def _binding(root: Path) -> str:
    return queue_binding(_backend(root), "/MEMORY.pending.json")


def _sealed_queue(root: Path, texts: list[str]) -> str:
    """A review queue as the consolidator writes it: each change and the list sealed, bound
    to its place and a generation the state folder records."""
    provenance = Provenance(thread_id="t1", date="2026-12-07", model="m")
    changes = [new_change("add", None, text, provenance=provenance) for text in texts]
    generation = advance_generation(_binding(root), len(changes))
    commit_generation(_binding(root))
    return queue_text(
        Queue(changes=changes),
        memory_path="/MEMORY.md",
        key=review_key(),
        binding=_binding(root),
        generation=generation,
    )


def _queue(root: Path) -> Queue:
    text = (root / "MEMORY.pending.json").read_text()
    return read_queue(text, review_key(), binding=_binding(root))


def _backend(root: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=True)


def test_forget_removes_every_spelling_from_writable_files_and_the_queue(root: Path) -> None:
    report = forget(
        SUBJECT,
        backend=_backend(root),
        files=["/MEMORY.md"],
        read_only=["/AGENTS.md", "/TEAM.md"],
    )
    text = (root / "MEMORY.md").read_text()
    assert text.splitlines() == KEPT
    [file] = report.files
    assert list(file.lines) == NAMING
    assert file.queued == 1
    # What stays keeps its seal, and the list is sealed again: nothing reads as tampered.
    queue = _queue(root)
    assert [change.text for change in queue.trusted()] == ["the user likes green tea"]
    assert queue.tampered is None
    # Read-only memory is listed, never changed.
    assert report.read_only == ("/AGENTS.md",)
    assert (root / "AGENTS.md").read_text() == "Our biggest client is Acme Corp.\n"
    assert not report.complete
    data = report.as_data()
    json.dumps(data)
    assert data["read_only"] == ["/AGENTS.md"]


def _contents(root: Path) -> dict[str, bytes]:
    """Every file's bytes, but the lock files (a dry run reads under the writers' lock)."""
    return {p.name: p.read_bytes() for p in root.iterdir() if not p.name.endswith(".lock")}


def test_a_dry_run_reports_the_same_and_writes_nothing(root: Path) -> None:
    before = _contents(root)
    report = forget(SUBJECT, backend=_backend(root), files=["/MEMORY.md"], dry_run=True)
    assert _contents(root) == before
    assert list(report.files[0].lines) == NAMING
    assert report.files[0].queued == 1
    assert report.dry_run


def test_forget_and_concurrent_writers_lose_nothing(root: Path) -> None:
    """Forget rewrites under the same lock as every writer: insights written meanwhile stay,
    and one naming the subject written before forget took the lock goes."""
    backend = _backend(root)
    writer = MemoryWriter(backend, "/MEMORY.md", max_insights=500)
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            writer.add_insight(f"lesson number {index}", entity=f"e{index}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(20)]
    for thread in threads[:10]:
        thread.start()
    forget(SUBJECT, backend=backend, files=["/MEMORY.md"])
    for thread in threads[10:]:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    text = (root / "MEMORY.md").read_text()
    for index in range(20):
        assert f"lesson number {index}" in text
    assert "Acme Corp pays late" not in text


def test_forget_in_a_knowledge_graph(root: Path) -> None:
    graph = KnowledgeGraph(_backend(root), "/memory.jsonl")
    graph.create_entities(
        [
            {"name": "Acme Corp", "entityType": "company", "observations": ["pays late"]},
            {"name": "Kim", "entityType": "person", "observations": ["works at ACME corp", "tea"]},
            {"name": "Lee", "entityType": "person", "observations": []},
        ]
    )
    graph.create_relations(
        [
            {"from": "Kim", "to": "Acme Corp", "relationType": "works_at"},
            {"from": "Kim", "to": "Lee", "relationType": "knows"},
        ]
    )
    dry = forget(SUBJECT, graphs=[graph], dry_run=True)
    assert dry.graphs[0].entities == ("Acme Corp",)
    assert len(graph.read_graph()["entities"]) == 3
    report = forget(SUBJECT, graphs=[graph])
    [found] = report.graphs
    assert found.entities == ("Acme Corp",)
    assert found.observations == (("Kim", "works at ACME corp"),)
    assert found.relations == (("Kim", "works_at", "Acme Corp"),)
    data = graph.read_graph()
    assert [e["name"] for e in data["entities"]] == ["Kim", "Lee"]
    assert data["entities"][0]["observations"] == ["tea"]
    assert data["relations"] == [{"from": "Kim", "to": "Lee", "relationType": "knows"}]


def test_forget_in_tiered_memory() -> None:
    from langgraph.store.memory import InMemoryStore

    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings())
    memory.add_page("u1", "I work at Acme Corp", "Noted.")
    memory.add_page("u1", "I like tea", "Noted.")
    memory.add_page("u2", "Acme Corp again", "Noted.")
    report = forget(SUBJECT, tiers=memory, tier_users=["u1"])
    assert [(t.user_id, t.kind) for t in report.tiers] == [("u1", "page")]
    assert [page.query for page in memory.short_term("u1")] == ["I like tea"]
    assert [page.query for page in memory.short_term("u2")] == ["Acme Corp again"]  # not asked


# -- session stores: each adapter, with real Redis and PostgreSQL ------------------------------


@pytest.fixture(params=["memory", "file", "redis", "postgres"])
def session_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param
    if kind == "memory":
        yield InMemorySessionStore()
    elif kind == "file":
        yield FileSessionStore(tmp_path / "sessions")
    elif kind == "redis":
        url = request.getfixturevalue("redis_url")
        store = RedisSessionStore.from_url(url, prefix=f"lm-forget-{uuid.uuid4().hex[:8]}:")
        try:
            yield store
        finally:
            store.close()
            import redis

            with redis.Redis.from_url(url) as client:
                for key in client.scan_iter(match=store.prefix + "*"):
                    client.delete(key)
    else:
        import psycopg
        from psycopg import sql

        url = request.getfixturevalue("postgres_url")
        schema = f"lm_forget_{uuid.uuid4().hex[:10]}"
        store = PostgresSessionStore.from_conn_string(url, schema=schema)
        try:
            store.setup()
            yield store
        finally:
            store.close()
            with psycopg.connect(url, autocommit=True) as conn:
                drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                conn.execute(drop)


def test_forget_in_a_session_store(session_store: Any) -> None:
    session_store.set(
        "entity:acme_corp:evaluation",
        {"client": "Acme Corp", "notes": ["acme corp is slow", "likes tea"], "step": 3},
    )
    session_store.set("entity:other:evaluation", {"client": "Globex"})
    session_store.set("entity:gone:evaluation", {"about": "ACME Corp"})
    keys = ["entity:acme_corp:evaluation", "entity:other:evaluation", "entity:gone:evaluation"]
    dry = forget(SUBJECT, session_store=session_store, session_keys=keys, dry_run=True)
    assert [(s.key, s.values) for s in dry.sessions if s.values] == [
        ("entity:acme_corp:evaluation", 2),
        ("entity:gone:evaluation", 1),
    ]
    assert session_store.get("entity:gone:evaluation") == {"about": "ACME Corp"}
    forget(SUBJECT, session_store=session_store, session_keys=keys)
    assert session_store.get("entity:acme_corp:evaluation") == {"notes": ["likes tea"], "step": 3}
    assert session_store.get("entity:other:evaluation") == {"client": "Globex"}
    assert session_store.get("entity:gone:evaluation") is None


def test_an_empty_subject_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        forget(" \u200b ")


# -- the command ---------------------------------------------------------------------------------


def test_the_command_forgets_lists_read_only_files_and_exits_1(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from layered_memory.cli import main

    args = ["forget", SUBJECT, "--root", str(root), "--layer", "project=/AGENTS.md"]
    args += ["--layer", "notes=/MEMORY.md:rw", "--graph", str(root / "memory.jsonl")]
    code = main([*args, "--dry-run", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1  # a read-only file still names it
    assert data["dry_run"] is True
    assert data["read_only"] == ["/AGENTS.md"]
    assert data["files"][0]["lines"] == NAMING
    assert "Acme Corp pays late" in (root / "MEMORY.md").read_text()  # dry run
    code = main(args)
    out = capsys.readouterr().out
    assert code == 1
    assert "/AGENTS.md: read-only memory names it" in out
    assert (root / "MEMORY.md").read_text().splitlines() == KEPT
    (root / "AGENTS.md").write_text("Our biggest client is someone.\n")
    assert main(args) == 0
