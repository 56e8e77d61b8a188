"""layered-memory: layered, budgeted, self-updating memory for LangChain and deepagents agents.

The public names are pinned by `tests/test_public_api.py`.
"""

from layered_memory.core.assembler import MemoryAssembler, MemorySnapshot
from layered_memory.core.layers import Layer
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
from layered_memory.writeback.insights import MemoryWriter, register_write_back

__version__ = "0.1.0"

__all__ = [
    "FileSessionStore",
    "HookEvent",
    "HookRegistry",
    "HybridSessionStore",
    "InMemorySessionStore",
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
    "register_write_back",
]
