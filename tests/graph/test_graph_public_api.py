"""`layered_memory.graph` exports exactly its public names (the DESIGN.md contract)."""

from __future__ import annotations

import layered_memory
import layered_memory.errors
import layered_memory.graph as graph


def test_graph_public_names_are_pinned() -> None:
    assert sorted(graph.__all__) == [
        "DEFAULT_PATH",
        "Entity",
        "EntityNotFoundError",
        "GraphData",
        "KnowledgeGraph",
        "KnowledgeGraphError",
        "KnowledgeGraphInputError",
        "KnowledgeGraphMiddleware",
        "KnowledgeGraphState",
        "MAX_TEXT_CHARS",
        "ObservationAddition",
        "ObservationDeletion",
        "ObservationResult",
        "Relation",
        "mcp_server",
    ]
    for name in graph.__all__:
        assert getattr(graph, name) is not None
    assert "KnowledgeGraph" not in layered_memory.__all__  # the top level is not touched
    assert issubclass(graph.KnowledgeGraphError, layered_memory.errors.LayeredMemoryError)
