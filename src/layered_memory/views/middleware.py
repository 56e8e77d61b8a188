"""`MessageViewMiddleware`: one job's view of the shared conversation, on every model call.

It changes only the `messages` of the `ModelRequest` a model call sees (`wrap_model_call`),
never the graph state: the conversation stays complete and auditable, as `ContextEditing`-
and `Summarization`-style middleware in LangChain leave history to the checkpointer. A profile
that forgets earlier runs (GOLDFISH) keeps one private state key, written when a run ends
(`after_agent`, a hook every instance has, so `MessageViewMiddleware(...)` is always that very
class; other profiles write nothing there); the middleware instance holds no per-thread data,
so a run resumed in another process behaves the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, TypedDict

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
from langchain_core.messages import BaseMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from layered_memory._logs import get_logger
from layered_memory.views._conversation import check_person
from layered_memory.views._view import view_messages
from layered_memory.views.settings import (
    MemoryProfile,
    MemorySettings,
    resolve_settings,
)

logger = get_logger(__name__)

RUN_MARK_KEY = "message_view_run_mark"


class RunMark(TypedDict):
    """Where the previous run of the thread ended: its last message's id and the count."""

    last_id: str | None
    count: int


class MessageViewState(AgentState):  # type: ignore[type-arg]
    """State key of `MessageViewMiddleware` (private: not part of the agent's input/output)."""

    message_view_run_mark: NotRequired[Annotated[RunMark | None, PrivateStateAttr]]
    """End of the previous run; only profiles that forget earlier runs (GOLDFISH) write it."""


def _agent_name() -> str | None:
    """The running agent's name (`create_agent(name=...)`), from the run's metadata."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a graph run (a test calling the hook directly)
        return None
    metadata = config.get("metadata") or {}
    name = metadata.get("lc_agent_name")
    return name if isinstance(name, str) and name else None


def run_start(messages: Sequence[BaseMessage], mark: Any) -> int | None:
    """Index of the current run's first message, from the mark the previous run left.

    None: no earlier run. When the marked message is gone (removed or summarized away), the
    earlier runs cannot be told apart, so the whole history counts as earlier: forgetting too
    much beats remembering what the profile promised to forget.
    """
    if not isinstance(mark, Mapping):
        return None
    last_id = mark.get("last_id")
    if isinstance(last_id, str):
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == last_id:
                return index + 1
        logger.debug("run mark %s not found: treating the whole history as earlier runs", last_id)
        return len(messages)
    count = mark.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= len(messages):
        return count
    return len(messages)


def run_mark(messages: Sequence[BaseMessage]) -> RunMark:
    """The mark a run leaves when it ends."""
    return RunMark(last_id=messages[-1].id if messages else None, count=len(messages))


class MessageViewMiddleware(AgentMiddleware[MessageViewState, ContextT, ResponseT]):
    """Shows the model one person's view of the shared conversation (one instance per job).

    Args:
        person: The agent's name in the conversation. None: the name given to
            `create_agent(name=...)` (or a deep agent's subagent name); an agent without a
            name counts its unnamed AI messages as its own.
        profile: A `MemoryProfile` (or its name); FULL by default.
        settings: Explicit `MemorySettings`, with `profile=CUSTOM` (or no profile).

    Example:
        judge = create_agent(model, name="judge",
                             middleware=[MessageViewMiddleware(profile=MemoryProfile.FULL)])
        debater = create_agent(model, name="optimist",
                               middleware=[MessageViewMiddleware(profile="FOCUSED")])
    """

    state_schema = MessageViewState

    def __init__(
        self,
        *,
        person: str | None = None,
        profile: MemoryProfile | str = MemoryProfile.FULL,
        settings: MemorySettings | None = None,
    ) -> None:
        super().__init__()
        self.person = check_person(person)
        self.settings = resolve_settings(profile, settings)

    def view(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        """The request with the job's view of the conversation in place of all messages.

        Args:
            request: The model request, with the whole conversation.

        Returns:
            The request with the view's messages.
        """
        person = self.person if self.person is not None else check_person(_agent_name())
        start = None
        if self.settings.forget_earlier_runs:
            start = run_start(request.messages, (request.state or {}).get(RUN_MARK_KEY))
        messages = view_messages(
            request.messages, person=person, settings=self.settings, run_start=start
        )
        return request.override(messages=messages)  # type: ignore[arg-type]

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelCallResult[ResponseT]:
        """Call the model with the job's view of the conversation.

        Args:
            request: The model request.
            handler: Calls the model (and the middlewares inside this one).

        Returns:
            The model's response.
        """
        return handler(self.view(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelCallResult[ResponseT]:
        """Async twin of `wrap_model_call`."""
        return await handler(self.view(request))

    def after_agent(
        self, state: MessageViewState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Under a profile that forgets earlier runs, remember where this run ended: the next
        run shows nothing before it. Other profiles change nothing here.

        Args:
            state: The final state of the run.
            runtime: The run's runtime.

        Returns:
            The state update (where this run ended), or None.
        """
        return _run_end_update(self.settings, state)

    async def aafter_agent(
        self, state: MessageViewState, runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        return _run_end_update(self.settings, state)


def _run_end_update(settings: MemorySettings, state: Mapping[str, Any]) -> dict[str, Any] | None:
    if not settings.forget_earlier_runs:
        return None
    return {RUN_MARK_KEY: run_mark(state.get("messages") or [])}
