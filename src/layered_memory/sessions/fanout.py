"""Clean context for hand-built LangGraph graphs: memory for nodes without new parameters.

Two tools for graphs built with ``StateGraph``:

- `memory_context` / `current_memory`: bind a memory object (a rendered prompt, an assembler)
  for the duration of ``graph.invoke()`` / ``ainvoke()`` / ``stream()``; any node reads it with
  `current_memory()` while keeping its ``(state) -> dict`` signature. It rides on `contextvars`,
  which LangGraph copies into every task, thread-pool worker and parallel branch, and two runs
  in concurrent asyncio tasks each see their own binding.
- `fan_out`: build the ``Send`` payloads of a map step so that each branch receives only its
  own item plus the read-only memory context, never the parent state with other branches'
  results ("clean context" fan-out).

Example:
    >>> with memory_context(prompt):  # doctest: +SKIP
    ...     graph.invoke({"items": ["a", "b"]})
    >>> def node(state):  # doctest: +SKIP
    ...     return {"answer": llm.invoke([current_memory(), state["item"]])}
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from langgraph.types import Send

from layered_memory.errors import MemoryContextError

__all__ = ["MemoryContextError", "current_memory", "fan_out", "memory_context"]

_UNSET: Final = object()
_memory: ContextVar[object] = ContextVar("layered_memory_memory", default=_UNSET)


@contextmanager
def memory_context(memory: object) -> Iterator[object]:
    """Bind ``memory`` for the code run inside the block (including graph nodes it invokes).

    Blocks nest: the inner binding wins and the outer one comes back on exit, also when the
    block raises.

    Args:
        memory: Anything the nodes need: a rendered prompt string, a snapshot, an assembler.

    Yields:
        ``memory`` itself.
    """
    token = _memory.set(memory)
    try:
        yield memory
    finally:
        _memory.reset(token)


def current_memory(default: Any = _UNSET) -> Any:
    """Return the memory bound by the innermost enclosing `memory_context`.

    Args:
        default: Returned when nothing is bound; without it, an unbound call raises.

    Returns:
        The bound memory object.

    Raises:
        MemoryContextError: Nothing is bound and no ``default`` was given.
    """
    value = _memory.get()
    if value is _UNSET:
        if default is not _UNSET:
            return default
        msg = (
            "no memory bound: call current_memory() inside `with memory_context(...)`, "
            "around graph.invoke()/ainvoke()/stream()"
        )
        raise MemoryContextError(msg)
    return value


def fan_out(
    node: str,
    items: Iterable[Any],
    *,
    memory: object,
    item_key: str = "item",
    memory_key: str = "memory",
    extra: Mapping[str, Any] | None = None,
) -> list[Send]:
    """Build one ``Send`` per item carrying only that item and the memory context.

    Use it as the router of a conditional edge (``add_conditional_edges(src, router, [node])``).
    The parent state is deliberately not forwarded, so a branch cannot see (or be confused by)
    the results other branches have already written.

    Args:
        node: The name of the node each branch runs.
        items: One branch per item.
        memory: The read-only memory context. Mutable values are deep-copied per branch, so a
            branch changing its copy cannot change what its siblings see.
        item_key: The payload key holding the branch's item.
        memory_key: The payload key holding the memory context.
        extra: Further read-only entries every branch receives (e.g. the session key).

    Returns:
        The ``Send`` objects, in item order.

    Raises:
        ValueError: ``item_key`` and ``memory_key`` are equal or collide with ``extra``.
    """
    if item_key == memory_key:
        msg = f"item_key and memory_key must differ, both are {item_key!r}"
        raise ValueError(msg)
    shared = dict(extra or {})
    clash = {item_key, memory_key} & shared.keys()
    if clash:
        msg = f"extra must not contain the payload keys {sorted(clash)}"
        raise ValueError(msg)
    return [
        Send(
            node,
            {**_private_copy(shared), memory_key: _private_copy(memory), item_key: item},
        )
        for item in items
    ]


def _private_copy(value: Any) -> Any:
    # Immutable values are shared as they are: copying a large prompt string per branch is waste.
    if isinstance(value, str | bytes | int | float | bool | type(None)):
        return value
    return copy.deepcopy(value)
