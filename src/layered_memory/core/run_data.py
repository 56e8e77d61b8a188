"""Reading a run's data: the state, the runtime context and `config["configurable"]`.

`PIPELINE_END` handlers receive the final state plus `config`, `runtime_context` and
`thread_id`; the middleware reads match keys from the same places. One set of helpers, so every
reader agrees on where a value may come from and what counts as true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.config import get_config

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


MatchKeySource = str | Callable[[Mapping[str, Any], Any], Iterable[str]]
"""A context name read from runtime.context / state / config, or a callable(state, runtime)."""

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def context_value(context: Any, key: str) -> Any:
    """`key` of a runtime context that may be a mapping, a dataclass/object, or None."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def configurable(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data["config"]["configurable"]`, or an empty mapping."""
    config = data.get("config")
    found = config.get("configurable") if isinstance(config, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def run_value(data: Mapping[str, Any], key: str) -> Any:
    """`key` from the runtime context, then the state, then `config["configurable"]`.

    The one lookup order of the package (match keys, write-back entity, dry run): what the
    caller passed for this run wins over what the thread accumulated.
    """
    value = context_value(data.get("runtime_context"), key)
    if value is None:
        value = data.get(key)
    if value is None:
        value = configurable(data).get(key)
    return value


def run_data(
    state: Mapping[str, Any], runtime: Any, config: RunnableConfig | None
) -> dict[str, Any]:
    """The state with the run's `config`, `runtime_context` and `thread_id` beside it: what
    hooks receive and what `run_value` reads."""
    return {
        **state,
        "config": config or {},
        "runtime_context": getattr(runtime, "context", None),
        "thread_id": thread_id(config),
    }


def context_strings(
    sources: Sequence[str | Callable[[Mapping[str, Any], Any], Iterable[str]]],
    state: Mapping[str, Any],
    runtime: Any,
    config: RunnableConfig | None,
) -> list[str]:
    """The strings named by `match_keys` for this run (names looked up with `run_value`, or
    callables `(state, runtime)`), sorted and unique."""
    data = run_data(state, runtime, config)
    found: set[str] = set()
    for source in sources:
        values = source(state, runtime) if callable(source) else run_value(data, source)
        if isinstance(values, str):
            found.add(values)
        elif isinstance(values, Iterable):
            found.update(value for value in values if isinstance(value, str))
    return sorted(value for value in found if value)


def current_config(config: RunnableConfig | None = None) -> RunnableConfig | None:
    """The config LangGraph (or a direct caller) passed, else the running graph's own."""
    if config is not None:
        return config
    try:
        return get_config()
    except RuntimeError:  # called outside a graph (a hook invoked directly in a test)
        return None


def thread_id(config: RunnableConfig | None) -> str | None:
    """The run's `thread_id` from its config."""
    found = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(found) if found is not None else None


def truthy(value: Any) -> bool:
    """A flag's value, accepting the strings a config file or CLI would give."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_WORDS
    return bool(value)


def is_dry_run(data: Mapping[str, Any]) -> bool:
    """Whether `dry_run` is true, looked up as every run value is (`run_value`: the runtime
    context, then the state, then the config)."""
    return truthy(run_value(data, "dry_run"))


def thread_id_of(data: Mapping[str, Any]) -> str | None:
    """The run's thread id (also its session key): `thread_id`, else the config's."""
    value = data.get("thread_id") or configurable(data).get("thread_id")
    return None if value is None else str(value)
