"""The public names are a contract: adding or removing one is a deliberate, reviewed change."""

from __future__ import annotations

import layered_memory

CONTRACT = {  # from DESIGN.md: users and acceptance checks import these
    "MemoryMiddleware",
    "Layer",
    "HookEvent",
    "HookRegistry",
    "MemoryWriter",
    "MemoryConsolidator",
    "register_write_back",
    "build_session_key",
    "parse_session_key",
    "build_thread_config",
    "InMemorySessionStore",
    "FileSessionStore",
    "RedisSessionStore",
    "PostgresSessionStore",
    "HybridSessionStore",
}


def test_all_is_pinned() -> None:
    assert sorted(layered_memory.__all__) == sorted(
        [
            *CONTRACT,
            "LayeredMemoryError",
            "MemoryAssembler",
            "MemorySnapshot",
            "MemorySourceError",
            "MemoryWriteError",
            "ReviewError",
            "RuleFileError",
            "SessionKeyError",
            "SessionStore",
            "SessionStoreError",
            "StoreUnavailableError",
            "__version__",
        ]
    )


def test_every_exported_name_exists() -> None:
    for name in layered_memory.__all__:
        assert getattr(layered_memory, name) is not None, name
