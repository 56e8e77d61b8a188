"""The MCP memory server's nine tools as LangChain tools, with its names and input schemas.

The input schemas are the JSON schemas the server publishes (`tools/list`), so a model that
learned the server's tools calls these the same way; results are the server's result text
(`JSON.stringify(result, null, 2)`, or its success sentences for deletions). Arguments are
checked by `KnowledgeGraph` (the server's zod rules) and a bad one comes back as an error
result naming the argument, as the server's validation error does.

Unlike the server, a result longer than `max_result_chars` is cut with a note saying how to
narrow it down, so `read_graph` on a large graph cannot flood the context window.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from layered_memory.errors import LayeredMemoryError
from layered_memory.graph._format import dumps_pretty
from layered_memory.graph.knowledge_graph import KnowledgeGraph

MUTATING_TOOLS = frozenset(
    {
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
    }
)
READ_TOOLS = ("read_graph", "search_nodes", "open_nodes")

DEFAULT_MAX_RESULT_CHARS = 40_000

_ENTITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The name of the entity"},
        "entityType": {"type": "string", "description": "The type of the entity"},
        "observations": {
            "type": "array",
            "items": {"type": "string"},
            "description": "An array of observation contents associated with the entity",
        },
    },
    "required": ["name", "entityType", "observations"],
}
_RELATION = {
    "type": "object",
    "properties": {
        "from": {
            "type": "string",
            "description": "The name of the entity where the relation starts",
        },
        "to": {"type": "string", "description": "The name of the entity where the relation ends"},
        "relationType": {"type": "string", "description": "The type of the relation"},
    },
    "required": ["from", "to", "relationType"],
}


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _names(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


# name -> (description, input schema): the server's own wording, so models trained on it
# recognize the tools.
SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "create_entities": (
        "Create multiple new entities in the knowledge graph",
        _schema({"entities": {"type": "array", "items": _ENTITY}}),
    ),
    "create_relations": (
        "Create multiple new relations between entities in the knowledge graph. Relations "
        "should be in active voice",
        _schema({"relations": {"type": "array", "items": _RELATION}}),
    ),
    "add_observations": (
        "Add new observations to existing entities in the knowledge graph",
        _schema(
            {
                "observations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "entityName": {
                                "type": "string",
                                "description": "The name of the entity to add the observations to",
                            },
                            "contents": _names("An array of observation contents to add"),
                        },
                        "required": ["entityName", "contents"],
                    },
                }
            }
        ),
    ),
    "delete_entities": (
        "Delete multiple entities and their associated relations from the knowledge graph",
        _schema({"entityNames": _names("An array of entity names to delete")}),
    ),
    "delete_observations": (
        "Delete specific observations from entities in the knowledge graph",
        _schema(
            {
                "deletions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "entityName": {
                                "type": "string",
                                "description": "The name of the entity containing the observations",
                            },
                            "observations": _names("An array of observations to delete"),
                        },
                        "required": ["entityName", "observations"],
                    },
                }
            }
        ),
    ),
    "delete_relations": (
        "Delete multiple relations from the knowledge graph",
        _schema(
            {
                "relations": {
                    "type": "array",
                    "items": _RELATION,
                    "description": "An array of relations to delete",
                }
            }
        ),
    ),
    "read_graph": ("Read the entire knowledge graph", {"type": "object", "properties": {}}),
    "search_nodes": (
        "Search for nodes in the knowledge graph based on a query",
        _schema(
            {
                "query": {
                    "type": "string",
                    "description": "The search query to match against entity names, types, "
                    "and observation content",
                }
            }
        ),
    ),
    "open_nodes": (
        "Open specific nodes in the knowledge graph by their names",
        _schema({"names": _names("An array of entity names to retrieve")}),
    ),
}

_DONE = {
    "delete_entities": "Entities deleted successfully",
    "delete_observations": "Observations deleted successfully",
    "delete_relations": "Relations deleted successfully",
}
_ARGUMENT = {
    "create_entities": "entities",
    "create_relations": "relations",
    "add_observations": "observations",
    "delete_entities": "entityNames",
    "delete_observations": "deletions",
    "delete_relations": "relations",
    "search_nodes": "query",
    "open_nodes": "names",
}


def _result_text(name: str, result: Any, max_chars: int) -> str:
    text = _DONE.get(name) or dumps_pretty(result)
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n… [result cut: {len(text) - max_chars:,} more chars. Narrow it "
        "down with search_nodes(query) or open_nodes(names).]"
    )


def _missing(name: str, kwargs: dict[str, Any]) -> None:
    argument = _ARGUMENT.get(name)
    if argument is not None and argument not in kwargs:
        msg = f"Invalid arguments for tool {name}: {argument} is required"
        raise ToolException(msg)


def _make_tool(graph: KnowledgeGraph, name: str, max_chars: int) -> BaseTool:
    description, schema = SPECS[name]
    method: Callable[..., Any] = getattr(graph, name)
    amethod: Callable[..., Awaitable[Any]] = getattr(graph, f"a{name}")
    argument = _ARGUMENT.get(name)

    def run(**kwargs: Any) -> str:
        _missing(name, kwargs)
        try:
            result = method(kwargs[argument]) if argument else method()
        except LayeredMemoryError as exc:
            raise ToolException(_error_text(exc)) from exc
        return _result_text(name, result, max_chars)

    async def arun(**kwargs: Any) -> str:
        _missing(name, kwargs)
        try:
            result = await (amethod(kwargs[argument]) if argument else amethod())
        except LayeredMemoryError as exc:
            raise ToolException(_error_text(exc)) from exc
        return _result_text(name, result, max_chars)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=schema,
        handle_tool_error=True,
    )


def _error_text(exc: LayeredMemoryError) -> str:
    return str(getattr(exc, "reason", None) or exc)


def graph_tools(
    graph: KnowledgeGraph, *, writable: bool, max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> list[BaseTool]:
    """The server's tools over `graph` (only the three reading ones when not `writable`)."""
    names = [name for name in SPECS if writable or name not in MUTATING_TOOLS]
    return [_make_tool(graph, name, max_result_chars) for name in names]
