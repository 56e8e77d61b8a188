"""A scripted chat model and a lexical embedding for tests, examples and benchmarks.

No API key, no model download, fully repeatable.

Each model call consumes the next step of a script. A step is an `AIMessage`, a plain string
(a final answer), or a callable that receives the prompt messages and returns either of those,
so a step can answer from what the memory block put into the system prompt.

Example:
    model = ScriptedChatModel(script=[
        tool_call("read_file", file_path="/AGENTS.md"),
        lambda messages: f"The system prompt was {len(messages[0].text)} chars long",
    ])
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr, field_validator

__all__ = [
    "LexicalEmbeddings",
    "PromptRecorder",
    "ScriptedChatModel",
    "system_text",
    "tool_call",
]

ScriptStep = AIMessage | str | Callable[[list[BaseMessage]], "AIMessage | str"]

_call_ids = itertools.count(1)


__all__ = ["LexicalEmbeddings", "PromptRecorder", "ScriptedChatModel", "system_text", "tool_call"]


def tool_call(name: str, /, **args: Any) -> AIMessage:
    """An `AIMessage` asking for one tool call (a step of a script).

    Args:
        name: The tool's name.
        **args: The tool's arguments.

    Returns:
        The message, with a fresh tool-call id.
    """
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{next(_call_ids)}", "type": "tool_call"}
        ],
    )


def system_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the system message in a prompt ("" when there is none).

    Args:
        messages: The prompt, as a model received it (`PromptRecorder` keeps them).

    Returns:
        The system message's text.
    """
    for message in messages:
        if isinstance(message, SystemMessage):
            return message.text
    return ""


class PromptRecorder(BaseCallbackHandler):
    """A callback keeping the system prompt of every model call, for a scripted or real model.

    Pass it in the run config (`{"callbacks": [recorder]}`): it sees the messages exactly as
    the model received them, after every middleware has changed the request.
    """

    def __init__(self) -> None:
        self.system_prompts: list[str] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.system_prompts.extend(system_text(batch) for batch in messages)


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays a script and records every prompt it receives.

    Attributes:
        script: The steps, consumed one per model call.
        default: Answer given once the script is exhausted, a step like any other (an
            `AIMessage`, a string, or a callable of the prompt messages), replayed for every
            extra call; `None` raises instead, so a test notices an unexpected extra model call.
    """

    script: list[Any]
    # `Any`, checked below: in a pydantic union, AIMessage's own validator fails on a function
    # with a raw AttributeError before `Callable` is tried.
    default: Any = None
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)

    @field_validator("default")
    @classmethod
    def _default_is_a_step(cls, value: Any) -> ScriptStep | None:
        if value is None or isinstance(value, str | AIMessage) or callable(value):
            return value  # type: ignore[no-any-return]
        msg = (
            "default must be a script step (an AIMessage, a str, or a callable of the prompt "
            f"messages) or None; got {type(value).__name__}"
        )
        raise ValueError(msg)

    @property
    def _llm_type(self) -> str:
        return "layered-memory-scripted"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Every prompt received so far, oldest first."""
        return list(self._prompts)

    @property
    def system_prompts(self) -> list[str]:
        """The system-message text of every prompt received so far."""
        return [system_text(prompt) for prompt in self._prompts]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        # The script already says which tools to call; binding changes nothing.
        return self

    def _next_step(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._prompts.append(list(messages))
            position = self._position
            self._position += 1
        if position < len(self.script):
            step = self.script[position]
        elif self.default is not None:
            step = self.default
        else:
            msg = f"ScriptedChatModel: script exhausted after {len(self.script)} steps"
            raise RuntimeError(msg)
        if callable(step) and not isinstance(step, AIMessage):
            step = step(list(messages))
        if isinstance(step, str):
            return AIMessage(content=step)
        if not isinstance(step, AIMessage):
            msg = f"ScriptedChatModel: step {position} gave {type(step).__name__}, not a message"
            raise TypeError(msg)
        # A fresh copy each time: the same scripted message may be replayed by several tests.
        return step.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next_step(messages))])


class LexicalEmbeddings(Embeddings):
    """A deterministic bag-of-words embedding: hashed content words, L2-normalized.

    Texts sharing content words get a positive cosine; texts sharing none get (almost) zero,
    up to hash collisions. Enough to test retrieval, run the demo and the evaluation offline;
    a real deployment passes a real LangChain `Embeddings`.

    Args:
        dimensions: Length of every vector (default 512).
    """

    def __init__(self, *, dimensions: int = 512) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 8:
            msg = f"dimensions must be an int >= 8, got {dimensions!r}"
            raise ValueError(msg)
        self.dimensions = dimensions
        # Imported here so that `layered_memory.testing` loads without the `tiers` extra.
        from layered_memory.recall.text import tokens

        self._tokens = tokens

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word, count in Counter(self._tokens(text)).items():
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            # A signed hash: colliding words cancel out on average instead of adding up.
            sign = 1.0 if digest & 1 else -1.0
            vector[(digest >> 1) % self.dimensions] += sign * (1.0 + math.log(count))
        norm = math.sqrt(sum(value * value for value in vector))
        return [value / norm for value in vector] if norm else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text.

        Args:
            texts: The documents.

        Returns:
            Their vectors, in order.
        """
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The vector of one text (queries and documents share one space).

        Args:
            text: The query.

        Returns:
            Its vector.
        """
        return self._vector(text)
