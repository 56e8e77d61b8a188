"""Secrets kept out of the graph file, and the names given later still finding what was stored.

Every string a write stores goes through the package's redaction (`writeback.redaction`):
entity names, types and observations (`create_entities`), both endpoints and the type of a
relation (`create_relations`), added contents (`add_observations`). Redaction is a pure
function of the text, so a relation whose endpoint holds a secret points at the entity created
with the same secret in its name: both are stored under the same redacted name.

Names that pick records already stored (to add to, delete or open) match both the name as
given and its redacted form: the agent names an entity as it first wrote it, secret included,
and a file written by the MCP server (or before redaction) may hold the secret verbatim, which
the agent must still be able to delete. Nothing is logged for those: nothing is stored.

A text without a secret comes back unchanged, so a file without secrets is written byte for
byte as the server writes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from layered_memory._logs import get_logger
from layered_memory.graph._format import GraphSnapshot
from layered_memory.graph._types import (
    Entity,
    ObservationAddition,
    ObservationDeletion,
    Relation,
)
from layered_memory.writeback.redaction import redact

logger = get_logger(__name__)


def stored(text: str, path: str, what: str) -> str:
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


def entities(items: list[Entity], path: str) -> list[Entity]:
    """`create_entities`' checked entities, redacted in place (they are the checks' copies)."""
    for item in items:
        item["name"] = stored(item["name"], path, "an entity name")
        item["entityType"] = stored(item["entityType"], path, "an entity type")
        item["observations"] = [
            stored(text, path, "an observation") for text in item["observations"]
        ]
    return items


def relations(items: list[Relation], path: str) -> list[Relation]:
    """`create_relations`' checked relations, redacted in place."""
    for item in items:
        item["from"] = stored(item["from"], path, "a relation's source")
        item["to"] = stored(item["to"], path, "a relation's target")
        item["relationType"] = stored(item["relationType"], path, "a relation type")
    return items


def additions(items: list[ObservationAddition], path: str) -> list[ObservationAddition]:
    """`add_observations`' checked items with their contents redacted in place (the entity
    name is matched in the transaction, `resolve_additions`)."""
    for item in items:
        item["contents"] = [stored(text, path, "an observation") for text in item["contents"]]
    return items


def _redacted(text: str) -> str:
    return redact(text)[0]


def either_form(names: Sequence[str]) -> list[str]:
    """`names` and the redacted form of each that has one (names to delete or open)."""
    found = list(names)
    found.extend(clean for clean in map(_redacted, names) if clean not in names)
    return found


def relation_forms(items: list[Relation]) -> list[Relation]:
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


def deletion_forms(items: list[ObservationDeletion]) -> list[ObservationDeletion]:
    """`delete_observations`' items, each observation also in its redacted form, and each item
    also under the entity's redacted name when that differs."""
    found: list[ObservationDeletion] = []
    for item in items:
        observations = either_form(item["observations"])
        found.append({"entityName": item["entityName"], "observations": observations})
        clean = _redacted(item["entityName"])
        if clean != item["entityName"]:
            found.append({"entityName": clean, "observations": observations})
    return found


def resolve_additions(
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
