"""Reading a run's data: the state, the runtime context and `config["configurable"]`.

`PIPELINE_END` handlers receive the final state plus `config`, `runtime_context` and
`thread_id`; the middleware reads match keys from the same places. One set of helpers, so every
reader agrees on where a value may come from and what counts as true.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    """`key` from the state, then the runtime context, then `config["configurable"]`."""
    value = data.get(key)
    if value is None:
        value = context_value(data.get("runtime_context"), key)
    if value is None:
        value = configurable(data).get(key)
    return value


def truthy(value: Any) -> bool:
    """A flag's value, accepting the strings a config file or CLI would give."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_WORDS
    return bool(value)


def is_dry_run(data: Mapping[str, Any]) -> bool:
    """Whether `dry_run` is true in the state, the runtime context or the config."""
    sources = (data, data.get("runtime_context"), configurable(data))
    return any(truthy(context_value(source, "dry_run")) for source in sources)


def thread_id_of(data: Mapping[str, Any]) -> str | None:
    """The run's thread id (also its session key): `thread_id`, else the config's."""
    value = data.get("thread_id") or configurable(data).get("thread_id")
    return None if value is None else str(value)
