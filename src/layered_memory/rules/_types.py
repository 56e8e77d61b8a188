"""The values of the rules engine: a parsed rule, a problem with a file, a match and a decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

RuleMode = Literal["always", "paths", "requested", "manual"]
"""How a rule is used.

- `always`: injected whatever the match keys are (no `paths`, or `alwaysApply: true`).
- `paths`: injected when a match key matches one of its globs.
- `requested`: `alwaysApply: false`, a description, no `paths`: listed by name, description and
  path only, for the agent to `read_file` when relevant (Cursor's "agent requested").
- `manual`: `alwaysApply: false`, no description, no `paths`: never injected nor listed
  (lint warns); it exists only to be read on purpose.
"""

Severity = Literal["error", "warning"]

DecisionStatus = Literal["applied", "listed", "skipped", "replaced", "invalid"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One valid rule file.

    Attributes:
        name: The `name:` field, else the file stem (`py.instructions.md` -> `py`).
        path: The rule file's backend path.
        description: The `description:` field ('' if absent).
        paths: Globs from `paths:` (or its aliases `globs:` / `applyTo:`), as written.
        always_apply: The `alwaysApply:` field; None when absent.
        body: The Markdown after the frontmatter, HTML comments stripped, whitespace trimmed.
        folder_index: Position of the rule's folder in `rules=[...]`; a higher index wins.
    """

    name: str
    path: str
    description: str = ""
    paths: tuple[str, ...] = ()
    always_apply: bool | None = None
    body: str = ""
    folder_index: int = 0

    @property
    def mode(self) -> RuleMode:
        """How the rule is used; see `RuleMode`."""
        if self.always_apply is True:
            return "always"
        if self.paths:
            return "paths"
        if self.always_apply is None:
            return "always"
        return "requested" if self.description else "manual"


@dataclass(frozen=True, slots=True)
class RuleProblem:
    """Something wrong with a rule file or a rule folder.

    Attributes:
        path: The file (or folder) the problem is about.
        reason: What is wrong, in one line fit for a log or lint line.
        severity: `error`: the file is skipped; `warning`: the rule is still used.
    """

    path: str
    reason: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.severity}: {self.reason}"


@dataclass(frozen=True, slots=True)
class RuleHit:
    """Why a `paths` rule applied: the first match key that matched one of its globs.

    Attributes:
        name: The rule's name.
        key: The match key as given (before normalization).
        glob: The glob as written in the rule file (braces unexpanded).
    """

    name: str
    key: str
    glob: str


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The rules selected for one set of match keys (hashable, so renders can be cached).

    Attributes:
        applied: Rules whose bodies go into the prompt, in `RuleSet.rules` order (lower
            folder first, then by name): the `always` rules and the matched `paths` rules.
        requested: `requested` rules, listed by name/description/path only, same order.
        hits: For each applied `paths` rule, the key and glob that matched, same order.
    """

    applied: tuple[Rule, ...] = ()
    requested: tuple[Rule, ...] = ()
    hits: tuple[RuleHit, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.applied or self.requested)


@dataclass(frozen=True, slots=True)
class RuleDecision:
    """What the engine did with one rule file for a set of match keys, and why.

    Attributes:
        name: The rule's name (the file stem for an invalid file).
        path: The rule file's path.
        status: `applied` (body injected), `listed` (requested rule, listed only), `skipped`
            (no key matched, or a `manual` rule), `replaced` (a higher folder's rule, or an
            earlier file in the same folder, has the same name), `invalid` (the file has errors).
        reason: Why, in words: e.g. `key 'src/app.py' matched glob '**/*.py'`.
        mode: The rule's mode; None for an invalid file.
        key: The matching key, for a matched `paths` rule.
        glob: The matching glob, for a matched `paths` rule.
    """

    name: str
    path: str
    status: DecisionStatus
    reason: str
    mode: RuleMode | None = None
    key: str | None = None
    glob: str | None = None

    def __str__(self) -> str:
        return f"{self.status}: {self.name} ({self.path}): {self.reason}"
