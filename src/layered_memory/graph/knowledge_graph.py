"""`KnowledgeGraph`: the MCP memory server's nine operations on a graph file in any backend.

The file is byte-compatible with `@modelcontextprotocol/server-memory`: Claude Desktop's
memory server and a LangChain agent can share one `memory.jsonl`. Every mutation is one
read-modify-write transaction under the lock every memory write takes (`core.files`: `flock`
+ atomic replace on local disk, an advisory-locked SQL transaction on a PostgreSQL-backed
`StoreBackend`, an in-process lock elsewhere), so writers in several processes never lose
each other's changes, which the server itself does not guarantee.

The operations are pure functions of a `GraphSnapshot` (below the class) with the server's
exact semantics (`KnowledgeGraphManager` in `@modelcontextprotocol/server-memory`):

- `create_entities` skips names already in the graph, but not duplicates within one call;
- `create_relations` skips exact `(from, to, relationType)` duplicates of existing relations,
  not duplicates within one call, and does not check that the endpoints exist;
- `add_observations` adds the contents the entity does not have yet and fails, writing
  nothing, when an entity is unknown (the first entity of that name gets them);
- `delete_entities` also deletes every relation touching them; deleting what is not there is
  not an error, for entities, observations and relations alike;
- `search_nodes` matches case-insensitively (`toLowerCase`) in names, types and observations;
  it and `open_nodes` return the relations with at least one endpoint among the entities found.

Secrets are kept out of the file: every string a write stores goes through the package's
redaction (`writeback.redaction`): entity names, types and observations (`create_entities`),
both endpoints and the type of a relation (`create_relations`), added contents
(`add_observations`). Redaction is a pure function of the text, so a relation whose endpoint
holds a secret points at the entity created with the same secret in its name: both are stored
under the same redacted name. Names that pick records already stored (to add to, delete or
open) match both the name as given and its redacted form: the agent names an entity as it
first wrote it, secret included, and a file written by the MCP server (or before redaction)
may hold the secret verbatim, which the agent must still be able to delete. Nothing is logged
for those: nothing is stored. A text without a secret comes back unchanged, so a file without
secrets is written byte for byte as the server writes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from deepagents.backends.protocol import BackendProtocol

from layered_memory._logs import get_logger
from layered_memory.core.files import WriteStrategy, strategy_for
from layered_memory.errors import EntityNotFoundError
from layered_memory.graph import _source
from layered_memory.graph._format import (
    Entity,
    EntityRecord,
    GraphData,
    GraphSnapshot,
    ObservationAddition,
    ObservationDeletion,
    ObservationResult,
    Relation,
    RelationRecord,
    check_additions,
    check_deletions,
    check_entities,
    check_names,
    check_query,
    check_relations,
    digest_of,
)
from layered_memory.writeback.redaction import redact

logger = get_logger(__name__)

T = TypeVar("T")

DEFAULT_PATH = "/memory.jsonl"

_OFF_LOOP_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class _Content:
    """What a mutation leaves: the records to write (unknown lines carried over by the caller)."""

    entities: Sequence[EntityRecord]
    relations: Sequence[RelationRecord]


_Mutation = Callable[[GraphSnapshot], tuple[_Content, T]]


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
        return _search_nodes(self.snapshot(), check_query(self.path, query))

    async def asearch_nodes(self, query: str) -> GraphData:
        """Async twin of `search_nodes`."""
        checked = check_query(self.path, query)
        return _search_nodes(await self.asnapshot(), checked)

    def open_nodes(self, names: list[str]) -> GraphData:
        """The named entities and the relations touching them."""
        return _open_nodes(self.snapshot(), self._lookup(check_names(self.path, "names", names)))

    async def aopen_nodes(self, names: list[str]) -> GraphData:
        """Async twin of `open_nodes`."""
        checked = self._lookup(check_names(self.path, "names", names))
        return _open_nodes(await self.asnapshot(), checked)

    # --- writing ------------------------------------------------------------------------

    def create_entities(self, entities: list[Entity]) -> list[Entity]:
        """Add entities whose name is new; return the ones added."""
        checked = self._redact_entities(check_entities(self.path, entities))
        return self._transact(lambda graph: _create_entities(graph, checked))

    async def acreate_entities(self, entities: list[Entity]) -> list[Entity]:
        """Async twin of `create_entities`."""
        checked = self._redact_entities(check_entities(self.path, entities))
        return await self._atransact(lambda graph: _create_entities(graph, checked))

    def create_relations(self, relations: list[Relation]) -> list[Relation]:
        """Add relations (active voice: `from` `relationType` `to`) not present yet; return
        the ones added."""
        checked = self._redact_relations(check_relations(self.path, relations))
        return self._transact(lambda graph: _create_relations(graph, checked))

    async def acreate_relations(self, relations: list[Relation]) -> list[Relation]:
        """Async twin of `create_relations`."""
        checked = self._redact_relations(check_relations(self.path, relations))
        return await self._atransact(lambda graph: _create_relations(graph, checked))

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
        self._transact(lambda graph: (_delete_entities(graph, checked), None))

    async def adelete_entities(self, entity_names: list[str]) -> None:
        """Async twin of `delete_entities`."""
        checked = self._lookup(check_names(self.path, "entityNames", entity_names))
        await self._atransact(lambda graph: (_delete_entities(graph, checked), None))

    def delete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Remove observations from entities (unknown entities are ignored)."""
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        self._transact(lambda graph: (_delete_observations(graph, checked), None))

    async def adelete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Async twin of `delete_observations`."""
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        await self._atransact(lambda graph: (_delete_observations(graph, checked), None))

    def delete_relations(self, relations: list[Relation]) -> None:
        """Remove relations (exact matches; unknown ones are ignored)."""
        checked = self._lookup_relations(check_relations(self.path, relations))
        self._transact(lambda graph: (_delete_relations(graph, checked), None))

    async def adelete_relations(self, relations: list[Relation]) -> None:
        """Async twin of `delete_relations`."""
        checked = self._lookup_relations(check_relations(self.path, relations))
        await self._atransact(lambda graph: (_delete_relations(graph, checked), None))

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
        return _redacted_entities(entities, self.path) if self.redact_secrets else entities

    def _redact_relations(self, relations: list[Relation]) -> list[Relation]:
        return _redacted_relations(relations, self.path) if self.redact_secrets else relations

    def _redact_additions(self, additions: list[ObservationAddition]) -> list[ObservationAddition]:
        return _redacted_additions(additions, self.path) if self.redact_secrets else additions

    def _add_observations(
        self, graph: GraphSnapshot, additions: list[ObservationAddition]
    ) -> tuple[_Content, list[ObservationResult]]:
        if self.redact_secrets:
            additions = _resolve_additions(graph, additions)
        return _add_observations(graph, additions, path=self.path)

    def _lookup(self, names: list[str]) -> list[str]:
        return _either_form(names) if self.redact_secrets else names

    def _lookup_relations(self, relations: list[Relation]) -> list[Relation]:
        return _relation_forms(relations) if self.redact_secrets else relations

    def _lookup_deletions(self, deletions: list[ObservationDeletion]) -> list[ObservationDeletion]:
        return _deletion_forms(deletions) if self.redact_secrets else deletions


# --- the server's semantics, pure ------------------------------------------------------


def _create_entities(
    graph: GraphSnapshot, entities: Sequence[Entity]
) -> tuple[_Content, list[Entity]]:
    """Append the entities whose name is not in the graph yet; return those."""
    new = [entity for entity in entities if not graph.positions(entity["name"])]
    records = [EntityRecord(e["name"], e["entityType"], tuple(e["observations"])) for e in new]
    return _Content((*graph.entities, *records), graph.relations), [r.as_dict() for r in records]


def _create_relations(
    graph: GraphSnapshot, relations: Sequence[Relation]
) -> tuple[_Content, list[Relation]]:
    """Append the relations not in the graph yet (exact triple match); return those."""
    existing = graph.relation_keys()
    new = [
        RelationRecord(r["from"], r["to"], r["relationType"])
        for r in relations
        if (r["from"], r["to"], r["relationType"]) not in existing
    ]
    return _Content(graph.entities, (*graph.relations, *new)), [r.as_dict() for r in new]


def _add_observations(
    graph: GraphSnapshot, additions: Sequence[ObservationAddition], *, path: str
) -> tuple[_Content, list[ObservationResult]]:
    """Add each item's new contents to the first entity of its name.

    Raises:
        EntityNotFoundError: An item names an entity the graph does not hold.
    """
    entities = list(graph.entities)
    results: list[ObservationResult] = []
    for item in additions:
        found = graph.positions(item["entityName"])
        if not found:
            raise EntityNotFoundError(path, item["entityName"])
        index = found[0]
        current = entities[index].observations
        known = set(current)
        # As the server does: checked against the entity before this item, so a content given
        # twice in one item is added twice.
        added = [content for content in item["contents"] if content not in known]
        if added:
            entities[index] = entities[index].with_observations((*current, *added))
        results.append({"entityName": item["entityName"], "addedObservations": added})
    return _Content(entities, graph.relations), results


def _delete_entities(graph: GraphSnapshot, names: Sequence[str]) -> _Content:
    """Drop the named entities and every relation touching one of them."""
    doomed = set(names)
    return _Content(
        [e for e in graph.entities if e.name not in doomed],
        [r for r in graph.relations if r.source not in doomed and r.target not in doomed],
    )


def _delete_observations(
    graph: GraphSnapshot, deletions: Sequence[ObservationDeletion]
) -> _Content:
    """Remove the given observations from the first entity of each name (unknown: skipped)."""
    entities = list(graph.entities)
    for item in deletions:
        found = graph.positions(item["entityName"])
        if not found:
            continue
        index = found[0]
        doomed = set(item["observations"])
        kept = tuple(o for o in entities[index].observations if o not in doomed)
        if len(kept) != len(entities[index].observations):
            entities[index] = entities[index].with_observations(kept)
    return _Content(entities, graph.relations)


def _delete_relations(graph: GraphSnapshot, relations: Sequence[Relation]) -> _Content:
    """Drop every relation equal to one given."""
    doomed = {(r["from"], r["to"], r["relationType"]) for r in relations}
    return _Content(graph.entities, [r for r in graph.relations if r.key not in doomed])


def _search_nodes(graph: GraphSnapshot, query: str) -> GraphData:
    """Entities whose name, type or an observation contains `query` (case-insensitive)."""
    needle = query.lower()
    if "\x00" in needle:
        # The haystacks join fields with NUL; a query holding one must not span two fields.
        matched = [
            e
            for e in graph.entities
            if needle in e.name.lower()
            or needle in e.entity_type.lower()
            or any(needle in o.lower() for o in e.observations)
        ]
    else:
        haystacks = graph.haystacks()
        matched = [e for e, hay in zip(graph.entities, haystacks, strict=True) if needle in hay]
    return _with_relations(graph, matched)


def _open_nodes(graph: GraphSnapshot, names: Sequence[str]) -> GraphData:
    """The named entities (every entity of each name, in file order) and their relations."""
    wanted = set(names)
    indexes = sorted(i for name in wanted for i in graph.positions(name))
    return _with_relations(graph, [graph.entities[i] for i in indexes])


def _with_relations(graph: GraphSnapshot, entities: Sequence[EntityRecord]) -> GraphData:
    names = {entity.name for entity in entities}
    return {
        "entities": [entity.as_dict() for entity in entities],
        "relations": [relation.as_dict() for relation in graph.relations_touching(names)],
    }


# --- redaction: what a write stores, and names finding what was stored -----------------

logger = get_logger(__name__)


def _stored(text: str, path: str, what: str) -> str:
    """`text` as it may be stored: secrets replaced, one warning naming the kinds (never the
    text) when there were any."""
    clean, kinds = redact(text)
    if kinds:
        logger.warning(
            "knowledge graph %s: redacted %s from %s before storing it",
            path,
            ", ".join(kinds),
            what,
        )
    return clean


def _redacted_entities(items: list[Entity], path: str) -> list[Entity]:
    """`create_entities`' checked entities, redacted in place (they are the checks' copies)."""
    for item in items:
        item["name"] = _stored(item["name"], path, "an entity name")
        item["entityType"] = _stored(item["entityType"], path, "an entity type")
        item["observations"] = [
            _stored(text, path, "an observation") for text in item["observations"]
        ]
    return items


def _redacted_relations(items: list[Relation], path: str) -> list[Relation]:
    """`create_relations`' checked relations, redacted in place."""
    for item in items:
        item["from"] = _stored(item["from"], path, "a relation's source")
        item["to"] = _stored(item["to"], path, "a relation's target")
        item["relationType"] = _stored(item["relationType"], path, "a relation type")
    return items


def _redacted_additions(items: list[ObservationAddition], path: str) -> list[ObservationAddition]:
    """`add_observations`' checked items with their contents redacted in place (the entity
    name is matched in the transaction, `resolve_additions`)."""
    for item in items:
        item["contents"] = [_stored(text, path, "an observation") for text in item["contents"]]
    return items


def _redacted(text: str) -> str:
    return redact(text)[0]


def _either_form(names: Sequence[str]) -> list[str]:
    """`names` and the redacted form of each that has one (names to delete or open)."""
    found = list(names)
    found.extend(clean for clean in map(_redacted, names) if clean not in names)
    return found


def _relation_forms(items: list[Relation]) -> list[Relation]:
    """`delete_relations`' relations, each also in its redacted form when that differs."""
    found = list(items)
    for item in items:
        clean: Relation = {
            "from": _redacted(item["from"]),
            "to": _redacted(item["to"]),
            "relationType": _redacted(item["relationType"]),
        }
        if clean != item:
            found.append(clean)
    return found


def _deletion_forms(items: list[ObservationDeletion]) -> list[ObservationDeletion]:
    """`delete_observations`' items, each observation also in its redacted form, and each item
    also under the entity's redacted name when that differs."""
    found: list[ObservationDeletion] = []
    for item in items:
        observations = _either_form(item["observations"])
        found.append({"entityName": item["entityName"], "observations": observations})
        clean = _redacted(item["entityName"])
        if clean != item["entityName"]:
            found.append({"entityName": clean, "observations": observations})
    return found


def _resolve_additions(
    graph: GraphSnapshot, items: list[ObservationAddition]
) -> list[ObservationAddition]:
    """`add_observations`' items naming the entity the graph holds: the name as given when
    there is one, else its redacted form when there is one (else as given: not found)."""
    resolved: list[ObservationAddition] = []
    for item in items:
        name = item["entityName"]
        if not graph.positions(name):
            clean = _redacted(name)
            if clean != name and graph.positions(clean):
                resolved.append({"entityName": clean, "contents": item["contents"]})
                continue
        resolved.append(item)
    return resolved
