"""The `layered-memory` console script: `demo`, `doctor`, `inspect`, `lint`, `review`, `sync`,
`graph`, `mcp`, `tiers`.

Each subcommand is one `_add_<name>` function declaring its arguments and one `_run_<name>`
function (or a module of its own) doing the work, so owners of different subcommands never edit
the same lines. Every subcommand has `--json` (a documented schema with a `"version"` key),
documents its exit status in `--help`, colours only a terminal (never with `NO_COLOR`), and
prints file names, keys and memory through `_output.printable` / `dumps_json`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, cast

from layered_memory import __version__
from layered_memory.cli._arguments import CONFIG_HELP, add_source_arguments
from layered_memory.cli._output import escaped_output, printable

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "demo",
    "main",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


class _Parser(argparse.ArgumentParser):
    """argparse quotes the arguments it rejects: hide passwords, escape control characters."""

    _arguments: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        from layered_memory.sessions.stores.urls import scrub

        if message.startswith(("one of the arguments", "the following arguments are required")):
            # argparse reports a missing required option before an unknown one: with
            # `inspect --bogus` the unknown flag is the mistake to name.
            unknown = []
            for arg in self._arguments:
                if arg == "--":
                    break
                if self._unknown_flag(arg):
                    unknown.append(arg)
            if unknown:
                message = "unrecognized arguments: " + " ".join(unknown)
        super().error(printable(scrub(message, None)))

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Keeps the arguments a subcommand parses, for `error`."""
        self._arguments = () if args is None else list(args)
        return super().parse_known_args(args, namespace)

    def _unknown_flag(self, arg: str) -> bool:
        if not arg or arg[0] not in self.prefix_chars or arg == "-":
            return False  # a value (a stub parser without option syntax takes everything)
        if self._negative_number_matcher.match(arg):
            return False
        flag = arg.split("=", 1)[0]
        known = self._option_string_actions
        # argparse takes an unambiguous prefix of a long option (`--conf` for `--config`).
        return flag not in known and not (
            flag.startswith("--") and any(option.startswith(flag) for option in known)
        )


def _subparser(subparsers: Subparsers, name: str, *, summary: str, description: str) -> Any:
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_call_arguments(parser: argparse.ArgumentParser) -> None:
    """The model call to render memory for: touched paths, context, message, thread."""
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="FILE",
        help="a file the agent's tools touched (a rule match key); repeatable",
    )
    parser.add_argument(
        "--entity",
        metavar="NAME",
        help="a context match key, e.g. an entity (with --config: --context KEY=VALUE instead)",
    )
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the run's context (invoke(..., context={KEY: VALUE})), read by the middleware's "
        "match_keys; without --config the VALUE is a match key; repeatable",
    )
    parser.add_argument(
        "--message", metavar="TEXT", help="with --config: the user's message of the call"
    )
    parser.add_argument(
        "--thread",
        metavar="ID",
        help="with --config: the thread id (the session store's key for the session layer)",
    )


# -- lint -----------------------------------------------------------------------------------

_LINT_DESCRIPTION = """\
Validate rule files (*.md, *.mdc, *.instructions.md; folders are searched
recursively; later PATHs take precedence, as in rules=[...]) and memory files
(AGENTS.md, AGENTS.override.md, AGENT.md, MEMORY.md, CLAUDE.md, CLAUDE.local.md,
GEMINI.md by name, or any --memory FILE): frontmatter, globs (also globs no
path can match, such as './src/**'), and the size budget (a memory file cut or
left out by --max-chars, MEMORY.md past its 200-line cap, a file holding only
comments). With --config, the rule folders and layer files of your own
middleware are checked through its backend, with its budgets. One finding per
line (PATH: error|warning: REASON), then a summary. The pre-commit hook
`layered-memory-lint` runs this command on the files of a commit.

--json prints {"version": 1, "source", "files": [{"path", "kind" ("rule" or
"memory"), "valid"}], "problems": [{"path", "severity", "reason"}], "counts":
{"errors", "warnings"}, "explain": [{"name", "path", "status", "mode",
"dialect" ("cursor", "copilot", "claude" or "layered-memory": the tool whose
semantics the file was read with), "reason", "key", "glob"}]}.

Exit status: 0 when nothing is invalid (warnings allowed), 1 when a file has an
error, 2 on a usage error (a PATH that is missing, a FIFO or another special
file, a folder given as a memory file; a --max-chars below the prompt
template's minimum; a --config that does not load)."""


def _add_lint(subparsers: Subparsers) -> None:
    from layered_memory.core.render import DEFAULT_MAX_CHARS

    parser = _subparser(
        subparsers,
        "lint",
        summary="validate rule files and memory files, one problem per line",
        description=_LINT_DESCRIPTION,
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="rule/memory file or rule folder")
    parser.add_argument("--config", metavar="MODULE:ATTR", help=CONFIG_HELP)
    parser.add_argument(
        "--memory",
        action="append",
        default=[],
        metavar="FILE",
        help="lint FILE as a memory file whatever its name; repeatable",
    )
    parser.add_argument(
        "--explain",
        action="append",
        default=[],
        metavar="KEY",
        help="also say which rules apply for this match key (a path or context string), the "
        "dialect each file was read in and why; repeatable",
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="the project root, as your agent's backend is rooted (default: this folder): "
        "--explain anchors relative globs there, and memory files are read as that backend "
        "reads them (an @import cannot leave DIR; a memory file outside DIR is refused); not "
        "with --config",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help=f"the memory budget a memory file must fit in (default {DEFAULT_MAX_CHARS}; not "
        "with --config)",
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(run=_run_lint)


def _run_lint(args: argparse.Namespace) -> int:
    from layered_memory.cli.lint import run_lint

    return run_lint(args)


# -- inspect --------------------------------------------------------------------------------

_INSPECT_DESCRIPTION = """\
Show what memory an agent would get, without running it: each layer with its
path(s), whether it is writable, its size in chars and approximate tokens
(chars / 4) and its share of the budget (a bar per layer); which rules match
the given --path/--entity/--context keys and why (key -> glob), which were
skipped and why; the files skipped and why; and the exact memory block the
model would receive (loaded and rendered by the same code as the middleware).
File names, keys and memory text are printed with control and invisible
characters (ANSI escapes, bidi overrides, zero-width) as escapes such as
\\x1b or \\u202e; --json holds the exact text.

Memory comes from your agent's own configuration (--config module:attribute:
its MemoryMiddleware, backend, layers, rule folders, budgets, match_keys and
session store, for the call described by --message, --path, --context and
--thread), from a folder (--root DIR) or from a PostgreSQL store namespace
(--store URL --namespace a/b/c, files kept as deepagents' StoreBackend keeps
them; see `layered-memory sync push`).

With --root or --store and no --layer, these layers are used when their file
exists, lowest precedence first: project = /AGENTS.md (read-only), memory =
/MEMORY.md (writable). Without --rules, these rule folders are used when they
hold rule files, lowest precedence first: /.agents/rules, /.claude/rules,
/.cursor/rules, /.github/instructions, /.windsurf/rules, /.devin/rules,
/.kiro/steering, /rules.

--json: see docs/cli.md ("Inspecting memory") for the schema ("version": 1;
source, keys, budget, layers[].files[], rules.decisions[], overhead,
problems[], block). Colours only on a terminal, never when NO_COLOR is set.
Exit status: 0, or 2 on a usage error, a --config that does not load, or a
store that does not answer."""


def _add_inspect(subparsers: Subparsers) -> None:
    parser = _subparser(
        subparsers,
        "inspect",
        summary="show the memory block an agent would get, layer by layer",
        description=_INSPECT_DESCRIPTION,
    )
    add_source_arguments(parser, required=True)
    _add_call_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=_run_inspect)


def _run_inspect(args: argparse.Namespace) -> int:
    from layered_memory.cli.inspect import print_report, run_inspect

    return run_inspect(args, render=print_report)


# -- doctor ---------------------------------------------------------------------------------


# Here rather than in `doctor.py`, which imports the middleware: `--help` lists them, and
# building the parser must stay cheap (`layered-memory --version`, `lint`).
CHECKS: dict[str, str] = {
    "no-memory": "no memory file and no rule folder: the agent gets no memory at all",
    "layer-file": "a layer file that is missing (read-only layer) or refused (a bad path)",
    "layer-unreadable": "a layer file that exists but cannot be read or decoded",
    "unrestored": "read-only memory an agent changed in an earlier run that could not be put "
    "back (a full disk, a permission): left out of the prompt until the file changes",
    "layer-absent": "a writable layer's file does not exist yet; the agent creates it (note)",
    "layer-empty": "a layer file holding only comments or blank lines: nothing is shown",
    "rules-folder": "a rule folder that is missing or is a file",
    "rule-invalid": "a rule file with an error: skipped, or an invalid glob dropped",
    "rule-warning": "a rule file used with a warning (a field its tool ignores, a Manual rule)",
    "rule-never-applies": "a rule glob no match key can ever match ('./src/**', a disk path)",
    "rule-matches-no-file": "a paths rule that none of the project's files matches",
    "budget-omits": "a layer file left out of the block by the budget",
    "budget-truncates": "a layer file cut by the budget",
    "budget-line-cap": "a file cut by its line cap (MEMORY.md: 200 lines) (note)",
    "budget-drops-rule": "a rule that applies but does not fit the rules budget",
    "budget-truncates-rule": "a rule cut to fit the rules budget",
    "store-unreachable": "a session store, or the --store, that does not answer",
    "import-too-deep": "@imports more than 5 hops from a configured file: not followed",
    "import-cycle": "memory files that import each other (harmless at run time, a mistake)",
    "stale-lesson": "a memory entry whose cited file changed in the cited lines, moved or "
    "vanished: shown marked stale; update or delete it",
    "memory-problem": "any other problem a load reports (a missing @import, a root holding "
    "none of the files...)",
    "strict": "strict=True: the agent's run stops at the first of these problems",
    "not-injected": "system_prompt=None: no block reaches the model (note)",
    "review-queue": "a consolidator's review queue that is unreadable, or was changed by "
    "something other than layered-memory (such changes are never approved)",
}
"""Every check, by the code findings carry (`--ignore CODE` leaves one out)."""


def _doctor_description() -> str:
    checks = "\n".join(f"  {code:<22}{text}" for code, text in CHECKS.items())
    return f"""\
One report of everything that makes memory silently absent or wrong, for your
agent's configuration (--config module:attribute), a folder (--root DIR,
default: this folder) or a store namespace (--store URL --namespace NS).
Memory is loaded and rendered by the middleware's own code, once for the call
described by --path/--context/--message/--thread and once as if the agent had
touched a file of every rule; no agent is invoked and no model is called (a
--config module is imported, which runs its top-level code).

Checks (a finding's code; --ignore CODE leaves one out):
{checks}

One line per finding: PATH: error|warning|note: MESSAGE [code], then a summary.
--json prints {{"version": 1, "ok", "source", "counts": {{"error", "warning",
"info"}}, "findings": [{{"check", "severity" ("error", "warning" or "info"),
"path" (or null), "message"}}], "skipped": [{{"check", "reason"}}]}}.

Exit status: 0 when clean (notes allowed), 1 on findings (errors or warnings),
2 on a usage error or a --config that does not load."""


def _add_doctor(subparsers: Subparsers) -> None:
    parser = _subparser(
        subparsers,
        "doctor",
        summary="report everything that makes memory silently absent or wrong (exit 1 on findings)",
        description=_doctor_description(),
    )
    add_source_arguments(parser, required=False)
    _add_call_arguments(parser)
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="CODE", help="skip a check; repeatable"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> int:
    from layered_memory.cli.doctor import run_doctor

    return run_doctor(args)


# -- demo -----------------------------------------------------------------------------------

_DEMO_DESCRIPTION = """\
Run the quickstart: a real create_deep_agent with layered memory on files in a
temporary folder (or --root, an empty or new folder, kept afterwards), with a
scripted model: no API key, no server. It shows the agent answering from
AGENTS.md, saving a preference into its writable MEMORY.md, its very next model
call seeing that edit, and an AGENTS.md changed on disk between two
invocations of one checkpointed thread being seen by the second.

--json prints {"version": 1, "ok", "root", "edit_calls": [{"name",
"file_path"}], "edit_seen_per_call", "first_answer", "second_answer",
"second_prompt_has_new_agents_md", "memory_md", "block_chars"} instead of the
narration. Exit status: 0 when every behaviour was seen, 1 when one was not, 2
on a usage error (a --root that is not empty, a --model that cannot be
created or whose calls fail: one line, the error's type and first line, keys
and passwords hidden)."""


def _add_demo(subparsers: Subparsers) -> None:
    parser = _subparser(
        subparsers,
        "demo",
        summary="run the quickstart: a deep agent with layered memory, no API key needed",
        description=_DEMO_DESCRIPTION,
    )
    parser.add_argument("--model", metavar="PROVIDER:NAME", help="a real model (needs its key)")
    parser.add_argument("--root", metavar="DIR", help="run in DIR (empty or new) and keep it")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from layered_memory.cli.demo import run_demo

    return run_demo(args)


# -- sync -----------------------------------------------------------------------------------

_SYNC_DESCRIPTION = """\
Copy a memory folder (AGENTS.md, MEMORY.md, rule folders...) into a
PostgreSQL store namespace (push) or back (pull), byte for byte: text files as
utf-8 items, other files as base64 items, keyed by their path from DIR
(/AGENTS.md, /.claude/rules/python.md), as deepagents' StoreBackend keeps them.
This is how a team keeps memory in git and deploys it to shared agents.

Copied: every file below DIR (push copies all of them, not only memory
files; --pattern limits it) except dot-folders and dotfiles (.git/, .env)
other than .agents/rules/, .claude/rules/ and .cursor/rules/; __pycache__/,
node_modules/ and editor/OS junk (*~, *.swp, *.swo, *.tmp, *.pyc, Thumbs.db,
desktop.ini); symlinks, files over 8 MB and non-UTF-8 file names (reported).
With --pattern GLOB (repeatable), only the paths from DIR that match one of
the globs, on both sides (AGENTS.md, MEMORY.md, '.claude/rules/**'; the glob
dialect of rule files: * stays within a folder, ** crosses folders).

One line per file: added, updated, unchanged, deleted, kept (only on the
destination; --delete removes it), skipped, refused (a pulled key with '..'
or leading outside DIR) or failed; then a summary. --delete is refused when
the source side has no files at all (a mistyped --root or --namespace would
otherwise empty the destination).

--json prints {"version": 1, "direction", "dry_run", "root", "store" (no
password), "namespace", "patterns", "actions": [{"key", "status", "detail"}], "counts":
{status: n}, "ok"}. Exit status: 0; 1 when a file failed or a key was refused;
2 on a usage error or a store error."""


def _add_sync(subparsers: Subparsers) -> None:
    parser = _subparser(
        subparsers,
        "sync",
        summary="copy a memory folder into a store namespace (push) or back (pull)",
        description=_SYNC_DESCRIPTION,
    )
    parser.add_argument(
        "direction", choices=("push", "pull"), help="push: DIR -> store; pull: back"
    )
    parser.add_argument("--store", required=True, metavar="URL", help="PostgreSQL URL")
    parser.add_argument(
        "--namespace", required=True, metavar="NS", help="store namespace, e.g. org/acme/project"
    )
    parser.add_argument(
        "--root",
        required=True,
        metavar="DIR",
        help="the memory folder: every file below it is copied (see --pattern)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would change; write nothing"
    )
    parser.add_argument(
        "--delete",
        action="store_true",
        help="delete files/items missing on the source side (default: keep them)",
    )
    parser.add_argument(
        "--pattern",
        action="append",
        default=[],
        metavar="GLOB",
        help="sync only the paths from DIR matching GLOB (e.g. AGENTS.md, '.claude/rules/**'); "
        "repeatable (default: every file below DIR)",
    )
    parser.add_argument("--json", action="store_true", help="print the actions as JSON")
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
        as_json=args.json,
        patterns=args.pattern,
    )


# -- review ---------------------------------------------------------------------------------

_REVIEW_DESCRIPTION = """\
List, approve and reject the changes a MemoryConsolidator holds for review:
every change with review=True, and always a lesson that would steer the
agent (run code from the network, send data off the machine, touch
credentials, widen its permissions, weaken checks, act behind the user's
back, override its instructions or read-only memory) or whose text came from
a tool result rather than from the user. Each shows why. They wait in the
review queue beside the memory file (MEMORY.pending.json), in the agent's own
backend: a folder (--root DIR, default: this folder), a store namespace
(--store URL --namespace NS) or your agent's consolidator (--config
module:attribute).

  layered-memory review                    list what waits (the default)
  layered-memory review approve ID [ID...] apply changes to the Learned section
  layered-memory review reject ID [ID...]  drop changes
  layered-memory review stale              list the entries of the memory file
                                           whose cited lines changed, moved or
                                           vanished (path, entry, cite, why, since)
  layered-memory review drop ID [ID...]    delete those stale entries
  layered-memory review refresh ID [ID...] keep them: the cited lines as they
                                           are now are digested again (say so
                                           only when the lesson still holds)
  (--all instead of IDs: every change that waits; approve --all skips the
  untrusted ones)

An ID is the SHA-256 of the exact text: the list shows its first 12 digits,
and any unique prefix of 8 or more names it, as in git. A text edited in the
queue file has another ID, so an approval applies exactly the text that was
listed. Every change is sealed by layered-memory (a key in your state folder):
one written or edited by anything else is listed as NOT TRUSTED, never
approved, only rejected. An approved change still follows the rules on the
section as it is now (an entry deleted since, a lesson already known: not
applied, and dequeued).

--json prints {"version": 1, "ok", "source", "memory", "queue", "section",
"problem" (null, or why the queue is unreadable), "distrust" (what was changed
outside layered-memory), "decisions": [{"id", "decision" ("approve" or
"reject"), "outcome" ("applied", "rejected" or "not found"), "entry_id",
"reason"}], "pending": [{"id", "op", "entry_id", "text", "reason",
"thread_id", "model", "date", "entry_text", "untrusted", "cites"}]} ("pending":
what still waits afterwards). stale, drop and refresh print {"version": 1,
"ok", "memory", "decisions": [{"id", "outcome" ("dropped", "refreshed" or
"not done"), "entry", "reason"}], "stale": [{"id", "path", "entry", "cites":
[[cite, "changed" | "shorter" | "moved"]], "reasons", "since"}]} ("stale":
what is still stale afterwards; exit 1 when any is).

Exit status: 0; 1 when an ID waits nowhere, an approval was not applied, the
queue is unreadable or something in it is not trusted; 2 on a usage error, a
--config that does not load or a store that does not answer."""


def _add_review(subparsers: Subparsers) -> None:
    parser = _subparser(
        subparsers,
        "review",
        summary="decide the lessons a consolidator holds for review, and stale entries",
        description=_REVIEW_DESCRIPTION,
    )
    parser.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "approve", "reject", "stale", "drop", "refresh"),
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="changes to approve or reject")
    parser.add_argument("--all", action="store_true", help="every change that waits")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config", metavar="MODULE:ATTR", help=CONFIG_HELP)
    where.add_argument("--root", metavar="DIR", help="the memory folder (default: this one)")
    where.add_argument("--store", metavar="URL", help="PostgreSQL URL of a LangGraph PostgresStore")
    parser.add_argument(
        "--namespace", metavar="NS", help="with --store: namespace, components joined by '/'"
    )
    parser.add_argument(
        "--memory", metavar="FILE", help="the memory file (default /MEMORY.md; not with --config)"
    )
    parser.add_argument(
        "--section", metavar="NAME", help="the managed section (default Learned; not with --config)"
    )
    parser.add_argument("--json", action="store_true", help="print the queue as JSON")
    parser.set_defaults(run=_run_review)


def _run_review(args: argparse.Namespace) -> int:
    from layered_memory.cli.review import run_review

    return run_review(args)


# -- graph, tiers (their own folders) --------------------------------------------------------
# -- graph, mcp (cli/graph.py), tiers (its own folder) ---------------------------------------


def _add_graph(subparsers: Subparsers) -> None:
    from layered_memory.cli.graph import add_graph_parser

    add_graph_parser(subparsers)


def _add_mcp(subparsers: Subparsers) -> None:
    from layered_memory.cli.graph import add_mcp_parser

    add_mcp_parser(subparsers)


def _add_forget(subparsers: Subparsers) -> None:
    from layered_memory.cli.forget import add_forget_parser

    add_forget_parser(subparsers)


def _add_tiers(subparsers: Subparsers) -> None:
    try:
        from layered_memory.cli.tiers import add_parser
    except ImportError:  # the `tiers` extra (numpy) is not installed: say so when it is used
        stub = subparsers.add_parser(
            "tiers",
            help="needs the tiers extra: pip install 'layered-memory[tiers]'",
            add_help=False,
            prefix_chars="\0",  # no option syntax: any arguments (--help too) reach the stub
        )
        stub.add_argument("ignored", nargs="*")
        stub.set_defaults(run=_tiers_missing)
        return
    add_parser(subparsers)


def _tiers_missing(_args: argparse.Namespace) -> int:
    print(TIERS_MISSING, file=sys.stderr)
    return EXIT_USAGE


TIERS_MISSING = "layered-memory tiers needs the tiers extra: pip install 'layered-memory[tiers]'"


SUBCOMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    _add_demo,
    _add_doctor,
    _add_inspect,
    _add_lint,
    _add_review,
    _add_forget,
    _add_sync,
    _add_graph,
    _add_mcp,
    _add_tiers,
)

_EPILOG = """\
Every subcommand has --json (a schema with a "version" key, in its --help)
and documents its exit status; in general 0 is success, 1 findings (an invalid
file, a doctor finding, a failed file), 2 a usage error. Colours only on a
terminal, never when NO_COLOR is set. File names, keys and memory text are
printed with control and invisible characters escaped (\\x1b, \\u202e); on a
stdout that is not UTF-8, non-ASCII text too (JSON \\u escapes in --json).
Start with: layered-memory demo; then layered-memory doctor in your project."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(
        prog="layered-memory",
        description="Layered memory for LangChain and deepagents agents.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"layered-memory {__version__}",
        help="print the version and exit",
    )
    # Subcommand parsers are `_Parser`s too (argparse makes them of the parent's class); the
    # `add_*` functions only need the ArgumentParser interface.
    subparsers = cast(
        "Subparsers", parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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
    # On a stdout or stderr that is not UTF-8, memory text, file names, help and argparse's
    # errors alike come out with escapes rather than a UnicodeEncodeError traceback.
    with escaped_output(sys.stdout, sys.stderr):
        return _parse_and_run(argv)


def _parse_and_run(argv: Sequence[str] | None) -> int:
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
