"""The MCP memory server's data: its value shapes, the checks its input schemas make, and its
file format (JSON Lines), parsed and written exactly as it does.

Values are plain dicts (`TypedDict`s) because that is the shape the server's tools take and
return: a result can be sent to an MCP client or compared with the server's output as is.
The checks mirror the server's zod schemas: every listed field is required and must be a
string (or a list of strings); keys the schema does not name are dropped, as zod does.

The server (`@modelcontextprotocol/server-memory`, `KnowledgeGraphManager`) reads the file as
UTF-8, splits it on `\\n`, drops lines that JavaScript's `trim()` leaves empty, `JSON.parse`s the
rest and keeps `type: "entity"` and `type: "relation"` items. It writes every entity, then every
relation, one `JSON.stringify` line each with the keys in a fixed order
(`type,name,entityType,observations` / `type,from,to,relationType`), joined by `\\n` with no
newline at the end. `JSON.stringify` keeps non-ASCII as is and escapes control characters and
lone surrogates (`\\ud800`); `canonical_line` does the same, so both write the same bytes.

Where this module does better than the server:

- A line the server would choke on (malformed JSON: the server fails every operation) or drop
  on its next write (another `type`, an entity whose fields are not strings) is kept byte for
  byte, after the relations, on every rewrite; the caller logs one warning per file version.
- Keys an entity or relation line carries beyond the server's (a newer server's or a fork's
  fields) are written back after the known ones instead of being dropped.
- Deeply nested or huge lines never crash the parser (`RecursionError` is caught: the line is
  kept as not understood).
- A number out of the double range (`1e400`) would be read as infinity and could only be
  written back as `Infinity`, which `JSON.parse` rejects: such a line is kept as not
  understood, byte for byte, so every written file stays readable by the server.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, TypedDict

from layered_memory.errors import KnowledgeGraphInputError

if TYPE_CHECKING:
    from layered_memory.graph._names import NameMatcher
    from layered_memory.graph._recall import EntityIndex


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


RELATION_FIELDS = ("from", "to", "relationType")

MAX_TEXT_CHARS = 65_536
"""Characters of one entity name, entity type, relation field or observation a write may
store, and a result may show. A longer one is refused at write with an error naming it; one
already in a file (written by another server) comes back as a marker saying how long it is.
Why: a graph is returned whole by `read_graph`, and MCP clients read a result as one line
(the official SDK's stdio client rejoins its buffer at every chunk: a 20 MB observation took
24 s to arrive)."""


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


def _strings(path: str, parameter: str, value: Any, *, capped: bool = False) -> list[str]:
    items = _items(path, parameter, value)
    check = _text if capped else _string
    return [check(path, f"{parameter}[{i}]", item) for i, item in enumerate(items)]


def _text(path: str, parameter: str, value: Any) -> str:
    """A string to store: at most `MAX_TEXT_CHARS` characters."""
    text = _string(path, parameter, value)
    if len(text) > MAX_TEXT_CHARS:
        reason = (
            f"{len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,} for one name, type "
            "or observation: store it as several shorter observations"
        )
        raise _fail(path, parameter, reason)
    return text


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
                "name": _text(path, f"{where}.name", record.get("name")),
                "entityType": _text(path, f"{where}.entityType", record.get("entityType")),
                "observations": _strings(
                    path, f"{where}.observations", record.get("observations"), capped=True
                ),
            }
        )
    return checked


def check_relations(path: str, value: Any, *, capped: bool = True) -> list[Relation]:
    """`relations` of `create_relations` / `delete_relations`, checked and copied (`capped`:
    each field at most `MAX_TEXT_CHARS`, for what is stored; a deletion names what is there)."""
    checked: list[Relation] = []
    check = _text if capped else _string
    for i, item in enumerate(_items(path, "relations", value)):
        where = f"relations[{i}]"
        record = _record(path, where, item)
        relation: dict[str, str] = {
            key: check(path, f"{where}.{key}", record.get(key)) for key in RELATION_FIELDS
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
                "contents": _strings(
                    path, f"{where}.contents", record.get("contents"), capped=True
                ),
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


# --- the file ------------------------------------------------------------------------

# ECMAScript `String.prototype.trim`: WhiteSpace (TAB, VT, FF, ZWNBSP, every Zs) and
# LineTerminator (LF, CR, LS, PS). Python's `str.strip()` differs (it strips \x1c-\x1f, \x85
# and keeps \ufeff), so the set is spelled out.
_JS_WHITESPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_ENTITY_KEYS = frozenset({"type", "name", "entityType", "observations"})
_RELATION_KEYS = frozenset({"type", "from", "to", "relationType"})


def _reject_constant(name: str) -> Any:
    # Python accepts NaN / Infinity; JSON.parse does not, so neither do we.
    raise ValueError(name)


def _finite_float(text: str) -> float:
    # `1e400` is valid JSON that Python reads as inf, which could only be written back as
    # `Infinity`: a line JSON.parse rejects, making the whole file unreadable to the server.
    # Such a line is not understood here either, so it is kept byte for byte.
    value = float(text)
    if not math.isfinite(value):
        msg = f"number out of range: {text[:40]}"
        raise ValueError(msg)
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps_compact(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII kept, lone surrogates escaped."""
    # allow_nan=False: a non-finite number cannot be parsed in (see `_finite_float`); should
    # one reach a record anyway, failing the write beats a file JSON.parse rejects.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # A Python str holds a lone surrogate only where the JSON had one (a valid pair decodes to
    # one code point); written raw it could not even be encoded as UTF-8.
    return _LONE_SURROGATE_RE.sub(_escape_surrogate, text) if _has_surrogate(text) else text


def dumps_pretty(value: Any) -> str:
    """`JSON.stringify(value, null, 2)`: the server's tool-result text."""
    text = _graph_pretty(value)
    if text is None:
        text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    return _LONE_SURROGATE_RE.sub(_escape_surrogate, text) if _has_surrogate(text) else text


# `json.dumps(indent=2)` runs the pure-Python encoder (the C one does no indenting): 105 ms
# for `read_graph` of 10,000 entities / 30,000 relations. The graph's own shapes are written
# here with the C string encoder instead (32 ms, the same bytes); anything else goes to
# `json.dumps`. `make bench` scenario 14 (MCP `read_graph`).
_ENTITY_ORDER = ["name", "entityType", "observations"]
_RELATION_ORDER = ["from", "to", "relationType"]
_GRAPH_ORDER = ["entities", "relations"]


def _pretty_strings(items: Any, indent: str) -> str:
    if not items:
        return "[]"
    inner = f",\n{indent}  ".join(map(encode_basestring, items))
    return f"[\n{indent}  {inner}\n{indent}]"


def _pretty_entity(entity: Any) -> str:
    if type(entity) is not dict or list(entity) != _ENTITY_ORDER:
        raise TypeError
    observations = entity["observations"]
    if type(observations) is not list:
        raise TypeError
    return (
        f'    {{\n      "name": {encode_basestring(entity["name"])},\n      "entityType": '
        f'{encode_basestring(entity["entityType"])},\n      "observations": '
        f"{_pretty_strings(observations, '      ')}\n    }}"
    )


def _pretty_relation(relation: Any) -> str:
    if type(relation) is not dict or list(relation) != _RELATION_ORDER:
        raise TypeError
    return (
        f'    {{\n      "from": {encode_basestring(relation["from"])},\n      "to": '
        f'{encode_basestring(relation["to"])},\n      "relationType": '
        f"{encode_basestring(relation['relationType'])}\n    }}"
    )


def _pretty_items(items: list[str]) -> str:
    return "[]" if not items else "[\n" + ",\n".join(items) + "\n  ]"


def _graph_pretty(value: Any) -> str | None:
    """`value` written as `JSON.stringify(value, null, 2)` when it is `GraphData` (None:
    another shape)."""
    if type(value) is not dict or list(value) != _GRAPH_ORDER:
        return None
    entities, relations = value["entities"], value["relations"]
    if type(entities) is not list or type(relations) is not list:
        return None
    try:
        # `encode_basestring` raises TypeError on anything but a str, as the checks above do.
        shown_entities = _pretty_items([_pretty_entity(e) for e in entities])
        shown_relations = _pretty_items([_pretty_relation(r) for r in relations])
    except TypeError:
        return None
    return f'{{\n  "entities": {shown_entities},\n  "relations": {shown_relations}\n}}'


def _has_surrogate(text: str) -> bool:
    # Fast path: pure-ASCII or surrogate-free text (the usual case) skips the regex.
    return not text.isascii() and _LONE_SURROGATE_RE.search(text) is not None


class EntityRecord:
    """One entity line, parsed. Immutable by convention: operations build new records.

    Attributes:
        name: The entity's name (its identity).
        entity_type: Its `entityType`.
        observations: Its observations, in file order.
        extra: Keys beyond the server's, in file order, written back after the known ones.
    """

    __slots__ = ("_line", "entity_type", "extra", "name", "observations")

    def __init__(
        self,
        name: str,
        entity_type: str,
        observations: tuple[str, ...],
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self.name = name
        self.entity_type = entity_type
        self.observations = observations
        self.extra = extra
        self._line: str | None = None

    def line(self) -> str:
        """The line the server would write for this entity (computed once)."""
        if self._line is None:
            record: dict[str, Any] = {
                "type": "entity",
                "name": self.name,
                "entityType": self.entity_type,
                "observations": list(self.observations),
            }
            record.update(self.extra)
            self._line = dumps_compact(record)
        return self._line

    def as_dict(self) -> Entity:
        """A fresh dict in the server's shape (safe for the caller to change)."""
        return {
            "name": self.name,
            "entityType": self.entity_type,
            "observations": list(self.observations),
        }

    def with_observations(self, observations: tuple[str, ...]) -> EntityRecord:
        """A copy with other observations."""
        return EntityRecord(self.name, self.entity_type, observations, self.extra)


class RelationRecord:
    """One relation line, parsed (immutable by convention)."""

    __slots__ = ("_line", "extra", "relation_type", "source", "target")

    def __init__(
        self,
        source: str,
        target: str,
        relation_type: str,
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self.source = source
        self.target = target
        self.relation_type = relation_type
        self.extra = extra
        self._line: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """`(from, to, relationType)`: what makes two relations the same."""
        return (self.source, self.target, self.relation_type)

    def line(self) -> str:
        """The line the server would write for this relation (computed once)."""
        if self._line is None:
            record: dict[str, Any] = {
                "type": "relation",
                "from": self.source,
                "to": self.target,
                "relationType": self.relation_type,
            }
            record.update(self.extra)
            self._line = dumps_compact(record)
        return self._line

    def as_dict(self) -> Relation:
        """A fresh dict in the server's shape."""
        return {"from": self.source, "to": self.target, "relationType": self.relation_type}


UNKNOWN_LINES_KEPT = 5
"""Line numbers of unknown lines a snapshot keeps: enough to find them, bounded however many."""


class GraphSnapshot:
    """One version of a graph file, parsed; indexes are built on first use and kept.

    Snapshots are shared by every reader of the same content (they are cached by digest), so
    nothing here changes after construction except the lazily built indexes, which are pure
    functions of the content.

    Attributes:
        entities: Entity records in file order (duplicates of a name kept, as the server does).
        relations: Relation records in file order.
        unknown: Lines not understood, byte for byte (as decoded text), in file order.
        unknown_lines: The 1-based line numbers of the first `UNKNOWN_LINES_KEPT` of them in
            the text (what a warning names, so they can be found): where `parse` found them,
            else where `text()` puts them (after the entities and relations).
        digest: Content digest of the text this snapshot was parsed from or serializes to.
    """

    __slots__ = (
        "_adjacency",
        "_haystacks",
        "_matcher",
        "_positions",
        "_recall",
        "_relation_keys",
        "digest",
        "entities",
        "relations",
        "unknown",
        "unknown_lines",
    )

    def __init__(
        self,
        entities: Sequence[EntityRecord],
        relations: Sequence[RelationRecord],
        unknown: Sequence[str],
        digest: str,
        unknown_lines: Sequence[int] | None = None,
    ) -> None:
        self.entities = tuple(entities)
        self.relations = tuple(relations)
        self.unknown = tuple(unknown)
        if unknown_lines is None:
            after = len(self.entities) + len(self.relations)
            unknown_lines = range(after + 1, after + 1 + len(self.unknown))
        self.unknown_lines = tuple(unknown_lines[:UNKNOWN_LINES_KEPT])
        self.digest = digest
        positions: dict[str, list[int]] = {}
        for index, entity in enumerate(self.entities):
            positions.setdefault(entity.name, []).append(index)
        self._positions = positions
        self._relation_keys: frozenset[tuple[str, str, str]] | None = None
        self._adjacency: dict[str, list[int]] | None = None
        self._haystacks: list[str] | None = None
        self._matcher: NameMatcher | None = None
        self._recall: EntityIndex | None = None

    # --- lookups ------------------------------------------------------------------------

    def positions(self, name: str) -> Sequence[int]:
        """Indexes of the entities named `name` (usually one), in file order."""
        return self._positions.get(name, ())

    def first(self, name: str) -> EntityRecord | None:
        """The first entity named `name` (the one the server's `find` returns)."""
        found = self._positions.get(name)
        return self.entities[found[0]] if found else None

    @property
    def names(self) -> Iterable[str]:
        """Every distinct entity name."""
        return self._positions.keys()

    def relation_keys(self) -> frozenset[tuple[str, str, str]]:
        """Every `(from, to, relationType)` present."""
        if self._relation_keys is None:
            self._relation_keys = frozenset(relation.key for relation in self.relations)
        return self._relation_keys

    def adjacency(self) -> dict[str, list[int]]:
        """Entity name -> indexes of the relations starting or ending there, in file order."""
        if self._adjacency is None:
            adjacency: dict[str, list[int]] = {}
            for index, relation in enumerate(self.relations):
                adjacency.setdefault(relation.source, []).append(index)
                if relation.target != relation.source:
                    adjacency.setdefault(relation.target, []).append(index)
            self._adjacency = adjacency
        return self._adjacency

    def relations_touching(self, names: Iterable[str]) -> list[RelationRecord]:
        """Relations with an endpoint in `names`, in file order (each once)."""
        adjacency = self.adjacency()
        indexes: set[int] = set()
        for name in names:
            indexes.update(adjacency.get(name, ()))
        return [self.relations[index] for index in sorted(indexes)]

    def haystacks(self) -> list[str]:
        """Per entity: name, type and observations lowercased, `\\x00`-separated (search)."""
        if self._haystacks is None:
            self._haystacks = [
                "\x00".join((e.name, e.entity_type, *e.observations)).lower() for e in self.entities
            ]
        return self._haystacks

    def matcher(self) -> NameMatcher:
        """The index finding entity names in free text (built on first use)."""
        if self._matcher is None:
            from layered_memory.graph._names import NameMatcher

            self._matcher = NameMatcher(self.names)
        return self._matcher

    def recall_index(self) -> EntityIndex:
        """The recall engine's index of the entities by name, type and observations (built on
        first use, so once per content digest; needs numpy)."""
        if self._recall is None:
            from layered_memory.graph._recall import EntityIndex

            texts = []
            for name, positions in self._positions.items():
                parts = [name]
                for index in positions:
                    entity = self.entities[index]
                    parts += (entity.entity_type, *entity.observations)
                texts.append("\n".join(parts))
            self._recall = EntityIndex(list(self._positions), texts)
        return self._recall

    # --- whole-graph views ---------------------------------------------------------------

    def data(self) -> GraphData:
        """`read_graph`'s result: every entity and relation, as fresh dicts."""
        return {
            "entities": [entity.as_dict() for entity in self.entities],
            "relations": [relation.as_dict() for relation in self.relations],
        }

    def text(self) -> str:
        """The file as the server would write it, plus the lines it would not understand."""
        lines = [entity.line() for entity in self.entities]
        lines.extend(relation.line() for relation in self.relations)
        lines.extend(self.unknown)
        return "\n".join(lines)


def digest_of(data: bytes) -> str:
    """The content digest snapshots are cached under."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def parse(text: str, digest: str) -> GraphSnapshot:
    """Parse a graph file's text (never raises: what is not understood goes to `unknown`)."""
    entities: list[EntityRecord] = []
    relations: list[RelationRecord] = []
    unknown: list[str] = []
    unknown_lines: list[int] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip(_JS_WHITESPACE):
            continue  # the server drops blank lines too
        record = _parse_line(raw)
        if isinstance(record, EntityRecord):
            entities.append(record)
        elif isinstance(record, RelationRecord):
            relations.append(record)
        else:
            unknown.append(raw)
            if len(unknown_lines) < UNKNOWN_LINES_KEPT:
                unknown_lines.append(number)
    return GraphSnapshot(entities, relations, unknown, digest, unknown_lines)


def _parse_line(raw: str) -> EntityRecord | RelationRecord | None:
    try:
        item = _DECODER.decode(raw)
    except (ValueError, RecursionError):
        # RecursionError: nesting deeper than the interpreter's limit (a hostile line).
        return None
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "entity":
        name, entity_type, observations = (
            item.get("name"),
            item.get("entityType"),
            item.get("observations"),
        )
        if (
            isinstance(name, str)
            and isinstance(entity_type, str)
            and isinstance(observations, list)
            and all(isinstance(o, str) for o in observations)
        ):
            extra = tuple((k, v) for k, v in item.items() if k not in _ENTITY_KEYS)
            return EntityRecord(name, entity_type, tuple(observations), extra)
        return None
    if kind == "relation":
        source, target, relation_type = item.get("from"), item.get("to"), item.get("relationType")
        if isinstance(source, str) and isinstance(target, str) and isinstance(relation_type, str):
            extra = tuple((k, v) for k, v in item.items() if k not in _RELATION_KEYS)
            return RelationRecord(source, target, relation_type, extra)
    return None
