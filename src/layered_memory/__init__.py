"""layered-memory: layered, budgeted, self-updating memory for LangChain and deepagents agents.

Start with `MemoryMiddleware` and `Layer`; the capabilities have their own modules
(`layered_memory.rules`, `.sessions`, `.views`, `.graph`, `.tiers`, `.checkpoint`) and
`layered_memory.testing` has the scripted model for trying it offline.
"""

# Names are imported on first use (PEP 562 `__getattr__`), not with the package: see
# docs/development.md ("The package root imports lazily").

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers and the docs
    from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
    from layered_memory.core.guard import protect
    from layered_memory.core.layers import Layer
    from layered_memory.core.options import MemoryOptions
    from layered_memory.core.protection import ProtectedPaths
    from layered_memory.core.shared_memory import (
        ORG_AGENTS,
        ORG_RULES,
        PROJECT_AGENTS,
        PROJECT_MEMORY,
        USER_MEMORY,
        shared_memory_backend,
        shared_memory_layers,
        user_namespace,
    )
    from layered_memory.errors import (
        LayeredMemoryError,
        MemorySourceError,
        MemoryWriteError,
        ReviewError,
        RuleFileError,
        SessionKeyError,
        SessionStoreError,
        StoreUnavailableError,
    )
    from layered_memory.forgetting import ForgetReport, aforget, forget
    from layered_memory.middleware import MemoryMiddleware
    from layered_memory.safety.redaction import redact
    from layered_memory.sessions import build_session_key, build_thread_config, parse_session_key
    from layered_memory.sessions.stores import (
        FileSessionStore,
        HybridSessionStore,
        InMemorySessionStore,
        PostgresSessionStore,
        RedisSessionStore,
        SessionStore,
    )
    from layered_memory.writeback.consolidation import MemoryConsolidator
    from layered_memory.writeback.hooks import HookEvent, HookRegistry
    from layered_memory.writeback.insights import (
        InsightNotebook,
        MemoryWriter,
        record_insight_tool,
        register_write_back,
    )

__version__ = "0.1.0"

_HOMES = {
    "layered_memory.core.assembler": (
        "MemoryAssembler",
        "MemorySnapshot",
    ),
    "layered_memory.core.guard": ("protect",),
    "layered_memory.core.layers": ("Layer",),
    "layered_memory.core.options": ("MemoryOptions",),
    "layered_memory.core.protection": ("ProtectedPaths",),
    "layered_memory.core.shared_memory": (
        "ORG_AGENTS",
        "ORG_RULES",
        "PROJECT_AGENTS",
        "PROJECT_MEMORY",
        "USER_MEMORY",
        "shared_memory_backend",
        "shared_memory_layers",
        "user_namespace",
    ),
    "layered_memory.errors": (
        "LayeredMemoryError",
        "MemorySourceError",
        "MemoryWriteError",
        "ReviewError",
        "RuleFileError",
        "SessionKeyError",
        "SessionStoreError",
        "StoreUnavailableError",
    ),
    "layered_memory.middleware": ("MemoryMiddleware",),
    "layered_memory.sessions": (
        "build_session_key",
        "build_thread_config",
        "parse_session_key",
    ),
    "layered_memory.sessions.stores": (
        "FileSessionStore",
        "HybridSessionStore",
        "InMemorySessionStore",
        "PostgresSessionStore",
        "RedisSessionStore",
        "SessionStore",
    ),
    "layered_memory.writeback.consolidation": ("MemoryConsolidator",),
    "layered_memory.writeback.hooks": (
        "HookEvent",
        "HookRegistry",
    ),
    "layered_memory.writeback.insights": (
        "InsightNotebook",
        "MemoryWriter",
        "record_insight_tool",
        "register_write_back",
    ),
    "layered_memory.safety.redaction": ("redact",),
    "layered_memory.forgetting": ("ForgetReport", "aforget", "forget"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [  # noqa: RUF022 (the order the API reference shows: the main use case first)
    "MemoryMiddleware",
    "Layer",
    "MemoryOptions",
    "HookEvent",
    "HookRegistry",
    "MemoryWriter",
    "register_write_back",
    "MemoryConsolidator",
    "InsightNotebook",
    "record_insight_tool",
    "build_session_key",
    "build_thread_config",
    "parse_session_key",
    "SessionStore",
    "InMemorySessionStore",
    "FileSessionStore",
    "RedisSessionStore",
    "PostgresSessionStore",
    "HybridSessionStore",
    "MemoryAssembler",
    "MemorySnapshot",
    "protect",
    "ProtectedPaths",
    "redact",
    "forget",
    "aforget",
    "ForgetReport",
    "shared_memory_backend",
    "shared_memory_layers",
    "user_namespace",
    "ORG_AGENTS",
    "ORG_RULES",
    "PROJECT_AGENTS",
    "PROJECT_MEMORY",
    "USER_MEMORY",
    "LayeredMemoryError",
    "MemorySourceError",
    "MemoryWriteError",
    "ReviewError",
    "RuleFileError",
    "SessionKeyError",
    "SessionStoreError",
    "StoreUnavailableError",
    "__version__",
]


if not TYPE_CHECKING:  # type checkers see the imports above: a misspelt name stays an error

    def __getattr__(name: str) -> Any:
        """Import a public name from its home on first use, then keep it here."""
        home = _HOME_OF.get(name)
        if home is None:
            elsewhere = None if name.startswith("__") else _public_home_of(name)
            if elsewhere is not None:
                # `from layered_memory import X` would say only "cannot import name"
                # (Python drops an AttributeError's message there): name the module instead.
                msg = (
                    f"{name!r} is not in {__name__!r}: import it from its module, "
                    f"`from {elsewhere} import {name}`"
                )
                raise ImportError(msg, name=__name__)
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value


_PUBLIC_MODULES = (
    "layered_memory.testing",
    "layered_memory.rules",
    "layered_memory.checkpoint",
    "layered_memory.sessions",
    "layered_memory.sessions.stores",
    "layered_memory.views",
    "layered_memory.graph",
    "layered_memory.tiers",
    "layered_memory.writeback.hooks",
    "layered_memory.writeback.insights",
    "layered_memory.writeback.consolidation",
)
"""The public homes searched (only when a name is missing here) to say where a name lives."""


def _public_home_of(name: str) -> str | None:
    """The public module whose `__all__` has `name`: searched on the error path only (it
    imports them; a module whose optional extra is missing is skipped)."""
    for module_name in _PUBLIC_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if name in getattr(module, "__all__", ()):
            return module_name
    return None


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
