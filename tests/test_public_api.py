"""The public names are a contract: adding or removing one is a deliberate, reviewed change."""

from __future__ import annotations

import layered_memory

CONTRACT = {  # from DESIGN.md: users and acceptance checks import these
    "LeanMemoryMiddleware",
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


def readme_imports() -> list[str]:
    """Every `from layered_memory... import ...` statement in the README's code blocks."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    statements = []
    for match in re.finditer(
        r"^(from layered_memory[\w.]* import (?:\([^)]*\)|[^\n]*))", readme, re.MULTILINE
    ):
        statements.append(" ".join(match.group(1).split()))
    return statements


def test_every_readme_import_path_works() -> None:
    """The README's import paths are public: a move inside the package must keep them."""
    statements = readme_imports()
    assert len(statements) >= 15
    for statement in statements:
        exec(statement, {})  # the README's own import lines, nothing else
