"""`layered-memory forget SUBJECT`: remove what names a subject from every memory it is shown.

The memory files are found as `inspect` finds them (the conventional layers, or `--layer`;
rule folders are read-only memory): each writable file loses the lines naming the subject,
with its review queue, through the lock every writer takes (`layered_memory.forgetting`);
each read-only file or rule file naming it is listed, never changed. `--graph FILE` adds
knowledge graphs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from layered_memory.cli._output import dumps_json, printable

# Building the parser imports no framework (`--version` stays fast): the loading modules are
# imported when the command runs.

__all__ = ["add_forget_parser", "run_forget"]

EXIT_OK, EXIT_REMAINS, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Remove every piece of memory that names SUBJECT (a whole word or words, any
case, any Unicode spelling of it): the lines of writable memory files and the
changes waiting in their review queue (MEMORY.pending.json), and with --graph
the knowledge graph's entities, observations and relations naming it. Each
file is rewritten under the lock every writer takes, with one atomic replace.

Read-only memory (read-only layers, rule files) is never changed: the files
that name SUBJECT are listed, and the exit status is 1 while any remain.
Tiered memory and session stores are forgotten from Python:
layered_memory.forget(..., tiers=, tier_users=, session_store=, session_keys=).

--json prints {"subject", "dry_run", "complete", "files": [{"path", "lines",
"queue_path", "queued"}], "read_only": [path], "graphs": [{"path",
"entities", "observations", "relations"}], "tiers": [], "sessions": []}.

Exit status: 0 nothing naming SUBJECT remains; 1 a read-only file still names
it; 2 a usage error, or a file that could not be locked, read or written."""


def add_forget_parser(subparsers: Any) -> None:
    """The `forget` subcommand.

    Args:
        subparsers: The console script's subparsers.
    """
    import argparse

    parser = subparsers.add_parser(
        "forget",
        help="remove what names a subject from memory files, review queues and graphs",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("subject", metavar="SUBJECT", help="the name to forget")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", metavar="DIR", help="the memory folder (default: this one)")
    where.add_argument("--store", metavar="URL", help="PostgreSQL URL of a LangGraph PostgresStore")
    parser.add_argument(
        "--namespace", metavar="NS", help="with --store: namespace, components joined by '/'"
    )
    parser.add_argument(
        "--layer",
        action="append",
        metavar="NAME=PATH[:rw]",
        help="a memory layer (default: the conventional ones found); :rw marks it writable",
    )
    parser.add_argument(
        "--rules", action="append", metavar="FOLDER", help="a rule folder (read-only memory)"
    )
    parser.add_argument(
        "--graph", action="append", metavar="FILE", help="a knowledge graph file (JSON Lines)"
    )
    parser.add_argument("--dry-run", action="store_true", help="show what would go; change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_forget)


def run_forget(args: Any) -> int:
    """Run the subcommand.

    Args:
        args: The parsed arguments.

    Returns:
        The exit status (see the description).
    """
    from layered_memory.cli._source import quiet_package_logs
    from layered_memory.errors import CliStoreError, LayeredMemoryError, UsageError
    from layered_memory.forgetting import forget

    failure: str | None = None
    report = None
    try:
        with quiet_package_logs(), _memory(args) as (backend, files, read_only):
            report = forget(
                args.subject,
                backend=backend,
                files=files,
                read_only=read_only,
                graphs=_graphs(args.graph or ()),
                dry_run=args.dry_run,
            )
    except (UsageError, CliStoreError, LayeredMemoryError, ValueError, OSError) as exc:
        failure = str(exc)
    if report is None:
        print(f"layered-memory forget: {printable(failure or 'failed')}", file=sys.stderr)
        return EXIT_USAGE
    data = report.as_data()
    if args.json:
        sys.stdout.write(dumps_json(data) + "\n")
    else:
        sys.stdout.write(_text(data))
    return EXIT_OK if report.complete else EXIT_REMAINS


@contextmanager
def _memory(args: Any) -> Iterator[tuple[Any, list[str], list[str]]]:
    """The backend, the writable memory files and the read-only ones (rule files included)."""
    from layered_memory.cli._source import (
        backend_path,
        folder_backend,
        parse_layers,
        store_namespace,
    )

    layers = parse_layers(args.layer or ())
    folders = [backend_path(folder) for folder in args.rules or ()]
    parts = store_namespace(args.store, args.namespace)
    if parts is None:
        backend, _folder = folder_backend(args.root)
        yield (backend, *_split(backend, layers, folders))
        return
    from deepagents.backends import StoreBackend

    from layered_memory.cli._store import open_store

    with open_store(args.store) as store:
        store_backend = StoreBackend(namespace=lambda _runtime: parts, store=store)
        yield (store_backend, *_split(store_backend, layers, folders))


def _split(backend: Any, layers: Any, folders: list[str]) -> tuple[list[str], list[str]]:
    from layered_memory.cli._source import build_assembler
    from layered_memory.core.render import DEFAULT_MAX_CHARS, DEFAULT_MAX_RULES_CHARS

    assembler = build_assembler(
        backend,
        layers=layers,
        rule_folders=folders,
        max_chars=DEFAULT_MAX_CHARS,
        max_rules_chars=DEFAULT_MAX_RULES_CHARS,
    )
    snapshot = assembler.load()
    found = [*snapshot.files, *snapshot.unreadable]
    writable = [path for path in found if not assembler.is_read_only_layer_file(path)]
    read_only = [path for path in found if assembler.is_read_only_layer_file(path)]
    return writable, [*read_only, *snapshot.rule_files]


def _graphs(files: Any) -> list[Any]:
    from deepagents.backends import FilesystemBackend

    from layered_memory.graph import KnowledgeGraph

    graphs = []
    for given in files:
        file = Path(given).expanduser().resolve()
        backend = FilesystemBackend(root_dir=file.parent, virtual_mode=True)
        graphs.append(KnowledgeGraph(backend, f"/{file.name}"))
    return graphs


def _text(data: dict[str, Any]) -> str:
    verb = "would remove" if data["dry_run"] else "removed"
    lines = [f"layered-memory forget {printable(repr(data['subject']))}"]
    for file in data["files"]:
        lines.append(f"  {printable(file['path'])}: {verb} {len(file['lines'])} lines")
        lines.extend(f"    - {printable(line)}" for line in file["lines"])
        if file["queued"]:
            lines.append(
                f"  {printable(file['queue_path'])}: {verb} {file['queued']} queued changes"
            )
    for graph in data["graphs"]:
        lines.append(
            f"  {printable(graph['path'])}: {verb} {len(graph['entities'])} entities, "
            f"{len(graph['observations'])} observations, {len(graph['relations'])} relations"
        )
    if not data["files"] and not data["graphs"]:
        lines.append("  nothing writable names it")
    for path in data["read_only"]:
        lines.append(f"  {printable(path)}: read-only memory names it; not changed (edit it)")
    return "\n".join(lines) + "\n"
