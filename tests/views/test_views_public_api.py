"""`layered_memory.views` is the one public namespace of the views: pinned, and self-contained."""

from __future__ import annotations

import ast
from pathlib import Path

import layered_memory.views as views

PUBLIC = [
    "ROUTE_KEY",
    "SYSTEM",
    "USER",
    "KeepPredicate",
    "MemoryProfile",
    "MemoryProfileFactory",
    "MemorySettings",
    "MessageView",
    "MessageViewMiddleware",
    "MessageViewState",
    "addressed",
    "view_messages",
]


def test_all_is_pinned_and_every_name_imports() -> None:
    assert sorted(views.__all__) == sorted(PUBLIC)
    for name in views.__all__:
        assert getattr(views, name) is not None


FORBIDDEN = ("checkpoint", "graph", "tiers", "cli", "writeback", "sessions")


def test_views_import_nothing_of_the_other_capabilities() -> None:
    # views is independent of checkpoint, graph and tiers, and below the middleware and the CLI
    # (DESIGN.md's layering); it may use core's text sanitizer and the package's logger.
    folder = Path(views.__file__).parent
    outside = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            outside += [
                f"{path.name}: {name}"
                for name in names
                if name.startswith(tuple(f"layered_memory.{other}" for other in FORBIDDEN))
                or name == "layered_memory.middleware"
            ]
    assert outside == []
