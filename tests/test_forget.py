"""Forget a subject everywhere: memory files, the review queue, graphs, tiers, session stores."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import (
    FileSessionStore,
    HybridSessionStore,
    InMemorySessionStore,
    MemoryWriter,
    PostgresSessionStore,
    RedisSessionStore,
    aforget,
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
from unlisted_store import UnlistedStore

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


# -- session stores: each adapter, with real Redis and PostgreSQL ------------------------------


def _redis(url: str, cleanups: list[Any]) -> Any:
    store = RedisSessionStore.from_url(url, prefix=f"lm-forget-{uuid.uuid4().hex[:8]}:")

    async def cleanup() -> None:
        await store.aclose()
        import redis

        with redis.Redis.from_url(url) as client:
            for key in client.scan_iter(match=store.prefix + "*"):
                client.delete(key)

    cleanups.append(cleanup)
    return store


def _postgres(url: str, schema: str, cleanups: list[Any]) -> Any:
    store = PostgresSessionStore.from_conn_string(url, schema=schema)
    store.setup()
    cleanups.append(store.close)
    return store


@pytest.fixture(params=["memory", "file", "redis", "postgres", "hybrid"])
async def session_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each adapter in turn (async, so Redis's async clients close on their loop)."""
    kind = request.param
    cleanups: list[Any] = []
    if kind == "memory":
        store: Any = InMemorySessionStore()
    elif kind == "file":
        store = FileSessionStore(tmp_path / "sessions", fsync=False)
    elif kind == "redis":
        store = _redis(request.getfixturevalue("redis_url"), cleanups)
    elif kind == "postgres":
        schema = request.getfixturevalue("postgres_schema").name
        store = _postgres(request.getfixturevalue("postgres_url"), schema, cleanups)
    else:
        l1 = _redis(request.getfixturevalue("redis_url"), cleanups)
        schema = request.getfixturevalue("postgres_schema").name
        store = HybridSessionStore(
            l1, _postgres(request.getfixturevalue("postgres_url"), schema, cleanups)
        )
    try:
        yield store
    finally:
        for cleanup in cleanups:
            result = cleanup()
            if hasattr(result, "__await__"):
                await result


NAMING_ENTRY = {"client": "Acme Corp", "notes": ["acme corp is slow", "likes tea"], "step": 3}
# Keys a glob, a LIKE pattern or a file name could misread: listed and searched like any.
SESSION_KEYS = [
    "entity:acme_corp:evaluation",
    "entity:a*[x]?%_\\:evaluation",
    "entity:\u202e\x1b[31m:evaluation",
    "entity:gone:evaluation",
    "entity:other:evaluation",
]


async def _fill(store: Any) -> None:
    for key in SESSION_KEYS[:3]:
        await store.aset(key, NAMING_ENTRY)
    await store.aset("entity:gone:evaluation", {"about": "ACME Corp"})
    await store.aset("entity:other:evaluation", {"client": "Globex"})


async def _run(use_async: bool, **kwargs: Any) -> Any:
    return await aforget(SUBJECT, **kwargs) if use_async else forget(SUBJECT, **kwargs)


USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["forget", "aforget"])


@USE_ASYNC
async def test_forget_searches_every_entry_of_a_session_store(
    session_store: Any, use_async: bool
) -> None:
    """No keys given: the store lists its own (the caller cannot know them)."""
    await _fill(session_store)
    dry = await _run(use_async, session_store=session_store, dry_run=True)
    assert sorted((s.key, s.values, s.deleted) for s in dry.sessions) == sorted(
        [(key, 2, False) for key in SESSION_KEYS[:3]] + [("entity:gone:evaluation", 1, True)]
    )
    assert await session_store.aget("entity:gone:evaluation") == {"about": "ACME Corp"}
    report = await _run(use_async, session_store=session_store)
    assert report.complete
    assert len(report.sessions) == 4, "entries that did not name it are not listed"
    for key in SESSION_KEYS[:3]:
        assert await session_store.aget(key) == {"notes": ["likes tea"], "step": 3}
    assert await session_store.aget("entity:other:evaluation") == {"client": "Globex"}
    assert await session_store.aget("entity:gone:evaluation") is None
    assert (await _run(use_async, session_store=session_store)).sessions == ()


@USE_ASYNC
async def test_named_session_keys_narrow_the_search(session_store: Any, use_async: bool) -> None:
    await _fill(session_store)
    keys = ["entity:gone:evaluation", "entity:other:evaluation"]
    report = await _run(use_async, session_store=session_store, session_keys=keys)
    assert [s.key for s in report.sessions] == ["entity:gone:evaluation"]
    assert await session_store.aget("entity:gone:evaluation") is None
    assert await session_store.aget(SESSION_KEYS[0]) == NAMING_ENTRY, "not named: kept"


def test_an_unreadable_entry_is_named_and_the_report_is_incomplete(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, fsync=False)
    store.set("entity:a:x", {"client": "Acme Corp"})
    store.set("entity:b:x", {"client": "Acme Corp"})
    path = store.path_for("entity:b:x")
    path.write_text(path.read_text().replace('"value":{', '"value":['))  # corrupt, key intact
    report = forget(SUBJECT, session_store=store)
    assert sorted((s.key, s.unreadable) for s in report.sessions) == [
        ("entity:a:x", False),
        ("entity:b:x", True),
    ]
    assert not report.complete
    assert store.get("entity:a:x") is None


def test_a_store_that_cannot_list_needs_its_keys_before_anything_is_written(root: Path) -> None:
    store = UnlistedStore()
    store.set("k", {"client": "Acme Corp", "n": 1})
    before = (root / "MEMORY.md").read_text()
    with pytest.raises(ValueError, match="session_keys="):
        forget(SUBJECT, backend=_backend(root), files=["/MEMORY.md"], session_store=store)
    assert (root / "MEMORY.md").read_text() == before
    report = forget(SUBJECT, session_store=store, session_keys=["k"])
    assert [s.key for s in report.sessions] == ["k"]
    assert store.get("k") == {"n": 1}
    with pytest.raises(ValueError, match="not one str"):
        forget(SUBJECT, session_store=store, session_keys="k")


@USE_ASYNC
async def test_forget_in_tiered_memory_of_every_user(use_async: bool) -> None:
    from langgraph.store.memory import InMemoryStore

    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings())
    memory.add_page("u1", "I work at Acme Corp", "Noted.")
    memory.add_page("u1", "I like tea", "Noted.")
    memory.add_page("u2", "Acme Corp again", "Noted.")
    memory.add_page("u3", "Acme Corp once more", "Noted.")
    report = await _run(use_async, tiers=memory, tier_users=["u1"])
    assert [(t.user_id, t.kind) for t in report.tiers] == [("u1", "page")]
    assert [page.query for page in memory.short_term("u1")] == ["I like tea"]
    assert [page.query for page in memory.short_term("u2")] == ["Acme Corp again"]  # not named
    # No users given: every user the store holds (the caller cannot know them).
    report = await _run(use_async, tiers=memory)
    assert sorted(t.user_id for t in report.tiers) == ["u2", "u3"]
    assert memory.short_term("u2") == memory.short_term("u3") == []


def test_a_segment_naming_the_subject_goes_with_its_pages() -> None:
    from langgraph.store.memory import InMemoryStore

    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings(), stm_capacity=1)
    for text in ("Acme Corp pays late", "Acme Corp wants PDF", "Acme Corp moved", "tea"):
        memory.add_page("u1", text, "Noted.")
    assert any("acme" in s.keywords for s in memory.segments("u1"))
    report = forget(SUBJECT, tiers=memory)
    assert "segment" in {t.kind for t in report.tiers}
    assert not any(
        SUBJECT.lower() in p.query.lower() for s in memory.segments("u1") for p in s.pages
    )


def test_an_empty_subject_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        forget(" \u200b ")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"files": "/MEMORY.md"}, r"files is a list of backend paths \(wrap one: \['/MEMORY.md'\]"),
        ({"read_only": "/AGENTS.md"}, r"read_only is a list of backend paths"),
        ({"graphs": ["/memory.jsonl"]}, r"graphs is a list of KnowledgeGraph objects"),
        ({"session_keys": ["entity:acme:x"]}, r"session_keys narrows session_store="),
        ({"tier_users": ["ada"]}, r"tier_users narrows tiers="),
    ],
)
def test_arguments_that_would_search_nothing_are_refused(
    root: Path, given: dict[str, Any], message: str
) -> None:
    """A str where a list goes, a path where a graph goes, a narrowing without its store:
    each used to report `complete` having searched nothing (or fail far from the cause)."""
    before = (root / "MEMORY.md").read_text()
    with pytest.raises(ValueError, match=message):
        forget(SUBJECT, backend=_backend(root), **given)
    assert (root / "MEMORY.md").read_text() == before


@USE_ASYNC
async def test_forgetting_in_a_graph_file_that_does_not_exist_creates_none(
    root: Path, use_async: bool
) -> None:
    graph = KnowledgeGraph(_backend(root), "/typo/memory.jsonl")
    if use_async:
        report = await aforget(SUBJECT, graphs=[graph])
    else:
        report = forget(SUBJECT, graphs=[graph])
    assert not report.graphs[0]
    assert not (root / "typo").exists()


def test_a_missing_file_is_named_not_reported_as_searched(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    report = forget(SUBJECT, backend=_backend(root), files=["/NOTES.md"], read_only=["/NOPE.md"])
    assert report.complete
    assert "memory file /NOTES.md does not exist: nothing was searched there" in caplog.text
    assert "read-only file /NOPE.md could not be read" in caplog.text


# -- the command ---------------------------------------------------------------------------------


def test_the_command_forgets_lists_read_only_files_and_exits_1(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from layered_memory.cli import main

    (root / "memory.jsonl").write_text("")  # a graph with nothing in it yet
    args = ["forget", SUBJECT, "--root", str(root), "--layer", "project=/AGENTS.md"]
    args += ["--layer", "notes=/MEMORY.md:rw", "--graph", str(root / "memory.jsonl")]
    code = main([*args, "--dry-run", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1  # a read-only file still names it
    assert data["version"] == 1  # as every subcommand's --json
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


def test_the_command_refuses_a_graph_file_that_does_not_exist(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in --graph used to create the file (and its folders) and report nothing found."""
    from layered_memory.cli import main

    typo = root / "typo" / "memory.jsonl"
    assert main(["forget", SUBJECT, "--root", str(root), "--graph", str(typo)]) == 2
    assert f"--graph {typo}: no such file" in capsys.readouterr().err
    assert not typo.parent.exists()


def _session_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[str]:
    """The `--sessions` options of a store of `kind` holding the entries of `_fill`."""
    if kind == "file":
        folder = tmp_path / "sessions"
        FileSessionStore(folder)
        return ["--sessions", str(folder)]
    if kind == "redis":
        return ["--sessions", request.getfixturevalue("redis_url")]
    schema = request.getfixturevalue("postgres_schema").name
    return ["--sessions", request.getfixturevalue("postgres_url"), "--sessions-namespace", schema]


@pytest.mark.parametrize("kind", ["file", "redis", "postgres"])
async def test_the_command_forgets_in_every_entry_of_a_session_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    from layered_memory.cli import main

    options = _session_url(kind, tmp_path, request)
    if kind == "redis":  # a prefix of its own: the database is shared
        options += ["--sessions-namespace", f"lm-forget-cli-{uuid.uuid4().hex[:8]}:"]
        store: Any = RedisSessionStore.from_url(options[1], prefix=options[3])
    elif kind == "postgres":
        store = PostgresSessionStore.from_conn_string(options[1], schema=options[3])
        store.setup()
    else:
        store = FileSessionStore(options[1])
    try:
        await _fill(store)
        args = ["forget", SUBJECT, "--root", str(tmp_path), *options]
        assert main([*args, "--dry-run", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert sorted(s["key"] for s in data["sessions"]) == sorted(
            [*SESSION_KEYS[:3], "entity:gone:evaluation"]
        )
        assert await store.aget("entity:gone:evaluation") == {"about": "ACME Corp"}
        assert main([*args, "--session-key", "entity:gone:evaluation"]) == 0
        out = capsys.readouterr().out
        assert "session entity:gone:evaluation: removed 1 values; the entry goes" in out
        assert await store.aget(SESSION_KEYS[0]) == NAMING_ENTRY, "not named: kept"
        assert main(args) == 0
        capsys.readouterr()
        for key in SESSION_KEYS[:3]:
            assert await store.aget(key) == {"notes": ["likes tea"], "step": 3}
        assert await store.aget("entity:other:evaluation") == {"client": "Globex"}
    finally:
        if kind == "redis":
            for key in SESSION_KEYS:
                await store.adelete(key)
            await store.aclose()
        elif kind == "postgres":
            store.close()


def test_the_command_forgets_in_every_users_tiered_memory(
    postgres_schema: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.store.postgres import PostgresStore

    from layered_memory.cli import main
    from layered_memory.testing import LexicalEmbeddings
    from layered_memory.tiers import TieredMemory

    with PostgresStore.from_conn_string(postgres_schema.url) as store:
        store.setup()
        memory = TieredMemory(store, embeddings=LexicalEmbeddings())
        memory.add_page("u1", "I work at Acme Corp", "Noted.")
        memory.add_page("u1", "I like tea", "Noted.")
        memory.add_page("u2", "Acme Corp again", "Noted.")
        args = ["forget", SUBJECT, "--root", str(tmp_path), "--tiers", postgres_schema.url]
        assert main([*args, "--user", "u2", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [(t["user_id"], t["kind"]) for t in data["tiers"]] == [("u2", "page")]
        assert [p.query for p in memory.short_term("u1")] == ["I work at Acme Corp", "I like tea"]
        assert main(args) == 0
        assert "tiers of u1: removed page" in capsys.readouterr().out
        assert [p.query for p in memory.short_term("u1")] == ["I like tea"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--user", "u1"], "--user goes with --tiers"),
        (["--session-key", "k"], "--session-key goes with --sessions"),
        (["--sessions", "ftp://x"], "no store for ftp://"),
        (["--sessions", "/no/such/folder"], "no such folder"),
        (["--tiers", "postgresql://x/y", "--tiers-namespace", "a.b"], "--tiers-namespace"),
        (["--config", "app:agent"], "unrecognized arguments: --config"),
        (["--layer", "notes=/NOTES.md:rw"], "--layer: no such file: /NOTES.md"),
    ],
)
def test_the_command_refuses_bad_store_options_before_writing(
    root: Path, options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from layered_memory.cli import main

    before = (root / "MEMORY.md").read_text()
    assert main(["forget", SUBJECT, "--root", str(root), *options]) == 2
    assert message in capsys.readouterr().err
    assert (root / "MEMORY.md").read_text() == before
