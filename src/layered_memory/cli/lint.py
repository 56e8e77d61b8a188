"""`layered-memory lint PATH...`: validate rule files with the same code the middleware uses."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from deepagents.backends import FilesystemBackend

from layered_memory.cli._text import printable
from layered_memory.core.loading import download_texts
from layered_memory.rules._listing import list_rule_files, parse_loaded
from layered_memory.rules._parse import is_rule_file
from layered_memory.rules._set import build_rule_set
from layered_memory.rules._types import RuleProblem


def _display(path: str) -> str:
    """`path` relative to the working folder when below it (shorter lines), fit to print."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return printable(path)
    return printable(path if relative.startswith("..") else relative)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _collect_files(
    paths: Sequence[str], backend: FilesystemBackend
) -> tuple[list[tuple[int, str]], list[RuleProblem], list[str]]:
    """Rule files to lint (folder index = PATH position), listing problems, missing PATHs."""
    missing: list[str] = []
    folders: list[tuple[int, str]] = []
    files: list[tuple[int, str]] = []
    problems: list[RuleProblem] = []
    for index, raw in enumerate(paths):
        target = Path(raw).expanduser().absolute()
        if target.is_dir():
            folders.append((index, target.as_posix()))
        elif target.is_file():
            files.append((index, target.as_posix()))
            if not is_rule_file(target.name):
                reason = "not a rule file name (*.md, *.mdc): a rule folder would ignore it"
                problems.append(RuleProblem(target.as_posix(), reason, "warning"))
        else:
            missing.append(raw)
    listed, listing_problems = list_rule_files(backend, [folder for _, folder in folders])
    files.extend((folders[position][0], path) for position, path in listed)
    return sorted(set(files)), problems + listing_problems, missing


def run_lint(paths: Sequence[str], *, explain: Sequence[str] = (), root: str = "/") -> int:
    """Lint rule files and folders; print findings and a summary to stdout.

    Args:
        paths: Rule files or folders (searched recursively), lowest precedence first.
        explain: Match keys to explain which rules apply for (optional).
        root: Project root for relative globs when explaining.

    Returns:
        0 when no rule file is invalid, 1 when one is, 2 when a PATH does not exist.
    """
    backend = FilesystemBackend(virtual_mode=False)
    files, problems, missing = _collect_files(paths, backend)
    for raw in missing:
        print(f"{printable(raw)}: error: no such file or directory", file=sys.stderr)
    if missing:
        return 2
    # One batched read and the same decoder and parser as the middleware's.
    loaded = download_texts(backend, [path for _, path in files])
    rule_set = build_rule_set([*parse_loaded(files, loaded), (None, problems)], log=False)
    for problem in rule_set.problems:
        print(f"{_display(problem.path)}: {problem.severity}: {printable(problem.reason)}")
    invalid = {p.path for p in rule_set.problems if p.severity == "error"}
    warnings = sum(p.severity == "warning" for p in rule_set.problems)
    errors = len(rule_set.problems) - warnings
    bad_files = len(invalid & {path for _, path in files})
    print(
        f"{_count(len(files), 'rule file')}: {len(files) - bad_files} valid, {bad_files} invalid; "
        f"{_count(errors, 'error')}, {_count(warnings, 'warning')}"
    )
    if explain:
        for decision in rule_set.explain(explain, root=root):
            name, reason = printable(decision.name), printable(decision.reason)
            print(f"{decision.status}: {name} ({_display(decision.path)}): {reason}")
    return 1 if invalid else 0
