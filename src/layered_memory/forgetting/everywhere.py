"""Forget a subject everywhere memory keeps it: `forget(...)` and `layered-memory forget`.

One call removes what names a subject (a whole word, any case, Unicode-normalised; see
`writeback.forget.SubjectMatcher`) from every store it is given, each through that store's own
write path, so a writer running at the same time loses nothing and leaves nothing behind:

- writable memory files: the lines naming it, under the file's lock with one atomic replace
  (`core.files`), together with the review queue beside the file (`MEMORY.pending.json`);
- knowledge graphs: entities, observations and relations naming it, in one graph transaction;
- tiered memory: pages, segments and long-term facts naming it, purged (`TieredMemory.forget`
  under the user's lock);
- session stores: the values naming it inside each given entry, by compare-and-swap
  (`replace`), retried when another writer changed the entry meanwhile.

Read-only memory is never changed: the read-only files that name the subject are listed
(`ForgetReport.read_only`), and the command exits 1 while any remain. A dry run computes the
same removals and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layered_memory.graph.forget import GraphForgotten, forget_in_graph
from layered_memory.sessions.stores.base import ConditionalSessionStore, ExpiryAwareSessionStore
from layered_memory.writeback.forget import (
    FileForgotten,
    SubjectMatcher,
    forget_in_file,
    read_only_naming,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

    from layered_memory.graph import KnowledgeGraph
    from layered_memory.sessions.stores import SessionStore
    from layered_memory.tiers import TieredMemory

__all__ = ["ForgetReport", "SessionForgotten", "TierForgotten", "forget"]

_CAS_ATTEMPTS = 8
"""Compare-and-swap rounds on one session entry before giving up (a writer per round)."""


@dataclass(frozen=True, slots=True)
class TierForgotten:
    """One tiered-memory item purged because it named the subject.

    Attributes:
        user_id: Whose memory it was.
        id: The page, segment or fact id.
        kind: `"page"`, `"segment"` or `"fact"`.
    """

    user_id: str
    id: str
    kind: str


@dataclass(frozen=True, slots=True)
class SessionForgotten:
    """What forgetting did to one session-store entry.

    Attributes:
        key: The entry's key.
        values: How many values naming the subject were removed.
        deleted: The whole entry was removed (nothing else was left in it).
        conflict: Other writers kept changing it: left unchanged (run again).
    """

    key: str
    values: int
    deleted: bool = False
    conflict: bool = False


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What `forget` removed (or, on a dry run, would remove), and what it could not.

    Attributes:
        subject: The subject as given.
        dry_run: Nothing was written.
        files: Writable memory files and their review queues.
        read_only: Read-only files that name the subject (left unchanged).
        graphs: Knowledge graphs.
        tiers: Tiered-memory items purged.
        sessions: Session-store entries.
    """

    subject: str
    dry_run: bool
    files: tuple[FileForgotten, ...] = ()
    read_only: tuple[str, ...] = ()
    graphs: tuple[GraphForgotten, ...] = ()
    tiers: tuple[TierForgotten, ...] = ()
    sessions: tuple[SessionForgotten, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """Whether nothing naming the subject remains where forgetting could look: no
        read-only file names it, and no session entry was left by a conflict."""
        return not self.read_only and not any(s.conflict for s in self.sessions)

    def as_data(self) -> dict[str, Any]:
        """The report as JSON-ready data.

        Returns:
            `{"subject", "dry_run", "complete", "files", "read_only", "graphs", "tiers",
            "sessions"}`.
        """
        return {
            "subject": self.subject,
            "dry_run": self.dry_run,
            "complete": self.complete,
            "files": [
                {
                    "path": f.path,
                    "lines": list(f.lines),
                    "queue_path": f.queue_path,
                    "queued": f.queued,
                }
                for f in self.files
                if f
            ],
            "read_only": list(self.read_only),
            "graphs": [
                {
                    "path": g.path,
                    "entities": list(g.entities),
                    "observations": [list(pair) for pair in g.observations],
                    "relations": [list(triple) for triple in g.relations],
                }
                for g in self.graphs
                if g
            ],
            "tiers": [{"user_id": t.user_id, "id": t.id, "kind": t.kind} for t in self.tiers],
            "sessions": [
                {"key": s.key, "values": s.values, "deleted": s.deleted, "conflict": s.conflict}
                for s in self.sessions
                if s.values or s.conflict
            ],
        }


def forget(
    subject: str,
    *,
    backend: BackendProtocol | None = None,
    files: Sequence[str] = (),
    read_only: Sequence[str] = (),
    queues: Mapping[str, str] | None = None,
    graphs: Sequence[KnowledgeGraph] = (),
    tiers: TieredMemory | None = None,
    tier_users: Sequence[str] = (),
    session_store: SessionStore | None = None,
    session_keys: Sequence[str] = (),
    dry_run: bool = False,
) -> ForgetReport:
    """Remove every piece of memory that names `subject`.

    Args:
        subject: The name to forget (whole words, any case, Unicode-normalised).
        backend: Where the memory files live (needed with `files` or `read_only`).
        files: Writable memory files: their lines naming the subject are removed.
        read_only: Read-only memory and rule files: never changed, listed when they name it.
        queues: Memory file -> its review queue, changed in the same transaction (default:
            `NAME.pending.json` beside each file whose name ends in `.md`).
        graphs: Knowledge graphs.
        tiers: Tiered memory, searched for the users in `tier_users`.
        tier_users: The users whose tiered memory is searched.
        session_store: A session store, searched under `session_keys`.
        session_keys: The entries to search (session stores list no keys).
        dry_run: Compute everything, write nothing.

    Returns:
        What was (or would be) removed, and the read-only files that still name it.

    Raises:
        ValueError: An empty subject, or files without a backend.
        MemoryWriteError: A memory file could not be locked, read or written (nothing of it
            was written; stores before it in this order were changed).

    Example:
        report = forget("Acme Corp", backend=FilesystemBackend(root_dir="."),
                        files=["/MEMORY.md"], read_only=["/AGENTS.md"])
        assert report.complete, report.read_only
    """
    matcher = SubjectMatcher(subject)
    if (files or read_only) and backend is None:
        msg = "forget: memory files need the backend they live in (backend=...)"
        raise ValueError(msg)
    queue_of = dict(queues) if queues is not None else {}
    forgotten_files: list[FileForgotten] = []
    for path in dict.fromkeys(files):
        assert backend is not None
        queue = queue_of.get(path) if queues is not None else _default_queue(path)
        forgotten_files.append(
            forget_in_file(backend, path, matcher, queue_path=queue, dry_run=dry_run)
        )
    listed = read_only_naming(backend, list(dict.fromkeys(read_only)), matcher) if backend else []
    return ForgetReport(
        subject=subject,
        dry_run=dry_run,
        files=tuple(forgotten_files),
        read_only=tuple(listed),
        graphs=tuple(forget_in_graph(graph, matcher, dry_run=dry_run) for graph in graphs),
        tiers=tuple(_forget_tiers(tiers, tier_users, matcher, dry_run)) if tiers else (),
        sessions=tuple(
            _forget_session(session_store, key, matcher, dry_run)
            for key in dict.fromkeys(session_keys)
        )
        if session_store is not None
        else (),
    )


def _default_queue(path: str) -> str | None:
    if not path.endswith(".md"):
        return None
    return path[: -len(".md")] + ".pending.json"


def _forget_tiers(
    tiers: TieredMemory, users: Sequence[str], matcher: SubjectMatcher, dry_run: bool
) -> list[TierForgotten]:
    found: list[TierForgotten] = []
    for user in dict.fromkeys(users):
        doomed: dict[str, str] = {}
        pages = list(tiers.short_term(user))
        for segment in tiers.segments(user):
            if matcher.names(segment.summary) or any(matcher.names(k) for k in segment.keywords):
                doomed[segment.id] = "segment"
            pages.extend(segment.pages)
        for page in pages:
            if matcher.names(page.query) or matcher.names(page.response):
                doomed.setdefault(page.id, "page")
        for fact in tiers.long_term_entries(user):
            if matcher.names(fact.text):
                doomed[fact.id] = "fact"
        for item, kind in doomed.items():
            if not dry_run:
                tiers.forget(user, item, purge=True)
            found.append(TierForgotten(user, item, kind))
    return found


def _pruned(value: Any, matcher: SubjectMatcher) -> tuple[Any, int]:
    """`value` without the strings, list items and dict items that name the subject."""
    if isinstance(value, str):
        return value, 0
    if isinstance(value, Mapping):
        kept: dict[str, Any] = {}
        removed = 0
        for key, item in value.items():
            if matcher.names(str(key)) or (isinstance(item, str) and matcher.names(item)):
                removed += 1
                continue
            kept[key], inner = _pruned(item, matcher)
            removed += inner
        return kept, removed
    if isinstance(value, list):
        items: list[Any] = []
        removed = 0
        for item in value:
            if isinstance(item, str) and matcher.names(item):
                removed += 1
                continue
            pruned, inner = _pruned(item, matcher)
            items.append(pruned)
            removed += inner
        return items, removed
    return value, 0


def _forget_session(
    store: SessionStore, key: str, matcher: SubjectMatcher, dry_run: bool
) -> SessionForgotten:
    for _ in range(_CAS_ATTEMPTS):
        ttl: float | None = None
        if isinstance(store, ExpiryAwareSessionStore):
            entry = store.get_entry(key)
            current = entry.value if entry is not None else None
            ttl = entry.ttl if entry is not None else None
        else:
            current = store.get(key)
        if current is None:
            return SessionForgotten(key, 0)
        pruned, removed = _pruned(current, matcher)
        if not removed or dry_run:
            return SessionForgotten(key, removed, deleted=removed > 0 and not pruned)
        new = pruned or None  # nothing else left: the entry goes
        if not isinstance(store, ConditionalSessionStore):
            if new is None:
                store.delete(key)
            else:
                store.set(key, new, ttl=ttl)
            return SessionForgotten(key, removed, deleted=new is None)
        if store.replace(key, current, new, ttl=ttl):
            return SessionForgotten(key, removed, deleted=new is None)
    return SessionForgotten(key, 0, conflict=True)
