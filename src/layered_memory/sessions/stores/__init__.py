"""Session stores: one `SessionStore` port, five adapters that pass one conformance suite.

- `InMemorySessionStore`: a dict with TTL, for tests and single-process apps.
- `FileSessionStore`: one JSON file per session, replaced atomically.
- `RedisSessionStore` (``redis`` extra): ``SETEX`` with a key prefix; the usual L1.
- `PostgresSessionStore` (``postgres`` extra): a table with versioned migrations; the usual L2.
- `HybridSessionStore`: L1 in front of L2, write-through; survives a frozen, restarted or
  rolled-back L1 without ever serving a value older than L2's.

Importing this package never imports ``redis`` or ``psycopg``; the adapters do, when built.
"""

from __future__ import annotations

from layered_memory.sessions.stores.base import (
    ConditionalSessionStore,
    ExpiryAwareSessionStore,
    GenerationalSessionStore,
    ListableSessionStore,
    SessionStore,
    StoredSession,
)
from layered_memory.sessions.stores.file import FileSessionStore
from layered_memory.sessions.stores.hybrid import HybridSessionStore
from layered_memory.sessions.stores.memory import InMemorySessionStore
from layered_memory.sessions.stores.postgres import MIGRATIONS, PostgresSessionStore
from layered_memory.sessions.stores.redis import RedisSessionStore

__all__ = [
    "MIGRATIONS",
    "ConditionalSessionStore",
    "ExpiryAwareSessionStore",
    "FileSessionStore",
    "GenerationalSessionStore",
    "HybridSessionStore",
    "InMemorySessionStore",
    "ListableSessionStore",
    "PostgresSessionStore",
    "RedisSessionStore",
    "SessionStore",
    "StoredSession",
]
