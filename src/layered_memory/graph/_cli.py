"""`layered-memory graph FILE`: what a knowledge-graph file holds and what an agent would see.

Reads the file with the same code as `KnowledgeGraph` and renders the focus block with the
same code as `KnowledgeGraphMiddleware`, so what it prints is what the agent gets.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from layered_memory.cli._text import dumps_json, printable

EXIT_OK = 0
EXIT_USAGE = 2

_DESCRIPTION = """\
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


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the `graph` subcommand."""
    from layered_memory.graph._focus import DEFAULT_MAX_CHARS

    parser = subparsers.add_parser(
        "graph",
        help="inspect a knowledge-graph file (MCP memory format): counts, search, focus block",
        description=_DESCRIPTION,
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
        "--max-chars", type=int, default=DEFAULT_MAX_CHARS, help="the block's budget"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run_graph)


def run_graph(args: argparse.Namespace) -> int:
    """Run `layered-memory graph` (see the module docstring)."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.errors import LayeredMemoryError
    from layered_memory.graph._focus import minimum_chars
    from layered_memory.graph._format import GraphSnapshot
    from layered_memory.graph.knowledge_graph import KnowledgeGraph

    file: Path | None
    try:
        # The file the user named, wherever a symlink leads (as any tool reading a file does):
        # the backend below is rooted at its real folder, and would refuse a link out of it.
        file = Path(args.file).expanduser().resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        file = None
    if file is None or not file.is_file():
        print(f"layered-memory graph: {printable(args.file)}: no such file", file=sys.stderr)
        return EXIT_USAGE
    graph = KnowledgeGraph(
        FilesystemBackend(root_dir=file.parent, virtual_mode=True), f"/{file.name}"
    )
    least = minimum_chars(graph.path)
    if args.max_chars < least:
        # The middleware refuses such a budget: a block printed for it would be no agent's.
        print(
            f"layered-memory graph: --max-chars {args.max_chars}: too small for the header and "
            f"guidelines; use at least {least}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        snapshot: GraphSnapshot = graph.snapshot()
        report = _report(graph, snapshot, args)
    except (LayeredMemoryError, ValueError) as exc:
        print(f"layered-memory graph: {printable(args.file)}: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(dumps_json(report))
    else:
        print(_text(args.file, report))
    return EXIT_OK


def _report(graph: Any, snapshot: Any, args: argparse.Namespace) -> dict[str, Any]:
    from layered_memory.graph import _ops
    from layered_memory.graph._focus import FocusSettings, focus_names, render_focus
    from layered_memory.sessions import parse_session_key

    types = Counter(entity.entity_type for entity in snapshot.entities)
    report: dict[str, Any] = {
        "version": 1,
        "entities": len(snapshot.entities),
        "relations": len(snapshot.relations),
        "unknown_lines": len(snapshot.unknown),
        "entity_types": dict(types.most_common(10)),
    }
    if args.search is not None:
        report["search"] = _ops.search_nodes(snapshot, args.search)
    if args.message is not None or args.session_key or args.context:
        context = [parse_session_key(args.session_key).entity] if args.session_key else []
        context += args.context
        settings = FocusSettings(path=graph.path, max_chars=args.max_chars)
        names = focus_names(
            snapshot, context=context, message=args.message or "", limit=settings.max_entities
        )
        report["focus"] = {"names": names, "block": render_focus(snapshot, names, settings)}
    return report


def _text(file: str, report: dict[str, Any]) -> str:
    # Names, types and observations are data (the agent writes them): control and invisible
    # characters are shown as escapes (`_cli_text`); --json keeps the exact text.
    lines = [
        f"{printable(file)}: {report['entities']:,} entities, {report['relations']:,} relations"
        + (
            f", {report['unknown_lines']:,} lines not in the MCP memory format (kept as is)"
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
            f"\nsearch: {len(found['entities'])} entities, {len(found['relations'])} relations"
        )
        lines.append(dumps_json(found))
    if "focus" in report:
        focus = report["focus"]
        names = ", ".join(printable(name) for name in focus["names"]) or "(none)"
        lines.append(f"\nin focus: {names}")
        lines.append(f"injected block ({len(focus['block']):,} chars):")
        lines.append(printable(focus["block"], multiline=True))
    return "\n".join(lines)
