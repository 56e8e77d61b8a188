"""Every operation on every kind of backend, sync and async; argument checks; caching."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from langgraph.store.memory import InMemoryStore

from layered_memory.errors import EntityNotFoundError, KnowledgeGraphInputError
from layered_memory.graph import KnowledgeGraph, knowledge_graph

BackendFactory = Callable[[Path], tuple[Any, str]]


def _fs_virtual(root: Path) -> tuple[Any, str]:
    return FilesystemBackend(root_dir=root, virtual_mode=True), "/memory.jsonl"


def _fs_host(root: Path) -> tuple[Any, str]:
    return FilesystemBackend(root_dir=root, virtual_mode=False), str(root / "kg" / "memory.jsonl")


def _store(root: Path) -> tuple[Any, str]:
    return StoreBackend(namespace=lambda _: ("graph",), store=InMemoryStore()), "/memory.jsonl"


def _composite_store(root: Path) -> tuple[Any, str]:
    store = StoreBackend(namespace=lambda _: ("graph",), store=InMemoryStore())
    backend = CompositeBackend(
        default=FilesystemBackend(root_dir=root, virtual_mode=True), routes={"/memories/": store}
    )
    return backend, "/memories/memory.jsonl"


def _composite_disk(root: Path) -> tuple[Any, str]:
    disk = FilesystemBackend(root_dir=root, virtual_mode=True)
    return CompositeBackend(default=StateBackend(), routes={"/disk/": disk}), "/disk/memory.jsonl"


BACKENDS = {
    "filesystem-virtual": _fs_virtual,
    "filesystem-host-path": _fs_host,
    "store": _store,
    "composite-store-route": _composite_store,
    "composite-disk-route": _composite_disk,
}


async def _call(graph: KnowledgeGraph, use_async: bool, name: str, *args: Any) -> Any:
    if use_async:
        return await getattr(graph, f"a{name}")(*args)
    return getattr(graph, name)(*args)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", list(BACKENDS))
async def test_every_operation_with_the_servers_semantics(
    tmp_path: Path, kind: str, use_async: bool
) -> None:
    backend, path = BACKENDS[kind](tmp_path)
    graph = KnowledgeGraph(backend, path)

    async def call(name: str, *args: Any) -> Any:
        return await _call(graph, use_async, name, *args)

    assert await call("read_graph") == {"entities": [], "relations": []}
    created = await call(
        "create_entities",
        [
            {"name": "Ada", "entityType": "person", "observations": ["Wrote notes"], "x": 1},
            {"name": "Babbage", "entityType": "person", "observations": []},
        ],
    )
    assert created == [
        {"name": "Ada", "entityType": "person", "observations": ["Wrote notes"]},
        {"name": "Babbage", "entityType": "person", "observations": []},
    ]
    assert (
        await call("create_entities", [{"name": "Ada", "entityType": "robot", "observations": []}])
        == []
    )
    relations = [
        {"from": "Ada", "to": "Babbage", "relationType": "corresponded_with"},
        {"from": "Babbage", "to": "Engine", "relationType": "designed"},
    ]
    assert await call("create_relations", relations) == relations
    assert await call("create_relations", relations[:1]) == []
    assert await call(
        "add_observations",
        [{"entityName": "Ada", "contents": ["Wrote notes", "First program", "First program"]}],
    ) == [{"entityName": "Ada", "addedObservations": ["First program", "First program"]}]
    with pytest.raises(EntityNotFoundError) as raised:
        await call("add_observations", [{"entityName": "Nobody", "contents": ["x"]}])
    assert raised.value.name == "Nobody"
    assert raised.value.path == path

    found = await call("search_nodes", "FIRST")
    assert [e["name"] for e in found["entities"]] == ["Ada"]
    assert found["relations"] == relations[:1]
    opened = await call("open_nodes", ["Babbage"])
    assert opened["relations"] == relations  # one endpoint among the names is enough

    assert (
        await call(
            "delete_observations", [{"entityName": "Ada", "observations": ["First program"]}]
        )
        is None
    )
    assert await call("delete_relations", relations[1:]) is None
    assert await call("delete_entities", ["Babbage", "Nobody"]) is None
    assert await call("read_graph") == {
        "entities": [{"name": "Ada", "entityType": "person", "observations": ["Wrote notes"]}],
        "relations": [],
    }
    # Another instance on the same backend sees the same file.
    assert KnowledgeGraph(backend, path).read_graph() == await call("read_graph")


@pytest.mark.parametrize(
    ("method", "argument", "parameter"),
    [
        ("create_entities", [{"name": "a", "entityType": "t"}], "entities[0].observations"),
        (
            "create_entities",
            [{"name": 1, "entityType": "t", "observations": []}],
            "entities[0].name",
        ),
        ("create_entities", {"name": "a"}, "entities"),
        ("create_relations", [{"from": "a", "to": "b"}], "relations[0].relationType"),
        ("add_observations", [{"entityName": "a", "contents": "text"}], "observations[0].contents"),
        ("delete_entities", "Ada", "entityNames"),
        (
            "delete_observations",
            [{"entityName": "a", "observations": [3]}],
            "deletions[0].observations[0]",
        ),
        ("search_nodes", None, "query"),
        ("open_nodes", [None], "names[0]"),
    ],
)
def test_bad_arguments_name_the_parameter_and_write_nothing(
    tmp_path: Path, method: str, argument: Any, parameter: str
) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    with pytest.raises(KnowledgeGraphInputError) as raised:
        getattr(graph, method)(argument)

    assert raised.value.parameter == parameter
    assert isinstance(raised.value, ValueError)
    assert not (tmp_path / "memory.jsonl").exists()


def test_constructor_checks_its_arguments(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    with pytest.raises(ValueError, match="path"):
        KnowledgeGraph(backend, "")
    with pytest.raises(ValueError, match="max_bytes"):
        KnowledgeGraph(backend, max_bytes=0)
    with pytest.raises(TypeError, match="backend"):
        KnowledgeGraph(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("use_async", [False, True])
async def test_secrets_are_redacted_from_observations(
    tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"

    created = await _call(
        graph,
        use_async,
        "create_entities",
        [{"name": "Ops", "entityType": "team", "observations": [f"deploy key {secret}"]}],
    )
    added = await _call(
        graph,
        use_async,
        "add_observations",
        [{"entityName": "Ops", "contents": ["password=hunter22"]}],
    )

    text = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
    assert secret not in text
    assert "hunter22" not in text
    assert created[0]["observations"] == ["deploy key [REDACTED:openai_api_key]"]
    assert added[0]["addedObservations"] == ["password=[REDACTED:password]"]
    assert secret not in caplog.text
    assert "hunter22" not in caplog.text


# Built from pieces so secret scanners do not flag this file.
GITHUB_TOKEN = "ghp_" + "x7Kq" * 9
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
PASSWORD = "hunter2" + "secret"


@pytest.mark.parametrize("use_async", [False, True])
async def test_secrets_are_redacted_from_names_types_and_relations(
    tmp_path: Path, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    graph = KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    name = f"deploy {GITHUB_TOKEN}"
    stored = "deploy [REDACTED:github_token]"

    async def call(method: str, *args: Any) -> Any:
        return await _call(graph, use_async, method, *args)

    created = await call(
        "create_entities",
        [
            {"name": name, "entityType": f"password={PASSWORD}", "observations": []},
            {"name": "prod", "entityType": "server", "observations": []},
        ],
    )
    related = await call(
        "create_relations", [{"from": name, "to": "prod", "relationType": AWS_KEY_ID}]
    )
    # Named as the agent first wrote it, the entity is found under its redacted name.
    added = await call("add_observations", [{"entityName": name, "contents": ["rotated"]}])
    opened = await call("open_nodes", [name])

    text = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
    for secret in (GITHUB_TOKEN, PASSWORD, AWS_KEY_ID):
        assert secret not in text
        assert secret not in caplog.text
    assert created[0] == {
        "name": stored,
        "entityType": "password=[REDACTED:password]",
        "observations": [],
    }
    relation = {"from": stored, "to": "prod", "relationType": "[REDACTED:aws_access_key_id]"}
    assert related == [relation]
    assert added == [{"entityName": stored, "addedObservations": ["rotated"]}]
    assert [e["name"] for e in opened["entities"]] == [stored]
    assert opened["relations"] == [relation]  # the relation still points at the entity
    assert "github_token" in caplog.text

    await call("delete_relations", [{"from": name, "to": "prod", "relationType": AWS_KEY_ID}])
    await call("delete_observations", [{"entityName": name, "observations": ["rotated"]}])
    assert (await call("read_graph"))["relations"] == []
    assert (await call("open_nodes", [stored]))["entities"][0]["observations"] == []
    await call("delete_entities", [name])
    assert [e["name"] for e in (await call("read_graph"))["entities"]] == ["prod"]


def test_a_secret_already_in_the_file_can_still_be_named_and_deleted(tmp_path: Path) -> None:
    # Written by the MCP server (or before redaction): the secret is in the file verbatim.
    name = f"deploy {GITHUB_TOKEN}"
    (tmp_path / "memory.jsonl").write_text(
        json.dumps({"type": "entity", "name": name, "entityType": "t", "observations": []}),
        encoding="utf-8",
    )
    graph = KnowledgeGraph(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    added = graph.add_observations([{"entityName": name, "contents": ["to be removed"]}])
    assert added == [{"entityName": name, "addedObservations": ["to be removed"]}]
    assert [e["name"] for e in graph.open_nodes([name])["entities"]] == [name]
    graph.delete_entities([name])

    assert GITHUB_TOKEN not in (tmp_path / "memory.jsonl").read_text(encoding="utf-8")


def test_redact_secrets_false_stores_every_string_as_given(tmp_path: Path) -> None:
    graph = KnowledgeGraph(
        FilesystemBackend(root_dir=tmp_path, virtual_mode=True), redact_secrets=False
    )
    graph.create_entities([{"name": GITHUB_TOKEN, "entityType": "t", "observations": []}])
    graph.create_relations([{"from": GITHUB_TOKEN, "to": "x", "relationType": AWS_KEY_ID}])

    text = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
    assert GITHUB_TOKEN in text
    assert AWS_KEY_ID in text


def _backdate(path: Path, seconds: float = 60) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


class _CountingBackend(FilesystemBackend):
    downloads = 0

    def download_files(self, paths: list[str]) -> Any:
        type(self).downloads += 1
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> Any:
        type(self).downloads += 1
        return await super().adownload_files(paths)


def test_an_unchanged_local_file_is_neither_read_nor_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    knowledge_graph.clear_caches()
    graph = KnowledgeGraph(_CountingBackend(root_dir=tmp_path, virtual_mode=True))
    graph.create_entities([{"name": "Ada", "entityType": "person", "observations": []}])
    _backdate(tmp_path / "memory.jsonl")
    parses: list[str] = []
    real_parse = knowledge_graph.parse
    monkeypatch.setattr(
        knowledge_graph,
        "parse",
        lambda text, digest: parses.append(digest) or real_parse(text, digest),
    )
    _CountingBackend.downloads = 0

    first = graph.snapshot()
    assert [graph.snapshot() for _ in range(5)] == [first] * 5
    assert asyncio.run(graph.asnapshot()) is first
    assert _CountingBackend.downloads == 1  # the first read after the write, then stat only
    assert parses == []  # the write already left the parsed content in the cache

    # Another writer changes the file behind our back, keeping its size: seen at once.
    text = (tmp_path / "memory.jsonl").read_text(encoding="utf-8")
    (tmp_path / "memory.jsonl").write_text(text.replace("Ada", "Eve"), encoding="utf-8")
    _backdate(tmp_path / "memory.jsonl", seconds=30)
    assert graph.read_graph()["entities"][0]["name"] == "Eve"
    assert len(parses) == 1


def test_a_file_changed_within_the_racy_window_is_read_again(tmp_path: Path) -> None:
    knowledge_graph.clear_caches()
    graph = KnowledgeGraph(_CountingBackend(root_dir=tmp_path, virtual_mode=True))
    graph.create_entities([{"name": "Ada", "entityType": "person", "observations": []}])
    _CountingBackend.downloads = 0

    graph.snapshot()
    graph.snapshot()

    assert _CountingBackend.downloads == 2  # modified just now: the signature is not trusted


def test_other_backends_download_but_never_parse_the_same_content_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    knowledge_graph.clear_caches()
    graph = KnowledgeGraph(StoreBackend(namespace=lambda _: ("g",), store=InMemoryStore()))
    graph.create_entities([{"name": "Ada", "entityType": "person", "observations": []}])
    parses: list[str] = []
    real_parse = knowledge_graph.parse
    monkeypatch.setattr(
        knowledge_graph,
        "parse",
        lambda text, digest: parses.append(digest) or real_parse(text, digest),
    )

    for _ in range(3):
        assert graph.read_graph()["entities"][0]["name"] == "Ada"

    assert parses == []


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parses: list[str] = []
    real_parse = knowledge_graph.parse
    monkeypatch.setattr(
        knowledge_graph,
        "parse",
        lambda text, digest: parses.append(digest) or real_parse(text, digest),
    )
    return parses


@pytest.mark.parametrize("backend_kind", ["local", "store"])
def test_many_graph_files_in_one_process_are_each_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_kind: str
) -> None:
    # One graph per user: every model call of every user must find its version parsed.
    store = InMemoryStore()
    graphs = []
    for user in range(12):
        if backend_kind == "local":
            backend: Any = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
        else:
            backend = StoreBackend(namespace=lambda _, u=user: ("users", str(u)), store=store)
        graph = KnowledgeGraph(backend, f"/u{user}.jsonl" if backend_kind == "local" else "/g")
        graph.create_entities(
            [
                {"name": f"E{j}", "entityType": "t", "observations": [f"user {user}"]}
                for j in range(50)
            ]
        )
        graphs.append(graph)
    for file in tmp_path.glob("*.jsonl"):
        _backdate(file)
    knowledge_graph.clear_caches()
    parses = _counting_parses(monkeypatch)

    for _ in range(3):
        for user, graph in enumerate(graphs):
            assert graph.open_nodes(["E0"])["entities"][0]["observations"] == [f"user {user}"]

    assert len(parses) == len(graphs)  # each version once, however many files


def test_the_snapshot_cache_is_bounded_by_bytes_and_drops_replaced_versions_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    knowledge_graph.clear_caches()
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    big = [{"name": f"E{j}", "entityType": "t", "observations": ["x" * 100]} for j in range(20)]
    one, two = KnowledgeGraph(backend, "/one.jsonl"), KnowledgeGraph(backend, "/two.jsonl")
    one.create_entities(big)
    two.create_entities(big[:10])
    sizes = {p.name: p.stat().st_size for p in tmp_path.glob("*.jsonl")}
    # Room for both files and a little more: not for one's version before the next write.
    monkeypatch.setattr(knowledge_graph, "SNAPSHOT_CACHE_BYTES", sum(sizes.values()) + 1_000)
    knowledge_graph.clear_caches()
    first_two, first_one = two.snapshot(), one.snapshot()

    one.add_observations([{"entityName": "E0", "contents": ["new"]}])

    assert knowledge_graph.cached(first_one.digest) is None  # replaced by the write: dropped first
    # another file's current version stays
    assert knowledge_graph.cached(first_two.digest) is first_two
    assert knowledge_graph.cached(one.snapshot().digest) is not None
    assert knowledge_graph._snapshots.total_bytes <= knowledge_graph.SNAPSHOT_CACHE_BYTES

    monkeypatch.setattr(knowledge_graph, "SNAPSHOT_CACHE_BYTES", 10)  # smaller than any file
    knowledge_graph.remember(first_one, sizes["one.jsonl"])
    assert knowledge_graph.cached(first_one.digest) is first_one  # the latest always stays
    assert knowledge_graph.cached(first_two.digest) is None
