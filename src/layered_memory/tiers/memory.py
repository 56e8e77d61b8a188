"""`TieredMemory`: MemoryOS's short-term, mid-term and long-term personal memory per user.

Stored in any LangGraph `BaseStore` (`InMemoryStore` in tests, `PostgresStore` in production),
one namespace per user; embeddings from any LangChain `Embeddings`; summaries, keywords and
persona extraction from an optional chat model (lexical without one).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.store.base import BaseStore

from layered_memory._logs import get_logger
from layered_memory.safety.redaction import redact
from layered_memory.tiers import _editing, _flows
from layered_memory.tiers._flows import Ask, Embed, Failed, Flow, Op, StoreBatch
from layered_memory.tiers.namespaces import DEFAULT_NAMESPACE, check_prefix, user_namespace
from layered_memory.tiers.settings import TierSettings
from layered_memory.tiers.summaries import storable
from layered_memory.tiers.values import Consolidation, Fact, Forgotten, Page, Retrieval, Segment

if TYPE_CHECKING:
    from layered_memory.writeback.insights import MemoryWriter

T = TypeVar("T")

logger = get_logger(__name__)

WriterFactory = Callable[[str], "MemoryWriter | None"]

_LOCKS: dict[tuple[int, tuple[str, ...]], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _user_lock(store: BaseStore, namespace: tuple[str, ...]) -> threading.Lock:
    """One lock per (store, user): a user's writes in this process never interleave."""
    key = (id(store), namespace)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            if len(_LOCKS) > 10_000:  # bound the registry; only idle locks are dropped
                for stale in [k for k, v in _LOCKS.items() if not v.locked()]:
                    del _LOCKS[stale]
            lock = _LOCKS[key] = threading.Lock()
        return lock


class TieredMemory:
    """Tiered conversational memory with heat-based promotion (MemoryOS), per user.

    Args:
        store: Where every user's memory lives (a LangGraph `BaseStore`).
        embeddings: Any LangChain `Embeddings` (pages, segment summaries, facts, queries).
        model: Optional chat model making keywords, summaries and long-term extractions as in
            the paper; without one they are lexical (offline, deterministic).
        clock: Returns the time in epoch seconds (inject one in tests).
        namespace: Store namespace prefix; each user gets one component below it (a hash of
            the user id, so no id can reach another user's items).
        memory_writer: Opt-in: a `MemoryWriter`, or a function `user_id -> MemoryWriter | None`;
            each promotion then also writes one line into that MEMORY.md.
        **settings: Any field of `TierSettings` (`stm_capacity=7`, `mtm_capacity=200`,
            `theta=0.6`, `tau=5.0`, `mu=86400.0`, `top_k=20`, `relevance_z=1.0`, ...).

    Raises:
        TypeError: `store`, `embeddings`, `model` or `clock` of the wrong type, or an unknown
            setting.
        ValueError: A setting out of range, or a bad namespace.

    Example:
        memory = TieredMemory(InMemoryStore(), embeddings=LexicalEmbeddings())
        memory.add_page("ada", "My sister Clara lives in Lisbon.", "Noted!")
        memory.retrieve("ada", "Where does Clara live?").short_term[0].query
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        embeddings: Embeddings,
        model: BaseChatModel | None = None,
        clock: Callable[[], float] = time.time,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        memory_writer: MemoryWriter | WriterFactory | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(store, BaseStore):
            msg = f"store must be a langgraph BaseStore, got {type(store).__name__}"
            raise TypeError(msg)
        if not isinstance(embeddings, Embeddings):
            msg = f"embeddings must be a langchain Embeddings, got {type(embeddings).__name__}"
            raise TypeError(msg)
        if model is not None and not isinstance(model, BaseChatModel):
            msg = f"model must be a langchain chat model or None, got {type(model).__name__}"
            raise TypeError(msg)
        if not callable(clock):
            msg = "clock must be a callable returning epoch seconds"
            raise TypeError(msg)
        unknown = set(settings) - set(TierSettings.__dataclass_fields__)
        if unknown:
            msg = f"unknown TieredMemory setting(s): {', '.join(sorted(unknown))}"
            raise TypeError(msg)
        if not (memory_writer is None or callable(memory_writer)) and not hasattr(
            memory_writer, "add_insight"
        ):
            msg = "memory_writer must be a MemoryWriter or a function user_id -> MemoryWriter"
            raise TypeError(msg)
        self.store = store
        self.embeddings = embeddings
        self.model = model
        self.clock = clock
        self.namespace = check_prefix(tuple(namespace))
        self.settings = TierSettings(**settings)
        self.memory_writer = memory_writer

    # --- the public API (sync) ---------------------------------------------------------------

    def add_page(
        self,
        user_id: str,
        query: str,
        response: str,
        *,
        meta: Mapping[str, Any] | None = None,
        consolidate: bool = True,
    ) -> Page:
        """Record one exchange in short-term memory, then consolidate (see `consolidate`).

        The page is written before any embedding or model call, so no failure loses it.
        `consolidate=False` only records it (one store write, no embedding or model call);
        run `consolidate(user_id)` later, e.g. from a background worker.
        """
        ctx = self._context(user_id)
        with self._locked(ctx):
            return self._run(
                _flows.add_page(
                    ctx,
                    self._page_text(query, "query", ctx),
                    self._page_text(response, "response", ctx),
                    _meta(meta),
                    then_consolidate=bool(consolidate),
                )
            )

    def consolidate(self, user_id: str) -> Consolidation:
        """Move short-term pages over capacity to mid-term, archive the coldest segments over
        `mtm_capacity`, promote hot ones."""
        ctx = self._context(user_id)
        with self._locked(ctx):
            return self._run(_flows.consolidate(ctx))

    def retrieve(self, user_id: str, query: str) -> Retrieval:
        """What the tiers hold for `query`: the relevant pages of every tier (mid-term and
        archive searched alike), the relevant long-term entries, the short-term pages; each
        segment a returned page belongs to gets a visit."""
        return self._run(_flows.retrieve(self._context(user_id), _text_arg(query, "query")))

    def short_term(self, user_id: str) -> list[Page]:
        """The short-term pages, oldest first (forgotten ones included, flagged)."""
        return self._run(_editing.short_term(self._context(user_id)))

    def segments(self, user_id: str) -> list[Segment]:
        """The mid-term segments, then the archived ones, with their pages and current heat."""
        return self._run(_editing.segments(self._context(user_id)))

    def long_term(self, user_id: str) -> list[str]:
        """The visible long-term entries' texts, oldest first."""
        return [fact.text for fact in self.long_term_entries(user_id) if not fact.forgotten]

    def long_term_entries(self, user_id: str) -> list[Fact]:
        """Every long-term entry with its id, kind and source (forgotten ones flagged)."""
        return [fact.public() for fact in self._run(_editing.long_term(self._context(user_id)))]

    def users(self) -> Iterator[str]:
        """Every user whose memory this store holds under the namespace, page by page.

        The store keeps a hash of each id (`tiers.namespaces.user_namespace`); the id comes
        from the user's own state record, believed only when it hashes to its namespace. A
        user added while the listing runs may or may not be listed, or be listed twice.

        Returns:
            An iterator over the user ids, in the store's namespace order.
        """
        offset = 0
        while True:
            users, more = self._run(_editing.user_page(self.namespace, offset))
            yield from users
            if not more:
                return
            offset += _editing.USERS_PAGE

    def forget(self, user_id: str, item_id: str, *, purge: bool = False) -> Forgotten:
        """Hide a page, segment or fact from retrieval (`purge=True`: delete it for good).

        Raises:
            TierItemError: No item with this id.
        """
        ctx = self._context(user_id)
        with self._locked(ctx):
            return self._run(_editing.forget(ctx, item_id, purge=bool(purge)))

    def restore(self, user_id: str, item_id: str) -> Forgotten:
        """Show a forgotten (not purged) page, segment or fact again."""
        ctx = self._context(user_id)
        with self._locked(ctx):
            return self._run(_editing.forget(ctx, item_id, purge=False, hide=False))

    # --- the public API (async) --------------------------------------------------------------

    async def aadd_page(
        self,
        user_id: str,
        query: str,
        response: str,
        *,
        meta: Mapping[str, Any] | None = None,
        consolidate: bool = True,
    ) -> Page:
        """Async `add_page`."""
        ctx = self._context(user_id)
        async with self._alocked(ctx):
            return await self._arun(
                _flows.add_page(
                    ctx,
                    self._page_text(query, "query", ctx),
                    self._page_text(response, "response", ctx),
                    _meta(meta),
                    then_consolidate=bool(consolidate),
                )
            )

    async def aconsolidate(self, user_id: str) -> Consolidation:
        """Async `consolidate`."""
        ctx = self._context(user_id)
        async with self._alocked(ctx):
            return await self._arun(_flows.consolidate(ctx))

    async def aretrieve(self, user_id: str, query: str) -> Retrieval:
        """Async `retrieve`."""
        return await self._arun(_flows.retrieve(self._context(user_id), _text_arg(query, "query")))

    async def ashort_term(self, user_id: str) -> list[Page]:
        """Async `short_term`."""
        return await self._arun(_editing.short_term(self._context(user_id)))

    async def asegments(self, user_id: str) -> list[Segment]:
        """Async `segments`."""
        return await self._arun(_editing.segments(self._context(user_id)))

    async def along_term(self, user_id: str) -> list[str]:
        """Async `long_term`."""
        return [f.text for f in await self.along_term_entries(user_id) if not f.forgotten]

    async def along_term_entries(self, user_id: str) -> list[Fact]:
        """Async `long_term_entries`."""
        return [f.public() for f in await self._arun(_editing.long_term(self._context(user_id)))]

    async def ausers(self) -> AsyncIterator[str]:
        """Async `users`."""
        offset = 0
        while True:
            users, more = await self._arun(_editing.user_page(self.namespace, offset))
            for user in users:
                yield user
            if not more:
                return
            offset += _editing.USERS_PAGE

    async def aforget(self, user_id: str, item_id: str, *, purge: bool = False) -> Forgotten:
        """Async `forget`."""
        ctx = self._context(user_id)
        async with self._alocked(ctx):
            return await self._arun(_editing.forget(ctx, item_id, purge=bool(purge)))

    async def arestore(self, user_id: str, item_id: str) -> Forgotten:
        """Async `restore`."""
        ctx = self._context(user_id)
        async with self._alocked(ctx):
            return await self._arun(_editing.forget(ctx, item_id, purge=False, hide=False))

    # --- drivers -------------------------------------------------------------------------------

    def _context(self, user_id: str) -> _flows.Context:
        now = self.clock()
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            msg = f"clock must return finite epoch seconds, got {now!r}"
            raise ValueError(msg)
        return _flows.Context(
            settings=self.settings,
            namespace=user_namespace(self.namespace, user_id),
            user_id=user_id,
            now=float(now),
            has_model=self.model is not None,
            has_writer=self.memory_writer is not None,
            store=id(self.store),
        )

    @contextmanager
    def _locked(self, ctx: _flows.Context) -> Iterator[None]:
        with _user_lock(self.store, ctx.namespace):
            yield

    @asynccontextmanager
    async def _alocked(self, ctx: _flows.Context) -> AsyncIterator[None]:
        lock = _user_lock(self.store, ctx.namespace)
        # Waiting happens in a worker thread so the event loop keeps running the lock's holder.
        if not lock.acquire(blocking=False):
            await asyncio.to_thread(lock.acquire)
        try:
            yield
        finally:
            lock.release()

    def _page_text(self, value: object, name: str, ctx: _flows.Context) -> str:
        text, replaced = storable(_text_arg(value, name))
        if replaced:
            logger.warning(
                "tiered memory %s: %d NUL or lone surrogate character(s) in the %s replaced "
                "by U+FFFD (PostgreSQL cannot store them)",
                ctx.where,
                replaced,
                name,
            )
        # Redacted before the cap, so a cut never leaves a secret's unrecognizable tail.
        text, kinds = redact(text)
        if kinds:
            logger.warning(
                "tiered memory %s: redacted %s from the %s before storing it",
                ctx.where,
                ", ".join(kinds),
                name,
            )
        limit = self.settings.max_text_chars
        if len(text) <= limit:
            return text
        logger.warning(
            "tiered memory %s: %s of %d chars cut to max_text_chars=%d",
            ctx.where,
            name,
            len(text),
            limit,
        )
        return _capped(text, limit)

    def _writer(self, user_id: str) -> MemoryWriter | None:
        writer = self.memory_writer
        if writer is None or hasattr(writer, "add_insight"):
            return writer  # type: ignore[return-value]
        return writer(user_id)

    def _run(self, flow: Flow[T]) -> T:
        value: Any = None
        try:
            while True:
                try:
                    op = flow.send(value)
                except StopIteration as stop:
                    result: T = stop.value
                    return result
                value = self._do(op)
        finally:
            flow.close()

    async def _arun(self, flow: Flow[T]) -> T:
        value: Any = None
        try:
            while True:
                try:
                    op = flow.send(value)
                except StopIteration as stop:
                    result: T = stop.value
                    return result
                value = await self._ado(op)
        finally:
            flow.close()

    def _do(self, op: Op) -> Any:
        if isinstance(op, StoreBatch):
            return self.store.batch(op.ops)
        try:
            if isinstance(op, Embed):
                if op.query:
                    return [self.embeddings.embed_query(op.texts[0])]
                return self.embeddings.embed_documents(list(op.texts))
            if isinstance(op, Ask):
                assert self.model is not None
                return self.model.invoke(list(op.messages))
            writer = self._writer(op.user_id)
            return writer.add_insight(op.text) if writer is not None else False
        except Exception as exc:  # reported to the flow, which keeps what it must
            return Failed(exc)

    async def _ado(self, op: Op) -> Any:
        if isinstance(op, StoreBatch):
            return await self.store.abatch(op.ops)
        try:
            if isinstance(op, Embed):
                if op.query:
                    return [await self.embeddings.aembed_query(op.texts[0])]
                return await self.embeddings.aembed_documents(list(op.texts))
            if isinstance(op, Ask):
                assert self.model is not None
                return await self.model.ainvoke(list(op.messages))
            writer = self._writer(op.user_id)
            return await writer.aadd_insight(op.text) if writer is not None else False
        except Exception as exc:
            return Failed(exc)


def _capped(text: str, limit: int) -> str:
    marker = f" [... {len(text) - limit} more chars not kept]"
    return text[: max(0, limit - len(marker))] + marker


def _text_arg(value: object, name: str) -> str:
    if not isinstance(value, str):
        msg = f"{name} must be a str, got {type(value).__name__}"
        raise TypeError(msg)
    return value


def _meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        msg = f"meta must be a mapping or None, got {type(meta).__name__}"
        raise TypeError(msg)
    try:  # it is stored as JSON (PostgresStore): refuse what could not be, before any write
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"meta must be JSON-serializable (str keys, JSON values): {exc}"
        raise TypeError(msg) from None
    stored: dict[str, Any] = _storable_json(meta)
    return stored


def _storable_json(value: Any) -> Any:
    """A JSON value with NUL and lone surrogates in its strings replaced (see `storable`):
    a thread id holding one must not lose the turn's page."""
    if isinstance(value, str):
        return storable(value)[0]
    if isinstance(value, Mapping):
        return {
            (storable(key)[0] if isinstance(key, str) else key): _storable_json(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_storable_json(item) for item in value]
    return value


__all__: Sequence[str] = ["TieredMemory"]
