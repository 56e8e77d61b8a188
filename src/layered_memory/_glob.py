"""The glob dialect of rule `paths:`: validation, compilation to regexes, and a matching index.

Semantics (documented in the README's "Rule files" section):

- `*` matches any run of characters except `/`; `?` one character except `/`.
- `**` as a whole path segment matches zero or more folders (`a/**/b`, `**/*.py`, `src/**`);
  `**` inside a segment (`a**b`) behaves as `*`.
- `[abc]`, `[a-z]`, `[!abc]` / `[^abc]` match one character (never `/`).
- `{a,b}` alternatives, nestable, expanded up to `MAX_BRACE_EXPANSION` patterns.
- `\\x` matches `x` literally. A trailing `/` means "everything below" (`docs/` == `docs/**`).
- A pattern matches the whole key, never a substring: `*acme*` matches `acme_corp`, and
  `*.py` matches `app.py` but not `src/app.py` (write `**/*.py`).

Python's regex engine costs about a microsecond per call, so testing every glob against every
key is far too slow for a thousand rules; `GlobIndex` buckets globs by their literal prefix,
literal suffix or required substring so each key is only tested against a few candidates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MAX_BRACE_EXPANSION = 256
"""A brace set expanding past this many patterns is refused (guards against `{a,b}{c,d}...`)."""

MAX_GLOB_LENGTH = 1024
"""Longer patterns are refused: nothing legitimate needs them, and regex size stays bounded."""

_BUCKET_CHARS = 16
"""Globs are bucketed by at most this many leading (or trailing) literal characters."""

_SPECIAL = frozenset("*?[{")


class GlobError(ValueError):
    """A glob pattern is invalid; the message says why, in words fit for a lint line."""


@dataclass(frozen=True, slots=True)
class CompiledGlob:
    """One brace-free pattern compiled for matching.

    Attributes:
        pattern: The brace-expanded pattern.
        regex: Full-match regex of the pattern.
        crosses: Whether the pattern can match a key containing `/`.
        prefix: Literal text every match starts with ('' if none).
        suffix: Literal text every match ends with ('' if none).
        required: The longest literal run every match contains ('' if none).
    """

    pattern: str
    regex: re.Pattern[str]
    crosses: bool
    prefix: str
    suffix: str
    required: str


def _outside_classes(text: str) -> Iterator[tuple[int, str, int]]:
    """Each character outside backslash escapes and `[...]` classes, with its brace depth.

    The depth is the number of `{` groups open before the character.
    """
    depth = 0
    in_class = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            # A `]` right after `[` or `[!` is a literal member, not the end of the class.
            if text[i + 1 : i + 2] in ("!", "^"):
                i += 1
            if text[i + 1 : i + 2] == "]":
                i += 1
        else:
            yield i, char, depth
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
        i += 1


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split on `sep` outside braces and brackets, honouring backslash escapes."""
    parts: list[str] = []
    start = 0
    for i, char, depth in _outside_classes(text):
        if char == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def split_glob_list(text: str) -> list[str]:
    """Split a comma-separated glob string, keeping commas inside `{a,b}` sets.

    Example:
        `split_glob_list("**/*.{ts,tsx}, docs/**")` -> `["**/*.{ts,tsx}", "docs/**"]`
    """
    return [part.strip() for part in _split_top_level(text, ",")]


def _find_brace(pattern: str) -> tuple[int, int] | None:
    """Span of the first top-level `{...}` group, or None; raises on an unbalanced brace."""
    start = -1
    for i, char, depth in _outside_classes(pattern):
        if char == "{" and depth == 0:
            start = i
        elif char == "}":
            if depth == 0:
                msg = "unbalanced '}'"
                raise GlobError(msg)
            if depth == 1:
                return start, i
    if start >= 0:
        msg = "unbalanced '{'"
        raise GlobError(msg)
    return None


def expand_braces(pattern: str) -> list[str]:
    """Expand `{a,b}` alternatives (nested ones too) into brace-free patterns, in order.

    Raises:
        GlobError: On an unbalanced brace or an expansion past `MAX_BRACE_EXPANSION`.
    """
    done: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop()
        span = _find_brace(current)
        if span is None:
            done.append(current)
            continue
        start, end = span
        head, inner, tail = current[:start], current[start + 1 : end], current[end + 1 :]
        # Reversed so the stack pops alternatives in written order.
        pending.extend(head + alt + tail for alt in reversed(_split_top_level(inner, ",")))
        if len(pending) + len(done) > MAX_BRACE_EXPANSION:
            msg = f"brace expansion gives more than {MAX_BRACE_EXPANSION} patterns"
            raise GlobError(msg)
    return done


def _class_to_regex(segment: str, start: int) -> tuple[str, int]:
    """Translate the `[...]` starting at `segment[start]`; return regex and the index after it."""
    i = start + 1
    negate = segment[i : i + 1] in ("!", "^")
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while True:
        if i >= len(segment):
            msg = "unclosed '['"
            raise GlobError(msg)
        char = segment[i]
        if char == "]" and not first:
            break
        first = False
        if char == "\\":
            if i + 1 >= len(segment):
                msg = "trailing backslash"
                raise GlobError(msg)
            members.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if char == "-" and members and i + 1 < len(segment) and segment[i + 1] != "]":
            low, high = members[-1], segment[i + 1]
            if len(low.lstrip("\\")) == 1 and low.lstrip("\\") > high:
                msg = f"reversed range '{low.lstrip(chr(92))}-{high}' in '[...]'"
                raise GlobError(msg)
            members.append("-" + re.escape(high))
            i += 2
            continue
        members.append(re.escape(char))
        i += 1
    # `/` separates folders, so a class never matches it (a negated one included).
    body = "".join(members)
    return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), i + 1


def _segment_to_regex(segment: str, literal_runs: list[str]) -> str:
    """Translate one path segment (no `/`, no braces); collect its literal runs."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            literal_runs.append("".join(run))
            out.append(re.escape("".join(run)))
            run.clear()

    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\":
            if i + 1 >= len(segment):
                msg = "trailing backslash"
                raise GlobError(msg)
            run.append(segment[i + 1])
            i += 2
        elif char == "*":
            flush()
            literal_runs.append("")
            while i < len(segment) and segment[i] == "*":
                i += 1
            out.append("[^/]*")
        elif char == "?":
            flush()
            literal_runs.append("")
            out.append("[^/]")
            i += 1
        elif char == "[":
            flush()
            literal_runs.append("")
            regex, i = _class_to_regex(segment, i)
            out.append(regex)
        elif char == "]":
            run.append(char)
            i += 1
        else:
            run.append(char)
            i += 1
    flush()
    return "".join(out)


def _compile_one(pattern: str) -> CompiledGlob:
    """Compile one brace-free pattern."""
    if pattern.endswith("/"):
        pattern += "**"
    segments = re.sub(r"/{2,}", "/", pattern).split("/")
    if ".." in segments:
        msg = "'..' segments never match (keys are normalized paths)"
        raise GlobError(msg)
    # Literal runs, '' marking a wildcard; '/' joins runs across segments.
    runs: list[str] = []
    out: list[str] = []
    crosses = len(segments) > 1
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            crosses = True
            runs.append("")
            out.append(".*" if last else "(?:.*/)?")
            continue
        segment_runs: list[str] = []
        out.append(_segment_to_regex(segment, segment_runs))
        runs.extend(segment_runs)
        if not last:
            out.append("/")
            runs.append("/")
    merged: list[str] = []
    for run in runs:
        if run and merged and merged[-1]:
            merged[-1] += run
        else:
            merged.append(run)
    prefix = merged[0] if merged else ""
    suffix = merged[-1] if merged else ""
    required = max(merged, key=len, default="")
    try:
        regex = re.compile("".join(out), re.DOTALL)
    except re.error as exc:
        msg = f"cannot be compiled ({exc.msg})"
        raise GlobError(msg) from exc
    return CompiledGlob(
        pattern=pattern,
        regex=regex,
        crosses=crosses,
        prefix=prefix,
        suffix=suffix,
        required=required,
    )


def compile_glob(pattern: str) -> tuple[CompiledGlob, ...]:
    """Validate and compile one glob as written in a rule file (braces allowed).

    Raises:
        GlobError: If the pattern is empty, too long, negated, unbalanced or otherwise invalid.
    """
    if not pattern.strip():
        msg = "empty pattern"
        raise GlobError(msg)
    if len(pattern) > MAX_GLOB_LENGTH:
        msg = f"longer than {MAX_GLOB_LENGTH} characters"
        raise GlobError(msg)
    if pattern.startswith("!"):
        msg = "negated patterns ('!...') are not supported"
        raise GlobError(msg)
    if pattern != pattern.strip():
        msg = "leading or trailing whitespace"
        raise GlobError(msg)
    compiled = [_compile_one(p) for p in expand_braces(pattern)]
    return tuple(compiled)


class GlobIndex:
    """Finds every glob matching a key while testing only a few candidates per key.

    Each compiled glob lands in one bucket, chosen by what every match of it must contain:
    its leading literal (looked up by the key's leading slices), else its trailing literal
    (the key's trailing slices), else its longest literal (a substring test), else a short
    list tested against every key. Candidates are always confirmed with the full regex, so a
    bucket only has to be a superset of the true matches.
    """

    __slots__ = (
        "_always",
        "_contains",
        "_prefix",
        "_prefix_lengths",
        "_regexes",
        "_suffix",
        "_suffix_lengths",
    )

    def __init__(self, globs: Sequence[CompiledGlob]) -> None:
        """Index `globs`; `matches` returns positions in this sequence."""
        # Side 0 serves keys without a `/`, side 1 keys with one. A glob that cannot cross
        # folders never matches a key containing `/`, so it sits on side 0 only; context
        # strings and paths then never pay for each other's globs.
        self._prefix: tuple[dict[str, list[int]], dict[str, list[int]]] = ({}, {})
        self._suffix: tuple[dict[str, list[int]], dict[str, list[int]]] = ({}, {})
        self._contains: tuple[list[tuple[str, int]], list[tuple[str, int]]] = ([], [])
        self._always: tuple[list[int], list[int]] = ([], [])
        for position, glob in enumerate(globs):
            for side in (0, 1) if glob.crosses else (0,):
                self._add(side, position, glob)
        self._prefix_lengths = tuple(sorted({len(k) for k in d}) for d in self._prefix)
        self._suffix_lengths = tuple(sorted({len(k) for k in d}) for d in self._suffix)
        self._regexes = tuple(glob.regex for glob in globs)

    def _add(self, side: int, position: int, glob: CompiledGlob) -> None:
        if glob.prefix and len(glob.prefix) >= len(glob.suffix):
            key = glob.prefix[:_BUCKET_CHARS]
            self._prefix[side].setdefault(key, []).append(position)
        elif glob.suffix:
            key = glob.suffix[-_BUCKET_CHARS:]
            self._suffix[side].setdefault(key, []).append(position)
        elif glob.required:
            self._contains[side].append((glob.required, position))
        else:
            self._always[side].append(position)

    def matches(self, key: str) -> set[int]:
        """Positions of the globs that match `key` entirely."""
        side = 1 if "/" in key else 0
        candidates: list[int] = list(self._always[side])
        prefix = self._prefix[side]
        for length in self._prefix_lengths[side]:
            if length > len(key):
                break
            found = prefix.get(key[:length])
            if found:
                candidates.extend(found)
        suffix = self._suffix[side]
        for length in self._suffix_lengths[side]:
            if length > len(key):
                break
            found = suffix.get(key[-length:])
            if found:
                candidates.extend(found)
        candidates.extend(pos for text, pos in self._contains[side] if text in key)
        regexes = self._regexes
        return {pos for pos in candidates if regexes[pos].fullmatch(key)}
