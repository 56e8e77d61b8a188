"""Frontmatter read from untrusted rule files: split from the body, bounded, parsed as YAML.

Every step is bounded and linear in the text: the frontmatter's size, its nesting depth
(checked by PyYAML's iterative scanner before its recursive parser runs, after a quick bracket
count that keeps the scanner fast), and the tools whose frontmatter is not strict YAML (Cursor,
VS Code) get a field-by-field reading (`lenient_fields`) that reads each line once.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_FRONTMATTER_CHARS = 16_384
"""Frontmatter is a handful of fields; the cap keeps `yaml.safe_load` cheap on hostile input."""

MAX_FRONTMATTER_DEPTH = 16
"""Nesting levels allowed in frontmatter (a rule needs two: a mapping holding a list)."""

QUOTED_FIELDS = ("paths", "globs", "applyTo", "fileMatchPattern")
"""Glob fields of every dialect: an unquoted leading `*` or `{` in them is quoted for YAML."""

# Cursor and Claude Code's docs write `globs: *.ts` / `paths: {src,lib}/**` unquoted; to YAML a
# leading `*` is an alias and a leading `{` a flow mapping, both errors (or nonsense) for a
# glob, so such values are quoted before parsing. The patterns stop at the value's first
# character: the value is the rest of the line, minus trailing blanks (a lazy `(.*?)\s*$` here
# rescanned a line's blanks from every position).
_GLOB_FIELD_HEAD = re.compile(r"(?:paths|globs|applyTo|fileMatchPattern)[ \t]*:[ \t]*(?=[*{'\"])")
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


def top_level_key(line: str) -> str | None:
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
        key = top_level_key(line)
        if key is not None:
            in_glob_field = key in QUOTED_FIELDS
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


_UNCLOSED = "frontmatter opened with '---' is never closed by a '---' line"


def split_frontmatter(text: str, *, cursor: bool = False) -> tuple[str | None, str, str | None]:
    """Split into (frontmatter or None, body, error reason or None).

    With `cursor`, a line that starts with `---` and goes on with text (`---# Title`) closes
    the frontmatter and the rest of it begins the body, as the front-matter readers of the
    JavaScript world (gray-matter: the first `\n---`) read it; the author plainly meant both.
    """
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return None, text, None
    for index in range(1, len(lines)):
        line = lines[index]
        if line.rstrip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), None
        if cursor and line.startswith("---") and line[3:4] not in ("-", ""):
            rest = [line[3:].lstrip(" \t"), *lines[index + 1 :]]
            return "\n".join(lines[1:index]), "\n".join(rest), None
    return None, "", _UNCLOSED


def lenient_fields(frontmatter: str) -> dict[str, Any]:
    """Frontmatter read field by field, for tools whose reader is not strict YAML.

    Cursor's frontmatter "is not strictly YAML formatted" (its own rule-writing guide), and a
    colon inside a value (`description: Rules for TS : style`) is text to it, while strict
    YAML rejects the whole block, and with it the globs. Each top-level `key:` line and its
    indented continuation lines are parsed alone; one that strict YAML still rejects is the
    raw rest of its line, quotes removed. A column-0 line that is not `key: ...` is ignored.
    Each line is read once and each field parsed once: linear in the frontmatter.
    """
    entries: list[tuple[str, list[str]]] = []
    for line in frontmatter.split("\n"):
        key = top_level_key(line)
        if key is not None:
            entries.append((key, [line]))
        elif entries and (not line.strip() or line[:1] in " \t-"):
            entries[-1][1].append(line)
    fields: dict[str, Any] = {}
    for key, lines in entries:
        loaded, error = load_yaml("\n".join(lines))
        if error is None and loaded is not None and len(loaded) == 1:
            fields.update(loaded)
            continue
        first = lines[0]
        fields[key] = unquote(first[first.index(":") + 1 :].strip())
    return fields


def _yaml_error(exc: yaml.YAMLError) -> str:
    # Only the problem and its position: the YAML context snippet would echo file contents.
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
    return f"malformed YAML frontmatter: {problem}{where}"


def flow_too_deep(text: str) -> bool:
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


def too_deep(frontmatter: str) -> bool:
    """Whether the YAML nests deeper than `MAX_FRONTMATTER_DEPTH`.

    PyYAML's composer and constructor recurse once per level, so `[[[[...]]]]` 5,000 deep
    raised `RecursionError` out of `safe_load`. Its scanner is iterative: its tokens give the
    exact depth, once `flow_too_deep` has ruled out the input that makes it slow. A scanning
    error is left for `safe_load` to report.
    """
    if flow_too_deep(frontmatter):
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


def load_yaml(frontmatter: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse frontmatter YAML into a mapping, or give the reason it is not one."""
    if len(frontmatter) > MAX_FRONTMATTER_CHARS:
        return None, f"frontmatter longer than {MAX_FRONTMATTER_CHARS} characters"
    quoted = _quote_glob_values(frontmatter)
    deep = f"frontmatter nested deeper than {MAX_FRONTMATTER_DEPTH} levels"
    if too_deep(quoted):
        return None, deep
    try:
        data = yaml.load(quoted, Loader=_LOADER)  # a safe loader (see _LOADER)
    except yaml.YAMLError as exc:
        return None, _yaml_error(exc)
    except RecursionError:  # the depth check above should make this unreachable
        return None, deep
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"frontmatter is not a mapping (got a YAML {type(data).__name__})"
    return data, None


def unquote(item: str) -> str:
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
        return item[1:-1].strip()
    return item
