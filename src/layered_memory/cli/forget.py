"""`layered-memory forget SUBJECT`: remove what names a subject from every memory it is shown.

The memory files are found as `inspect` finds them (the conventional layers, or `--layer`;
rule folders are read-only memory): each writable file loses the lines naming the subject,
with its review queue, through the lock every writer takes (`layered_memory.forgetting`);
each read-only file or rule file naming it is listed, never changed. `--graph FILE` adds
knowledge graphs, `--tiers URL` the tiered memory of every user (or `--user ID`), `--sessions
URL` every entry of a session store (or `--session-key KEY`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from layered_memory.cli._arguments import add_source_arguments
from layered_memory.cli._output import dumps_json, printable

# Building the parser imports no framework (`--version` stays fast): the loading modules are
# imported when the command runs.

__all__ = ["add_forget_parser", "run_forget"]

EXIT_OK, EXIT_REMAINS, EXIT_USAGE = 0, 1, 2

DEFAULT_TIERS_NAMESPACE = "layered_memory/tiers"
"""`tiers.namespaces.DEFAULT_NAMESPACE` joined by '/', as `layered-memory tiers` spells it."""

DESCRIPTION = """\
Remove every piece of memory that names SUBJECT (a whole word or words, any
case, any Unicode spelling of it): the lines of writable memory files and the
changes waiting in their review queue (MEMORY.pending.json); with --graph the
knowledge graph's entities, observations and relations naming it; with
--tiers the pages, segments and long-term facts of every user's tiered memory
(--user ID: only theirs); with --sessions the values naming it in every entry
of a session store (--session-key KEY: only those entries). Each file is
rewritten under the lock every writer takes, with one atomic replace; each
session entry by compare-and-swap.

--sessions URL: redis://... (--sessions-namespace: the store's key prefix,
default layered_memory:session:), postgresql://... (--sessions-namespace: the
schema, default public) or the folder of a FileSessionStore. For a
HybridSessionStore give its L2 (the source of truth), then run again with its
L1 (or let L1's entries expire).

Read-only memory (read-only layers, rule files) is never changed: the files
that name SUBJECT are listed, and the exit status is 1 while any remain.

--json prints {"version": 1, "subject", "dry_run", "complete", "files": [{"path", "lines",
"queue_path", "queued"}], "read_only": [path], "graphs": [{"path",
"entities", "observations", "relations"}], "tiers": [{"user_id", "id",
"kind"}], "sessions": [{"key", "values", "deleted", "conflict",
"unreadable"}]} (the session entries that named it or could not be searched).

Exit status: 0 nothing naming SUBJECT remains; 1 a read-only file still names
it, or a session entry could not be searched (changed by others meanwhile, or
unreadable); 2 a usage error, a file that could not be locked, read or
written, or a store that does not answer."""


def add_forget_parser(subparsers: Any) -> None:
    """The `forget` subcommand.

    Args:
        subparsers: The console script's subparsers.
    """
    import argparse

    parser = subparsers.add_parser(
        "forget",
        help="remove what names a subject from memory files, graphs, tiers and session stores",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("subject", metavar="SUBJECT", help="the name to forget")
    add_source_arguments(parser, required=False, rendering=False)
    parser.add_argument(
        "--graph", action="append", metavar="FILE", help="a knowledge graph file (JSON Lines)"
    )
    parser.add_argument(
        "--tiers", metavar="URL", help="PostgreSQL URL of the store holding TieredMemory"
    )
    parser.add_argument(
        "--tiers-namespace",
        metavar="NS",
        help=f"with --tiers: TieredMemory's namespace prefix (default {DEFAULT_TIERS_NAMESPACE})",
    )
    parser.add_argument(
        "--user", action="append", metavar="ID", help="with --tiers: only this user; repeatable"
    )
    parser.add_argument(
        "--sessions", metavar="URL", help="a session store: redis://, postgresql:// or a folder"
    )
    parser.add_argument(
        "--sessions-namespace",
        metavar="NS",
        help="with --sessions: Redis key prefix, or PostgreSQL schema",
    )
    parser.add_argument(
        "--session-key",
        action="append",
        metavar="KEY",
        help="with --sessions: only this entry; repeatable",
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
        _check_pairs(args)
        with (
            quiet_package_logs(),
            _memory(args) as (backend, files, read_only),
            _tiers(args) as tiers,
            _sessions(args) as sessions,
        ):
            report = forget(
                args.subject,
                backend=backend,
                files=files,
                read_only=read_only,
                graphs=_graphs(args.graph or ()),
                tiers=tiers,
                tier_users=args.user,
                session_store=sessions,
                session_keys=args.session_key,
                dry_run=args.dry_run,
            )
    except (UsageError, CliStoreError, LayeredMemoryError, ValueError, OSError) as exc:
        failure = str(exc)
    if report is None:
        print(f"layered-memory forget: {printable(failure or 'failed')}", file=sys.stderr)
        return EXIT_USAGE
    data = {"version": 1, **report.as_data()}
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
    from layered_memory.errors import UsageError

    assembler = build_assembler(
        backend,
        layers=layers,
        rule_folders=folders,
        max_chars=DEFAULT_MAX_CHARS,
        max_rules_chars=DEFAULT_MAX_RULES_CHARS,
    )
    snapshot = assembler.load()
    found = [*snapshot.files, *snapshot.unreadable]
    named = [path for layer in layers for path in layer.paths if not path.endswith("/")]
    missing = [path for path in named if path not in found]
    if missing:  # a typo in --layer must not read as "nothing names it"
        msg = f"--layer: no such file: {', '.join(missing)} (paths are from --root or the store)"
        raise UsageError(msg)
    writable = [path for path in found if not assembler.is_read_only_layer_file(path)]
    read_only = [path for path in found if assembler.is_read_only_layer_file(path)]
    return writable, [*read_only, *snapshot.rule_files]


def _check_pairs(args: Any) -> None:
    from layered_memory.errors import UsageError

    for option, needs, given in (
        ("--tiers-namespace", "--tiers", args.tiers_namespace),
        ("--user", "--tiers", args.user),
        ("--sessions-namespace", "--sessions", args.sessions_namespace),
        ("--session-key", "--sessions", args.session_key),
    ):
        if given is not None and getattr(args, needs[2:].replace("-", "_")) is None:
            msg = f"{option} goes with {needs}"
            raise UsageError(msg)


@contextmanager
def _tiers(args: Any) -> Iterator[Any]:
    """The `TieredMemory` of `--tiers` (None without it), its store closed afterwards."""
    if args.tiers is None:
        yield None
        return
    from layered_memory.cli._store import open_store, parse_namespace
    from layered_memory.errors import LayeredMemoryError, UsageError

    try:
        from layered_memory.cli.tiers import no_embeddings
        from layered_memory.tiers import TieredMemory
        from layered_memory.tiers.namespaces import check_prefix
    except ImportError:
        msg = "--tiers needs the tiers extra: pip install 'layered-memory[tiers]'"
        raise UsageError(msg) from None
    try:
        # Checked before any connection (`parse_namespace` refuses '.', PostgreSQL's
        # separator; `check_prefix` what the tiers reserve).
        prefix = check_prefix(parse_namespace(args.tiers_namespace or DEFAULT_TIERS_NAMESPACE))
    except (UsageError, LayeredMemoryError, ValueError) as exc:
        msg = f"--tiers-namespace: {exc}"
        raise UsageError(msg) from None
    with open_store(args.tiers) as store:
        yield TieredMemory(store, embeddings=no_embeddings(), namespace=prefix)


@contextmanager
def _sessions(args: Any) -> Iterator[Any]:
    """The session store of `--sessions` (None without it), closed afterwards."""
    if args.sessions is None:
        yield None
        return
    from layered_memory.errors import UsageError
    from layered_memory.sessions.stores import (
        FileSessionStore,
        PostgresSessionStore,
        RedisSessionStore,
    )

    url: str = args.sessions
    namespace = args.sessions_namespace
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    with ExitStack() as stack:
        if scheme in ("redis", "rediss", "unix"):
            store: Any = RedisSessionStore.from_url(
                url, **({"prefix": namespace} if namespace else {})
            )
        elif scheme in ("postgresql", "postgres"):
            store = PostgresSessionStore.from_conn_string(url, schema=namespace or "public")
        elif scheme:
            msg = f"--sessions: no store for {scheme}:// (redis://, postgresql:// or a folder)"
            raise UsageError(msg)
        else:
            if namespace is not None:
                msg = "--sessions-namespace: a folder of session files has no namespace"
                raise UsageError(msg)
            folder = Path(url).expanduser()
            if not folder.is_dir():  # never create the folder a typo names
                msg = f"--sessions {url}: no such folder"
                raise UsageError(msg)
            store = FileSessionStore(folder)
        close = getattr(store, "close", None)
        if close is not None:
            stack.callback(close)
        yield store


def _graphs(files: Any) -> list[Any]:
    from deepagents.backends import FilesystemBackend

    from layered_memory.errors import UsageError
    from layered_memory.graph import KnowledgeGraph

    graphs = []
    for given in files:
        file = Path(given).expanduser().resolve()
        if not file.is_file():  # a typo must not read as "the graph does not name it"
            msg = (
                f"--graph {given}: no such file ({file}; a path on this machine, from the "
                "current folder, not from --root)"
            )
            raise UsageError(msg)
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
    for item in data["tiers"]:
        user = printable(item["user_id"])
        lines.append(f"  tiers of {user}: {verb} {item['kind']} {printable(item['id'])}")
    for entry in data["sessions"]:
        key = printable(entry["key"])
        if entry["unreadable"]:
            lines.append(f"  session {key}: unreadable, not searched (delete it)")
        elif entry["conflict"]:
            lines.append(f"  session {key}: changed by others meanwhile, not searched (run again)")
        else:
            gone = "; the entry goes" if entry["deleted"] else ""
            lines.append(f"  session {key}: {verb} {entry['values']} values{gone}")
    if not any(data[kind] for kind in ("files", "graphs", "tiers", "sessions")):
        lines.append("  nothing writable names it")
    for path in data["read_only"]:
        lines.append(f"  {printable(path)}: read-only memory names it; not changed (edit it)")
    return "\n".join(lines) + "\n"
