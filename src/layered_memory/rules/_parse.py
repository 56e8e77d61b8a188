"""One rule file: the tool it was written for, its frontmatter, and the `Rule` it defines.

Each file is read with the semantics of the tool its type and place say it was written for
(`dialect_of`): Cursor's `.mdc` rules and `.cursor/rules/` files, VS Code Copilot's
`*.instructions.md`, Claude Code's `.claude/rules/`, Windsurf's (and Devin's) `.windsurf/rules/`,
Kiro's `.kiro/steering/`, Cline's `.clinerules`, and this package's own dialect for any other
`.md` in a rule folder. A field another dialect reads is a warning, not a rejection; an invalid
glob drops only itself. The tools' semantics, and where they are undocumented, what was chosen
and why, are in docs/rules.md.

Rule files are untrusted input (anyone who can write the rule folder, an agent included), so
every step is bounded: the file's size, the frontmatter (`_frontmatter`: its size and nesting
depth), the number of globs and of the patterns their braces expand to, and each glob's length.
Every check runs in time linear in the file; a file that fails one is skipped with the reason,
never parsed further.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from posixpath import basename
from typing import Any, Literal

from layered_memory.core.loading import strip_html_comments
from layered_memory.rules._frontmatter import (
    QUOTED_FIELDS,
    lenient_fields,
    load_yaml,
    split_frontmatter,
    unquote,
)
from layered_memory.rules._glob import GlobError, compile_glob, split_glob_list
from layered_memory.safety.redaction import redact_text

RuleMode = Literal["always", "paths", "requested", "manual"]
"""How a rule is used (each dialect's frontmatter maps onto these; see `Rule.why`).

- `always`: the body is injected whatever the match keys are.
- `paths`: the body is injected when a match key matches one of its globs.
- `requested`: listed by name, description and path only, for the agent to `read_file` when
  relevant (Cursor's Agent Requested, VS Code's instructions without `applyTo`); injected in
  full when a match key names it.
- `manual`: injected only when a match key names it (`deploy` or `@deploy`, as an @-mention in
  Cursor); nothing otherwise.
"""

Dialect = Literal["cursor", "copilot", "claude", "windsurf", "kiro", "cline", "layered-memory"]
"""The tool whose semantics a rule file is read with (`dialect_of`)."""

DIALECT_NAMES: dict[Dialect, str] = {
    "cursor": "Cursor",
    "copilot": "VS Code Copilot",
    "claude": "Claude Code",
    "windsurf": "Windsurf",
    "kiro": "Kiro",
    "cline": "Cline",
    "layered-memory": "layered-memory",
}

Severity = Literal["error", "warning"]

MAX_RULE_FILE_CHARS = 1_000_000
"""A bigger rule file is refused: it could never fit a prompt budget anyway."""

MAX_PATTERNS_PER_RULE = 1024
"""Globs of one rule, counted after brace expansion; more is refused (each costs a regex)."""

MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 1024

RULE_FILE_SUFFIXES = (".md", ".mdc")
"""`*.md` (Claude Code, this package), `*.mdc` (Cursor); `*.instructions.md` is a `.md` too."""

LEGACY_RULE_FILES: dict[str, Dialect] = {".windsurfrules": "windsurf", ".clinerules": "cline"}
"""Single rule files at a project's root, always on in their tool (Windsurf's docs, Cline's
docs). Name one in `rules=[...]` as if it were a folder; a `.clinerules` folder works too."""

_TOOL_FOLDERS: tuple[tuple[str, Dialect], ...] = (
    ("/.cursor/rules/", "cursor"),
    ("/.claude/rules/", "claude"),
    ("/.windsurf/rules/", "windsurf"),
    ("/.devin/rules/", "windsurf"),
    ("/.kiro/steering/", "kiro"),
    ("/.clinerules/", "cline"),
    ("/.cline/rules/", "cline"),
)
"""The rule folders each tool reads: a `.md` below one is read in that tool's dialect."""

_COPILOT_FOLDER = "/.github/instructions/"
"""VS Code reads only `*.instructions.md` here (`is_rule_file`)."""

WINDSURF_MAX_CHARS = 12_000
"""Windsurf reads at most this many characters of a rule file (its docs); lint reports more."""

GLOB_FIELDS = ("paths", "globs", "applyTo")

_NATIVE_FIELDS: dict[Dialect, frozenset[str]] = {
    "cursor": frozenset({"description", "globs", "alwaysApply"}),
    "copilot": frozenset({"description", "applyTo"}),
    "claude": frozenset({"paths"}),
    "windsurf": frozenset({"trigger", "description", "globs"}),
    "kiro": frozenset({"inclusion", "fileMatchPattern", "description"}),
    "cline": frozenset({"paths"}),
    "layered-memory": frozenset({"description", "alwaysApply", *GLOB_FIELDS}),
}
"""The fields each dialect reads; `name` (this package's precedence key) is read in all."""

_FIELD_OWNERS = {
    "description": "Cursor, VS Code, Windsurf and Kiro",
    "globs": "Cursor and Windsurf",
    "alwaysApply": "Cursor",
    "applyTo": "VS Code",
    "paths": "Claude Code and Cline",
    "trigger": "Windsurf",
    "inclusion": "Kiro",
    "fileMatchPattern": "Kiro",
}

_SCOPE_FIELD: dict[Dialect, str] = {
    "cursor": "globs",
    "copilot": "applyTo",
    "claude": "paths",
    "windsurf": "globs",
    "kiro": "fileMatchPattern",
    "cline": "paths",
}

_LENIENT: frozenset[Dialect] = frozenset({"cursor", "copilot"})
"""Dialects whose tools do not read frontmatter as strict YAML (see `lenient_fields`)."""

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Rule:
    """One usable rule file.

    Attributes:
        name: The `name:` field, else the file stem (`py.instructions.md` -> `py`). A rule in a
            later folder replaces the rules of the same name in earlier ones.
        path: The rule file's backend path.
        mode: How the rule is used; see `RuleMode`.
        why: The frontmatter that chose the mode, in the dialect's words (`lint --explain`).
        dialect: The tool whose semantics the file was read with.
        description: The `description:` field ('' if absent or not read in this dialect).
        paths: The valid globs, as written (from `paths:`, `globs:` or `applyTo:`).
        patterns: What each glob matches as, in the same order: `*.rs` in Cursor and in VS
            Code matches at any depth, so it is `**/*.rs` here.
        ignore_case: Whether the globs ignore ASCII case (VS Code's `applyTo`).
        body: The Markdown after the frontmatter, HTML comments stripped, whitespace trimmed.
        folder_index: Position of the rule's folder in `rules=[...]`; a higher index wins.
    """

    name: str
    path: str
    mode: RuleMode = "always"
    why: str = ""
    dialect: Dialect = "layered-memory"
    description: str = ""
    paths: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    ignore_case: bool = False
    body: str = ""
    folder_index: int = 0

    def __post_init__(self) -> None:
        if self.paths and not self.patterns:  # a hand-built rule: globs match as written
            object.__setattr__(self, "patterns", self.paths)


@dataclass(frozen=True, slots=True)
class RuleProblem:
    """Something wrong with a rule file or a rule folder.

    Attributes:
        path: The file (or folder) the problem is about.
        reason: What is wrong, in one line fit for a log or lint line.
        severity: `error`: the file is skipped, or (an invalid glob) the part named is;
            `warning`: the rule is used as the reason says.
    """

    path: str
    reason: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.severity}: {self.reason}"


def dialect_of(path: str) -> Dialect:
    """The tool a rule file was written for: by its type, then by its place.

    `.mdc` is Cursor's and `*.instructions.md` VS Code Copilot's wherever they lie (the name
    says which tool the author wrote for, even in a `.claude/rules/` folder, where Claude Code
    would load them as plain rules). Any other file below a tool's own rule folder is that
    tool's: `.cursor/rules/` Cursor's (Cursor reads `.md` there as it reads `.mdc`),
    `.claude/rules/` Claude Code's, `.windsurf/rules/` and `.devin/rules/` Windsurf's (Devin
    Desktop is Windsurf renamed), `.kiro/steering/` Kiro's, `.clinerules/` and `.cline/rules/`
    Cline's; so are the legacy single files `.windsurfrules` and `.clinerules`. Every other
    `.md` is this package's own dialect.

    Args:
        path: The rule file's path (backend or disk path).

    Returns:
        The dialect's name (`DIALECT_NAMES` lists them).

    Example:
        `dialect_of("/.claude/rules/py.md")` -> `"claude"`
    """
    lowered = path.lower()
    if lowered.endswith(".mdc"):
        return "cursor"
    if lowered.endswith(".instructions.md"):
        return "copilot"
    legacy = LEGACY_RULE_FILES.get(basename(path))
    if legacy is not None:
        return legacy
    placed = f"/{path}"
    for folder, dialect in _TOOL_FOLDERS:
        if folder in placed:
            return dialect
    return "layered-memory"


def is_rule_file(path: str) -> bool:
    """Whether `path` names a rule file: `*.md` or `*.mdc`, not a dotfile, as its tool reads.

    Below `.github/instructions/` only `*.instructions.md` (VS Code reads nothing else there);
    below a Cline folder `*.txt` too (Cline reads `.md` and `.txt`); the legacy single files
    `.windsurfrules` and `.clinerules` are rule files by name.

    Args:
        path: The file's path (backend or disk path).

    Returns:
        Whether a rule folder's listing takes it.

    Example:
        `is_rule_file("/rules/py.instructions.md")` -> True; `is_rule_file("/rules/x.txt")` -> False
    """
    name = basename(path)
    if name in LEGACY_RULE_FILES:
        return True
    lowered = name.lower()
    if name.startswith("."):
        return False
    placed = f"/{path}"
    if _COPILOT_FOLDER in placed:
        return lowered.endswith(".instructions.md")
    if lowered.endswith(".txt"):
        return dialect_of(path) == "cline"
    return lowered.endswith(RULE_FILE_SUFFIXES)


def unread_reason(path: str) -> str | None:
    """Why a Markdown file below a rule folder is not a rule file, when its tool would say so
    (a README in `.github/instructions/`); None for any other file."""
    if _COPILOT_FOLDER in f"/{path}" and path.lower().endswith(".md"):
        return (
            "not read: VS Code reads only *.instructions.md in .github/instructions; rename it "
            f"to {default_rule_name(path)}.instructions.md to make it a rule"
        )
    return None


def default_rule_name(path: str) -> str:
    """The file stem used when a rule has no `name:` (`x.instructions.md` and `x.mdc` -> `x`;
    `.windsurfrules` -> `windsurfrules`)."""
    name = basename(path)
    if name in LEGACY_RULE_FILES:
        return name[1:]
    lowered = name.lower()
    suffixes: tuple[str, ...] = (".instructions.md", *RULE_FILE_SUFFIXES)
    if lowered.endswith(".txt") and dialect_of(path) == "cline":
        suffixes = (".txt",)
    for suffix in suffixes:
        if lowered.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _shown(glob: str) -> str:
    """A glob as quoted in a problem: at most 80 characters (a problem is one log line)."""
    return repr(glob) if len(glob) <= 80 else f"{glob[:77]!r}..."


def _kind(value: object) -> str:
    # The type only: a YAML alias can make a value's repr as large as memory allows.
    return type(value).__name__


def _glob_items(field: str, value: object, errors: list[str]) -> list[str] | None:
    """The glob strings a field holds (a comma-separated string or a list), empty ones left
    out; None when the value is of no glob shape at all (an error names it)."""
    if value is None:
        return []
    if isinstance(value, str):
        # `globs: *.ts, '*.tsx'` (quotes inside a comma list) means the glob, not the quotes.
        return [item for item in map(unquote, split_glob_list(value)) if item]
    if isinstance(value, list):
        items: list[str] = []
        for position, item in enumerate(value, start=1):
            if isinstance(item, str):
                items.append(item.strip())
            else:
                kind = _kind(item)
                errors.append(f"{field} item {position} is not a string (got {kind}): dropped")
        return items
    errors.append(f"{field} must be a string or a list of strings (got {_kind(value)})")
    return None


def _present(value: object) -> bool:
    """Whether a glob field says anything (an empty string or list says nothing)."""
    if isinstance(value, str):
        return bool(value.strip())
    return value is not None and value != []


def _valid_globs(
    field: str,
    items: list[str],
    errors: list[str],
    *,
    pattern_of: Callable[[str], str] = str,
    ignore_case: bool = False,
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """`(globs as written, patterns)` of the items that compile; each invalid one is an error
    naming it, and drops only itself. None past `MAX_PATTERNS_PER_RULE` globs or
    brace-expanded patterns: the file is refused whole (the bound guards against hostile
    files, which get no partial reading)."""
    if len(items) > MAX_PATTERNS_PER_RULE:
        errors.append(f"{field} lists {len(items)} globs; at most {MAX_PATTERNS_PER_RULE}")
        return None
    written: list[str] = []
    patterns: list[str] = []
    expanded = 0
    for glob in items:
        pattern = pattern_of(glob)
        try:
            expanded += len(compile_glob(pattern, ignore_case=ignore_case))
        except GlobError as exc:
            errors.append(f"invalid glob {_shown(glob)} in {field} (dropped): {exc}")
            continue
        if expanded > MAX_PATTERNS_PER_RULE:
            errors.append(
                f"{field} expands to more than {MAX_PATTERNS_PER_RULE} patterns (braces count)"
            )
            return None
        written.append(glob)
        patterns.append(pattern)
    return tuple(written), tuple(patterns)


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a dialect reader decided: the mode, why, and the globs."""

    mode: RuleMode
    why: str
    paths: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    ignore_case: bool = False


def _cursor_pattern(glob: str) -> str:
    """A Cursor glob as matched here. Cursor does not document where a glob is anchored; it is
    read as `.gitignore` reads a pattern: without a `/` before its end it matches at any depth
    (`*.rs`, `Dockerfile`, `docs/`), with one it is relative to the project root (a leading
    `/` only anchors)."""
    if "/" not in glob.rstrip("/"):
        return f"**/{glob}"
    return glob.lstrip("/") or glob


def _copilot_pattern(glob: str) -> str:
    """VS Code's own rule (`computeAutomaticInstructions._matches`): a pattern not starting
    with `/` or `**/` is relative and matches at any depth."""
    return glob if glob.startswith(("/", "**/")) else f"**/{glob}"


_COPILOT_EVERYWHERE = frozenset({"*", "**", "**/*"})
"""`applyTo` values VS Code attaches to every request, files or not."""


def _paths_scope(
    why: str, found: tuple[tuple[str, ...], tuple[str, ...]] | None, *, ignore_case: bool = False
) -> _Scope | None:
    return None if found is None else _Scope("paths", why, *found, ignore_case=ignore_case)


def _read_cursor(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, warnings = notes
    always = data.get("alwaysApply")
    if always is not None and not isinstance(always, bool):
        warnings.append(
            f"alwaysApply must be true or false (got a {_kind(always)}); Cursor does not "
            "apply such a rule always: ignored"
        )
        always = None
    items = _glob_items("globs", data.get("globs"), errors)
    if always is True:
        if items:
            warnings.append("alwaysApply: true makes the globs irrelevant")
        return _Scope("always", "alwaysApply: true (Cursor: Always)")
    if items is None or items:
        found = _valid_globs("globs", items or [], errors, pattern_of=_cursor_pattern)
        return _paths_scope("globs (Cursor: Auto Attached)", found)
    if description:
        return _Scope("requested", "a description and no globs (Cursor: Agent Requested)")
    facts = "no alwaysApply, globs or description" if has_frontmatter else "no frontmatter"
    if always is False:
        facts = "alwaysApply: false, no globs and no description"
    return _Scope("manual", f"{facts} (Cursor: Manual)")


def _read_copilot(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, warnings = notes
    del description, has_frontmatter  # VS Code lists the file for the agent either way
    value = data.get("applyTo")
    if isinstance(value, str) and value.strip():
        items = [item for item in map(unquote, split_glob_list(value)) if item]
        if _COPILOT_EVERYWHERE.intersection(items):
            return _Scope("always", f"applyTo {_shown(value.strip())} (VS Code: every request)")
        found = _valid_globs(
            "applyTo", items, errors, pattern_of=_copilot_pattern, ignore_case=True
        )
        return _paths_scope("applyTo (VS Code)", found, ignore_case=True)
    if value is None or value == "":
        return _Scope("requested", "no applyTo (VS Code never attaches it on its own)")
    warnings.append(
        f"applyTo is a YAML {_kind(value)}: VS Code reads only a string of comma-separated "
        "globs and ignores it, so the file is never attached automatically; write "
        "applyTo: '**/*.ts, docs/**'"
    )
    return _Scope("requested", f"applyTo is a {_kind(value)}, which VS Code ignores")


def _read_claude(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, _ = notes
    del description, has_frontmatter
    items = _glob_items("paths", data.get("paths"), errors)
    if items is None or items:
        found = _valid_globs("paths", items or [], errors)
        return _paths_scope("paths (Claude Code: loaded for matching files)", found)
    return _Scope("always", "no paths (Claude Code loads it at session start)")


def _read_own(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, warnings = notes
    del has_frontmatter
    always = data.get("alwaysApply")
    if always is not None and not isinstance(always, bool):
        errors.append(f"alwaysApply must be true or false (got a {_kind(always)})")
        return None  # this package's own field: an ambiguous value is refused
    given = [field for field in GLOB_FIELDS if _present(data.get(field))]
    if len(given) > 1:
        warnings.append(f"{' and '.join(given)} are aliases here: their globs are combined")
    items: list[str] = []
    for field in given:
        items.extend(_glob_items(field, data[field], errors) or [])
    if always is True:
        if given:
            warnings.append("alwaysApply: true makes the paths globs irrelevant")
        return _Scope("always", "alwaysApply: true")
    if given:
        return _paths_scope("/".join(given), _valid_globs("/".join(given), items, errors))
    if always is None:
        return _Scope("always", "no paths")
    if description:
        return _Scope("requested", "alwaysApply: false, a description and no paths")
    return _Scope("manual", "alwaysApply: false, no paths and no description")


_WINDSURF_TRIGGERS = ("always_on", "manual", "model_decision", "glob")


def _read_windsurf(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, warnings = notes
    del has_frontmatter
    trigger = data.get("trigger")
    items = _glob_items("globs", data.get("globs"), errors)
    if trigger is None:
        # Windsurf documents no default; a file without a trigger is read as its legacy
        # `.windsurfrules` was (always on), unless it names globs, which only `glob` reads.
        trigger = "glob" if items else "always_on"
    elif trigger == "always":
        # Hand-written by some projects (and older guides) for `always_on`; its author meant it.
        warnings.append("trigger: always is read as always_on, Windsurf's name for it")
        trigger = "always_on"
    if trigger not in _WINDSURF_TRIGGERS:
        warnings.append(
            f"trigger must be one of {', '.join(_WINDSURF_TRIGGERS)} (got {_shown(str(trigger))}):"
            " Windsurf would not apply it on its own, so it applies only when a key names it"
        )
        return _Scope("manual", "an unknown trigger (Windsurf: not applied)")
    if trigger == "always_on":
        if items:
            warnings.append("trigger: always_on makes the globs irrelevant")
        return _Scope("always", "trigger: always_on (Windsurf: Always On)")
    if trigger == "glob":
        if items is None or items:
            found = _valid_globs("globs", items or [], errors, pattern_of=_cursor_pattern)
            return _paths_scope("trigger: glob (Windsurf: Glob)", found)
        warnings.append("trigger: glob without globs never applies on its own")
        return _Scope("manual", "trigger: glob and no globs (Windsurf: never attached)")
    if trigger == "model_decision":
        if not description:
            warnings.append("trigger: model_decision without a description: listed by name only")
        return _Scope("requested", "trigger: model_decision (Windsurf: Model Decision)")
    return _Scope("manual", "trigger: manual (Windsurf: Manual, @-mentioned)")


_KIRO_MODES = ("always", "fileMatch", "manual", "auto")


def _read_kiro(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, warnings = notes
    del has_frontmatter
    inclusion = data.get("inclusion")
    if inclusion is None or inclusion == "always":
        return _Scope("always", "inclusion: always (Kiro: the default)")
    if inclusion == "fileMatch":
        items = _glob_items("fileMatchPattern", data.get("fileMatchPattern"), errors)
        if items is None or items:
            found = _valid_globs(
                "fileMatchPattern", items or [], errors, pattern_of=_cursor_pattern
            )
            return _paths_scope(
                "inclusion: fileMatch (Kiro: when a matching file is in context)", found
            )
        warnings.append("inclusion: fileMatch without a fileMatchPattern never applies on its own")
        return _Scope("manual", "inclusion: fileMatch and no fileMatchPattern (Kiro)")
    if inclusion == "manual":
        return _Scope("manual", "inclusion: manual (Kiro: #-referenced in chat)")
    if inclusion == "auto":
        if not description:
            warnings.append("inclusion: auto without a description: listed by name only")
        return _Scope("requested", "inclusion: auto (Kiro: included when the request matches)")
    warnings.append(
        f"inclusion must be one of {', '.join(_KIRO_MODES)} (got {_shown(str(inclusion))}): "
        "applied only when a key names it"
    )
    return _Scope("manual", "an unknown inclusion (Kiro)")


def _read_cline(
    data: dict[str, Any], description: str, has_frontmatter: bool, notes: list[list[str]]
) -> _Scope | None:
    errors, _ = notes
    del description, has_frontmatter
    value = data.get("paths")
    if value == []:
        return _Scope("manual", "paths: [] (Cline: never activates)")
    items = _glob_items("paths", value, errors)
    if items is None or items:
        found = _valid_globs("paths", items or [], errors)
        return _paths_scope("paths (Cline: conditional rule)", found)
    return _Scope("always", "no paths (Cline: always active)")


_READERS: dict[Dialect, Callable[[dict[str, Any], str, bool, list[list[str]]], _Scope | None]] = {
    "cursor": _read_cursor,
    "copilot": _read_copilot,
    "claude": _read_claude,
    "windsurf": _read_windsurf,
    "kiro": _read_kiro,
    "cline": _read_cline,
    "layered-memory": _read_own,
}


def _foreign_field(field: str, dialect: Dialect) -> str:
    tool = DIALECT_NAMES[dialect]
    if dialect == "claude" and field == "globs":
        return (
            "globs is not read in Claude Code rules (its docs name only paths; its users report "
            "both that globs scopes and that it is ignored): ignored, so the rule is scoped by "
            "paths alone; rename globs to paths"
        )
    reason = f"{field} is a {_FIELD_OWNERS[field]} field, not read in {tool} files: ignored"
    scope = _SCOPE_FIELD.get(dialect)
    if field in QUOTED_FIELDS and scope is not None:
        reason += f" ({tool} scopes a rule with {scope})"
    return reason


def _text_field(data: dict[str, Any], field: str, limit: int, warnings: list[str]) -> str | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        warnings.append(f"{field} must be a string (got {_kind(value)}): ignored")
        return None
    value = value.strip()
    if len(value) > limit:
        warnings.append(f"{field} longer than {limit} characters; truncated")
        value = value[:limit]
    return value


def _frontmatter_of(
    text: str, dialect: Dialect, errors: list[str], warnings: list[str]
) -> tuple[dict[str, Any], str, bool]:
    """`(fields, body, has_frontmatter)`; a reason appended to `errors` when unreadable.

    Each tool's own answer to frontmatter it cannot read: Cursor loads a rule whose
    frontmatter is never closed only when it is @-mentioned (so: Manual, the whole text its
    body); Cursor and VS Code read a block strict YAML rejects field by field
    (`lenient_fields`); Cline "fails open": the rule is always on, its raw text shown. Any
    other dialect refuses the file with the reason.
    """
    tool = DIALECT_NAMES[dialect]
    frontmatter, body, error = split_frontmatter(text, cursor=dialect == "cursor")
    if error:
        if dialect == "cursor":
            warnings.append(
                f"{error}: Cursor does not read it, so the file is a rule with no frontmatter; "
                "close the frontmatter with a '---' line"
            )
            return {}, text, False
        if dialect == "cline":
            warnings.append(f"{error}: Cline fails open, so the whole file is always on")
            return {}, text, False
        errors.append(error)
        return {}, body, False
    if frontmatter is None:
        return {}, body, False
    loaded, error = load_yaml(frontmatter)
    if error is None and loaded is not None:
        return loaded, body, True
    reason = error or "frontmatter is not a mapping"
    if dialect in _LENIENT and reason.startswith("malformed YAML"):
        warnings.append(
            f"{reason}; read field by field, as {tool} reads it (a colon inside a value is "
            "part of the value): quote such a value to silence this"
        )
        return lenient_fields(frontmatter), body, True
    if dialect == "cline":
        warnings.append(f"{reason}: Cline fails open, so the whole file is always on")
        return {}, text, False
    errors.append(reason)
    return {}, body, True


def parse_rule_file(
    path: str, text: str, *, folder_index: int
) -> tuple[Rule | None, list[RuleProblem]]:
    """Parse one rule file with the semantics of the tool it was written for (`dialect_of`).

    Never raises on bad content. A file whose frontmatter cannot be read (malformed YAML, not a
    mapping, over a bound) gives `(None, problems)`; otherwise the rule is used, with an
    `error` per glob it had to drop and a `warning` per field it ignored.

    Args:
        path: The file's backend path (picks the dialect, names the rule by default).
        text: The file's text.
        folder_index: Position of the file's folder in `rules=[...]` (higher wins).

    Returns:
        The rule (None when unusable) and the problems found, in a stable order.

    Example:
        `parse_rule_file("/rules/py.md", "---\\npaths: '**/*.py'\\n---\\nRuff.", folder_index=0)`
    """
    errors: list[str] = []
    warnings: list[str] = []
    if len(text) > MAX_RULE_FILE_CHARS:
        return None, [RuleProblem(path, f"file longer than {MAX_RULE_FILE_CHARS} characters")]
    size = len(text)
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    dialect = dialect_of(path)
    data, body, has_frontmatter = _frontmatter_of(text, dialect, errors, warnings)
    if errors:
        return None, [RuleProblem(path, reason) for reason in errors]
    if dialect == "windsurf" and size > WINDSURF_MAX_CHARS:
        warnings.append(
            f"{size:,} characters: Windsurf reads at most {WINDSURF_MAX_CHARS:,} characters of a "
            "rule file and drops the rest (here the whole file is read); split it in two"
        )
    native = _NATIVE_FIELDS[dialect]
    for field in sorted(str(key) for key in data):
        if field == "name" or field in native:
            continue
        if field in _FIELD_OWNERS:
            warnings.append(_foreign_field(field, dialect))
        else:
            warnings.append(f"unknown field {field!r} (ignored)")
    name = _text_field(data, "name", MAX_NAME_CHARS, warnings)
    if name is not None and (not name or _CONTROL_CHARS.search(name)):
        warnings.append("name must be a non-empty single line: the file stem is used")
        name = None
    description = None
    if "description" in native:
        description = _text_field(data, "description", MAX_DESCRIPTION_CHARS, warnings)
    description = " ".join((description or "").split())
    scope = _READERS[dialect](data, description, has_frontmatter, [errors, warnings])
    if scope is None:
        problems = [RuleProblem(path, reason, "error") for reason in errors]
        return None, problems + [RuleProblem(path, reason, "warning") for reason in warnings]
    rule = Rule(
        name=name or default_rule_name(path),
        path=path,
        mode=scope.mode,
        why=scope.why,
        dialect=dialect,
        # Redacted as memory files are when rendered (a rule reaches every prompt it
        # matches); parsing is cached by content, so this costs once per changed file.
        description=redact_text(description).text if description else "",
        paths=scope.paths,
        patterns=scope.patterns,
        ignore_case=scope.ignore_case,
        body=redact_text(strip_html_comments(body)).text.strip(),
        folder_index=folder_index,
    )
    if rule.mode == "manual":
        warnings.append(
            f"{rule.why}: injected only when a match key names it ({rule.name!r} or '@{rule.name}')"
        )
    elif rule.mode != "requested" and not rule.body:
        warnings.append("empty body: the rule injects nothing")
    problems = [RuleProblem(path, reason, "error") for reason in errors]
    return rule, problems + [RuleProblem(path, reason, "warning") for reason in warnings]
