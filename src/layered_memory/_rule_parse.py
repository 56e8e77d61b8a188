"""Parsing and validating one rule file: YAML frontmatter, field aliases, globs, body."""

from __future__ import annotations

import re
from functools import lru_cache
from posixpath import basename
from typing import TYPE_CHECKING, Any

import yaml

from layered_memory._glob import CompiledGlob, GlobError, compile_glob, split_glob_list
from layered_memory._rule_types import Rule, RuleProblem
from layered_memory.loading import decode_content

if TYPE_CHECKING:
    from deepagents.backends.protocol import FileDownloadResponse

MAX_RULE_FILE_CHARS = 1_000_000
"""A bigger rule file is refused: it could never fit a prompt budget anyway."""

MAX_FRONTMATTER_CHARS = 16_384
"""Frontmatter is a handful of fields; the cap keeps `yaml.safe_load` cheap on hostile input."""

MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 1024

RULE_FILE_SUFFIXES = (".md", ".mdc")
"""`*.md` (Claude Code), `*.mdc` (Cursor); Copilot's `*.instructions.md` is a `.md` too."""

GLOB_FIELDS = ("paths", "globs", "applyTo")
"""`paths:` (Claude Code) and its aliases `globs:` (Cursor) and `applyTo:` (Copilot)."""

KNOWN_FIELDS = frozenset({"name", "description", "alwaysApply", *GLOB_FIELDS})

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
# Cursor writes `globs: *.ts` unquoted; to YAML a leading `*` is an alias and a leading `{` a
# flow mapping, both errors (or nonsense) for a glob, so such values are quoted before parsing.
_GLOB_FIELD_LINE = re.compile(r"^(?P<head>(?:paths|globs|applyTo)\s*:\s*)(?P<value>[*{].*?)\s*$")
_GLOB_ITEM_LINE = re.compile(r"^(?P<head>\s*-\s+)(?P<value>[*{].*?)\s*$")
_TOP_LEVEL_KEY = re.compile(r"^(?P<key>[^\s#:-][^:]*?)\s*:")


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


def _quote_cursor_globs(frontmatter: str) -> str:
    """Quote glob values YAML would misread (see `_GLOB_FIELD_LINE`)."""
    lines = frontmatter.split("\n")
    in_glob_field = False
    for index, line in enumerate(lines):
        top = _TOP_LEVEL_KEY.match(line)
        if top:
            in_glob_field = top.group("key") in GLOB_FIELDS
        match = _GLOB_FIELD_LINE.match(line) or (in_glob_field and _GLOB_ITEM_LINE.match(line))
        if match:
            value = match.group("value").replace("'", "''")
            lines[index] = f"{match.group('head')}'{value}'"
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


def _load_yaml(frontmatter: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse frontmatter YAML into a mapping, or give the reason it is not one."""
    if len(frontmatter) > MAX_FRONTMATTER_CHARS:
        return None, f"frontmatter longer than {MAX_FRONTMATTER_CHARS} characters"
    try:
        data = yaml.safe_load(_quote_cursor_globs(frontmatter))
    except yaml.YAMLError as exc:
        # Only the problem and its position: the YAML context snippet would echo file contents.
        problem = getattr(exc, "problem", None) or type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        return None, f"malformed YAML frontmatter: {problem}{where}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"frontmatter is not a mapping (got a YAML {type(data).__name__})"
    return data, None


def _unquote(item: str) -> str:
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1].strip()
    return item


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
    for glob in raw:
        try:
            cached_compile_glob(glob)
        except GlobError as exc:
            problems.append(f"invalid glob {glob!r} in {field}: {exc}")
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
        errors.append(f"alwaysApply must be true or false (got {always_apply!r:.40})")

    if errors:
        problems = [RuleProblem(path, reason, "error") for reason in errors]
        return None, problems + [RuleProblem(path, reason, "warning") for reason in warnings]

    rule = Rule(
        name=name or default_rule_name(path),
        path=path,
        description=description or "",
        paths=globs,
        always_apply=always_apply,
        body=_HTML_COMMENT.sub("", body).strip(),
        folder_index=folder_index,
    )
    if rule.always_apply and rule.paths:
        warnings.append("alwaysApply: true makes the paths globs irrelevant")
    if rule.mode == "manual":
        warnings.append(
            "alwaysApply is false with no paths and no description: never injected nor listed"
        )
    elif rule.mode != "requested" and not rule.body:
        warnings.append("empty body: the rule injects nothing")
    return rule, [RuleProblem(path, reason, "warning") for reason in warnings]


def decode_rule_file(
    response: FileDownloadResponse, *, folder_index: int
) -> tuple[Rule | None, list[RuleProblem]]:
    """Parse a rule file from a backend `download_files` response (errors become problems).

    Args:
        response: One entry of `backend.download_files(paths)`.
        folder_index: Position of the file's folder in `rules=[...]`.

    Returns:
        As `parse_rule_file`.
    """
    if response.error or response.content is None:
        reason = response.error or "no content"
        if reason == "file_not_found":
            reason = "file not found (deleted after it was listed?)"
        return None, [RuleProblem(response.path, f"cannot read: {reason}")]
    # The middleware's own decoder: lint and the agent reach the same verdict on every file.
    text, problem = decode_content(response.content)
    if text is None:
        return None, [RuleProblem(response.path, problem or "unreadable")]
    return parse_rule_file(response.path, text, folder_index=folder_index)
