"""The one place that reads private internals of deepagents (written against deepagents 0.7.32).

deepagents has no public API for these; each is used by name here only, so an upgrade that
renames one breaks this module and `tests/test_deepagents_internals.py`, not the features.
"""

from __future__ import annotations

from typing import Any

from deepagents.backends.composite import CompositeBackend

WRITTEN_FOR = "0.7.32"
"""The deepagents version these adapters were written and tested against."""


def route(backend: CompositeBackend, path: str) -> tuple[Any, str, str | None]:
    """Where a `CompositeBackend` sends `path`: `(backend, path there, route prefix or None)`.

    The same function deepagents routes with, so a guard and the backend never disagree on
    which backend a path lands in.
    """
    from deepagents.backends.composite import _route_for_path

    return _route_for_path(default=backend.default, sorted_routes=backend.sorted_routes, path=path)
