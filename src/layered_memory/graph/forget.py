"""Forgetting a subject in a knowledge graph: the entities, observations and relations naming it.

One transaction of the graph's own (`KnowledgeGraph`'s lock and atomic replace, as every
operation of the MCP server's): an entity whose name or type names the subject goes with every
relation touching it; an observation naming it leaves its entity; a relation whose ends or type
name it goes. A dry run reads the graph and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from layered_memory.graph._format import GraphSnapshot
from layered_memory.graph.knowledge_graph import KnowledgeGraph, _Content
from layered_memory.writeback.forget import SubjectMatcher

__all__ = ["GraphForgotten", "aforget_in_graph", "forget_in_graph"]


@dataclass(frozen=True, slots=True)
class GraphForgotten:
    """What forgetting did (or would do) to one graph file.

    Attributes:
        path: The graph file.
        entities: Names of the entities removed.
        observations: `(entity, observation)` pairs removed from entities that stay.
        relations: `(from, relationType, to)` of the relations removed.
    """

    path: str
    entities: tuple[str, ...] = ()
    observations: tuple[tuple[str, str], ...] = ()
    relations: tuple[tuple[str, str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entities or self.observations or self.relations)


def _forgotten(
    path: str, graph: GraphSnapshot, matcher: SubjectMatcher
) -> tuple[_Content, GraphForgotten]:
    doomed = {
        entity.name
        for entity in graph.entities
        if matcher.names(entity.name) or matcher.names(entity.entity_type)
    }
    entities = []
    observations: list[tuple[str, str]] = []
    for entity in graph.entities:
        if entity.name in doomed:
            continue
        kept = tuple(o for o in entity.observations if not matcher.names(o))
        if len(kept) != len(entity.observations):
            observations.extend((entity.name, o) for o in entity.observations if matcher.names(o))
            entities.append(entity.with_observations(kept))
        else:
            entities.append(entity)
    relations = []
    gone: list[tuple[str, str, str]] = []
    for relation in graph.relations:
        if (
            relation.source in doomed
            or relation.target in doomed
            or matcher.names(relation.source)
            or matcher.names(relation.target)
            or matcher.names(relation.relation_type)
        ):
            gone.append((relation.source, relation.relation_type, relation.target))
        else:
            relations.append(relation)
    names = tuple(entity.name for entity in graph.entities if entity.name in doomed)
    return _Content(entities, relations), GraphForgotten(
        path, names, tuple(observations), tuple(gone)
    )


def forget_in_graph(
    graph: KnowledgeGraph, matcher: SubjectMatcher, *, dry_run: bool = False
) -> GraphForgotten:
    """Remove what names the subject from `graph`, in one locked transaction.

    Args:
        graph: The knowledge graph.
        matcher: The subject.
        dry_run: Read the graph, change nothing.

    Returns:
        What was (or would be) removed.
    """
    found = _forgotten(graph.path, graph.snapshot(), matcher)[1]
    if dry_run or not found:  # nothing to remove: no write (a missing file is not created)
        return found
    return graph._transact(lambda snapshot: _forgotten(graph.path, snapshot, matcher))


async def aforget_in_graph(
    graph: KnowledgeGraph, matcher: SubjectMatcher, *, dry_run: bool = False
) -> GraphForgotten:
    """Async twin of `forget_in_graph`.

    Args:
        graph: The knowledge graph.
        matcher: The subject.
        dry_run: Change nothing.

    Returns:
        What was (or would be) removed.
    """
    found = _forgotten(graph.path, await graph.asnapshot(), matcher)[1]
    if dry_run or not found:  # nothing to remove: no write (a missing file is not created)
        return found
    return await graph._atransact(lambda snapshot: _forgotten(graph.path, snapshot, matcher))
