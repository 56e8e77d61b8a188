"""The server's nine operations as pure functions of a `GraphSnapshot`.

Each mutation takes a snapshot and checked arguments and returns the new content (entities,
relations, the kept unknown lines) and the server's result, with the server's exact semantics
(`KnowledgeGraphManager` in `@modelcontextprotocol/server-memory`):

- `create_entities` skips names already in the graph, but not duplicates within one call;
- `create_relations` skips exact `(from, to, relationType)` duplicates of existing relations,
  not duplicates within one call, and does not check that the endpoints exist;
- `add_observations` adds the contents the entity does not have yet and fails, writing
  nothing, when an entity is unknown (the first entity of that name gets them);
- `delete_entities` also deletes every relation touching them; deleting what is not there is
  not an error, for entities, observations and relations alike;
- `search_nodes` matches case-insensitively (`toLowerCase`) in names, types and observations;
  it and `open_nodes` return the relations with at least one endpoint among the entities found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from layered_memory.errors import EntityNotFoundError
from layered_memory.graph._format import EntityRecord, GraphSnapshot, RelationRecord
from layered_memory.graph._types import (
    Entity,
    GraphData,
    ObservationAddition,
    ObservationDeletion,
    ObservationResult,
    Relation,
)


@dataclass(frozen=True, slots=True)
class Content:
    """What a mutation leaves: the records to write (unknown lines carried over by the caller)."""

    entities: Sequence[EntityRecord]
    relations: Sequence[RelationRecord]


def create_entities(
    graph: GraphSnapshot, entities: Sequence[Entity]
) -> tuple[Content, list[Entity]]:
    """Append the entities whose name is not in the graph yet; return those."""
    new = [entity for entity in entities if not graph.positions(entity["name"])]
    records = [EntityRecord(e["name"], e["entityType"], tuple(e["observations"])) for e in new]
    return Content((*graph.entities, *records), graph.relations), [r.as_dict() for r in records]


def create_relations(
    graph: GraphSnapshot, relations: Sequence[Relation]
) -> tuple[Content, list[Relation]]:
    """Append the relations not in the graph yet (exact triple match); return those."""
    existing = graph.relation_keys()
    new = [
        RelationRecord(r["from"], r["to"], r["relationType"])
        for r in relations
        if (r["from"], r["to"], r["relationType"]) not in existing
    ]
    return Content(graph.entities, (*graph.relations, *new)), [r.as_dict() for r in new]


def add_observations(
    graph: GraphSnapshot, additions: Sequence[ObservationAddition], *, path: str
) -> tuple[Content, list[ObservationResult]]:
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
    return Content(entities, graph.relations), results


def delete_entities(graph: GraphSnapshot, names: Sequence[str]) -> Content:
    """Drop the named entities and every relation touching one of them."""
    doomed = set(names)
    return Content(
        [e for e in graph.entities if e.name not in doomed],
        [r for r in graph.relations if r.source not in doomed and r.target not in doomed],
    )


def delete_observations(graph: GraphSnapshot, deletions: Sequence[ObservationDeletion]) -> Content:
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
    return Content(entities, graph.relations)


def delete_relations(graph: GraphSnapshot, relations: Sequence[Relation]) -> Content:
    """Drop every relation equal to one given."""
    doomed = {(r["from"], r["to"], r["relationType"]) for r in relations}
    return Content(graph.entities, [r for r in graph.relations if r.key not in doomed])


def search_nodes(graph: GraphSnapshot, query: str) -> GraphData:
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


def open_nodes(graph: GraphSnapshot, names: Sequence[str]) -> GraphData:
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
