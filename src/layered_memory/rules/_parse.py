"""Parsing and validating one rule file: YAML frontmatter, field aliases, globs, body.

Rule files are untrusted input (anyone who can write the rule folder, an agent included), so
every step is bounded: the file's size, the frontmatter's size and nesting depth (checked by
PyYAML's iterative scanner before its recursive parser runs), the number of globs and of the
patterns their braces expand to, and each glob's length. Every check runs in time linear in the
file; a file that fails one is skipped with the reason, never parsed further.
"""

from __future__ import annotations

import re
from functools import lru_cache
from posixpath import basename
from typing import TYPE_CHECKING, Any

import yaml

from layered_memory.core.loading import strip_html_comments
from layered_memory.rules._glob import CompiledGlob, GlobError, compile_glob, split_glob_list
from layered_memory.rules._types import Rule, RuleProblem
from layered_memory.writeback.redaction import redact_text

if TYPE_CHECKING:
    pass

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
"""`*.md` (Claude Code), `*.mdc` (Cursor); Copilot's `*.instructions.md` is a `.md` too."""

GLOB_FIELDS = ("paths", "globs", "applyTo")
"""`paths:` (Claude Code) and its aliases `globs:` (Cursor) and `applyTo:` (Copilot)."""

KNOWN_FIELDS = frozenset({"name", "description", "alwaysApply", *GLOB_FIELDS})

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
# Cursor writes `globs: *.ts` unquoted; to YAML a leading `*` is an alias and a leading `{` a
# flow mapping, both errors (or nonsense) for a glob, so such values are quoted before parsing.
# The patterns stop at the value's first character: the value is the rest of the line, minus
# trailing blanks (a lazy `(.*?)\s*$` here rescanned a line's blanks from every position).
_GLOB_FIELD_HEAD = re.compile(r"(?:paths|globs|applyTo)[ \t]*:[ \t]*(?=[*{])")
_GLOB_ITEM_HEAD = re.compile(r"[ \t]*-[ \t]+(?=[*{])")
_NOT_A_KEY_START = frozenset(" \t\r\f\v#:-")
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


@lru_cache(maxsize=4096)
def cached_compile_glob(pattern: str) -> tuple[CompiledGlob, ...]:
    """`compile_glob`, memoized: parsing validates a glob and building reuses the result."""
    return compile_glob(pattern)


def _top_level_key(line: str) -> str | None:
    """The key a `key: ...` line at column 0 sets, else None."""
    colon = line.find(":")
    if colon <= 0 or line[0] in _NOT_A_KEY_START:
        return None
    return line[:colon].rstrip()


_COMMENT_START = re.compile(r"[ \t]#")


def _quote_cursor_globs(frontmatter: str) -> str:
    """Quote glob values YAML would misread (see `_GLOB_FIELD_HEAD`)."""
    lines = frontmatter.split("\n")
    in_glob_field = False
    for index, line in enumerate(lines):
        key = _top_level_key(line)
        if key is not None:
            in_glob_field = key in GLOB_FIELDS
        head = _GLOB_FIELD_HEAD.match(line) or (in_glob_field and _GLOB_ITEM_HEAD.match(line))
        if head:
            value = line[head.end() :]
            # A `#` after white space starts a YAML comment (`globs: *.ts  # typescript`);
            # quoted whole, the comment became part of the glob and matched nothing.
            comment = _COMMENT_START.search(value)
            if comment is not None:
                value = value[: comment.start()]
            value = value.rstrip().replace("'", "''")
            lines[index] = f"{head.group()}'{value}'"
    return "\n".join(lines)


_COPILOT_EVERYWHERE = frozenset({"*", "**", "**/*"})


def _copilot_apply_to(globs: tuple[str, ...]) -> tuple[bool | None, tuple[str, ...]]:
    """`(always_apply, globs)` of a Copilot `*.instructions.md` file, read as VS Code reads it
    (`computeAutomaticInstructions`): without `applyTo` it is never attached automatically
    (agent-requested when it has a description); `*`, `**` and `**/*` apply always; a
    relative pattern matches at any depth (`*.py` is `**/*.py`)."""
    if not globs:
        return False, ()
    if _COPILOT_EVERYWHERE.intersection(globs):
        return True, ()
    return None, tuple(glob if glob.startswith(("/", "**/")) else f"**/{glob}" for glob in globs)


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
    quoted = _quote_cursor_globs(frontmatter)
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


def _read_globs(data: dict[str, Any], problems: list[str]) -> tuple[str, ...]:
    """The globs of `paths:`/`globs:`/`applyTo:`, validated; reasons appended to `problems`."""
    given = [field for field in GLOB_FIELDS if field in data]
    if len(given) > 1:
        problems.append(f"give only one of {', '.join(given)} (they are aliases)")
        return ()
    if not given:
        return ()
    field = given[0]
    value = data[field]
    if value is None:
        return ()
    if isinstance(value, str):
        if not value.strip():
            return ()
        # `globs: *.ts, '*.tsx'` (quotes inside a comma list) means the glob, not the quotes.
        raw = [_unquote(item) for item in split_glob_list(value)]
    elif isinstance(value, list):
        raw = []
        for position, item in enumerate(value, start=1):
            if not isinstance(item, str):
                kind = type(item).__name__
                problems.append(f"{field} item {position} is not a string (got {kind})")
                return ()
            raw.append(item.strip())
    else:
        kind = type(value).__name__
        problems.append(f"{field} must be a string or a list of strings (got {kind})")
        return ()
    if len(raw) > MAX_PATTERNS_PER_RULE:
        problems.append(f"{field} lists {len(raw)} globs; at most {MAX_PATTERNS_PER_RULE}")
        return ()
    patterns = 0
    for glob in raw:
        try:
            patterns += len(cached_compile_glob(glob))
        except GlobError as exc:
            problems.append(f"invalid glob {_shown(glob)} in {field}: {exc}")
            continue
        if patterns > MAX_PATTERNS_PER_RULE:
            problems.append(
                f"{field} expands to more than {MAX_PATTERNS_PER_RULE} patterns (braces count)"
            )
            return ()
    return tuple(raw)


def _read_text_field(
    data: dict[str, Any], field: str, limit: int, errors: list[str], warnings: list[str]
) -> str | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        errors.append(f"{field} must be a string (got {type(value).__name__})")
        return None
    value = value.strip()
    if len(value) > limit:
        warnings.append(f"{field} longer than {limit} characters; truncated")
        value = value[:limit]
    return value


def parse_rule_file(
    path: str, text: str, *, folder_index: int
) -> tuple[Rule | None, list[RuleProblem]]:
    """Parse and validate one rule file.

    Never raises on bad content: an invalid file gives `(None, problems)` with at least one
    `error`; a valid one gives the rule plus any `warning`s (e.g. an unknown field).

    Args:
        path: The file's backend path (names the rule by default and appears in problems).
        text: The file's text.
        folder_index: Position of the file's folder in `rules=[...]` (higher wins).

    Returns:
        The rule (None when invalid) and the problems found, in a stable order.

    Example:
        `parse_rule_file("/rules/py.md", "---\\npaths: '**/*.py'\\n---\\nRuff.", folder_index=0)`
    """
    errors: list[str] = []
    warnings: list[str] = []
    if len(text) > MAX_RULE_FILE_CHARS:
        errors.append(f"file longer than {MAX_RULE_FILE_CHARS} characters")
        return None, [RuleProblem(path, reason) for reason in errors]
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    frontmatter, body, error = _split_frontmatter(text)
    data: dict[str, Any] = {}
    if error:
        errors.append(error)
    elif frontmatter is not None:
        loaded, error = _load_yaml(frontmatter)
        if error or loaded is None:
            errors.append(error or "frontmatter is not a mapping")
        else:
            data = loaded
    for field in sorted(str(key) for key in data if key not in KNOWN_FIELDS):
        warnings.append(f"unknown field {field!r} (ignored)")

    name = _read_text_field(data, "name", MAX_NAME_CHARS, errors, warnings)
    if name is not None and (not name or _CONTROL_CHARS.search(name)):
        errors.append("name must be a non-empty single line")
    description = _read_text_field(data, "description", MAX_DESCRIPTION_CHARS, errors, warnings)
    if description is not None:
        description = " ".join(description.split())
    globs = _read_globs(data, errors)
    always_apply = data.get("alwaysApply")
    if always_apply is not None and not isinstance(always_apply, bool):
        # The type only: a YAML alias can make the value's repr as large as memory allows.
        kind = type(always_apply).__name__
        errors.append(f"alwaysApply must be true or false (got a {kind})")

    if errors:
        problems = [RuleProblem(path, reason, "error") for reason in errors]
        return None, problems + [RuleProblem(path, reason, "warning") for reason in warnings]

    copilot = path.lower().endswith(".instructions.md")
    if copilot and always_apply is None:
        always_apply, globs = _copilot_apply_to(globs)

    rule = Rule(
        name=name or default_rule_name(path),
        path=path,
        # Redacted as memory files are when rendered (a rule reaches every prompt it
        # matches); parsing is cached by content, so this costs once per changed file.
        description=redact_text(description).text if description else "",
        paths=globs,
        always_apply=always_apply,
        body=redact_text(strip_html_comments(body)).text.strip(),
        folder_index=folder_index,
    )
    if rule.always_apply and rule.paths:
        warnings.append("alwaysApply: true makes the paths globs irrelevant")
    if rule.mode == "manual":
        warnings.append(
            "no applyTo and no description: never injected nor listed (as in VS Code, which "
            "attaches such a file only by hand)"
            if copilot and data.get("alwaysApply") is not False
            else "alwaysApply is false with no paths and no description: never injected nor listed"
        )
    elif rule.mode != "requested" and not rule.body:
        warnings.append("empty body: the rule injects nothing")
    return rule, [RuleProblem(path, reason, "warning") for reason in warnings]
