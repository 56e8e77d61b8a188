"""The MCP memory server's value shapes, and the argument checks its input schemas make.

Values are plain dicts (`TypedDict`s) because that is the shape the server's tools take and
return: a result can be sent to an MCP client or compared with the server's output as is.
The checks mirror the server's zod schemas: every listed field is required and must be a
string (or a list of strings); keys the schema does not name are dropped, as zod does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from layered_memory.errors import KnowledgeGraphInputError


class Entity(TypedDict):
    """A node: a unique name, a type, and atomic facts about it."""

    name: str
    entityType: str
    observations: list[str]


# `from` is a Python keyword, so only the functional syntax can declare it.
Relation = TypedDict("Relation", {"from": str, "to": str, "relationType": str})
"""A directed edge, in active voice: `from` `relationType` `to`."""


class ObservationAddition(TypedDict):
    """One item of `add_observations`: facts to add to one entity."""

    entityName: str
    contents: list[str]


class ObservationResult(TypedDict):
    """One item of `add_observations`' result: what was actually added."""

    entityName: str
    addedObservations: list[str]


class ObservationDeletion(TypedDict):
    """One item of `delete_observations`: facts to remove from one entity."""

    entityName: str
    observations: list[str]


class GraphData(TypedDict):
    """`read_graph`, `search_nodes` and `open_nodes` results."""

    entities: list[Entity]
    relations: list[Relation]


ENTITY_FIELDS = ("name", "entityType", "observations")
RELATION_FIELDS = ("from", "to", "relationType")


def _fail(path: str, parameter: str, reason: str) -> KnowledgeGraphInputError:
    return KnowledgeGraphInputError(path, parameter, reason)


def _items(path: str, parameter: str, value: Any) -> Sequence[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise _fail(path, parameter, f"expected a list, got {type(value).__name__}")
    return value


def _string(path: str, parameter: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(path, parameter, f"expected a string, got {type(value).__name__}")
    return value


def _strings(path: str, parameter: str, value: Any) -> list[str]:
    items = _items(path, parameter, value)
    return [_string(path, f"{parameter}[{i}]", item) for i, item in enumerate(items)]


def _record(path: str, parameter: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, parameter, f"expected an object, got {type(value).__name__}")
    return value


def check_entities(path: str, value: Any) -> list[Entity]:
    """`entities` of `create_entities`, checked and copied (unknown keys dropped)."""
    checked: list[Entity] = []
    for i, item in enumerate(_items(path, "entities", value)):
        where = f"entities[{i}]"
        record = _record(path, where, item)
        checked.append(
            {
                "name": _string(path, f"{where}.name", record.get("name")),
                "entityType": _string(path, f"{where}.entityType", record.get("entityType")),
                "observations": _strings(path, f"{where}.observations", record.get("observations")),
            }
        )
    return checked


def check_relations(path: str, value: Any) -> list[Relation]:
    """`relations` of `create_relations` / `delete_relations`, checked and copied."""
    checked: list[Relation] = []
    for i, item in enumerate(_items(path, "relations", value)):
        where = f"relations[{i}]"
        record = _record(path, where, item)
        relation: dict[str, str] = {
            key: _string(path, f"{where}.{key}", record.get(key)) for key in RELATION_FIELDS
        }
        checked.append(relation)  # type: ignore[arg-type]
    return checked


def check_additions(path: str, value: Any) -> list[ObservationAddition]:
    """`observations` of `add_observations`, checked and copied."""
    checked: list[ObservationAddition] = []
    for i, item in enumerate(_items(path, "observations", value)):
        where = f"observations[{i}]"
        record = _record(path, where, item)
        checked.append(
            {
                "entityName": _string(path, f"{where}.entityName", record.get("entityName")),
                "contents": _strings(path, f"{where}.contents", record.get("contents")),
            }
        )
    return checked


def check_deletions(path: str, value: Any) -> list[ObservationDeletion]:
    """`deletions` of `delete_observations`, checked and copied."""
    checked: list[ObservationDeletion] = []
    for i, item in enumerate(_items(path, "deletions", value)):
        where = f"deletions[{i}]"
        record = _record(path, where, item)
        checked.append(
            {
                "entityName": _string(path, f"{where}.entityName", record.get("entityName")),
                "observations": _strings(path, f"{where}.observations", record.get("observations")),
            }
        )
    return checked


def check_names(path: str, parameter: str, value: Any) -> list[str]:
    """A list of entity names (`entityNames`, `names`), checked and copied."""
    return _strings(path, parameter, value)


def check_query(path: str, value: Any) -> str:
    """The `query` of `search_nodes`."""
    return _string(path, "query", value)
