"""The knowledge graph on the command line: `layered-memory graph FILE` (what a graph file holds
and what an agent would see) and `layered-memory mcp` (the graph served over MCP stdio).

`graph` reads the file with `KnowledgeGraph` and renders the focus block with
`KnowledgeGraphMiddleware.focus`, so what it prints is what the agent gets. `mcp` serves
`layered_memory.graph.mcp_server`; the MCP SDK is imported only when it runs, so the other
subcommands start without it.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layered_memory.cli._output import counted, dumps_json, printable
from layered_memory.errors import CliStoreError

if TYPE_CHECKING:
    from layered_memory.graph import KnowledgeGraph, KnowledgeGraphMiddleware

EXIT_OK = 0
EXIT_USAGE = 2

_GRAPH_DESCRIPTION = """\
Show what a knowledge-graph file (the MCP memory server's memory.jsonl) holds:
entity and relation counts, entity types, lines that are not part of the
format; with --search, what search_nodes returns; with --message (and
--session-key / --context), the exact block KnowledgeGraphMiddleware would
inject for that user message.

--json prints {"version": 1, "entities", "relations", "unknown_lines",
"entity_types": {type: count}}, plus "search": {"entities", "relations"} with
--search and "focus": {"names", "block"} with --message / --session-key /
--context. Exit status: 0, or 2 when the file cannot be read or --max-chars
is below the block's minimum (its header and guidelines)."""


def add_graph_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the `graph` subcommand."""
    parser = subparsers.add_parser(
        "graph",
        help="inspect a knowledge-graph file (MCP memory format): counts, search, focus block",
        description=_GRAPH_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the graph file, e.g. memory.jsonl")
    parser.add_argument("--search", metavar="QUERY", help="print search_nodes(QUERY)")
    parser.add_argument("--message", metavar="TEXT", help="a user message to find entities in")
    parser.add_argument(
        "--session-key", metavar="KEY", help="the run's thread id, e.g. entity:acme:support"
    )
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="VALUE",
        help="a match_keys context value naming an entity; repeatable",
    )
    parser.add_argument(
        "--max-chars", type=int, help="the block's budget (default: the middleware's)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run_graph)


def _local_file(name: str, command: str, *, must_exist: bool) -> Path | None:
    """The file the user named, wherever a symlink leads (as any tool reading a file does):
    its backend is rooted at its real folder, and would refuse a link out of it."""
    try:
        file: Path | None = Path(name).expanduser().resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        file = None
    if file is not None and file.is_dir():
        reason = "a folder, not a file"
    elif file is not None and (
        file.is_file() or (not must_exist and not file.exists() and file.parent.is_dir())
    ):
        return file
    else:
        reason = "no such file"
    print(f"layered-memory {command}: {printable(name)}: {reason}", file=sys.stderr)
    return None


def run_graph(args: argparse.Namespace) -> int:
    """Run `layered-memory graph` (see the module docstring)."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.errors import LayeredMemoryError
    from layered_memory.graph import KnowledgeGraphMiddleware

    file = _local_file(args.file, "graph", must_exist=True)
    if file is None:
        return EXIT_USAGE
    budget = {} if args.max_chars is None else {"max_chars": args.max_chars}
    try:
        middleware = KnowledgeGraphMiddleware[Any, Any](
            backend=FilesystemBackend(root_dir=file.parent, virtual_mode=True),
            path=f"/{file.name}",
            **budget,
        )
    except ValueError as exc:
        # The middleware refuses such a budget: a block printed for it would be no agent's.
        print(
            f"layered-memory graph: --max-chars {args.max_chars} is too small: {exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        report = _report(middleware, args)
    except (LayeredMemoryError, ValueError) as exc:
        print(f"layered-memory graph: {printable(args.file)}: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(dumps_json(report))
    else:
        print(_text(args.file, report))
    return EXIT_OK


def _report(middleware: KnowledgeGraphMiddleware[Any, Any], args: argparse.Namespace) -> Any:
    from layered_memory.sessions import parse_session_key

    graph = middleware.graph
    snapshot = graph.snapshot()
    types = Counter(entity.entity_type for entity in snapshot.entities)
    report: dict[str, Any] = {
        "version": 1,
        "entities": len(snapshot.entities),
        "relations": len(snapshot.relations),
        "unknown_lines": len(snapshot.unknown),
        "entity_types": dict(types.most_common(10)),
    }
    if args.search is not None:
        report["search"] = graph.search_nodes(args.search)
    if args.message is not None or args.session_key or args.context:
        context = [parse_session_key(args.session_key).entity] if args.session_key else []
        context += args.context
        names, block = middleware.focus(message=args.message or "", context=context)
        report["focus"] = {"names": names, "block": block}
    return report


def _text(file: str, report: dict[str, Any]) -> str:
    # Names, types and observations are data (the agent writes them): control and invisible
    # characters are shown as escapes (`_output.printable`); --json keeps the exact text.
    lines = [
        f"{printable(file)}: {counted(report['entities'], 'entity', 'entities')}, "
        f"{counted(report['relations'], 'relation')}"
        + (
            f", {counted(report['unknown_lines'], 'line')} not in the MCP memory format "
            "(kept as is)"
            if report["unknown_lines"]
            else ""
        )
    ]
    if report["entity_types"]:
        top = ", ".join(
            f"{printable(kind)} {count:,}" for kind, count in report["entity_types"].items()
        )
        lines.append(f"entity types: {top}")
    if "search" in report:
        found = report["search"]
        lines.append(
            f"\nsearch: {counted(len(found['entities']), 'entity', 'entities')}, "
            f"{counted(len(found['relations']), 'relation')}"
        )
        lines.append(dumps_json(found))
    if "focus" in report:
        focus = report["focus"]
        names = ", ".join(printable(name) for name in focus["names"]) or "(none)"
        lines.append(f"\nin focus: {names}")
        lines.append(f"injected block ({len(focus['block']):,} chars):")
        lines.append(printable(focus["block"], multiline=True))
    return "\n".join(lines)


# -- mcp -------------------------------------------------------------------------------------

_MCP_DESCRIPTION = """\
Serve a knowledge graph over MCP (stdio) with the reference memory server's
nine tools (create_entities, create_relations, add_observations,
delete_entities, delete_observations, delete_relations, read_graph,
search_nodes, open_nodes), the same arguments and the same JSONL file as
@modelcontextprotocol/server-memory, so either can open what the other wrote.
Beyond the reference: every string a write stores is redacted of secrets,
results are defused before they reach the client's prompt, writes from many
clients never lose one another (a lock per file; a PostgreSQL transaction with
--store), and --read-only refuses every write as a tool error (isError).

  layered-memory mcp --graph ~/memory.jsonl
  layered-memory mcp --graph ~/memory.jsonl --read-only
  layered-memory mcp --store postgresql://... --namespace org/acme

--graph names the file (created on the first write, as the reference does);
with --store it names the item in the namespace (default /memory.jsonl).
Needs the mcp extra: pip install 'layered-memory[mcp]'. No --json: stdout is
the protocol. Exit status: 0 when the client closes the connection, 2 when the
graph or the store cannot be used (the reason on stderr)."""


def add_mcp_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the `mcp` subcommand."""
    parser = subparsers.add_parser(
        "mcp",
        help="serve a knowledge graph over MCP stdio with the reference memory server's tools",
        description=_MCP_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--graph", metavar="FILE", help="the graph file, e.g. memory.jsonl")
    parser.add_argument(
        "--read-only", action="store_true", help="refuse every write with a tool error"
    )
    parser.add_argument(
        "--store", metavar="URL", help="PostgreSQL URL of a LangGraph PostgresStore"
    )
    parser.add_argument(
        "--namespace", metavar="NS", help="with --store: namespace, components joined by '/'"
    )
    parser.set_defaults(run=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    """Run `layered-memory mcp` (see its description)."""
    usage = _mcp_usage_error(args)
    if usage is not None:
        print(f"layered-memory mcp: {usage}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import mcp  # noqa: F401  (checked before anything is opened)
    except ImportError:
        print(
            "layered-memory mcp needs the mcp extra: pip install 'layered-memory[mcp]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.store is not None:
        return _serve_store(args)
    from deepagents.backends import FilesystemBackend

    from layered_memory.graph import KnowledgeGraph

    file = _local_file(args.graph, "mcp", must_exist=False)
    if file is None:
        return EXIT_USAGE
    backend = FilesystemBackend(root_dir=file.parent, virtual_mode=True)
    return _serve(KnowledgeGraph(backend, f"/{file.name}"), args.graph, args.read_only)


def _mcp_usage_error(args: argparse.Namespace) -> str | None:
    if (args.store is None) != (args.namespace is None):
        return "--store and --namespace go together"
    if args.store is None and args.graph is None:
        return "name the graph: --graph FILE (or --store URL --namespace NS)"
    return None


def _serve_store(args: argparse.Namespace) -> int:
    from deepagents.backends import StoreBackend

    from layered_memory.cli._store import open_store, parse_namespace
    from layered_memory.graph import DEFAULT_PATH, KnowledgeGraph

    path = args.graph or DEFAULT_PATH
    path = path if path.startswith("/") else f"/{path}"
    try:
        parts = parse_namespace(args.namespace)
        with open_store(args.store) as store:
            if not args.read_only:
                store.setup()  # type: ignore[attr-defined]  # idempotent; read-only: none
            backend = StoreBackend(namespace=lambda _runtime: parts, store=store)
            return _serve(KnowledgeGraph(backend, path), path, args.read_only)
    except CliStoreError as exc:
        print(f"layered-memory mcp: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE


def _serve(graph: KnowledgeGraph, shown: str, read_only: bool) -> int:
    import anyio
    from mcp.server.stdio import stdio_server

    from layered_memory.errors import LayeredMemoryError
    from layered_memory.graph import mcp_server

    try:
        graph.snapshot()  # fail now, not at every call: unreadable, too large, no table...
    except LayeredMemoryError as exc:
        print(f"layered-memory mcp: {printable(shown)}: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    server = mcp_server(graph, read_only=read_only)

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
    return EXIT_OK
