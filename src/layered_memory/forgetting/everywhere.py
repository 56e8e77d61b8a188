"""Forget a subject everywhere memory keeps it: `forget(...)` and `layered-memory forget`.

One call removes what names a subject (a whole word, any case, Unicode-normalised; see
`writeback.forget.SubjectMatcher`) from every store it is given, each through that store's own
write path, so a writer running at the same time loses nothing and leaves nothing behind:

- writable memory files: the lines naming it, under the file's lock with one atomic replace
  (`core.files`), together with the review queue beside the file (`MEMORY.pending.json`);
- knowledge graphs: entities, observations and relations naming it, in one graph transaction;
- tiered memory: pages, segments and long-term facts naming it, purged (`TieredMemory.forget`
  under the user's lock), for every user the store holds (`TieredMemory.users`) or the ones
  named;
- session stores: the values naming it inside each entry, by compare-and-swap (`replace`),
  retried when another writer changed the entry meanwhile, in every entry the store holds
  (`ListableSessionStore.keys`, page by page) or the ones named.

`aforget` is the same on an event loop: every store through its async methods, every file
read and lock wait in a worker thread.

Read-only memory is never changed: the read-only files that name the subject are listed
(`ForgetReport.read_only`), and the command exits 1 while any remain. A dry run computes the
same removals and writes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layered_memory._logs import get_logger
from layered_memory.errors import SessionDataError, TierItemError
from layered_memory.graph.forget import GraphForgotten, aforget_in_graph, forget_in_graph
from layered_memory.sessions.stores.base import (
    ConditionalSessionStore,
    ListableSessionStore,
    StoredSession,
    aread_entry,
    read_entry,
)
from layered_memory.writeback.forget import (
    FileForgotten,
    SubjectMatcher,
    aforget_in_file,
    aread_only_naming,
    forget_in_file,
    read_only_naming,
)

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol

    from layered_memory.graph import KnowledgeGraph
    from layered_memory.sessions.stores import SessionStore
    from layered_memory.tiers import Fact, Page, Segment, TieredMemory

__all__ = ["ForgetReport", "SessionForgotten", "TierForgotten", "aforget", "forget"]

logger = get_logger(__name__)

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
        unreadable: Its stored value is no session value (corrupt or foreign): not searched,
            left unchanged (delete it).
    """

    key: str
    values: int
    deleted: bool = False
    conflict: bool = False
    unreadable: bool = False


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
        sessions: Session-store entries that named the subject, or that could not be
            searched (a conflict, an unreadable value); the others are not listed.
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
        read-only file names it, and every session entry was searched (no conflict, nothing
        unreadable)."""
        return not self.read_only and not any(s.conflict or s.unreadable for s in self.sessions)

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
                {
                    "key": s.key,
                    "values": s.values,
                    "deleted": s.deleted,
                    "conflict": s.conflict,
                    "unreadable": s.unreadable,
                }
                for s in self.sessions
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
    tier_users: Sequence[str] | None = None,
    session_store: SessionStore | None = None,
    session_keys: Sequence[str] | None = None,
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
        tiers: Tiered memory.
        tier_users: Only these users' tiered memory (default: every user it holds).
        session_store: A session store.
        session_keys: Only these entries (default: every entry the store holds, which needs
            a `ListableSessionStore`: every built-in store is one).
        dry_run: Compute everything, write nothing.

    Returns:
        What was (or would be) removed, and the read-only files that still name it.

    Raises:
        ValueError: An empty subject, files without a backend, or a session store that
            cannot list its keys without `session_keys` (checked before anything is written).
        MemoryWriteError: A memory file could not be locked, read or written (nothing of it
            was written; stores before it in this order were changed).
        SessionStoreError: A session store failed (an explicit key it refuses, a server
            that does not answer).

    Example:
        report = forget("Acme Corp", backend=FilesystemBackend(root_dir="."),
                        files=["/MEMORY.md"], read_only=["/AGENTS.md"])
        assert report.complete, report.read_only
    """
    matcher = _checked(
        subject,
        backend=backend,
        files=files,
        read_only=read_only,
        graphs=graphs,
        tiers=tiers,
        tier_users=tier_users,
        session_store=session_store,
        session_keys=session_keys,
    )
    forgotten_files: list[FileForgotten] = []
    listed: list[str] = []
    if backend is not None:  # `_checked`: files come with their backend
        forgotten_files = [
            forget_in_file(backend, path, matcher, queue_path=queue, dry_run=dry_run)
            for path, queue in _queues(files, queues)
        ]
        listed = read_only_naming(backend, list(dict.fromkeys(read_only)), matcher)
    found_graphs = [forget_in_graph(graph, matcher, dry_run=dry_run) for graph in graphs]
    found_tiers: list[TierForgotten] = []
    if tiers is not None:
        users = tiers.users() if tier_users is None else dict.fromkeys(tier_users)
        for user in users:
            found_tiers += _forget_tier_user(tiers, user, matcher, dry_run)
    sessions: list[SessionForgotten] = []
    if session_store is not None:
        for key in _keys(session_store, session_keys):
            found = _forget_session(session_store, key, matcher, dry_run)
            if found.values or found.conflict or found.unreadable:
                sessions.append(found)
    return ForgetReport(
        subject=subject,
        dry_run=dry_run,
        files=tuple(forgotten_files),
        read_only=tuple(listed),
        graphs=tuple(found_graphs),
        tiers=tuple(found_tiers),
        sessions=tuple(sessions),
    )


async def aforget(
    subject: str,
    *,
    backend: BackendProtocol | None = None,
    files: Sequence[str] = (),
    read_only: Sequence[str] = (),
    queues: Mapping[str, str] | None = None,
    graphs: Sequence[KnowledgeGraph] = (),
    tiers: TieredMemory | None = None,
    tier_users: Sequence[str] | None = None,
    session_store: SessionStore | None = None,
    session_keys: Sequence[str] | None = None,
    dry_run: bool = False,
) -> ForgetReport:
    """Async twin of `forget`: the same removals, never blocking the event loop.

    Memory files are read, locked and replaced in worker threads (or through the backend's
    async methods), graphs, tiers and session stores through their async methods.

    Args:
        subject: The name to forget (whole words, any case, Unicode-normalised).
        backend: Where the memory files live (needed with `files` or `read_only`).
        files: Writable memory files: their lines naming the subject are removed.
        read_only: Read-only memory and rule files: never changed, listed when they name it.
        queues: Memory file -> its review queue (default: `NAME.pending.json` beside `NAME.md`).
        graphs: Knowledge graphs.
        tiers: Tiered memory.
        tier_users: Only these users' tiered memory (default: every user it holds).
        session_store: A session store.
        session_keys: Only these entries (default: every entry the store holds).
        dry_run: Compute everything, write nothing.

    Returns:
        What was (or would be) removed, and the read-only files that still name it.

    Raises:
        ValueError: As `forget`.
        MemoryWriteError: As `forget`.
        SessionStoreError: As `forget`.
    """
    matcher = _checked(
        subject,
        backend=backend,
        files=files,
        read_only=read_only,
        graphs=graphs,
        tiers=tiers,
        tier_users=tier_users,
        session_store=session_store,
        session_keys=session_keys,
    )
    forgotten_files: list[FileForgotten] = []
    listed: list[str] = []
    if backend is not None:
        forgotten_files = [
            await aforget_in_file(backend, path, matcher, queue_path=queue, dry_run=dry_run)
            for path, queue in _queues(files, queues)
        ]
        listed = await aread_only_naming(backend, list(dict.fromkeys(read_only)), matcher)
    found_graphs = [await aforget_in_graph(graph, matcher, dry_run=dry_run) for graph in graphs]
    found_tiers: list[TierForgotten] = []
    if tiers is not None:
        async for user in _each(tiers.ausers() if tier_users is None else tier_users):
            found_tiers += await _aforget_tier_user(tiers, user, matcher, dry_run)
    sessions: list[SessionForgotten] = []
    if session_store is not None:
        async for key in _akeys(session_store, session_keys):
            found = await _aforget_session(session_store, key, matcher, dry_run)
            if found.values or found.conflict or found.unreadable:
                sessions.append(found)
    return ForgetReport(
        subject=subject,
        dry_run=dry_run,
        files=tuple(forgotten_files),
        read_only=tuple(listed),
        graphs=tuple(found_graphs),
        tiers=tuple(found_tiers),
        sessions=tuple(sessions),
    )


def _checked(
    subject: str,
    *,
    backend: BackendProtocol | None,
    files: Sequence[str],
    read_only: Sequence[str],
    graphs: Sequence[KnowledgeGraph],
    tiers: TieredMemory | None,
    tier_users: Sequence[str] | None,
    session_store: SessionStore | None,
    session_keys: Sequence[str] | None,
) -> SubjectMatcher:
    """The subject's matcher, once every argument was checked: nothing is written before."""
    matcher = SubjectMatcher(subject)
    for name, paths in (("files", files), ("read_only", read_only)):
        if isinstance(paths, str) or not all(isinstance(path, str) for path in paths):
            msg = f"forget: {name} is a list of backend paths (wrap one: [{paths!r}])"
            raise ValueError(msg)
    from layered_memory.graph import KnowledgeGraph

    if isinstance(graphs, KnowledgeGraph | str) or not all(
        isinstance(graph, KnowledgeGraph) for graph in graphs
    ):
        msg = (
            "forget: graphs is a list of KnowledgeGraph objects "
            f"([KnowledgeGraph(backend, '/memory.jsonl')]), got {graphs!r}"
        )
        raise ValueError(msg)
    for name, value, needs, given in (
        ("session_keys", session_keys, "session_store", session_store),
        ("tier_users", tier_users, "tiers", tiers),
    ):
        if value is not None and given is None:
            msg = f"forget: {name} narrows {needs}=, which is not given: pass {needs}=..."
            raise ValueError(msg)
    if (files or read_only) and backend is None:
        msg = "forget: memory files need the backend they live in (backend=...)"
        raise ValueError(msg)
    for name, value in (("session_keys", session_keys), ("tier_users", tier_users)):
        if isinstance(value, str):
            msg = f"forget: {name} is a list of keys, not one str (wrap it: [{value!r}])"
            raise ValueError(msg)
    if (
        session_store is not None
        and session_keys is None
        and not isinstance(session_store, ListableSessionStore)
    ):
        msg = (
            f"forget: the session store ({type(session_store).__name__}) cannot list its keys: "
            "name the entries to search (session_keys=[...])"
        )
        raise ValueError(msg)
    return matcher


def _queues(files: Sequence[str], queues: Mapping[str, str] | None) -> list[tuple[str, str | None]]:
    return [
        (path, queues.get(path) if queues is not None else _default_queue(path))
        for path in dict.fromkeys(files)
    ]


def _default_queue(path: str) -> str | None:
    if not path.endswith(".md"):
        return None
    return path[: -len(".md")] + ".pending.json"


def _keys(store: SessionStore, keys: Sequence[str] | None) -> Iterable[str]:
    if keys is not None:
        return dict.fromkeys(keys)
    assert isinstance(store, ListableSessionStore)  # `_checked` made sure
    return store.keys()


def _akeys(store: SessionStore, keys: Sequence[str] | None) -> AsyncIterator[str]:
    if keys is not None:
        return _each(dict.fromkeys(keys))
    assert isinstance(store, ListableSessionStore)  # `_checked` made sure
    return store.akeys()


async def _each(items: Iterable[str] | AsyncIterator[str]) -> AsyncIterator[str]:
    if isinstance(items, AsyncIterator):
        async for item in items:
            yield item
    else:
        for item in dict.fromkeys(items):
            yield item


# -- tiered memory: what names the subject is found from the user's items (pure), then purged


def _doomed(
    pages: Sequence[Page],
    segments: Sequence[Segment],
    facts: Sequence[Fact],
    matcher: SubjectMatcher,
) -> dict[str, str]:
    """Item id -> kind of every page, segment and fact naming the subject. A segment naming it
    goes with its pages (a purge deletes them), so they are not purged again one by one."""
    doomed: dict[str, str] = {}
    gone_with_segment: set[str] = set()
    every_page = list(pages)
    for segment in segments:
        if matcher.names(segment.summary) or any(matcher.names(k) for k in segment.keywords):
            doomed[segment.id] = "segment"
            gone_with_segment.update(page.id for page in segment.pages)
        else:
            every_page.extend(segment.pages)
    for page in every_page:
        if page.id not in gone_with_segment and (
            matcher.names(page.query) or matcher.names(page.response)
        ):
            doomed.setdefault(page.id, "page")
    for fact in facts:
        if matcher.names(fact.text):
            doomed[fact.id] = "fact"
    return doomed


def _forget_tier_user(
    tiers: TieredMemory, user: str, matcher: SubjectMatcher, dry_run: bool
) -> list[TierForgotten]:
    doomed = _doomed(
        tiers.short_term(user), tiers.segments(user), tiers.long_term_entries(user), matcher
    )
    for item in doomed if not dry_run else ():
        try:
            tiers.forget(user, item, purge=True)
        except TierItemError:
            logger.debug("tiered memory: %s was removed meanwhile", item)  # gone all the same
    return [TierForgotten(user, item, kind) for item, kind in doomed.items()]


async def _aforget_tier_user(
    tiers: TieredMemory, user: str, matcher: SubjectMatcher, dry_run: bool
) -> list[TierForgotten]:
    doomed = _doomed(
        await tiers.ashort_term(user),
        await tiers.asegments(user),
        await tiers.along_term_entries(user),
        matcher,
    )
    for item in doomed if not dry_run else ():
        try:
            await tiers.aforget(user, item, purge=True)
        except TierItemError:
            logger.debug("tiered memory: %s was removed meanwhile", item)
    return [TierForgotten(user, item, kind) for item, kind in doomed.items()]


# -- session stores: one entry at a time, by compare-and-swap ---------------------------------


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


@dataclass(frozen=True, slots=True)
class _Step:
    """What to do with one entry as read: `done` (a result), or write `new` in its place."""

    done: SessionForgotten | None
    current: Any = None
    new: Any = None
    ttl: float | None = None
    removed: int = 0


def _step(key: str, entry: StoredSession | None, matcher: SubjectMatcher, dry_run: bool) -> _Step:
    if entry is None:
        return _Step(SessionForgotten(key, 0))
    pruned, removed = _pruned(entry.value, matcher)
    if not removed or dry_run:
        return _Step(SessionForgotten(key, removed, deleted=removed > 0 and not pruned))
    # Nothing else left: the entry goes.
    return _Step(None, entry.value, pruned or None, entry.ttl, removed)


def _unreadable(key: str, exc: SessionDataError) -> SessionForgotten:
    logger.warning("forget: session entry %r not searched: %s (delete it)", key, exc)
    return SessionForgotten(key, 0, unreadable=True)


def _forget_session(
    store: SessionStore, key: str, matcher: SubjectMatcher, dry_run: bool
) -> SessionForgotten:
    for _ in range(_CAS_ATTEMPTS):
        try:
            step = _step(key, read_entry(store, key), matcher, dry_run)
        except SessionDataError as exc:
            return _unreadable(key, exc)
        if step.done is not None:
            return step.done
        found = SessionForgotten(key, step.removed, deleted=step.new is None)
        if not isinstance(store, ConditionalSessionStore):
            if step.new is None:
                store.delete(key)
            else:
                store.set(key, step.new, ttl=step.ttl)
            return found
        if store.replace(key, step.current, step.new, ttl=step.ttl):
            return found
    return SessionForgotten(key, 0, conflict=True)


async def _aforget_session(
    store: SessionStore, key: str, matcher: SubjectMatcher, dry_run: bool
) -> SessionForgotten:
    for _ in range(_CAS_ATTEMPTS):
        try:
            step = _step(key, await aread_entry(store, key), matcher, dry_run)
        except SessionDataError as exc:
            return _unreadable(key, exc)
        if step.done is not None:
            return step.done
        found = SessionForgotten(key, step.removed, deleted=step.new is None)
        if not isinstance(store, ConditionalSessionStore):
            if step.new is None:
                await store.adelete(key)
            else:
                await store.aset(key, step.new, ttl=step.ttl)
            return found
        if await store.areplace(key, step.current, step.new, ttl=step.ttl):
            return found
    return SessionForgotten(key, 0, conflict=True)
