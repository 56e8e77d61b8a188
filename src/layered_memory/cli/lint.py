"""`layered-memory lint PATH...`: validate rule files and memory files with the middleware's code.

Rule files (`*.md`, `*.mdc`, `*.instructions.md`; folders are searched recursively) are parsed
as the middleware parses them: frontmatter, globs, bounds. Memory files (`AGENTS.md`,
`MEMORY.md`, `CLAUDE.md`, ... or any `--memory FILE`) are loaded and rendered as a layer of
their own, within `--max-chars`: unreadable or non-UTF-8 files, files cut or left out by the
budget, `MEMORY.md` past its line cap and files holding only comments are reported. With
`--config module:attribute` the rule folders and layer files of the user's own middleware are
checked, through its backend. The pre-commit hook (`.pre-commit-hooks.yaml`) runs this command
on the files of a commit.

Globs that can never match are found by `rules.dead_globs` (shared with `doctor`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from layered_memory.cli._output import (
    SEVERITY_STYLE,
    Painter,
    counted,
    dumps_json,
    printable,
    use_colour,
)
from layered_memory.core.disk_cache import special_file_kind
from layered_memory.core.layers import Layer
from layered_memory.core.render import DEFAULT_MAX_CHARS, MEMORY_SYSTEM_PROMPT, minimum_budget
from layered_memory.rules import (
    DIALECT_NAMES,
    RuleDecision,
    RuleProblem,
    RuleSet,
    build_rule_set,
    is_rule_file,
    parse_loaded,
)
from layered_memory.rules.dead_globs import dead_globs
from layered_memory.rules.disk import list_local_rule_files, read_local_texts

if TYPE_CHECKING:
    from layered_memory.cli._report import FileReport, InspectReport

# Rule files and folders given as PATHs are listed and read by `rules.disk`, as the agent's
# `FilesystemBackend(virtual_mode=False)` would, without importing deepagents: the pre-commit
# hook starts in ~0.2x the time of `import deepagents` instead of 1.26x (issue 26,
# `benchmarks/cli_startup.py`; `tests/cli/test_cli_startup.py` pins what gets imported).
# Memory files and `--config` still load the framework, on first use.

# -- lint files -------------------------------------------------------------------------------

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

MEMORY_FILE_NAMES = frozenset(
    name.lower()
    for name in (
        "AGENTS.md",
        "AGENTS.override.md",
        "AGENT.md",
        "MEMORY.md",
        "CLAUDE.md",
        "CLAUDE.local.md",
        "GEMINI.md",
    )
)
"""File names linted as memory files (case-insensitive) unless they sit in a rule folder."""

_RULE_FOLDER_NAMES = frozenset({"rules", "instructions"})


@dataclass(frozen=True, slots=True)
class LintProblem:
    """One finding: the file (or folder), `error` / `warning`, and why."""

    path: str
    severity: str
    reason: str


@dataclass(slots=True)
class LintResult:
    """What `lint` found, for the text and the JSON output."""

    rule_files: list[str] = field(default_factory=list)
    memory_files: list[str] = field(default_factory=list)
    problems: list[LintProblem] = field(default_factory=list)
    decisions: list[RuleDecision] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)

    def invalid(self, files: Sequence[str]) -> set[str]:
        """The files among `files` with an error."""
        bad = {p.path for p in self.problems if p.severity == "error"}
        return bad & set(files)


def is_memory_file(path: str) -> bool:
    """A memory file by its name (`AGENTS.md`, `MEMORY.md`, ...), unless inside a rule folder."""
    pure = PurePosixPath(path.replace(os.sep, "/"))
    if pure.name.lower() not in MEMORY_FILE_NAMES:
        return False
    return not any(part.lower() in _RULE_FOLDER_NAMES for part in pure.parts[:-1])


def _display(path: str) -> str:
    """`path` relative to the working folder when below it (shorter lines), fit to print."""
    if not os.path.isabs(path):
        return printable(path)
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return printable(path)
    return printable(path if relative.startswith("..") else relative)


# -- rule files -----------------------------------------------------------------------------


def _unusable(target: Path, *, memory: bool) -> str | None:
    """Why `target` cannot be linted as given, or None. Only `stat` is called: a FIFO is
    never opened (it would block until a writer came)."""
    if target.is_dir():
        # A folder is a rule folder, unless it was given as a memory file (`--memory`, or
        # named like one): reporting "0 rule files" would pass a memory file no agent can read.
        return "is a directory, not a memory file" if memory else None
    if target.is_file():
        return None
    kind = special_file_kind(str(target))
    if kind is not None:
        return f"is {kind}, not a regular file"
    return "no such file or directory"


def _backend_key(path: str, root: Path) -> str | None:
    """`path` (absolute) as a virtual-path backend rooted at `root` names it
    (`/docs/AGENTS.md`), or None when it lies outside `root`."""
    target = Path(path)
    # The folder's real place; whether the file itself is a link leading out of the root is
    # for the backend to judge, as it does for the agent.
    try:
        relative = (target.parent.resolve() / target.name).relative_to(root)
    except ValueError:
        return None
    return "/" + relative.as_posix()


def _collect_files(
    paths: Sequence[str], memory: Sequence[str], root: Path
) -> tuple[list[tuple[int, str]], list[str], list[RuleProblem], list[tuple[str, str]]]:
    """Rule files (folder index = PATH position), memory files, listing problems, and the
    PATHs that cannot be linted with the reason."""
    unusable: list[tuple[str, str]] = []
    folders: list[tuple[int, str]] = []
    files: list[tuple[int, str]] = []
    memory_files: list[str] = []
    problems: list[RuleProblem] = []
    forced = {Path(raw).expanduser().absolute().as_posix() for raw in memory}
    for index, raw in enumerate([*paths, *memory]):
        target = Path(raw).expanduser().absolute()
        posix = target.as_posix()
        as_memory = posix in forced or is_memory_file(posix)
        reason = _unusable(target, memory=as_memory)
        if reason is not None:
            unusable.append((raw, reason))
        elif target.is_dir():
            folders.append((index, posix))
        elif as_memory:
            if _backend_key(posix, root) is None:
                reason = (
                    f"outside the lint root {printable(root.as_posix())}, where the agent's "
                    "backend would be rooted: give --root (the agent's root folder)"
                )
                unusable.append((raw, reason))
            elif posix not in memory_files:
                memory_files.append(posix)
        else:
            files.append((index, posix))
            if not is_rule_file(posix):
                reason = "not a rule file name (*.md, *.mdc): a rule folder would ignore it"
                problems.append(RuleProblem(posix, reason, "warning"))
    listed, listing_problems = list_local_rule_files([folder for _, folder in folders])
    files.extend((folders[position][0], path) for position, path in listed)
    return sorted(set(files)), memory_files, problems + listing_problems, unusable


def _rule_set(files: Sequence[tuple[int, str]], extra: list[Any]) -> RuleSet:
    # The middleware's reads, decoder and parser.
    loaded = read_local_texts([path for _, path in files])
    return build_rule_set([*parse_loaded(list(files), loaded), (None, extra)], log=False)


def glob_problems(rule_set: RuleSet, *, disk_root: str | None = None) -> list[LintProblem]:
    """Globs no match key can match (`dead_globs`), as `doctor` reports them."""
    return [
        LintProblem(dead.rule.path, dead.severity, dead.message)
        for dead in dead_globs(rule_set.rules, disk_root=disk_root)
    ]


# -- memory files ---------------------------------------------------------------------------


def memory_file_problems(file: FileReport, max_chars: int) -> list[LintProblem]:
    """What the budget and the line cap do to one layer file, as lint findings."""
    path = file.path
    size = f"{file.chars:,} chars"
    if file.shown == "omitted":
        reason = (
            f"over the memory budget: left out of the prompt entirely ({size}, "
            f"max_chars={max_chars:,}; set --max-chars to your agent's budget)"
        )
        return [LintProblem(path, "error", reason)]
    if file.shown == "truncated":
        reason = (
            f"over the memory budget: the model sees only its head ({size}, "
            f"max_chars={max_chars:,}); shorten it or raise the budget"
        )
        return [LintProblem(path, "error", reason)]
    problems = []
    if file.cut_by_lines:
        reason = (
            f"only the first lines are shown ({file.lines:,} lines; the line cap cuts the rest)"
        )
        problems.append(LintProblem(path, "warning", reason))
    if file.status == "loaded" and file.shown == "absent":
        reason = "holds only HTML comments or blank lines: nothing reaches the model"
        problems.append(LintProblem(path, "warning", reason))
    return problems


def report_problems(report: InspectReport) -> list[LintProblem]:
    """Every problem of a measured report: load problems, rule problems, budget verdicts."""
    from layered_memory.cli._report import shown_of

    problems = [LintProblem(p.path, p.severity, p.reason) for p in report.problems]
    for layer in report.layers:
        for file in layer.files:
            problems.extend(memory_file_problems(file, report.max_chars))
    for piece in report.extras:  # nested and imported files
        shown, _ = shown_of(piece)
        if shown in ("omitted", "absent", "truncated"):
            reason = (
                f"{piece.kind} file over the memory budget: "
                f"{'left out' if shown != 'truncated' else 'cut'} ({piece.source_chars:,} "
                f"chars, max_chars={report.max_chars:,})"
            )
            problems.append(LintProblem(piece.path, "error", reason))
    return problems


def import_problems(extras: Any) -> list[LintProblem]:
    """Import chains cut at the depth limit (an error) and import cycles (a warning)."""
    from layered_memory.cli.doctor import import_findings

    return [
        LintProblem(finding.path or "", finding.severity, finding.message)
        for finding in import_findings(extras)
    ]


def _lint_memory_file(path: str, root: Path, max_chars: int) -> list[LintProblem]:
    """Load and render one memory file as an agent whose backend is rooted at `root` would:
    its `@imports` are read (or refused) by that backend, never from outside `root`."""
    from deepagents.backends import FilesystemBackend

    from layered_memory.cli._report import report_from
    from layered_memory.cli._source import build_assembler, quiet_package_logs

    key = _backend_key(path, root)
    if key is None:  # `_collect_files` refused it already
        return []
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    with quiet_package_logs():
        assembler = build_assembler(
            backend,
            layers=[Layer("memory", key)],
            rule_folders=None,
            max_chars=max_chars,
            max_rules_chars=0,
            discover=False,
        )
        snapshot = assembler.load()
        rendered = assembler.render_report(snapshot)
        report = report_from(assembler, snapshot, rendered, keys=(), source={})
    problems = [*report_problems(report), *import_problems(snapshot.extras)]
    # Findings name files as the backend does (`/docs/x.md`); lint names them on disk.
    return [replace(p, path=_on_disk(p.path, key, path, root)) for p in problems]


def _on_disk(found: str, key: str, path: str, root: Path) -> str:
    if found == key:
        return path  # as the user named it, whatever links lead to the root
    if found.startswith("/"):
        return (root / found.lstrip("/")).as_posix()
    return found


# -- the command ----------------------------------------------------------------------------


def lint_paths(
    paths: Sequence[str],
    *,
    memory: Sequence[str] = (),
    explain: Sequence[str] = (),
    root: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> LintResult | list[tuple[str, str]]:
    """Lint files and folders; the result, or the PATHs that cannot be linted (with why).

    `root` (default: the working folder) is the project root: relative globs of `explain`
    are anchored there, and memory files are read through a backend rooted there.
    """
    folder = Path(root or ".").expanduser().resolve()
    files, memory_files, listing, unusable = _collect_files(paths, memory, folder)
    if unusable:
        return unusable
    rule_set = _rule_set(files, listing)
    result = LintResult(
        rule_files=[path for _, path in files],
        memory_files=memory_files,
        problems=[LintProblem(p.path, p.severity, p.reason) for p in rule_set.problems],
        source={
            "kind": "paths",
            "paths": list(paths),
            "memory": list(memory),
            "root": folder.as_posix(),
        },
    )
    result.problems.extend(glob_problems(rule_set))
    for path in memory_files:
        result.problems.extend(_lint_memory_file(path, folder, max_chars))
    if explain:
        result.decisions = list(rule_set.explain(explain, root=folder.as_posix()))
    return result


def lint_config(spec: str, *, explain: Sequence[str] = ()) -> LintResult:
    """Lint the rule folders and layer files of the middleware `--config` names, through its
    backend and with its budgets.

    Raises:
        Whatever `cli._source.loaded_memory` raises for the user to fix (`LOAD_ERRORS`).
    """
    from layered_memory.cli._source import SourceOptions, disk_root, loaded_memory

    with loaded_memory(SourceOptions(config=spec)) as loaded:
        report = loaded.report
        rule_set = loaded.assembler.rule_set(loaded.snapshot.rule_files)
        assembler, snapshot = loaded.assembler, loaded.snapshot
        layer_paths = [p for layer in assembler.layers for p in assembler.files_of(layer, snapshot)]
        result = LintResult(
            rule_files=sorted(loaded.snapshot.rule_files),
            memory_files=[p for p in layer_paths if p in loaded.snapshot.files],
            problems=[*report_problems(report), *import_problems(loaded.snapshot.extras)],
            source=report.source,
        )
        if rule_set is not None:
            root = disk_root(loaded.backend)
            result.problems.extend(glob_problems(rule_set, disk_root=str(root) if root else None))
            if explain:
                result.decisions = list(rule_set.explain(explain, root=loaded.assembler.rule_root))
    return result


def summary(result: LintResult) -> str:
    """`3 rule files: 3 valid, 0 invalid; 1 memory file: 1 ok, 0 with errors; 0 errors, ...`."""
    errors = sum(p.severity == "error" for p in result.problems)
    warnings = len(result.problems) - errors
    parts = []
    if result.rule_files or not result.memory_files:
        bad = len(result.invalid(result.rule_files))
        total = len(result.rule_files)
        parts.append(f"{counted(total, 'rule file')}: {total - bad} valid, {bad} invalid")
    if result.memory_files:
        bad = len(result.invalid(result.memory_files))
        total = len(result.memory_files)
        parts.append(f"{counted(total, 'memory file')}: {total - bad} ok, {bad} with errors")
    parts.append(f"{counted(errors, 'error')}, {counted(warnings, 'warning')}")
    return "; ".join(parts)


def result_data(result: LintResult) -> dict[str, Any]:
    """The JSON form (see the `lint --help` text for the keys)."""
    errors = sum(p.severity == "error" for p in result.problems)
    bad = {p.path for p in result.problems if p.severity == "error"}
    return {
        "version": 1,
        "source": result.source,
        "files": [
            {"path": path, "kind": kind, "valid": path not in bad}
            for kind, paths in (("rule", result.rule_files), ("memory", result.memory_files))
            for path in paths
        ],
        "problems": [
            {"path": p.path, "severity": p.severity, "reason": p.reason} for p in result.problems
        ],
        "counts": {"errors": errors, "warnings": len(result.problems) - errors},
        "explain": [
            {
                "name": d.name,
                "path": d.path,
                "status": d.status,
                "mode": d.mode,
                "dialect": d.dialect,
                "reason": d.reason,
                "key": d.key,
                "glob": d.glob,
            }
            for d in result.decisions
        ],
    }


def print_result(result: LintResult, *, as_json: bool) -> None:
    """Findings one per line, then the summary (or the JSON form)."""
    if as_json:
        print(dumps_json(result_data(result)))
        return
    paint = Painter(use_colour(sys.stdout))
    for problem in sorted(result.problems, key=lambda p: p.path):
        severity = paint(problem.severity, SEVERITY_STYLE.get(problem.severity, "bold"))
        print(f"{_display(problem.path)}: {severity}: {printable(problem.reason)}")
    print(summary(result))
    for decision in result.decisions:
        name, reason = printable(decision.name), printable(decision.reason)
        read_as = DIALECT_NAMES[decision.dialect or "layered-memory"]
        print(f"{decision.status}: {name} ({_display(decision.path)}) [{read_as}]: {reason}")


def run_lint(args: Any) -> int:
    """Run the subcommand: 0 when nothing is invalid, 1 when something is, 2 on a usage error."""
    if args.config is not None:
        from layered_memory.cli._source import LOAD_ERRORS
        from layered_memory.sessions.stores.urls import scrub

        if args.paths or args.memory:
            print("layered-memory lint: give PATHs or --config, not both", file=sys.stderr)
            return EXIT_USAGE
        # The middleware has its own budget and backend root: a flag lint would silently drop
        # must be refused, as inspect and doctor refuse theirs (`_source`).
        by_hand = [
            flag
            for flag, value in (("--root", args.root), ("--max-chars", args.max_chars))
            if value is not None
        ]
        if by_hand:
            print(
                f"layered-memory lint: {', '.join(by_hand)}: --config takes these from your "
                "middleware; drop them",
                file=sys.stderr,
            )
            return EXIT_USAGE
        failure: str | None = None
        try:
            result = lint_config(args.config, explain=args.explain)
        except LOAD_ERRORS as exc:
            failure = str(exc)
        if failure is not None:
            print(f"layered-memory lint: {printable(scrub(failure, None))}", file=sys.stderr)
            return EXIT_USAGE
    else:
        if not args.paths and not args.memory:
            print("layered-memory lint: give rule files, folders or --config", file=sys.stderr)
            return EXIT_USAGE
        if args.root is not None and not Path(args.root).expanduser().is_dir():
            print(
                f"layered-memory lint: --root {printable(args.root)}: no such folder",
                file=sys.stderr,
            )
            return EXIT_USAGE
        max_chars = DEFAULT_MAX_CHARS if args.max_chars is None else args.max_chars
        least = minimum_budget(MEMORY_SYSTEM_PROMPT)
        if max_chars < least:
            # Checked before anything is read: the assembler would refuse the budget for the
            # first memory file, halfway through the report.
            print(
                f"layered-memory lint: --max-chars {args.max_chars}: too small for the prompt "
                f"template; use at least {least}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        found = lint_paths(
            args.paths,
            memory=args.memory,
            explain=args.explain,
            root=args.root,
            max_chars=max_chars,
        )
        if isinstance(found, list):
            for raw, reason in found:
                print(f"{printable(raw)}: error: {reason}", file=sys.stderr)
            return EXIT_USAGE
        result = found
    print_result(result, as_json=args.json)
    return EXIT_FINDINGS if any(p.severity == "error" for p in result.problems) else EXIT_OK
