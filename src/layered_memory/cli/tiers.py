"""`layered-memory tiers --user ID --store URL`: inspect and edit one user's tiered memory.

Prints the short-term pages, the mid-term segments with their heat and pages, the archived
segments, and the long-term entries, each with the id that `--forget` / `--restore` take.
Forgetting hides an item from retrieval and prompts (restorable); `--purge` deletes it for
good.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from layered_memory.cli._output import counted, dumps_json, printable
from layered_memory.errors import LayeredMemoryError, TierItemError

if TYPE_CHECKING:
    from layered_memory.tiers import Page, TieredMemory

# The parser declares every subcommand, so this module is imported by every command: the tiers
# (numpy, LangChain) are imported only when `tiers` runs. Without the `tiers` extra the import
# fails here, and `layered-memory tiers` names the extra instead (`cli._add_tiers`).
if importlib.util.find_spec("numpy") is None:
    msg = "layered-memory tiers needs numpy (the tiers extra)"
    raise ImportError(msg)

DEFAULT_NAMESPACE = "layered_memory/tiers"
"""`tiers.namespaces.DEFAULT_NAMESPACE` joined by '/' (pinned by `tests/tiers/test_tiers_cli.py`),
spelled out so that declaring the option imports nothing of the tiers."""

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Show one user's tiered memory (MemoryOS) kept in a PostgreSQL store by
TieredMemory: short-term pages, mid-term segments with their heat (visits,
pages, recency) and pages, the archived segments (still searched), long-term
entries. Every item has an id (p<n>, s<n>, f<n>).

--forget ID hides that page, segment or fact from retrieval and prompts
(non-destructive: --restore ID shows it again); with --purge it is deleted
for good. Control characters in memory text are shown escaped.

--json prints {"version": 1, "namespace" (the user's hashed namespace, a
list), "short_term": [page], "segments": [segment], "long_term": [entry]}, each
item with all its fields (a page: "id", "query", "response", "timestamp",
"forgotten", ...). Exit status: 0; 1 when the id is unknown; 2 on a usage or
store error."""


def no_embeddings() -> Any:
    """Embeddings for a `TieredMemory` that only inspects and forgets: it never embeds, so a
    call would be a bug."""
    from langchain_core.embeddings import Embeddings

    class NoEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise NotImplementedError

        def embed_query(self, text: str) -> list[float]:
            raise NotImplementedError

    return NoEmbeddings()


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the `tiers` subcommand."""
    parser = subparsers.add_parser(
        "tiers",
        help="show (and forget items of) one user's tiered conversational memory",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--user", required=True, metavar="ID", help="the user id")
    parser.add_argument("--store", required=True, metavar="URL", help="PostgreSQL URL")
    parser.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help="TieredMemory's namespace prefix, parts joined by '/' (default %(default)s)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--forget", metavar="ITEM", help="hide a page, segment or fact")
    action.add_argument("--restore", metavar="ITEM", help="show a forgotten item again")
    parser.add_argument("--purge", action="store_true", help="with --forget: delete for good")
    parser.add_argument("--json", action="store_true", help="print the tiers as JSON")
    parser.set_defaults(run=run_tiers)


def _clean(text: str, limit: int = 100) -> str:
    flat = printable(text)  # the CLI's one escaping helper: controls, bidi, zero-width
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _when(timestamp: float) -> str:
    try:
        return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"


def _page_line(page: Page, indent: str) -> str:
    flag = "  (forgotten)" if page.forgotten else ""
    return (
        f"{indent}{page.id:<6} {_when(page.timestamp)}  User: {_clean(page.query, 60)} | "
        f"Assistant: {_clean(page.response, 40)}{flag}"
    )


def run_tiers(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit status."""
    from layered_memory.cli._store import open_store, parse_namespace
    from layered_memory.tiers.memory import TieredMemory
    from layered_memory.tiers.namespaces import check_prefix

    if args.purge and not args.forget:
        print("layered-memory tiers: --purge goes with --forget ITEM", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Checked before any connection, as a usage error (`parse_namespace` refuses '.',
        # PostgreSQL's separator; `check_prefix` what the tiers reserve).
        prefix = check_prefix(parse_namespace(args.namespace))
    except (LayeredMemoryError, ValueError) as exc:
        print(f"layered-memory tiers: --namespace: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with open_store(args.store) as store:
            memory = TieredMemory(store, embeddings=no_embeddings(), namespace=prefix)
            if args.forget or args.restore:
                return _edit(memory, args)
            _show(memory, args.user, as_json=args.json)
    except LayeredMemoryError as exc:
        print(f"layered-memory tiers: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _edit(memory: TieredMemory, args: argparse.Namespace) -> int:
    try:
        if args.forget:
            done = memory.forget(args.user, args.forget, purge=args.purge)
            verb = "purged" if done.purged else "forgot"
        else:
            done = memory.restore(args.user, args.restore)
            verb = "restored"
    except TierItemError as exc:
        print(f"layered-memory tiers: {printable(exc)}", file=sys.stderr)
        return EXIT_NOT_FOUND
    print(f"{verb} {done.kind} {printable(done.id)}")
    return EXIT_OK


def _show(memory: TieredMemory, user_id: str, *, as_json: bool) -> None:
    from layered_memory.tiers.namespaces import user_namespace

    stm = memory.short_term(user_id)
    every = memory.segments(user_id)
    segments = sorted((s for s in every if not s.archived), key=lambda s: -s.heat)
    archived = [s for s in every if s.archived]
    facts = memory.long_term_entries(user_id)
    if as_json:
        data: dict[str, Any] = {
            "version": 1,
            "namespace": list(user_namespace(memory.namespace, user_id)),
            "short_term": [asdict(page) for page in stm],
            "segments": [asdict(segment) for segment in segments + archived],
            "long_term": [asdict(fact) for fact in facts],
        }
        print(dumps_json(data, default=str))
        return
    print(
        f"user {_clean(repr(user_id), 60)} ({'/'.join(user_namespace(memory.namespace, user_id))})"
    )
    print(f"short-term: {counted(len(stm), 'page')}")
    for page in stm:
        print(_page_line(page, "  "))
    for title, group in (("mid-term", segments), ("archive", archived)):
        order = ", hottest first" if title == "mid-term" else ", oldest first (searched)"
        print(f"{title}: {counted(len(group), 'segment')}{order}")
        for seg in group:
            flag = "  (forgotten)" if seg.forgotten else ""
            print(
                f"  {seg.id:<6} heat {seg.heat:6.2f}  visits {seg.n_visit}, pages "
                f"{len(seg.pages)} ({seg.l_interaction} since promotion, {seg.promoted} "
                f"promoted){flag}"
            )
            print(f"         {_clean(seg.summary, 90)}")
            for page in seg.pages:
                print(_page_line(page, "         "))
    print(f"long-term: {counted(len(facts), 'entry', 'entries')}")
    for fact in facts:
        flag = "  (forgotten)" if fact.forgotten else ""
        print(f"  {fact.id:<6} [{fact.kind}] {_clean(fact.text, 90)}{flag}")
