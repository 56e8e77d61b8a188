"""The public names are a contract: adding or removing one is a deliberate, reviewed change."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

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
            "InsightNotebook",
            "LayeredMemoryError",
            "MemoryAssembler",
            "MemoryOptions",
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
            # write-back's notebook and tool, the guard, redaction, shared memory on a store
            "record_insight_tool",
            "protect",
            "ProtectedPaths",
            "redact",
            "ORG_AGENTS",
            "ORG_RULES",
            "PROJECT_AGENTS",
            "PROJECT_MEMORY",
            "USER_MEMORY",
            "shared_memory_backend",
            "shared_memory_layers",
            "user_namespace",
            # forgetting a subject everywhere (issue 38)
            "ForgetReport",
            "forget",
        ]
    )


def test_every_exported_name_exists() -> None:
    for name in layered_memory.__all__:
        assert getattr(layered_memory, name) is not None, name


SUBPACKAGE_NAMESPACES = {  # rules, views, graph and tiers are pinned beside their own tests
    "layered_memory.sessions": [
        "KEY_PREFIX",
        "SESSION_SAVE_HANDLER_NAME",
        "SessionKey",
        "alist_thread_ids",
        "build_session_key",
        "build_thread_config",
        "current_memory",
        "default_session_formatter",
        "fan_out",
        "list_thread_ids",
        "memory_context",
        "normalize_key_part",
        "parse_session_key",
        "register_session_save",
    ],
    "layered_memory.sessions.stores": [
        "MIGRATIONS",
        "ConditionalSessionStore",
        "ExpiryAwareSessionStore",
        "FileSessionStore",
        "GenerationalSessionStore",
        "HybridSessionStore",
        "InMemorySessionStore",
        "PostgresSessionStore",
        "RedisSessionStore",
        "SessionStore",
        "StoredSession",
    ],
    "layered_memory.checkpoint": ["DEFAULT_PREFIX", "CachedCheckpointSaver"],
    "layered_memory.forgetting": ["ForgetReport", "SessionForgotten", "TierForgotten", "forget"],
    "layered_memory.recall": [
        "Entry",
        "RecallQuery",
        "choose_entries",
        "split_entries",
        "tokens",
    ],
}


@pytest.mark.parametrize("module_name", sorted(SUBPACKAGE_NAMESPACES))
def test_subpackage_namespaces_are_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(SUBPACKAGE_NAMESPACES[module_name])
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_no_compatibility_shims() -> None:
    """Only the public API, the middleware, errors, testing and the logger live at the top."""
    top = sorted(p.name for p in Path(layered_memory.__file__).parent.glob("*.py"))
    assert top == ["__init__.py", "_logs.py", "errors.py", "middleware.py", "testing.py"]
