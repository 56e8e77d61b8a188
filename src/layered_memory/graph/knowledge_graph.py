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
redaction (`safety.redaction`): entity names, types and observations (`create_entities`),
both endpoints and the type of a relation (`create_relations`), added contents
(`add_observations`). Redaction is a pure function of the text, so a relation whose endpoint
holds a secret points at the entity created with the same secret in its name: both are stored
under the same redacted name. Names that pick records already stored (to add to, delete or
open) match both the name as given and its redacted form: the agent names an entity as it
first wrote it, secret included, and a file written by the MCP server (or before redaction)
may hold the secret verbatim, which the agent must still be able to delete. Nothing is logged
for those: nothing is stored. A text without a secret comes back unchanged, so a file without
secrets is written byte for byte as the server writes it.

Reading a graph file through its backend (the helpers above the class) never parses the same
content twice.

Parsed snapshots are cached by content digest, shared by the process, so a cache hit is by
definition the content just read: it can never be stale. The cache is bounded by the total size
of the files it holds (`SNAPSHOT_CACHE_BYTES`), not by a count, so an agent per user, each
with its own graph file, keeps every current version parsed; a version a write replaced is the
first to go. What a read still costs depends on the backend:

- a file on local disk (`FilesystemBackend`, also behind a `CompositeBackend` route) is first
  `lstat`ed: while its signature (mtime, ctime, size, inode, device) matches the one its
  content was last read under, the file is not read again. As git does with "racily clean"
  entries, a signature taken within `RACY_WINDOW_NS` of a write is not trusted.
- any other backend downloads the file; only hashing it is repeated, never parsing.

Memory stays bounded: a file over `max_bytes` is refused before it is read (on local disk) or
right after (elsewhere), with an error naming the file, its size and the limit.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.backends.protocol import FILE_NOT_FOUND, BackendProtocol

from layered_memory._logs import get_logger
from layered_memory.core.disk_cache import RACY_WINDOW_NS, disk_path, now_ns
from layered_memory.core.files import WriteStrategy, strategy_for
from layered_memory.core.internals import final_route
from layered_memory.core.validation import check_bool
from layered_memory.errors import EntityNotFoundError, KnowledgeGraphError
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
    parse,
)
from layered_memory.safety.redaction import redact

logger = get_logger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Largest graph file read (64 MiB: a few hundred thousand entities)."""

SNAPSHOT_CACHE_BYTES = 64 * 1024 * 1024
"""Total size (as file bytes) of the parsed versions kept per process. A parsed, indexed
snapshot takes about 6 times its file size in memory. The version used last is always kept,
even alone over this bound, so a file up to `max_bytes` is never parsed twice in a row."""

EMPTY_DIGEST = digest_of(b"")

Signature = tuple[int, int, int, int, int]

_SIGNATURES_KEEP = 4096


class _Snapshots:
    """Parsed versions by digest, least recently used first, with their files' total size."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[GraphSnapshot, int]] = OrderedDict()
        self.total_bytes = 0


_lock = threading.Lock()
_snapshots = _Snapshots()
_signatures: OrderedDict[str, tuple[Signature, str]] = OrderedDict()
_warned: OrderedDict[tuple[str, int], None] = OrderedDict()
_WARNED_KEEP = 256


def cached(digest: str) -> GraphSnapshot | None:
    """The parsed snapshot of `digest`, if this process still has it."""
    with _lock:
        found = _snapshots.entries.get(digest)
        if found is None:
            return None
        _snapshots.entries.move_to_end(digest)
        return found[0]


def remember(snapshot: GraphSnapshot, size: int, *, replaces: str | None = None) -> None:
    """Keep `snapshot` (of a `size`-byte file) for later readers of the same content.

    Args:
        snapshot: The parsed version.
        size: Its file's size in bytes: what it counts against `SNAPSHOT_CACHE_BYTES`.
        replaces: The digest of the version a write just replaced: it goes first when room
            is needed (a reader still asking for it gets it parsed again, never wrongly).
    """
    with _lock:
        entries = _snapshots.entries
        previous = entries.pop(snapshot.digest, None)
        if previous is not None:
            _snapshots.total_bytes -= previous[1]
        entries[snapshot.digest] = (snapshot, size)
        _snapshots.total_bytes += size
        if replaces is not None and replaces != snapshot.digest and replaces in entries:
            entries.move_to_end(replaces, last=False)
        while _snapshots.total_bytes > SNAPSHOT_CACHE_BYTES and len(entries) > 1:
            _digest, (_snapshot, evicted) = entries.popitem(last=False)
            _snapshots.total_bytes -= evicted


def clear_caches() -> None:
    """Forget every parsed snapshot and stat signature (benchmarks of a cold process)."""
    with _lock:
        _snapshots.entries.clear()
        _snapshots.total_bytes = 0
        _signatures.clear()


def snapshot_of_text(text: str | None, path: str, *, max_bytes: int) -> GraphSnapshot:
    """The snapshot of a file's text (None: no file), parsed only if not cached.

    Raises:
        KnowledgeGraphError: The text is over `max_bytes` (as UTF-8).
    """
    if text is None or not text:
        return snapshot_of_bytes(b"", path, text="")
    data = text.encode("utf-8")
    check_size(path, len(data), max_bytes)
    return snapshot_of_bytes(data, path, text=text)


def snapshot_of_bytes(
    data: bytes, path: str, *, text: str | None = None, digest: str | None = None
) -> GraphSnapshot:
    """The snapshot of a file's bytes, parsed only if not cached; warns about unknown lines."""
    digest = digest or digest_of(data)
    found = cached(digest)
    if found is not None:
        return found
    if text is None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Readable anyway (as the server reads it); a write refuses to touch the file.
            logger.warning(
                "knowledge graph %s is not valid UTF-8 (%s); reading it with replacement "
                "characters, and writes will refuse to change it until it is fixed",
                path,
                exc.reason,
            )
            text = data.decode("utf-8", errors="replace")
    snapshot = parse(text, digest)
    if snapshot.unknown:
        _warn_unknown(path, snapshot)
    remember(snapshot, len(data))
    return snapshot


def _warn_unknown(path: str, snapshot: GraphSnapshot) -> None:
    # One warning per file and set of unknown lines, however often the file is rewritten.
    unknown = snapshot.unknown
    key = (path, hash(unknown))
    with _lock:
        if key in _warned:
            return
        _warned[key] = None
        while len(_warned) > _WARNED_KEEP:
            _warned.popitem(last=False)
    # Line numbers, never the lines: they may hold anything.
    where = ", ".join(map(str, snapshot.unknown_lines))
    if len(unknown) > len(snapshot.unknown_lines):
        where += ", ..."
    logger.warning(
        "knowledge graph %s has %d line(s) that are not entities or relations of the MCP "
        "memory format (another type, or malformed JSON), at line %s; they are kept unchanged "
        "after the relations on every write",
        path,
        len(unknown),
        where,
    )


@dataclass(frozen=True, slots=True)
class LocalFile:
    """Where a backend path lives on local disk."""

    real_path: str


def local_file(backend: BackendProtocol, path: str) -> LocalFile | None:
    """The local file behind `path` when it is on a `FilesystemBackend` (else None)."""
    target, key = final_route(backend, path)
    if not isinstance(target, FilesystemBackend):
        return None
    return LocalFile(disk_path(str(target.cwd), key, virtual=target.virtual_mode))


def check_size(path: str, size: int, max_bytes: int) -> None:
    """Refuse a file too large to parse within bounded memory."""
    if size > max_bytes:
        msg = (
            f"file is {size:,} bytes, over max_bytes={max_bytes:,}; split the graph or raise "
            "max_bytes"
        )
        raise KnowledgeGraphError(path, msg)


def local_size(local: LocalFile | None) -> int | None:
    """The size of a local file (None: not local, or not there)."""
    if local is None:
        return None
    try:
        return os.stat(local.real_path).st_size
    except OSError:
        return None


def _signature(real_path: str) -> Signature | None:
    try:
        info = os.lstat(real_path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None  # a symlink or device always goes through the backend and its checks
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


def unchanged_local(local: LocalFile | None) -> GraphSnapshot | None:
    """The cached snapshot of a local file whose stat signature has not changed."""
    if local is None:
        return None
    signature = _signature(local.real_path)
    with _lock:
        entry = _signatures.get(local.real_path)
    if signature is None or entry is None or entry[0] != signature:
        return None
    return cached(entry[1])


def changed_since(local: LocalFile | None, digest: str | None) -> bool:
    """Whether a local file's stat signature shows content other than `digest` (one `lstat`).

    False when it cannot tell: not local, not a regular file, or last read within the racy
    window (those are read again at the next run, or after a tool that may have changed them).
    """
    if local is None or digest is None:
        return False  # not local, or unreadable at the last load (retried at the next run)
    signature = _signature(local.real_path)
    if signature is None:
        # Gone (a missing file reads as empty), or a symlink or device: not judged by stat.
        missing = not os.path.lexists(local.real_path)
        return missing and digest != EMPTY_DIGEST
    with _lock:
        entry = _signatures.get(local.real_path)
    if entry is None:
        return False
    return entry[0] != signature or entry[1] != digest


def before_read(local: LocalFile | None) -> tuple[Signature | None, int]:
    """The signature to file a read under, taken before the read (a racing write shows)."""
    if local is None:
        return None, 0
    return _signature(local.real_path), now_ns()


def after_read(
    local: LocalFile | None, signature: Signature | None, started_ns: int, digest: str
) -> None:
    """Remember which content a local file's signature stands for, when it can be trusted."""
    if local is None:
        return
    with _lock:
        if signature is not None and started_ns - signature[0] > RACY_WINDOW_NS:
            _signatures[local.real_path] = (signature, digest)
            _signatures.move_to_end(local.real_path)
            while len(_signatures) > _SIGNATURES_KEEP:
                _signatures.popitem(last=False)
        else:
            _signatures.pop(local.real_path, None)


def download_response(path: str, responses: Sequence[Any], max_bytes: int) -> bytes | None:
    """The bytes of a one-file download (None: no such file); errors raise."""
    response = responses[0]
    if response.error == FILE_NOT_FOUND:
        return None
    if response.error is not None or response.content is None:
        raise KnowledgeGraphError(path, f"cannot read: {response.error}")
    data: bytes = response.content
    check_size(path, len(data), max_bytes)
    return data


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
        max_bytes: int = DEFAULT_MAX_BYTES,
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
        self.redact_secrets = check_bool(redact_secrets, parameter="redact_secrets")
        self._local = local_file(backend, path)
        self._strategy: WriteStrategy | None = None

    def __repr__(self) -> str:
        return f"KnowledgeGraph({type(self.backend).__name__}, path={self.path!r})"

    # --- reading ------------------------------------------------------------------------

    def snapshot(self) -> GraphSnapshot:
        """The current content, parsed (cached by digest: an unchanged file is not re-parsed).

        Returns:
            The parsed graph and its content digest.
        """
        found, signature, started = self._before_download()
        if found is not None:
            return found
        data = download_response(
            self.path, self.backend.download_files([self.path]), self.max_bytes
        )
        return self._snapshot_from(data, signature, started)

    def _before_download(self) -> tuple[GraphSnapshot | None, Signature | None, int]:
        """A local file's cached snapshot (unchanged signature), else its size checked and the
        signature to file the read under: the disk is stat'ed, nothing is read."""
        found = unchanged_local(self._local)
        if found is not None:
            return found, None, 0
        self._check_local_size()
        signature, started = before_read(self._local)
        return None, signature, started

    async def asnapshot(self) -> GraphSnapshot:
        """Async twin of `snapshot`."""
        # A local file is stat'ed (never on the event loop); any other has nothing to stat.
        if self._local is None:
            found, signature, started = self._before_download()
        else:
            found, signature, started = await asyncio.to_thread(self._before_download)
        if found is not None:
            return found
        data = download_response(
            self.path, await self.backend.adownload_files([self.path]), self.max_bytes
        )
        if data is not None and len(data) > _OFF_LOOP_BYTES:
            # Parsing a large file takes a while: keep the event loop free meanwhile.
            return await asyncio.to_thread(self._snapshot_from, data, signature, started)
        return self._snapshot_from(data, signature, started)

    def _snapshot_from(self, data: bytes | None, signature: Any, started: int) -> GraphSnapshot:
        snapshot = snapshot_of_bytes(data or b"", self.path)
        after_read(self._local, signature, started, snapshot.digest)
        return snapshot

    def _check_local_size(self) -> None:
        size = local_size(self._local)
        if size is not None:
            check_size(self.path, size, self.max_bytes)

    async def _acheck_local_size(self) -> None:
        if self._local is not None:  # a stat of the disk: never on the event loop
            await asyncio.to_thread(self._check_local_size)

    def read_graph(self) -> GraphData:
        """Every entity and relation.

        Returns:
            The whole graph, as the MCP server's `read_graph` answers.
        """
        return self.snapshot().data()

    async def aread_graph(self) -> GraphData:
        """Async twin of `read_graph`."""
        return (await self.asnapshot()).data()

    def search_nodes(self, query: str) -> GraphData:
        """Entities whose name, type or an observation contains `query` (any case), and the
        relations touching them.

        Args:
            query: The text to look for.

        Returns:
            The matching entities and the relations touching them.
        """
        return _search_nodes(self.snapshot(), check_query(self.path, query))

    async def asearch_nodes(self, query: str) -> GraphData:
        """Async twin of `search_nodes`."""
        checked = check_query(self.path, query)
        return _search_nodes(await self.asnapshot(), checked)

    def open_nodes(self, names: list[str]) -> GraphData:
        """The named entities and the relations touching them.

        Args:
            names: Entity names (unknown ones are ignored).

        Returns:
            The entities found and the relations touching them.
        """
        return _open_nodes(self.snapshot(), self._lookup(check_names(self.path, "names", names)))

    async def aopen_nodes(self, names: list[str]) -> GraphData:
        """Async twin of `open_nodes`."""
        checked = self._lookup(check_names(self.path, "names", names))
        return _open_nodes(await self.asnapshot(), checked)

    # --- writing ------------------------------------------------------------------------

    def create_entities(self, entities: list[Entity]) -> list[Entity]:
        """Add entities whose name is new.

        Args:
            entities: Entities to add (`name`, `entityType`, `observations`).

        Returns:
            The ones added (a name already present is skipped).
        """
        checked = self._redact_entities(check_entities(self.path, entities))
        return self._transact(lambda graph: _create_entities(graph, checked))

    async def acreate_entities(self, entities: list[Entity]) -> list[Entity]:
        """Async twin of `create_entities`."""
        checked = self._redact_entities(check_entities(self.path, entities))
        return await self._atransact(lambda graph: _create_entities(graph, checked))

    def create_relations(self, relations: list[Relation]) -> list[Relation]:
        """Add relations (active voice: `from` `relationType` `to`) not present yet.

        Args:
            relations: Relations to add.

        Returns:
            The ones added (one already present is skipped).
        """
        checked = self._redact_relations(check_relations(self.path, relations))
        return self._transact(lambda graph: _create_relations(graph, checked))

    async def acreate_relations(self, relations: list[Relation]) -> list[Relation]:
        """Async twin of `create_relations`."""
        checked = self._redact_relations(check_relations(self.path, relations))
        return await self._atransact(lambda graph: _create_relations(graph, checked))

    def add_observations(self, observations: list[ObservationAddition]) -> list[ObservationResult]:
        """Add facts to existing entities.

        Args:
            observations: Per entity (`entityName`), the observations (`contents`) to add.

        Returns:
            Per entity, the observations it actually gained (duplicates are skipped).

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
        """Delete entities and every relation touching them (unknown names are ignored).

        Args:
            entity_names: The entities to delete.
        """
        checked = self._lookup(check_names(self.path, "entityNames", entity_names))
        self._transact(lambda graph: (_delete_entities(graph, checked), None))

    async def adelete_entities(self, entity_names: list[str]) -> None:
        """Async twin of `delete_entities`."""
        checked = self._lookup(check_names(self.path, "entityNames", entity_names))
        await self._atransact(lambda graph: (_delete_entities(graph, checked), None))

    def delete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Remove observations from entities (unknown entities are ignored).

        Args:
            deletions: Per entity (`entityName`), the observations to remove.
        """
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        self._transact(lambda graph: (_delete_observations(graph, checked), None))

    async def adelete_observations(self, deletions: list[ObservationDeletion]) -> None:
        """Async twin of `delete_observations`."""
        checked = self._lookup_deletions(check_deletions(self.path, deletions))
        await self._atransact(lambda graph: (_delete_observations(graph, checked), None))

    def delete_relations(self, relations: list[Relation]) -> None:
        """Remove relations (exact matches; unknown ones are ignored).

        Args:
            relations: The relations to remove.
        """
        checked = self._lookup_relations(check_relations(self.path, relations, capped=False))
        self._transact(lambda graph: (_delete_relations(graph, checked), None))

    async def adelete_relations(self, relations: list[Relation]) -> None:
        """Async twin of `delete_relations`."""
        checked = self._lookup_relations(check_relations(self.path, relations, capped=False))
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
            graph = snapshot_of_text(old, path, max_bytes=self.max_bytes)
            content, result = mutation(graph)
            updated = GraphSnapshot(content.entities, content.relations, graph.unknown, "")
            text = updated.text()
            data = text.encode("utf-8")
            updated.digest = digest_of(data)
            remember(updated, len(data), replaces=graph.digest)
            # The server rewrites the file on every mutation; the same bytes need no write,
            # but a missing file is created (empty) as the server creates it.
            return ({} if text == old else {path: text}), result

        return transform

    def _transact(self, mutation: _Mutation[T]) -> T:
        self._check_local_size()
        return self._write_strategy().transact(self._transform(mutation))

    async def _atransact(self, mutation: _Mutation[T]) -> T:
        await self._acheck_local_size()
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
