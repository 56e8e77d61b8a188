"""Rule globs that can never match what the middleware matches them against (`lint`, `doctor`).

What is decidable, and what is checked here: match keys are normalized
before matching (`RuleSet.match`: `posixpath.normpath` for any key with a `/`, Unicode NFC,
an absolute key also tried relative to the root), so

- a glob with a `.` segment between slashes (`./src/**`, `src/./*.py`) needs a key that
  normalization never produces: dead, whatever the agent does;
- with a virtual-path backend (`FilesystemBackend(virtual_mode=True)`), the agent's tools name
  files from the backend's root (`/src/app.py`), so a glob spelling out the root's own folder on
  disk (`/home/me/project/src/**`) matches only paths no file of the project has.

Everything else is a question about data (which files exist, which context strings a run
carries), answered by `doctor` against the files on disk, as a warning rather than a verdict.
Empty and `..` globs are already invalid (the parser rejects them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from layered_memory.errors import GlobError
from layered_memory.rules._glob import compile_glob
from layered_memory.rules._parse import Rule

_SLASHES = re.compile(r"/{2,}")


@dataclass(frozen=True, slots=True)
class DeadGlob:
    """A glob of a rule that no match key can match.

    Attributes:
        rule: The rule.
        glob: The glob as written.
        reason: Why, with the fix.
        all_dead: Every glob of the rule is dead: the rule can never apply.
    """

    rule: Rule
    glob: str
    reason: str
    all_dead: bool

    # `lint` and `doctor` report a dead glob alike (issue 26: a warning in one, an error in the
    # other). The severity is the rules parser's own for the same kind of glob: `'..'
    # segments never match (keys are normalized paths)` is an invalid glob, an error
    # (`RuleProblem`: the part named is skipped); a `.` segment never matches for the same
    # reason, and a glob naming the backend's disk folder never matches a key either.
    severity: ClassVar[Literal["error"]] = "error"

    @property
    def message(self) -> str:
        """The reason, and when no glob of the rule can match, that the rule never applies."""
        if self.all_dead:
            return f"{self.reason}; rule {self.rule.name!r} can never apply"
        return self.reason


def _has_dot_segment(pattern: str) -> bool:
    segments = _SLASHES.sub("/", pattern).split("/")
    return len(segments) > 1 and "." in segments


def dead_glob_reason(glob: str, *, disk_root: str | None = None) -> str | None:
    """Why `glob` can never match a match key, or None when it can (or is invalid anyway).

    Args:
        glob: The glob as written in the rule file.
        disk_root: The disk folder of a virtual-path backend, if the rule is used with one.
    """
    try:
        parts = compile_glob(glob)
    except GlobError:
        return None  # reported as invalid by the parser
    if parts and all(_has_dot_segment(part.pattern) for part in parts):
        fixed = posixpath.normpath(glob) + ("/" if glob.endswith("/") else "")
        return (
            f"glob {glob!r} can never match: match keys are normalized paths, which have no "
            f"'.' segment; write {fixed!r}"
        )
    root = (disk_root or "").rstrip("/")
    if root and (glob == root or glob.startswith(root + "/")):
        inside = glob[len(root) :] or "/"
        return (
            f"glob {glob!r} names the backend's folder on disk ({root}), but the agent names "
            f"files from the backend's root (/src/app.py): write {inside!r}"
        )
    return None


def dead_globs(rules: Iterable[Rule], *, disk_root: str | None = None) -> list[DeadGlob]:
    """Every dead glob of the `paths` rules, in rule order."""
    found: list[DeadGlob] = []
    for rule in rules:
        if rule.mode != "paths":
            continue
        reasons = [(glob, dead_glob_reason(glob, disk_root=disk_root)) for glob in rule.paths]
        dead = [(glob, reason) for glob, reason in reasons if reason is not None]
        found.extend(
            DeadGlob(rule, glob, reason, all_dead=len(dead) == len(rule.paths))
            for glob, reason in dead
        )
    return found
