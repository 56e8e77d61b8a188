"""The `layered-memory` console script: `lint`, `inspect` and `sync` subcommands.

Each subcommand is one `_add_<name>` function declaring its arguments and one `_run_<name>`
function doing the work (or a module of its own, like `_cli_lint`), so owners of different
subcommands never edit the same lines.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from layered_memory._cli_lint import run_lint

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


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


def _add_inspect(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Stub: owned by a colleague; shows what an agent would get in its prompt.
    parser = subparsers.add_parser("inspect", help="show the memory block an agent would get")
    parser.set_defaults(run=_run_inspect)


def _run_inspect(_args: argparse.Namespace) -> int:
    print("layered-memory inspect: not implemented yet", file=sys.stderr)
    return EXIT_USAGE


def _add_sync(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Stub: owned by a colleague.
    parser = subparsers.add_parser("sync", help="synchronize memory files with a store")
    parser.set_defaults(run=_run_sync)


def _run_sync(_args: argparse.Namespace) -> int:
    print("layered-memory sync: not implemented yet", file=sys.stderr)
    return EXIT_USAGE


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    _add_lint,
    _add_inspect,
    _add_sync,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="layered-memory", description="Layered memory for LangChain and deepagents agents."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
