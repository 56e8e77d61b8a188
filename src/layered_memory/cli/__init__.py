"""The `layered-memory` console script: `lint`, `inspect`, `sync`, `graph`, `tiers` subcommands.

Each subcommand is one `_add_<name>` function declaring its arguments and one `_run_<name>`
function doing the work (or a module of its own, like `_cli_lint`), so owners of different
subcommands never edit the same lines.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, cast

from layered_memory.cli._text import printable
from layered_memory.cli.lint import run_lint

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse quotes the arguments it rejects: hide passwords, escape control characters."""

    def error(self, message: str) -> NoReturn:
        from layered_memory.sessions.stores._urls import scrub

        super().error(printable(scrub(message, None)))


def _add_lint(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="validate rule files and print every problem, one per line",
        description=(
            "Validate rule files (*.md, *.mdc, *.instructions.md). Folders are searched "
            "recursively; later PATHs take precedence, as in rules=[...]. Exit status: 0 when "
            "no rule is invalid (warnings allowed), 1 when one is, 2 on a usage error."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="rule file or rule folder")
    parser.add_argument(
        "--explain",
        action="append",
        default=[],
        metavar="KEY",
        help="also say which rules apply for this match key (a path or context string); repeatable",
    )
    parser.add_argument(
        "--root", default="/", help="project root that relative globs are anchored at"
    )
    parser.set_defaults(run=_run_lint)


def _run_lint(args: argparse.Namespace) -> int:
    return run_lint(args.paths, explain=args.explain, root=args.root)


_INSPECT_DESCRIPTION = """\
Show what memory an agent would get, without running it: each layer with its
path(s), whether it is writable, its size in chars and approximate tokens
(chars / 4) and its share of the budget (a bar per layer); which rules match
the given --path/--entity keys and why (key -> glob), which were skipped and
why; the files skipped and why; and the exact memory block the model would
receive (loaded and rendered by the same code as the middleware). File
names, keys and memory text are printed with control and invisible
characters (ANSI escapes, bidi overrides, zero-width) as escapes such as
\x1b or \u202e; --json holds the exact text.

Memory comes from a folder (--root DIR) or from a PostgreSQL store namespace
(--store URL --namespace a/b/c, files kept as deepagents' StoreBackend keeps
them; see `layered-memory sync push`).

Without --layer, these layers are used when their file exists, lowest
precedence first: project = /AGENTS.md (read-only), memory = /MEMORY.md
(writable). Without --rules, these rule folders are used when they hold rule
files, lowest precedence first: /.agents/rules, /.claude/rules,
/.cursor/rules, /rules. Pass --layer/--rules to mirror your agent's exact
configuration.

Colours only on a terminal, never when NO_COLOR is set. Exit status: 0, or 2
on a usage error or a store that does not answer."""


def _add_inspect(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from layered_memory.core.render import DEFAULT_MAX_CHARS, DEFAULT_MAX_RULES_CHARS

    parser = subparsers.add_parser(
        "inspect",
        help="show the memory block an agent would get, layer by layer",
        description=_INSPECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", metavar="DIR", help="the memory folder ('.' for this one)")
    where.add_argument("--store", metavar="URL", help="PostgreSQL URL of a LangGraph PostgresStore")
    parser.add_argument(
        "--namespace", metavar="NS", help="with --store: namespace, components joined by '/'"
    )
    parser.add_argument(
        "--layer",
        action="append",
        default=[],
        metavar="NAME=PATH[:rw]",
        help="a layer, lowest precedence first; ':rw' makes it writable; repeat a NAME to give "
        "it several paths",
    )
    parser.add_argument(
        "--rules", action="append", default=[], metavar="FOLDER", help="rule folder; repeatable"
    )
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="FILE",
        help="a file the agent works on (a rule match key); repeatable",
    )
    parser.add_argument("--entity", metavar="NAME", help="a context match key, e.g. an entity")
    parser.add_argument(
        "--max-chars",
        type=int,
        default=DEFAULT_MAX_CHARS,
        metavar="N",
        help=f"budget of the whole block (default {DEFAULT_MAX_CHARS})",
    )
    parser.add_argument(
        "--max-rules-chars",
        type=int,
        default=DEFAULT_MAX_RULES_CHARS,
        metavar="N",
        help=f"budget of the matched rules inside it (default {DEFAULT_MAX_RULES_CHARS})",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=_run_inspect)


def _run_inspect(args: argparse.Namespace) -> int:
    from layered_memory.cli._inspect_view import print_report
    from layered_memory.cli.inspect import run_inspect

    return run_inspect(args, render=print_report)


_SYNC_DESCRIPTION = """\
Copy a memory folder (AGENTS.md, MEMORY.md, rule folders...) into a
PostgreSQL store namespace (push) or back (pull), byte for byte: text files as
utf-8 items, other files as base64 items, keyed by their path from DIR
(/AGENTS.md, /.claude/rules/python.md), as deepagents' StoreBackend keeps them.
This is how a team keeps memory in git and deploys it to shared agents.

Copied: every file below DIR except dot-folders and dotfiles (.git/, .env)
other than .agents/rules/, .claude/rules/ and .cursor/rules/; __pycache__/,
node_modules/ and editor/OS junk (*~, *.swp, *.swo, *.tmp, *.pyc, Thumbs.db,
desktop.ini); symlinks, files over 8 MB and non-UTF-8 file names (reported).

One line per file: added, updated, unchanged, deleted, kept (only on the
destination; --delete removes it), skipped, refused (a pulled key with '..'
or leading outside DIR) or failed; then a summary. --delete is refused when
the source side has no files at all (a mistyped --root or --namespace would
otherwise empty the destination). Exit status: 0; 1 when a file failed or a
key was refused; 2 on a usage error or a store error."""


def _add_sync(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sync",
        help="copy a memory folder into a store namespace (push) or back (pull)",
        description=_SYNC_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "direction", choices=("push", "pull"), help="push: DIR -> store; pull: back"
    )
    parser.add_argument("--store", required=True, metavar="URL", help="PostgreSQL URL")
    parser.add_argument(
        "--namespace", required=True, metavar="NS", help="store namespace, e.g. org/acme/project"
    )
    parser.add_argument("--root", required=True, metavar="DIR", help="the memory folder")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would change; write nothing"
    )
    parser.add_argument(
        "--delete",
        action="store_true",
        help="delete files/items missing on the source side (default: keep them)",
    )
    parser.set_defaults(run=_run_sync)


def _run_sync(args: argparse.Namespace) -> int:
    from layered_memory.cli.sync import run_sync

    return run_sync(
        args.direction,
        url=args.store,
        namespace=args.namespace,
        root=args.root,
        dry_run=args.dry_run,
        delete=args.delete,
    )


def _add_graph(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from layered_memory.graph._cli import add_parser

    add_parser(subparsers)


def _add_tiers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    try:
        from layered_memory.tiers._cli import add_parser
    except ImportError:  # the `tiers` extra (numpy) is not installed: no such subcommand
        return
    add_parser(subparsers)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    _add_lint,
    _add_inspect,
    _add_sync,
    _add_graph,
    _add_tiers,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(
        prog="layered-memory", description="Layered memory for LangChain and deepagents agents."
    )
    # Subcommand parsers are `_Parser`s too (argparse makes them of the parent's class); the
    # `add_*` functions only need the ArgumentParser interface.
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", required=True),
    )
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script.

    Args:
        argv: Arguments without the program name (default: `sys.argv[1:]`).

    Returns:
        The exit status: 0 success, 1 findings (e.g. an invalid rule file), 2 usage error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on usage errors and --help; return instead
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        # The reader went away (`layered-memory inspect ... | head`): stop quietly, as Unix
        # filters do, and keep Python from complaining again when it flushes stdout at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS


if __name__ == "__main__":
    sys.exit(main())
