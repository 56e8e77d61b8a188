"""layered-memory: layered, budgeted, self-updating memory for LangChain and deepagents agents.

The public names are pinned by `tests/test_public_api.py`.
"""

from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.guard import ProtectedPaths, protect
from layered_memory.core.layers import Layer
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
from layered_memory.middleware import MemoryMiddleware
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
from layered_memory.writeback.redaction import redact

__version__ = "0.1.0"

__all__ = [
    "ORG_AGENTS",
    "ORG_RULES",
    "PROJECT_AGENTS",
    "PROJECT_MEMORY",
    "USER_MEMORY",
    "FileSessionStore",
    "HookEvent",
    "HookRegistry",
    "HybridSessionStore",
    "InMemorySessionStore",
    "InsightNotebook",
    "Layer",
    "LayeredMemoryError",
    "MemoryAssembler",
    "MemoryConsolidator",
    "MemoryMiddleware",
    "MemorySnapshot",
    "MemorySourceError",
    "MemoryWriteError",
    "MemoryWriter",
    "PostgresSessionStore",
    "ProtectedPaths",
    "RedisSessionStore",
    "ReviewError",
    "RuleFileError",
    "SessionKeyError",
    "SessionStore",
    "SessionStoreError",
    "StoreUnavailableError",
    "__version__",
    "build_session_key",
    "build_thread_config",
    "parse_session_key",
    "protect",
    "record_insight_tool",
    "redact",
    "register_write_back",
    "shared_memory_backend",
    "shared_memory_layers",
    "user_namespace",
]
