"""`KnowledgeGraph`: the MCP memory server's operations on a graph file in any backend.

The file is byte-compatible with `@modelcontextprotocol/server-memory`: Claude Desktop's
memory server and a LangChain agent can share one `memory.jsonl`. Every mutation is one
read-modify-write transaction under the lock every memory write takes (`core.files`: `flock`
+ atomic replace on local disk, an advisory-locked SQL transaction on a PostgreSQL-backed
`StoreBackend`, an in-process lock elsewhere), so writers in several processes never lose
each other's changes, which the server itself does not guarantee. Every string a write stores
(names, types, observations, relation endpoints and types) is passed through the package's
secret redaction first (`_redaction`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from deepagents.backends.protocol import BackendProtocol

from layered_memory.core.files import WriteStrategy, strategy_for
from layered_memory.graph import _ops, _redaction, _source
from layered_memory.graph._format import GraphSnapshot, digest_of
from layered_memory.graph._types import (
    Entity,
    GraphData,
    ObservationAddition,
    ObservationDeletion,
    ObservationResult,
    Relation,
    check_additions,
    check_deletions,
    check_entities,
    check_names,
    check_query,
    check_relations,
)

T = TypeVar("T")

DEFAULT_PATH = "/memory.jsonl"

_OFF_LOOP_BYTES = 256 * 1024

_Mutation = Callable[[GraphSnapshot], tuple[_ops.Content, T]]


class KnowledgeGraph:
    """A knowledge graph stored in the MCP memory server's JSON Lines format.

    Methods take and return what the server's tools do (`create_entities(entities=[{"name",
    "entityType", "observations"}])`, ...); each has an async twin (`acreate_entities`, ...).

    Args:
        backend: The deepagents backend the file lives in (`FilesystemBackend`,
            `StateBackend`, `StoreBackend`, `CompositeBackend`, ...).
        path: The file's path in that backend.
        max_bytes: Larger files are refused (bounded memory) with a `KnowledgeGraphError`.
        redact_secrets: Cut credentials out of every string a write stores (names, types,
            observations, relations) before it is stored.

    Example:
        graph = KnowledgeGraph(FilesystemBackend(root_dir=".", virtual_mode=True))
        graph.create_entities([{"name": "Ada", "entityType": "person", "observations": []}])
        graph.search_nodes("ada")
    """

    def __init__(
        self,
        backend: BackendProtocol,
        path: str = DEFAULT_PATH,
        *,
        max_bytes: int = _source.DEFAULT_MAX_BYTES,
        redact_secrets: bool = True,
    ) -> None:
        if not isinstance(path, str) or not path or "\x00" in path:
            msg = f"path must be a non-empty backend path without NUL, got {path!r}"
            raise ValueError(msg)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            msg = f"max_bytes must be a positive int, got {max_bytes!r}"
            raise ValueError(msg)
        for method in ("download_files", "upload_files"):
            if not callable(getattr(backend, method, None)):
                msg = f"backend must be a deepagents backend (it has no {method}())"
                raise TypeError(msg)
        self.backend = backend
        self.path = path
        self.max_bytes = max_bytes
        self.redact_secrets = redact_secrets
        self._local = _source.local_file(backend, path)
        self._strategy: WriteStrategy | None = None

    def __repr__(self) -> str:
        return f"KnowledgeGraph({type(self.backend).__name__}, path={self.path!r})"

    # --- reading ------------------------------------------------------------------------

    def snapshot(self) -> GraphSnapshot:
        """The current content, parsed (cached by digest: an unchanged file is not re-parsed)."""
        found = _source.unchanged_local(self._local)
        if found is not None:
            return found
        self._check_local_size()
        signature, started = _source.before_read(self._local)
        data = _source.download_response(
            self.path, self.backend.download_files([self.path]), self.max_bytes
        )
        return self._snapshot_from(data, signature, started)

    async def asnapshot(self) -> GraphSnapshot:
        """Async twin of `snapshot`."""
        found = _source.unchanged_local(self._local)
        if found is not None:
            return found
        self._check_local_size()
        signature, started = _source.before_read(self._local)
        data = _source.download_response(
            self.path, await self.backend.adownload_files([self.path]), self.max_bytes
        )
        if data is not None and len(data) > _OFF_LOOP_BYTES:
            # Parsing a large file takes a while: keep the event loop free meanwhile.
            return await asyncio.to_thread(self._snapshot_from, data, signature, started)
        return self._snapshot_from(data, signature, started)

    def _snapshot_from(self, data: bytes | None, signature: Any, started: int) -> GraphSnapshot:
        snapshot = _source.snapshot_of_bytes(data or b"", self.path)
        _source.after_read(self._local, signature, started, snapshot.digest)
        return snapshot

    def _check_local_size(self) -> None:
        size = _source.local_size(self._local)
        if size is not None:
            _source.check_size(self.path, size, self.max_bytes)

    def read_graph(self) -> GraphData:
        """Every entity and relation."""
        return self.snapshot().data()

    async def aread_graph(self) -> GraphData:
        """Async twin of `read_graph`."""
        return (await self.asnapshot()).data()

    def search_nodes(self, query: str) -> GraphData:
        """Entities whose name, type or an observation contains `query` (any case), and the
        relations touching them."""
        return _ops.search_nodes(self.snapshot(), check_query(self.path, query))

    async def asearch_nodes(self, query: str) -> GraphData:
        """Async twin of `search_nodes`."""
        checked = check_query(self.path, query)
        return _ops.search_nodes(await self.asnapshot(), checked)

    def open_nodes(self, names: list[str]) -> GraphData:
        """The named entities and the relations touching them."""
        return _ops.open_nodes(
            self.snapshot(), self._lookup(check_names(self.path, "names", names))
        )

    async def aopen_nodes(self, names: list[str]) -> GraphData:
        """Async twin of `open_nodes`."""
        checked = self._lookup(check_names(self.path, "names", names))
        return _ops.open_nodes(await self.asnapshot(), checked)

    # --- writing ------------------------------------------------------------------------

    def create_entities(self, entities: list[Entity]) -> list[Entity]:
        """Add entities whose name is new; return the ones added."""
        checked = self._redact_entities(check_entities(self.path, entities))
        return self._transact(lambda graph: _ops.create_entities(graph, checked))

    async def acreate_entities(self, entities: list[Entity]) -> list[Entity]:
        """Async twin of `create_entities`."""
        checked = self._redact_entities(check_entities(self.path, entities))
        return await self._atransact(lambda graph: _ops.create_entities(graph, checked))

    def create_relations(self, relations: list[Relation]) -> list[Relation]:
        """Add relations (active voice: `from` `relationType` `to`) not present yet; return
        the ones added."""
        checked = self._redact_relations(check_relations(self.path, relations))
        return self._transact(lambda graph: _ops.create_relations(graph, checked))

    async def acreate_relations(self, relations: list[Relation]) -> list[Relation]:
        """Async twin of `create_relations`."""
        checked = self._redact_relations(check_relations(self.path, relations))
        return await self._atransact(lambda graph: _ops.create_relations(graph, checked))

    def add_observations(self, observations: list[ObservationAddition]) -> list[ObservationResult]:
        """Add facts to existing entities; return what each actually gained.

        Raises:
            EntityNotFoundError: An entity is unknown; nothing was written.
        """
        checked = self._redact_additions(check_additions(self.path, observations))
        return self._transact(lambda graph: self._add_observations(graph, checked))

    async def aadd_observations(
        self, observations: list[ObservationAddition]
    ) -> list[ObservationResult]:
        """Async twin of `add_observations`."""
        checked = self._redact_additions(check_additions(self.path, observations))
        return await self._atransact(lambda graph: self._add_observations(graph, checked))

    def delete_entities(self, entity_names: list[str]) -> None:
        """Delete entities and every relation touching them (unknown names are ignored)."""
        checked = self._lookup(check_names(self.path, "entityNames", entity_names))
        self._transact(lambda graph: (_ops.delete_entities(graph, checked), None))

    async def adelete_entities(self, entity_names: list[str]) -> None:
        """Async twin of `delete_entities`."""
        checked = self._lookup(check_names(self.path, "entityNames", entity_names))
        await self._atransact(lambda graph: (_ops.delete_entities(graph, checked), None))

    def delete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Remove observations from entities (unknown entities are ignored)."""
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        self._transact(lambda graph: (_ops.delete_observations(graph, checked), None))

    async def adelete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Async twin of `delete_observations`."""
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        await self._atransact(lambda graph: (_ops.delete_observations(graph, checked), None))

    def delete_relations(self, relations: list[Relation]) -> None:
        """Remove relations (exact matches; unknown ones are ignored)."""
        checked = self._lookup_relations(check_relations(self.path, relations))
        self._transact(lambda graph: (_ops.delete_relations(graph, checked), None))

    async def adelete_relations(self, relations: list[Relation]) -> None:
        """Async twin of `delete_relations`."""
        checked = self._lookup_relations(check_relations(self.path, relations))
        await self._atransact(lambda graph: (_ops.delete_relations(graph, checked), None))

    # --- the transaction ----------------------------------------------------------------

    def _write_strategy(self) -> WriteStrategy:
        if self._strategy is None:
            self._strategy = strategy_for(self.backend, [self.path])
        return self._strategy

    def _transform(self, mutation: _Mutation[T]) -> Callable[[Any], tuple[dict[str, str], T]]:
        path = self.path

        def transform(texts: Any) -> tuple[dict[str, str], T]:
            old = texts[path]
            graph = _source.snapshot_of_text(old, path, max_bytes=self.max_bytes)
            content, result = mutation(graph)
            updated = GraphSnapshot(content.entities, content.relations, graph.unknown, "")
            text = updated.text()
            data = text.encode("utf-8")
            updated.digest = digest_of(data)
            _source.remember(updated, len(data), replaces=graph.digest)
            # The server rewrites the file on every mutation; the same bytes need no write,
            # but a missing file is created (empty) as the server creates it.
            return ({} if text == old else {path: text}), result

        return transform

    def _transact(self, mutation: _Mutation[T]) -> T:
        self._check_local_size()
        return self._write_strategy().transact(self._transform(mutation))

    async def _atransact(self, mutation: _Mutation[T]) -> T:
        self._check_local_size()
        return await self._write_strategy().atransact(self._transform(mutation))

    # --- redaction (`_redaction`: what is stored, and names finding what was stored) --

    def _redact_entities(self, entities: list[Entity]) -> list[Entity]:
        return _redaction.entities(entities, self.path) if self.redact_secrets else entities

    def _redact_relations(self, relations: list[Relation]) -> list[Relation]:
        return _redaction.relations(relations, self.path) if self.redact_secrets else relations

    def _redact_additions(self, additions: list[ObservationAddition]) -> list[ObservationAddition]:
        return _redaction.additions(additions, self.path) if self.redact_secrets else additions

    def _add_observations(
        self, graph: GraphSnapshot, additions: list[ObservationAddition]
    ) -> tuple[_ops.Content, list[ObservationResult]]:
        if self.redact_secrets:
            additions = _redaction.resolve_additions(graph, additions)
        return _ops.add_observations(graph, additions, path=self.path)

    def _lookup(self, names: list[str]) -> list[str]:
        return _redaction.either_form(names) if self.redact_secrets else names

    def _lookup_relations(self, relations: list[Relation]) -> list[Relation]:
        return _redaction.relation_forms(relations) if self.redact_secrets else relations

    def _lookup_deletions(self, deletions: list[ObservationDeletion]) -> list[ObservationDeletion]:
        return _redaction.deletion_forms(deletions) if self.redact_secrets else deletions
