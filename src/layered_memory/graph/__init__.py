"""Knowledge-graph memory, file-compatible with the MCP reference memory server.

One `memory.jsonl` can be shared by Claude Desktop's `@modelcontextprotocol/server-memory` and
a LangChain or deepagents agent: `KnowledgeGraph` runs the server's nine operations on the file
in any deepagents backend (with cross-process write locks and secret redaction the server
lacks), `KnowledgeGraphMiddleware` gives an agent the server's tools plus what the graph
knows about the entities in focus, within a character budget, and `mcp_server` serves the
graph to any MCP client with the server's tools (`layered-memory mcp --graph FILE`).

Example:
    from deepagents.backends import FilesystemBackend
    from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware

    backend = FilesystemBackend(root_dir=".", virtual_mode=True)
    KnowledgeGraph(backend).create_entities(
        [{"name": "Ada_Lovelace", "entityType": "person", "observations": ["Wrote notes"]}]
    )
    middleware = KnowledgeGraphMiddleware(backend=backend)
"""

from __future__ import annotations

from layered_memory.errors import (
    EntityNotFoundError,
    KnowledgeGraphError,
    KnowledgeGraphInputError,
)
from layered_memory.graph._format import (
    MAX_TEXT_CHARS,
    Entity,
    GraphData,
    ObservationAddition,
    ObservationDeletion,
    ObservationResult,
    Relation,
)
from layered_memory.graph._tools import mcp_server
from layered_memory.graph.knowledge_graph import DEFAULT_PATH, KnowledgeGraph
from layered_memory.graph.middleware import KnowledgeGraphMiddleware, KnowledgeGraphState

__all__ = [
    "DEFAULT_PATH",
    "MAX_TEXT_CHARS",
    "Entity",
    "EntityNotFoundError",
    "GraphData",
    "KnowledgeGraph",
    "KnowledgeGraphError",
    "KnowledgeGraphInputError",
    "KnowledgeGraphMiddleware",
    "KnowledgeGraphState",
    "ObservationAddition",
    "ObservationDeletion",
    "ObservationResult",
    "Relation",
    "mcp_server",
]
