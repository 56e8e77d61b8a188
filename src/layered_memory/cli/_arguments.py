"""The options several subcommands share: where memory comes from (`--config`, `--root`,
`--store URL --namespace NS` and the by-hand description of layers and rule folders).

Declaring them imports no framework: building the parser stays cheap (`--version`, `lint`).
"""

from __future__ import annotations

import argparse

__all__ = ["CONFIG_HELP", "add_source_arguments"]

CONFIG_HELP = (
    "your agent's memory, as uvicorn finds an app: MODULE:ATTRIBUTE (from this folder and "
    "sys.path) or path/to/file.py:ATTRIBUTE, naming a MemoryMiddleware, a compiled agent "
    "(create_agent / create_deep_agent) holding one, a list holding one, or a function taking "
    "no arguments that returns one of those. The module is imported, which runs its "
    'top-level code (keep a program\'s own run under `if __name__ == "__main__":`); no agent '
    "is invoked and no model is called"
)


def add_source_arguments(
    parser: argparse.ArgumentParser, *, required: bool, rendering: bool = True
) -> None:
    """Where memory comes from: --config, --root or --store (+ the by-hand description).

    Args:
        parser: The subcommand's parser.
        required: One of --config, --root and --store must be given.
        rendering: The command renders memory for a model call (`inspect`, `doctor`):
            --config, --nested and the budgets too. Without it (`forget` reads every file
            whatever the budget) only the folder or store and its layers and rule folders.
    """
    from layered_memory.core.render import DEFAULT_MAX_CHARS, DEFAULT_MAX_RULES_CHARS

    not_config = " (not with --config)" if rendering else ""
    where = parser.add_mutually_exclusive_group(required=required)
    if rendering:
        where.add_argument("--config", metavar="MODULE:ATTR", help=CONFIG_HELP)
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
        f"it several paths{not_config}",
    )
    parser.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="FOLDER",
        help=f"rule folder; repeatable{not_config}",
    )
    if not rendering:
        return
    parser.add_argument(
        "--nested",
        action="append",
        default=[],
        metavar="NAME",
        help="nested memory file name looked up in every folder down to each --path, as "
        "nested=(...) (e.g. AGENTS.md); repeatable, first existing wins (not with --config)",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help=f"budget of the whole block (default {DEFAULT_MAX_CHARS}; not with --config)",
    )
    parser.add_argument(
        "--max-rules-chars",
        type=int,
        metavar="N",
        help=f"budget of the matched rules inside it (default {DEFAULT_MAX_RULES_CHARS}; not "
        "with --config)",
    )
