"""The MCP memory server's nine tools: their definitions, and the graph served through them as
LangChain tools (for `KnowledgeGraphMiddleware`) and as an MCP server (`mcp_server`).

The definitions are the ones the pinned reference server publishes (`tools/list` of
`@modelcontextprotocol/server-memory`): names, titles, descriptions, input and output JSON
schemas, annotations, so a model or client that learned the server's tools calls these the
same way. Results are the server's: its result text (`JSON.stringify(result, null, 2)`, or its
success sentences for deletions) and, over MCP, its `structuredContent`. Arguments are
checked by `KnowledgeGraph` (the server's zod rules) and a bad one comes back as an error
result naming the argument, as the server's validation error does.

Beyond the server:

- LangChain tools cut a result longer than `max_result_chars`, with a note saying how to
  narrow it down, so `read_graph` on a large graph cannot flood the context window.
- The MCP server defuses what it returns (text, structured content, the resource): a result
  enters the client's prompt, and a name or observation holding `</system>` or
  `<|im_start|>` comes back with the package's `defuse` backslash (`<\\/system>`), in the text
  and in `structuredContent` alike. Names given back in that form still find what was stored
  (`undefused_forms`).
- Served read-only, the six mutating tools stay listed (the same tool list as the server) and
  every call of one is an MCP tool error (`isError: true`) saying why; nothing is written.
- Calls run in worker threads through `KnowledgeGraph`'s locked transactions, so several
  clients (several servers on one file or one store namespace) never lose a write.

The MCP SDK (`mcp`, the `mcp` extra) is imported only by `mcp_server`, so importing the graph
never pays for it.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from layered_memory.errors import LayeredMemoryError
from layered_memory.graph._format import MAX_TEXT_CHARS, dumps_pretty
from layered_memory.graph.knowledge_graph import KnowledgeGraph
from layered_memory.safety.defuse import defuse

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

DEFAULT_MAX_RESULT_CHARS = 40_000

_JSON_SCHEMA = "http://json-schema.org/draft-07/schema#"


def _string(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _strings(description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    return {**schema, **({"description": description} if description else {})}


def _object(properties: dict[str, Any], *, closed: bool) -> dict[str, Any]:
    # zod's JSON schema: every property required; output objects (strict) are closed.
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    if closed:
        schema["additionalProperties"] = False
    return schema


def _root(properties: dict[str, Any], *, closed: bool) -> dict[str, Any]:
    return {"$schema": _JSON_SCHEMA, **_object(properties, closed=closed)}


def _entity(*, closed: bool) -> dict[str, Any]:
    return _object(
        {
            "name": _string("The name of the entity"),
            "entityType": _string("The type of the entity"),
            "observations": _strings("An array of observation contents associated with the entity"),
        },
        closed=closed,
    )


def _relation(*, closed: bool) -> dict[str, Any]:
    return _object(
        {
            "from": _string("The name of the entity where the relation starts"),
            "to": _string("The name of the entity where the relation ends"),
            "relationType": _string("The type of the relation"),
        },
        closed=closed,
    )


def _items(item: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {"type": "array", "items": item, **({"description": description} if description else {})}


_GRAPH_OUTPUT = _root(
    {"entities": _items(_entity(closed=True)), "relations": _items(_relation(closed=True))},
    closed=True,
)
_DONE_OUTPUT = _root({"success": {"type": "boolean"}, "message": _string()}, closed=True)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the reference server publishes it.

    Attributes:
        name: The tool's name.
        title: Its display title.
        description: What the model reads about it.
        argument: Its one argument (None: `read_graph` takes none).
        input_schema: The JSON schema of its arguments.
        output_schema: The JSON schema of its `structuredContent`.
        writes: Whether it changes the graph (refused when served read-only).
        idempotent: The `idempotentHint` annotation.
        done: The success sentence of a deletion (None: the result is data).
    """

    name: str
    title: str
    description: str
    argument: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    writes: bool
    idempotent: bool
    done: str | None = None

    def listing(self) -> dict[str, Any]:
        """The tool's `tools/list` entry, in the reference server's JSON."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "readOnlyHint": not self.writes,
                # The server's own hints: additions are not destructive, deletions are.
                "destructiveHint": self.done is not None,
                "idempotentHint": self.idempotent,
                "openWorldHint": False,
            },
            "execution": {"taskSupport": "forbidden"},
            "outputSchema": self.output_schema,
        }

    def structured(self, result: Any) -> dict[str, Any]:
        """The `structuredContent` of a successful call."""
        if self.done is not None:
            return {"success": True, "message": self.done}
        if self.name in _DATA_KEYS:
            return {_DATA_KEYS[self.name]: result}
        return dict(result)


_DATA_KEYS = {
    "create_entities": "entities",
    "create_relations": "relations",
    "add_observations": "results",
}


def _spec(
    name: str,
    description: str,
    argument: tuple[str, dict[str, Any]] | None,
    output: dict[str, Any],
    *,
    writes: bool,
    idempotent: bool,
    done: str | None = None,
) -> ToolSpec:
    properties = dict([argument]) if argument else {}
    title = name.replace("_", " ").title()
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        argument=argument[0] if argument else None,
        input_schema=_root(properties, closed=False),
        output_schema=output,
        writes=writes,
        idempotent=idempotent,
        done=done,
    )


_SPECS = (
    _spec(
        "create_entities",
        "Create multiple new entities in the knowledge graph",
        ("entities", _items(_entity(closed=False))),
        _root({"entities": _items(_entity(closed=True))}, closed=True),
        writes=True,
        idempotent=False,
    ),
    _spec(
        "create_relations",
        "Create multiple new relations between entities in the knowledge graph. Relations "
        "should be in active voice",
        ("relations", _items(_relation(closed=False))),
        _root({"relations": _items(_relation(closed=True))}, closed=True),
        writes=True,
        idempotent=False,
    ),
    _spec(
        "add_observations",
        "Add new observations to existing entities in the knowledge graph",
        (
            "observations",
            _items(
                _object(
                    {
                        "entityName": _string("The name of the entity to add the observations to"),
                        "contents": _strings("An array of observation contents to add"),
                    },
                    closed=False,
                )
            ),
        ),
        _root(
            {
                "results": _items(
                    _object({"entityName": _string(), "addedObservations": _strings()}, closed=True)
                )
            },
            closed=True,
        ),
        writes=True,
        idempotent=False,
    ),
    _spec(
        "delete_entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        ("entityNames", _strings("An array of entity names to delete")),
        _DONE_OUTPUT,
        writes=True,
        idempotent=True,
        done="Entities deleted successfully",
    ),
    _spec(
        "delete_observations",
        "Delete specific observations from entities in the knowledge graph",
        (
            "deletions",
            _items(
                _object(
                    {
                        "entityName": _string("The name of the entity containing the observations"),
                        "observations": _strings("An array of observations to delete"),
                    },
                    closed=False,
                )
            ),
        ),
        _DONE_OUTPUT,
        writes=True,
        idempotent=True,
        done="Observations deleted successfully",
    ),
    _spec(
        "delete_relations",
        "Delete multiple relations from the knowledge graph",
        ("relations", _items(_relation(closed=False), "An array of relations to delete")),
        _DONE_OUTPUT,
        writes=True,
        idempotent=True,
        done="Relations deleted successfully",
    ),
    _spec(
        "read_graph",
        "Read the entire knowledge graph",
        None,
        _GRAPH_OUTPUT,
        writes=False,
        idempotent=True,
    ),
    _spec(
        "search_nodes",
        "Search for nodes in the knowledge graph based on a query",
        (
            "query",
            _string(
                "The search query to match against entity names, types, and observation content"
            ),
        ),
        _GRAPH_OUTPUT,
        writes=False,
        idempotent=True,
    ),
    _spec(
        "open_nodes",
        "Open specific nodes in the knowledge graph by their names",
        ("names", _strings("An array of entity names to retrieve")),
        _GRAPH_OUTPUT,
        writes=False,
        idempotent=True,
    ),
)

SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
"""The nine tools, in the reference server's order."""

MUTATING_TOOLS = frozenset(name for name, spec in SPECS.items() if spec.writes)


def _missing_argument(spec: ToolSpec, arguments: Mapping[str, Any]) -> str | None:
    if spec.argument is not None and spec.argument not in arguments:
        return f"Invalid arguments for tool {spec.name}: {spec.argument} is required"
    return None


def _call(graph: KnowledgeGraph, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
    method: Callable[..., Any] = getattr(graph, spec.name)
    return method(arguments[spec.argument]) if spec.argument else method()


def _error_text(exc: LayeredMemoryError) -> str:
    return str(getattr(exc, "reason", None) or exc)


# --- LangChain tools ----------------------------------------------------------------------


def _result_text(spec: ToolSpec, result: Any, max_chars: int) -> str:
    text = spec.done or dumps_pretty(result)
    if len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n… [result cut: {len(text) - max_chars:,} more chars. Narrow it "
        "down with search_nodes(query) or open_nodes(names).]"
    )


def _langchain_tool(graph: KnowledgeGraph, spec: ToolSpec, max_chars: int) -> BaseTool:
    amethod: Callable[..., Awaitable[Any]] = getattr(graph, f"a{spec.name}")

    def run(**kwargs: Any) -> str:
        missing = _missing_argument(spec, kwargs)
        if missing is not None:
            raise ToolException(missing)
        try:
            result = _call(graph, spec, kwargs)
        except LayeredMemoryError as exc:
            raise ToolException(_error_text(exc)) from exc
        return _result_text(spec, result, max_chars)

    async def arun(**kwargs: Any) -> str:
        missing = _missing_argument(spec, kwargs)
        if missing is not None:
            raise ToolException(missing)
        try:
            result = await (amethod(kwargs[spec.argument]) if spec.argument else amethod())
        except LayeredMemoryError as exc:
            raise ToolException(_error_text(exc)) from exc
        return _result_text(spec, result, max_chars)

    # Providers take a plain JSON schema for a function's parameters (no `$schema`).
    schema = {key: value for key, value in spec.input_schema.items() if key != "$schema"}
    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=spec.name,
        description=spec.description,
        args_schema=schema,
        handle_tool_error=True,
    )


def graph_tools(
    graph: KnowledgeGraph, *, writable: bool, max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> list[BaseTool]:
    """The server's tools over `graph` (only the three reading ones when not `writable`)."""
    return [
        _langchain_tool(graph, spec, max_result_chars)
        for spec in SPECS.values()
        if writable or not spec.writes
    ]


# --- the MCP server -----------------------------------------------------------------------

RESOURCE_URI = "memory://knowledge-graph"
"""The reference server's resource: the whole graph as JSON."""


def _defused(value: Any) -> Any:
    """`value` with `defuse` applied to every string in it (keys are the schema's own)."""
    if isinstance(value, str):
        return defuse(value)
    if isinstance(value, list):
        return [_defused(item) for item in value]
    if isinstance(value, dict):
        return {key: _defused(item) for key, item in value.items()}
    return value


def capped_result(value: Any) -> Any:
    """`value` with every string longer than `MAX_TEXT_CHARS` replaced by a marker saying how
    long it was (a file written by another server may hold one): a result stays small enough
    for any client to read. Unchanged containers are returned as they are."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT_CHARS:
            return value
        return (
            f"[{len(value):,} characters left out: over the {MAX_TEXT_CHARS:,}-character limit "
            "of one name, type or observation; delete it and store it again in parts]"
        )
    if isinstance(value, list):
        items = [capped_result(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {key: capped_result(item) for key, item in value.items()}
        return value if all(pairs[key] is value[key] for key in value) else pairs
    return value


def defused_result(result: Any) -> tuple[str, Any]:
    """The result's text and value as they may enter a prompt.

    One `defuse` pass over the whole text finds out whether anything needs it (it is linear,
    and almost every graph has nothing to defuse); only then is each string defused and the
    text written again, so the text and the structured value say the same.
    """
    text = dumps_pretty(result)
    if defuse(text) == text:
        return text, result
    value = _defused(result)
    return dumps_pretty(value), value


def undefused_forms(names: list[str]) -> list[str]:
    """`names` plus, for each that reads like `defuse` output, the text it was made from: a
    name the client copied from a defused result still finds the entity as stored."""
    found = list(names)
    for name in names:
        if "\\" not in name:
            continue
        original = _undefused(name)
        if original != name and original not in found:
            found.append(original)
    return found


def _undefused(text: str) -> str:
    # `defuse` puts one backslash right after the `<` of a tag it breaks (the `<` may be a
    # look-alike): dropping every backslash that follows a non-backslash character and
    # checking that `defuse` gives the text back finds the original without knowing the set.
    if "\\" not in text:
        return text
    parts: list[str] = []
    start = 0
    while True:
        found = text.find("\\", start + 1)
        if found < 0:
            parts.append(text[start:])
            break
        parts.append(text[start:found])
        start = found + 1
    candidate = "".join(parts)
    return candidate if defuse(candidate) == text else text


def _undefused_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments naming stored records to open or delete, with their undefused forms added
    (harmless: a form naming nothing finds nothing). Arguments that create or add are stored
    as given: a name copied from a defused result does not find its entity there."""
    key = spec.argument
    value = arguments.get(key) if key is not None else None
    if key is None or not isinstance(value, list) or not any(map(_could_be_defused, value)):
        return arguments
    if spec.name in ("open_nodes", "delete_entities"):
        strings = [v for v in value if isinstance(v, str)]
        return {**arguments, key: [*value, *undefused_forms(strings)[len(strings) :]]}
    if spec.name in ("delete_relations", "delete_observations"):
        extra = [_undefused_item(item) for item in value if isinstance(item, dict)]
        return {**arguments, key: [*value, *(e for e in extra if e is not None)]}
    return arguments


def _could_be_defused(value: Any) -> bool:
    # An escaped backslash in the JSON is a backslash in some string of the value.
    return "\\\\" in json.dumps(value, ensure_ascii=False)


def _undefused_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """A relation or observation deletion with every string undefused (None: unchanged)."""
    plain: dict[str, Any] = {}
    for key, value in item.items():
        if isinstance(value, str):
            plain[key] = _undefused(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            plain[key] = undefused_forms(value)
        else:
            plain[key] = value
    return plain if plain != item else None


def mcp_server(graph: KnowledgeGraph, *, read_only: bool = False) -> Server[Any]:
    """An MCP server (the official SDK's low-level `Server`) with the reference memory
    server's tools and resource over `graph`.

    Serve it on any transport of the SDK: `layered-memory mcp` runs it over stdio; in an app,
    `server.streamable_http_app()` serves it over HTTP.

    Args:
        graph: The graph to serve (its backend: a local file, a `StoreBackend` over a
            `PostgresStore` shared by many servers, ...). Writes are redacted when the graph
            redacts (`KnowledgeGraph(redact_secrets=True)`, the default).
        read_only: Refuse every call of a mutating tool with a tool error.

    Returns:
        The server, not yet running.

    Raises:
        ImportError: The `mcp` package is not installed (`pip install 'layered-memory[mcp]'`).
    """
    try:
        import anyio.to_thread
        import mcp.types as mcp_types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        msg = "the MCP server needs the mcp extra: pip install 'layered-memory[mcp]'"
        raise ImportError(msg) from exc
    from importlib.metadata import version

    tools = [mcp_types.Tool.model_validate(spec.listing()) for spec in SPECS.values()]

    def failure(text: str) -> mcp_types.CallToolResult:
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=defuse(text))], is_error=True
        )

    # `read_graph`'s answer for the content version last read (digest -> text, value): the
    # answer is a pure function of the content, so it is never stale; a file read again
    # unchanged (its stat signature, `_source`) costs a lookup instead of building and
    # writing the whole graph as JSON again (`make bench`, scenario 14).
    last_graph: dict[str, tuple[str, Any]] = {}
    last_graph_lock = threading.Lock()

    def whole_graph() -> tuple[str, Any]:
        snapshot = graph.snapshot()
        with last_graph_lock:
            found = last_graph.get(snapshot.digest)
        if found is None:
            found = defused_result(capped_result(snapshot.data()))
            with last_graph_lock:
                last_graph.clear()
                last_graph[snapshot.digest] = found
        return found

    def run(spec: ToolSpec, arguments: dict[str, Any]) -> mcp_types.CallToolResult | dict[str, Any]:
        try:
            if spec.name == "read_graph":
                text, value = whole_graph()
            else:
                result = _call(graph, spec, _undefused_arguments(spec, arguments))
                text, value = (
                    (spec.done, None) if spec.done else defused_result(capped_result(result))
                )
        except LayeredMemoryError as exc:
            return failure(_error_text(exc))
        # The result as the wire dict, which the SDK takes as it is (`HandlerResult`): a
        # `CallToolResult` would be dumped once more before the SDK validates and dumps it
        # again, one more walk of a whole graph (~100 ms at 10,000 entities, scenario 14).
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": spec.structured(value),
        }

    async def list_tools(_ctx: Any, _params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: mcp_types.CallToolRequestParams) -> Any:
        spec = SPECS.get(params.name)
        if spec is None:
            return failure(f"Tool {params.name} not found")
        arguments = dict(params.arguments or {})
        if read_only and spec.writes:
            return failure(
                f"{spec.name} refused: this knowledge graph ({graph.path}) is served "
                "read-only. Nothing was changed; read_graph, search_nodes and open_nodes read "
                "it, and whoever runs the server can serve it writable."
            )
        missing = _missing_argument(spec, arguments)
        if missing is not None:
            return failure(missing)
        # Off the event loop: a transaction waits for the file's lock, reads and writes.
        return await anyio.to_thread.run_sync(functools.partial(run, spec, arguments))

    async def list_resources(_ctx: Any, _params: Any) -> mcp_types.ListResourcesResult:
        return mcp_types.ListResourcesResult(
            resources=[
                mcp_types.Resource(
                    uri=RESOURCE_URI,
                    name="knowledge-graph",
                    title="Knowledge Graph",
                    description="The full knowledge graph with all entities and relations",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        _ctx: Any, params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        if str(params.uri) != RESOURCE_URI:
            msg = f"Resource {params.uri} not found"
            raise ValueError(msg)
        text, _value = await anyio.to_thread.run_sync(whole_graph)
        return mcp_types.ReadResourceResult(
            contents=[
                mcp_types.TextResourceContents(
                    uri=RESOURCE_URI, mime_type="application/json", text=text
                )
            ]
        )

    return Server(
        "layered-memory-graph",
        version=version("layered-memory"),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
