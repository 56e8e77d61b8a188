"""`TieredMemoryMiddleware`: the tiers in an agent.

- `before_agent`: retrieve for the latest user message of the user named by
  `runtime.context[user_id_key]` (or `config["configurable"]`), render the block within
  `max_chars` and keep it in the graph state (a private key), once per invocation.
- `wrap_model_call`: append that block to the system message (no I/O on this path).
- `after_agent`: record the turn (the last user message and the final answer) as a page. The
  model-needing bookkeeping (summaries, promotion) runs here, after the answer exists, so it
  never delays it; the page is written before any of it, so a failure never loses it.

A run without a usable user id gets no memory and records nothing (one warning), unless
`strict=True`, which raises instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ContextT,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ResponseT,
)
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.config import get_config

from layered_memory._logs import get_logger
from layered_memory.core.state import append_block, context_value
from layered_memory.errors import LayeredMemoryError
from layered_memory.tiers._render import DEFAULT_MAX_CHARS, render_retrieval
from layered_memory.tiers._types import check_user_id
from layered_memory.tiers.memory import TieredMemory

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

logger = get_logger(__name__)

BLOCK_KEY = "tiered_memory_block"


class TieredMemoryState(AgentState):  # type: ignore[type-arg]
    """The agent state with the block retrieved for this invocation (private to the hooks)."""

    tiered_memory_block: NotRequired[Annotated[str | None, PrivateStateAttr]]


class TieredMemoryMiddleware(AgentMiddleware[TieredMemoryState, ContextT, ResponseT]):
    """Per-user tiered memory (MemoryOS) for `create_agent` / `create_deep_agent`.

    Args:
        memory: The `TieredMemory` (store, embeddings, optional model, settings).
        user_id_key: Key of the user id in `runtime.context`, else in `config["configurable"]`.
        max_chars: Budget of the injected block, tags included.
        record: Record each turn as a page after the run (False: read-only memory).
        consolidate: After recording, also consolidate (move pages to mid-term, promote:
            embedding and model calls) in `after_agent`. False: only record the page (one store
            write) and run `memory.consolidate(user_id)` yourself, e.g. from a background
            worker, so not even `invoke()`'s return waits for it.
        strict: Raise on a missing or invalid user id and on memory errors instead of
            logging a warning and going on without memory.

    Example:
        memory = TieredMemory(PostgresStore(...), embeddings=OpenAIEmbeddings())
        agent = create_agent(model, tools, middleware=[TieredMemoryMiddleware(memory)])
        agent.invoke({"messages": [("user", "hi")]}, context={"user_id": "ada"})
    """

    state_schema = TieredMemoryState

    def __init__(
        self,
        memory: TieredMemory,
        *,
        user_id_key: str = "user_id",
        max_chars: int = DEFAULT_MAX_CHARS,
        record: bool = True,
        consolidate: bool = True,
        strict: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(memory, TieredMemory):
            msg = f"memory must be a TieredMemory, got {type(memory).__name__}"
            raise TypeError(msg)
        if not isinstance(user_id_key, str) or not user_id_key:
            msg = "user_id_key must be a non-empty str"
            raise ValueError(msg)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 200:
            msg = f"max_chars must be an int >= 200, got {max_chars!r}"
            raise ValueError(msg)
        self.memory = memory
        self.user_id_key = user_id_key
        self.max_chars = max_chars
        self.record = bool(record)
        self.consolidate = bool(consolidate)
        self.strict = bool(strict)

    @property
    def name(self) -> str:
        return "TieredMemoryMiddleware"

    # -- before_agent -----------------------------------------------------------------------

    def before_agent(
        self, state: TieredMemoryState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Retrieve for the latest user message and keep the rendered block in the state."""
        user_id, query = self._user_id(runtime, "retrieve"), _last_user_text(state["messages"])
        if user_id is None or not query:
            return {BLOCK_KEY: None}
        try:
            retrieval = self.memory.retrieve(user_id, query)
        except Exception as exc:
            self._failed("retrieval", exc)
            return {BLOCK_KEY: None}
        return {BLOCK_KEY: render_retrieval(retrieval, max_chars=self.max_chars) or None}

    async def abefore_agent(
        self, state: TieredMemoryState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        user_id, query = self._user_id(runtime, "retrieve"), _last_user_text(state["messages"])
        if user_id is None or not query:
            return {BLOCK_KEY: None}
        try:
            retrieval = await self.memory.aretrieve(user_id, query)
        except Exception as exc:
            self._failed("retrieval", exc)
            return {BLOCK_KEY: None}
        return {BLOCK_KEY: render_retrieval(retrieval, max_chars=self.max_chars) or None}

    # -- wrap_model_call ----------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelCallResult[ResponseT]:
        """Append the retrieved block to the system message, then call the model."""
        return handler(self._inject(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        """Async twin of `wrap_model_call`."""
        return await handler(self._inject(request))

    # -- after_agent --------------------------------------------------------------------------

    def after_agent(
        self, state: TieredMemoryState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Record the turn as a page (then consolidate: summaries, promotion)."""
        turn = self._turn(state, runtime)
        if turn is not None:
            try:
                self.memory.add_page(*turn[:3], meta=turn[3], consolidate=self.consolidate)
            except Exception as exc:
                self._failed("recording", exc)
        return None

    async def aafter_agent(
        self, state: TieredMemoryState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        turn = self._turn(state, runtime)
        if turn is not None:
            try:
                await self.memory.aadd_page(*turn[:3], meta=turn[3], consolidate=self.consolidate)
            except Exception as exc:
                self._failed("recording", exc)
        return None

    # -- helpers shared by both halves --------------------------------------------------------

    def _inject(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        block = request.state.get(BLOCK_KEY)
        if not isinstance(block, str) or not block:
            return request
        return request.override(system_message=append_block(request.system_message, block))

    def _user_id(self, runtime: Runtime[ContextT], action: str) -> str | None:
        value = context_value(getattr(runtime, "context", None), self.user_id_key)
        if value is None:
            configurable = _config().get("configurable")
            if isinstance(configurable, Mapping):
                value = configurable.get(self.user_id_key)
        try:
            return check_user_id(value)
        except LayeredMemoryError as exc:
            if self.strict:
                raise
            logger.warning(
                "TieredMemoryMiddleware: no usable user id under %r (%s); did not %s memory",
                self.user_id_key,
                "missing" if value is None else getattr(exc, "reason", "invalid"),
                action,
            )
            return None

    def _turn(
        self, state: TieredMemoryState, runtime: Runtime[ContextT]
    ) -> tuple[str, str, str, dict[str, Any]] | None:
        if not self.record:
            return None
        messages = state["messages"]
        query, answer = _last_user_text(messages), _final_answer(messages)
        if not query or not answer:
            return None
        user_id = self._user_id(runtime, "record")
        if user_id is None:
            return None
        configurable = _config().get("configurable")
        thread_id = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
        return user_id, query, answer, ({"thread_id": str(thread_id)} if thread_id else {})

    def _failed(self, what: str, exc: Exception) -> None:
        if self.strict:
            raise exc
        logger.warning(
            "TieredMemoryMiddleware: %s failed (%s); run goes on", what, type(exc).__name__
        )


def _config() -> RunnableConfig | dict[str, Any]:
    try:
        return get_config()
    except RuntimeError:
        return {}


def _last_user_text(messages: Sequence[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text.strip()
    return ""


def _final_answer(messages: Sequence[AnyMessage]) -> str:
    """The text of the last AI message after the last user message (no tool call pending)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return ""
        if isinstance(message, AIMessage) and not message.tool_calls and message.text.strip():
            return message.text.strip()
    return ""
