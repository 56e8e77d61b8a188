"""One rule file: the tool it was written for, its frontmatter, and the `Rule` it defines.

Each file is read with the semantics of the tool its type and place say it was written for
(`dialect_of`): Cursor's `.mdc` rules, VS Code Copilot's `*.instructions.md`, Claude Code's
`.claude/rules/**/*.md`, and this package's own dialect for any other `.md` in a rule folder. A
field another dialect reads is a warning, not a rejection; an invalid glob drops only itself.
The tools' semantics, and where they are undocumented, what was chosen and why, are in
docs/rules.md.

Rule files are untrusted input (anyone who can write the rule folder, an agent included), so
every step is bounded: the file's size, the frontmatter's size and nesting depth (checked by
PyYAML's iterative scanner before its recursive parser runs), the number of globs and of the
patterns their braces expand to, and each glob's length. Every check runs in time linear in the
file; a file that fails one is skipped with the reason, never parsed further.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from posixpath import basename
from typing import Any, Literal

import yaml

from layered_memory.core.loading import strip_html_comments
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

Dialect = Literal["cursor", "copilot", "claude", "layered-memory"]
"""The tool whose semantics a rule file is read with (`dialect_of`)."""

DIALECT_NAMES: dict[Dialect, str] = {
    "cursor": "Cursor",
    "copilot": "VS Code Copilot",
    "claude": "Claude Code",
    "layered-memory": "layered-memory",
}

Severity = Literal["error", "warning"]

MAX_RULE_FILE_CHARS = 1_000_000
"""A bigger rule file is refused: it could never fit a prompt budget anyway."""

MAX_FRONTMATTER_CHARS = 16_384
"""Frontmatter is a handful of fields; the cap keeps `yaml.safe_load` cheap on hostile input."""

MAX_FRONTMATTER_DEPTH = 16
"""Nesting levels allowed in frontmatter (a rule needs two: a mapping holding a list)."""

MAX_PATTERNS_PER_RULE = 1024
"""Globs of one rule, counted after brace expansion; more is refused (each costs a regex)."""

MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 1024

RULE_FILE_SUFFIXES = (".md", ".mdc")
"""`*.md` (Claude Code, this package), `*.mdc` (Cursor); `*.instructions.md` is a `.md` too."""

GLOB_FIELDS = ("paths", "globs", "applyTo")

_NATIVE_FIELDS: dict[Dialect, frozenset[str]] = {
    "cursor": frozenset({"description", "globs", "alwaysApply"}),
    "copilot": frozenset({"description", "applyTo"}),
    "claude": frozenset({"paths"}),
    "layered-memory": frozenset({"description", "alwaysApply", *GLOB_FIELDS}),
}
"""The fields each dialect reads; `name` (this package's precedence key) is read in all."""

_FIELD_OWNERS = {
    "description": "Cursor and VS Code",
    "globs": "Cursor",
    "alwaysApply": "Cursor",
    "applyTo": "VS Code",
    "paths": "Claude Code",
}

_SCOPE_FIELD: dict[Dialect, str] = {"cursor": "globs", "copilot": "applyTo", "claude": "paths"}

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
# Cursor and Claude Code's docs write `globs: *.ts` / `paths: {src,lib}/**` unquoted; to YAML a
# leading `*` is an alias and a leading `{` a flow mapping, both errors (or nonsense) for a
# glob, so such values are quoted before parsing. The patterns stop at the value's first
# character: the value is the rest of the line, minus trailing blanks (a lazy `(.*?)\s*$` here
# rescanned a line's blanks from every position).
_GLOB_FIELD_HEAD = re.compile(r"(?:paths|globs|applyTo)[ \t]*:[ \t]*(?=[*{'\"])")
_GLOB_ITEM_HEAD = re.compile(r"[ \t]*-[ \t]+(?=[*{])")
_NOT_A_KEY_START = frozenset(" \t\r\f\v#:-")
_COMMENT_START = re.compile(r"[ \t]#")
_NESTING_STARTS = (
    yaml.BlockSequenceStartToken,
    yaml.BlockMappingStartToken,
    yaml.FlowSequenceStartToken,
    yaml.FlowMappingStartToken,
)
_NESTING_ENDS = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)
# libyaml's loader when PyYAML was built with it (the wheels are): 15x faster on big frontmatter.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FLOW_START_AFTER = frozenset("\n:-,?")
_FLOW_CHARS = re.compile(r"[\[\]{}'\"#]")
_SINGLE_QUOTED = re.compile(r"(?:[^']|'')*'")
_DOUBLE_QUOTED = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)


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
    would load them as plain rules); any other `.md` below a `.claude/rules/` folder is Claude
    Code's; every other `.md` is this package's own dialect.

    Example:
        `dialect_of("/.claude/rules/py.md")` -> `"claude"`
    """
    lowered = path.lower()
    if lowered.endswith(".mdc"):
        return "cursor"
    if lowered.endswith(".instructions.md"):
        return "copilot"
    if "/.claude/rules/" in f"/{path}":
        return "claude"
    return "layered-memory"


def is_rule_file(path: str) -> bool:
    """Whether `path` names a rule file: `*.md` or `*.mdc`, not a dotfile.

    Example:
        `is_rule_file("/rules/py.instructions.md")` -> True; `is_rule_file("/rules/x.txt")` -> False
    """
    name = basename(path)
    return not name.startswith(".") and name.lower().endswith(RULE_FILE_SUFFIXES)


def default_rule_name(path: str) -> str:
    """The file stem used when a rule has no `name:` (`x.instructions.md` and `x.mdc` -> `x`)."""
    name = basename(path)
    lowered = name.lower()
    for suffix in (".instructions.md", *RULE_FILE_SUFFIXES):
        if lowered.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


# -- frontmatter ------------------------------------------------------------------------------


def _top_level_key(line: str) -> str | None:
    """The key a `key: ...` line at column 0 sets, else None."""
    colon = line.find(":")
    if colon <= 0 or line[0] in _NOT_A_KEY_START:
        return None
    return line[:colon].rstrip()


def _quoted_run_end(value: str) -> int:
    """Where a run of quoted scalars separated by commas (`"a", 'b'`) starting `value` ends;
    0 unless there are two or more (YAML reads the first one and fails at the comma)."""
    position, count = 0, 0
    while position < len(value) and value[position] in "'\"":
        pattern = _SINGLE_QUOTED if value[position] == "'" else _DOUBLE_QUOTED
        closed = pattern.match(value, position + 1)
        if closed is None:
            return 0
        count += 1
        after = closed.end()
        while after < len(value) and value[after] in " \t":
            after += 1
        if after == len(value) or value[after] != ",":
            return after if count > 1 else 0
        position = after + 1
        while position < len(value) and value[position] in " \t":
            position += 1
    return 0


def _quote_glob_values(frontmatter: str) -> str:
    """Quote glob values YAML would misread: an unquoted leading `*` or `{` (see
    `_GLOB_FIELD_HEAD`), and a comma list of quoted globs (`globs: "*.ts", "*.tsx"`)."""
    lines = frontmatter.split("\n")
    in_glob_field = False
    for index, line in enumerate(lines):
        key = _top_level_key(line)
        if key is not None:
            in_glob_field = key in GLOB_FIELDS
        head = _GLOB_FIELD_HEAD.match(line) or (in_glob_field and _GLOB_ITEM_HEAD.match(line))
        if not head:
            continue
        value = line[head.end() :]
        if value[:1] in ("'", '"'):
            end = _quoted_run_end(value)
            rest = value[end:].lstrip(" \t")
            if not end or (rest and not rest.startswith("#")):
                continue  # one quoted scalar (or not a clean list): YAML reads it as it is
            value = value[:end]
        else:
            # A `#` after white space starts a YAML comment (`globs: *.ts  # typescript`);
            # quoted whole, the comment became part of the glob and matched nothing.
            comment = _COMMENT_START.search(value)
            if comment is not None:
                value = value[: comment.start()]
        value = value.rstrip().replace("'", "''")
        lines[index] = f"{head.group()}'{value}'"
    return "\n".join(lines)


def _split_frontmatter(text: str) -> tuple[str | None, str, str | None]:
    """Split into (frontmatter or None, body, error reason or None)."""
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return None, text, None
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), None
    return None, "", "frontmatter opened with '---' is never closed by a '---' line"


def _yaml_error(exc: yaml.YAMLError) -> str:
    # Only the problem and its position: the YAML context snippet would echo file contents.
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
    return f"malformed YAML frontmatter: {problem}{where}"


def _flow_too_deep(text: str) -> bool:
    """A quick, conservative look for `[`/`{` nested deeper than `MAX_FRONTMATTER_DEPTH`.

    PyYAML's scanner keeps a possible implicit key per open flow level and rechecks them all
    at every token, so 8,000 `[` cost it half a second before any depth check could stop it.
    This pass, linear, counts the brackets that can open a flow collection (after a line
    start, `:`, `-`, `,`, `?` or another such bracket), skipping quoted scalars and comments.
    """
    depth = 0
    last_opener = -1
    i = 0
    while (found := _FLOW_CHARS.search(text, i)) is not None:
        j = found.start()
        char = text[j]
        k = j - 1
        while k >= 0 and text[k] in " \t":
            k -= 1
        before = text[k] if k >= 0 else "\n"
        starts = before in _FLOW_START_AFTER or (before in "[{" and k == last_opener)
        i = j + 1
        if char == "#":
            if k < j - 1 or before == "\n":  # a comment: blank or line start before it
                i = text.find("\n", j)
                if i < 0:
                    return False
        elif char in "'\"":
            if starts:
                end = (_SINGLE_QUOTED if char == "'" else _DOUBLE_QUOTED).match(text, j + 1)
                if end is None:
                    return False  # unclosed: a YAML error, reported by the parser
                i = end.end()
        elif char in "[{":
            if starts:
                depth += 1
                last_opener = j
                if depth > MAX_FRONTMATTER_DEPTH:
                    return True
        elif depth:
            depth -= 1
    return False


def _too_deep(frontmatter: str) -> bool:
    """Whether the YAML nests deeper than `MAX_FRONTMATTER_DEPTH`.

    PyYAML's composer and constructor recurse once per level, so `[[[[...]]]]` 5,000 deep
    raised `RecursionError` out of `safe_load`. Its scanner is iterative: its tokens give the
    exact depth, once `_flow_too_deep` has ruled out the input that makes it slow. A scanning
    error is left for `safe_load` to report.
    """
    if _flow_too_deep(frontmatter):
        return True
    depth = 0
    try:
        for token in yaml.scan(frontmatter, Loader=_LOADER):
            if isinstance(token, _NESTING_STARTS):
                depth += 1
                if depth > MAX_FRONTMATTER_DEPTH:
                    return True
            elif isinstance(token, _NESTING_ENDS):
                depth -= 1
    except yaml.YAMLError:
        return False
    return False


def _load_yaml(frontmatter: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse frontmatter YAML into a mapping, or give the reason it is not one."""
    if len(frontmatter) > MAX_FRONTMATTER_CHARS:
        return None, f"frontmatter longer than {MAX_FRONTMATTER_CHARS} characters"
    quoted = _quote_glob_values(frontmatter)
    too_deep = f"frontmatter nested deeper than {MAX_FRONTMATTER_DEPTH} levels"
    if _too_deep(quoted):
        return None, too_deep
    try:
        data = yaml.load(quoted, Loader=_LOADER)  # a safe loader (see _LOADER)
    except yaml.YAMLError as exc:
        return None, _yaml_error(exc)
    except RecursionError:  # the depth check above should make this unreachable
        return None, too_deep
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"frontmatter is not a mapping (got a YAML {type(data).__name__})"
    return data, None


def _unquote(item: str) -> str:
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1].strip()
    return item


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
        return [item for item in map(_unquote, split_glob_list(value)) if item]
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
        items = [item for item in map(_unquote, split_glob_list(value)) if item]
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


_READERS: dict[Dialect, Callable[[dict[str, Any], str, bool, list[list[str]]], _Scope | None]] = {
    "cursor": _read_cursor,
    "copilot": _read_copilot,
    "claude": _read_claude,
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
    if field in GLOB_FIELDS:
        reason += f" ({tool} scopes a rule with {_SCOPE_FIELD[dialect]})"
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


def _frontmatter_of(text: str, errors: list[str]) -> tuple[dict[str, Any], str, bool]:
    """`(fields, body, has_frontmatter)`; a reason appended to `errors` when unreadable."""
    frontmatter, body, error = _split_frontmatter(text)
    if error:
        errors.append(error)
        return {}, body, False
    if frontmatter is None:
        return {}, body, False
    loaded, error = _load_yaml(frontmatter)
    if error or loaded is None:
        errors.append(error or "frontmatter is not a mapping")
        return {}, body, True
    return loaded, body, True


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
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    data, body, has_frontmatter = _frontmatter_of(text, errors)
    if errors:
        return None, [RuleProblem(path, reason) for reason in errors]
    dialect = dialect_of(path)
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
