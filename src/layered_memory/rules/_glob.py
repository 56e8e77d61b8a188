"""The glob dialect of rule `paths:`: validation, linear-time compilation, and a matching index.

Semantics (documented in docs/rules.md, "Match keys and globs"):

- `*` matches any run of characters except `/`; `?` one character except `/`. A segment that is
  only `*` matches a non-empty name, so `*/README.md` never matches `/README.md` (whose first
  segment is empty), as in wcmatch.
- `**` as a whole path segment matches zero or more folders (`a/**/b`, `**/*.py`, `src/**`);
  `**` inside a segment (`a**b`) behaves as `*`.
- `[abc]`, `[a-z]`, `[!abc]` / `[^abc]`, `[[:alpha:]]` (POSIX names) match one character
  (never `/`).
- `{a,b}` alternatives, nestable, and `{1..3}` ranges, expanded as deepagents' `glob` tool
  expands them (by `bracex`, wcmatch's brace expander), up to `MAX_BRACE_EXPANSION` patterns.
- `\\x` matches `x` literally. A trailing `/` means "everything below" (`docs/` == `docs/**`).
- A pattern matches the whole key, never a substring: `*acme*` matches `acme_corp`, and
  `*.py` matches `app.py` but not `src/app.py` (write `**/*.py`).
- Case-sensitive (`ignore_case=True`, for VS Code's `applyTo`, folds ASCII letters only), and
  dot files are ordinary files (`**/*.yml` matches `.github/ci.yml`).
- Patterns and keys are compared in Unicode NFC, so a decomposed `é` from macOS matches.

This is wcmatch's `GLOBSTAR | BRACE | DOTGLOB` dialect, the one deepagents' `glob` tool and its
filesystem permissions speak (they leave dot files out), and `tests/core/hostile/
test_hostile_glob.py` checks our verdicts against `wcmatch.glob.globmatch` on random patterns
and keys. Two differences, on purpose: a trailing `/` means everything below (to wcmatch it
matches folders only, and a match key names a file); and what wcmatch would take literally
when it looks like a typo (an unclosed `[` or `{`, a stray `}`, a leading `!`, a `..` segment)
is refused, so `layered-memory lint` reports it. wcmatch also supplies the POSIX class table
and bracex the brace expansion; the segments and `**` are translated here.

Why matching does not use wcmatch's regexes: they backtrack. Measured on a 200-character path,
`wcmatch.glob.globmatch` takes 43 s for `**/a/**/a/**/a/**/a/**/b` (every choice of folders for
each `**` is tried), and our previous translation took 1.9 s for `**/**/**/**/*a*a*a*a*a*b` on
a 240-character path, growing with the fourth power of its length. The regexes built here
commit to the leftmost match of each piece between two wildcards, inside a segment (`*a*b`: the
first `a`) and across folders (`**/a/**`: the first folder run matching `a`), with atomic
groups `(?>...)`. Leftmost is always right there: whatever the rest of the key must still
match, an earlier piece leaves more room for it. So no regex ever revisits a choice, and
matching costs O(key length x pattern length). A segment-wise matcher on top of wcmatch's
per-segment regexes would be linear too, but costs one regex call per (segment, state) instead of
one per glob: matching the `rule_matching` benchmark's 100 fresh paths against its 1,000 rules
took 35 ms of CPU with it, against 3.2 ms with these regexes (the same as the previous,
backtracking ones).

Python's regex engine costs about a microsecond per call, so testing every glob against every
key is far too slow for a thousand rules; `GlobIndex` buckets globs by their literal prefix,
literal suffix or required substring so each key is only tested against a few candidates.
Buckets are keyed by ASCII-folded text, so one index serves case-sensitive and case-insensitive
globs alike (a bucket only has to hold a superset of the true matches).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import bracex
from wcmatch import posix

from layered_memory.errors import GlobError

__all__ = [
    "MAX_BRACE_DEPTH",
    "MAX_BRACE_EXPANSION",
    "MAX_GLOB_LENGTH",
    "CompiledGlob",
    "GlobError",
    "GlobIndex",
    "compile_glob",
    "expand_braces",
    "fold",
    "nfc",
    "split_glob_list",
]

MAX_BRACE_EXPANSION = 256
"""A brace set expanding past this many patterns is refused (guards against `{a,b}{c,d}...`)."""

MAX_BRACE_DEPTH = 8
"""Braces nested deeper are refused (bracex recurses once per level)."""

MAX_GLOB_LENGTH = 1024
"""Longer patterns are refused: nothing legitimate needs them, and regex size stays bounded."""

_BUCKET_CHARS = 16
"""Globs are bucketed by at most this many leading (or trailing) literal characters."""

_POSIX_CLASS = re.compile(
    r"\[:(alnum|alpha|ascii|blank|cntrl|digit|graph|lower|print|punct|space|upper|word|xdigit):\]"
)
"""`[:alpha:]` inside `[...]`, with wcmatch's names (its table gives the characters)."""

_STAR = object()
"""A `*` run inside a segment, among the fixed-width atoms of `_segment_atoms`."""

_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(text: str) -> str:
    """`text` with ASCII letters lowercased, nothing else changed (same length, char by char).

    VS Code folds case with JavaScript's `i` flag; ASCII folding agrees with it on every path a
    project is likely to hold, and keeps the index's buckets exact (`str.lower` can change a
    string's length, `re.IGNORECASE` folds `\u017f` into `s`).
    """
    return text.lower() if text.isascii() else text.translate(_ASCII_FOLD)


class _Atom:
    """One character position of a segment: its regex, and its literal text ('' if none)."""

    __slots__ = ("literal", "regex")

    def __init__(self, regex: str, literal: str) -> None:
        self.regex = regex
        self.literal = literal


@dataclass(frozen=True, slots=True)
class CompiledGlob:
    """One brace-free pattern compiled for matching.

    Attributes:
        pattern: The brace-expanded pattern.
        regex: Full-match regex of the pattern; never backtracks (see the module docstring).
        crosses: Whether the pattern can match a key containing `/`.
        prefix: Literal text every match starts with, ASCII-folded ('' if none).
        suffix: Literal text every match ends with, ASCII-folded ('' if none).
        required: The longest literal run every match contains, ASCII-folded ('' if none).
    """

    pattern: str
    regex: re.Pattern[str]
    crosses: bool
    prefix: str
    suffix: str
    required: str


def nfc(text: str) -> str:
    """`text` in Unicode NFC (ASCII, the common case, is returned as it is)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _outside_classes(text: str) -> Iterator[tuple[int, str, int]]:
    """Each character outside backslash escapes and `[...]` classes, with its brace depth.

    The depth is the number of `{` groups open before the character. One pass, linear.
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


def split_glob_list(text: str) -> list[str]:
    """Split a comma-separated glob string, keeping commas inside `{a,b}` sets.

    Example:
        `split_glob_list("**/*.{ts,tsx}, docs/**")` -> `["**/*.{ts,tsx}", "docs/**"]`
    """
    parts: list[str] = []
    start = 0
    for i, char, depth in _outside_classes(text):
        if char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _check_braces(pattern: str) -> None:
    """Raise on an unbalanced brace or braces nested deeper than `MAX_BRACE_DEPTH`."""
    depth = 0
    for _, char, _ in _outside_classes(pattern):
        if char == "{":
            depth += 1
            if depth > MAX_BRACE_DEPTH:
                msg = f"braces nested deeper than {MAX_BRACE_DEPTH} levels"
                raise GlobError(msg, pattern=pattern)
        elif char == "}":
            if depth == 0:
                msg = "unbalanced '}'"
                raise GlobError(msg, pattern=pattern)
            depth -= 1
    if depth:
        msg = "unbalanced '{'"
        raise GlobError(msg, pattern=pattern)


def expand_braces(pattern: str) -> list[str]:
    """Expand `{a,b}` alternatives and `{1..3}` ranges into brace-free patterns, in order.

    Raises:
        GlobError: On an unbalanced brace, nesting past `MAX_BRACE_DEPTH`, or an expansion
            past `MAX_BRACE_EXPANSION` (counted as it grows: `{a,b}` x 40 stops at once).
    """
    _check_braces(pattern)
    if "{" not in pattern:
        return [pattern]
    try:
        expanded = bracex.expand(pattern, keep_escapes=True, limit=MAX_BRACE_EXPANSION)
    except bracex.ExpansionLimitException:
        msg = f"brace expansion gives more than {MAX_BRACE_EXPANSION} patterns"
        raise GlobError(msg, pattern=pattern) from None
    except RecursionError:  # bounded by MAX_BRACE_DEPTH; kept in case bracex changes
        msg = "braces too deeply nested"
        raise GlobError(msg, pattern=pattern) from None
    # Duplicates (`{a,a}`) would only cost index slots.
    return list(dict.fromkeys(expanded))


def _class_atom(segment: str, start: int) -> tuple[_Atom, int]:
    """Translate the `[...]` starting at `segment[start]`; return it and the index after it."""
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
        named = _POSIX_CLASS.match(segment, i) if char == "[" else None
        if named is not None:
            # A regex class body, as wcmatch embeds it (its `\\` escapes keep ranges exact).
            members.append(posix.get_posix_property(named.group(1), False))
            i = named.end()
            continue
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
    return _Atom(f"[^/{body}]" if negate else f"(?!/)[{body}]", ""), i + 1


def _segment_atoms(segment: str) -> list[_Atom | object]:
    """One path segment (no `/`, no braces) as fixed-width atoms and `_STAR` markers."""
    atoms: list[_Atom | object] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\":
            if i + 1 >= len(segment):
                msg = "trailing backslash"
                raise GlobError(msg)
            atoms.append(_Atom(re.escape(segment[i + 1]), segment[i + 1]))
            i += 2
        elif char == "*":
            if not atoms or atoms[-1] is not _STAR:  # `**` inside a segment is one `*`
                atoms.append(_STAR)
            i += 1
        elif char == "?":
            atoms.append(_Atom("[^/]", ""))
            i += 1
        elif char == "[":
            atom, i = _class_atom(segment, i)
            atoms.append(atom)
        else:
            atoms.append(_Atom(re.escape(char), char))
            i += 1
    return atoms


def _segment_regex(segment: str, runs: list[str]) -> str:
    """Regex of one segment, bounded to it; its literal runs appended to `runs` ('' = gap).

    `a*b*c*d` becomes `a(?>[^/]*?b)(?>[^/]*?c)[^/]*d`: each middle piece is the first
    occurrence (atomic, never revisited), only the last piece searches back from the end. A
    segment of stars alone names something, so it needs one character: `[^/]+`.
    """
    atoms = _segment_atoms(segment)
    if atoms == [_STAR]:
        runs.append("")
        return "[^/]+"
    chunks: list[list[_Atom]] = [[]]
    for atom in atoms:
        if isinstance(atom, _Atom):
            chunks[-1].append(atom)
        else:
            chunks.append([])
    for index, chunk in enumerate(chunks):
        if index:
            runs.append("")
        literal: list[str] = []
        for atom in chunk:
            if atom.literal:
                literal.append(atom.literal)
                continue
            if literal:
                runs.append("".join(literal))
                literal.clear()
            runs.append("")
        if literal:
            runs.append("".join(literal))
    texts = ["".join(atom.regex for atom in chunk) for chunk in chunks]
    if len(texts) == 1:
        return texts[0]
    middle = "".join(f"(?>[^/]*?{text})" for text in texts[1:-1])
    return f"{texts[0]}{middle}[^/]*{texts[-1]}"


def _compile_one(pattern: str, ignore_case: bool) -> CompiledGlob:
    """Compile one brace-free pattern into a regex that never backtracks across choices.

    Folders between two `**` are placed at their first (leftmost) fit, in an atomic group; the
    part after the last `**` is anchored at the key's end.
    """
    if pattern.endswith("/"):
        pattern += "**"
    segments: list[str] = []
    for segment in re.sub(r"/{2,}", "/", pattern).split("/"):
        if segment == "**" and segments and segments[-1] == "**":
            continue  # `**/**` is `**`
        segments.append(segment)
    if ".." in segments:
        msg = "'..' segments never match (keys are normalized paths)"
        raise GlobError(msg)
    # Runs of literal text ('' marks a wildcard, '/' joins segments) feed the index.
    runs: list[str] = []
    groups: list[list[str]] = [[]]  # segment regexes between `**` segments
    for index, segment in enumerate(segments):
        if segment == "**":
            runs.append("")
            groups.append([])
            continue
        groups[-1].append(_segment_regex(segment, runs))
        if index < len(segments) - 1:
            runs.append("/")
    regex = _assemble(groups)
    merged: list[str] = []
    for run in runs:
        if run and merged and merged[-1]:
            merged[-1] += run
        else:
            merged.append(run)
    flags = re.DOTALL | (re.IGNORECASE | re.ASCII if ignore_case else 0)
    try:
        compiled = re.compile(regex, flags)
    except re.error as exc:
        msg = f"cannot be compiled ({exc.msg})"
        raise GlobError(msg) from exc
    return CompiledGlob(
        pattern=pattern,
        regex=compiled,
        crosses=len(segments) > 1 or "**" in segments,
        prefix=fold(merged[0]) if merged else "",
        suffix=fold(merged[-1]) if merged else "",
        required=fold(max(merged, key=len, default="")),
    )


def _assemble(groups: list[list[str]]) -> str:
    """Join segment regexes; `groups` holds the segments before, between and after each `**`."""
    if len(groups) == 1:
        return "/".join(groups[0])
    head = "".join(f"{segment}/" for segment in groups[0])
    # A lazy run of whole folders, then the group: its first fit wins and is never revisited.
    middle = "".join(
        "(?>(?:[^/]*/)*?" + "".join(f"{segment}/" for segment in group) + ")"
        for group in groups[1:-1]
    )
    last = groups[-1]
    tail = "(?:.*/)?" + "/".join(last) if last else ".*"
    return head + middle + tail


@functools.lru_cache(maxsize=4096)
def compile_glob(pattern: str, *, ignore_case: bool = False) -> tuple[CompiledGlob, ...]:
    """Validate and compile one glob (braces allowed), remembered: a rule set is rebuilt when
    one rule file changes, and every other glob is compiled already.

    Args:
        pattern: The glob.
        ignore_case: Fold ASCII letters (VS Code's `applyTo` matching).

    Raises:
        GlobError: If the pattern is empty, too long, negated, unbalanced or otherwise invalid.
    """
    if not pattern.strip():
        msg = "empty pattern"
        raise GlobError(msg, pattern=pattern)
    if len(pattern) > MAX_GLOB_LENGTH:
        msg = f"longer than {MAX_GLOB_LENGTH} characters"
        raise GlobError(msg, pattern=pattern[:MAX_GLOB_LENGTH])
    if pattern.startswith("!"):
        msg = "negated patterns ('!...') are not supported"
        raise GlobError(msg, pattern=pattern)
    if pattern != pattern.strip():
        msg = "leading or trailing whitespace"
        raise GlobError(msg, pattern=pattern)
    try:
        return tuple(_compile_one(part, ignore_case) for part in expand_braces(nfc(pattern)))
    except GlobError as exc:
        exc.pattern = pattern
        raise


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
        """Positions of the globs that match `key` (in NFC) entirely."""
        side = 1 if "/" in key else 0
        folded = key.lower() if key.isascii() else key.translate(_ASCII_FOLD)  # `fold`, inlined
        size = len(folded)
        candidates: list[int] = list(self._always[side])
        prefix = self._prefix[side]
        for length in self._prefix_lengths[side]:
            if length > size:
                break
            found = prefix.get(folded[:length])
            if found:
                candidates.extend(found)
        suffix = self._suffix[side]
        for length in self._suffix_lengths[side]:
            if length > size:
                break
            found = suffix.get(folded[-length:])
            if found:
                candidates.extend(found)
        candidates.extend(pos for text, pos in self._contains[side] if text in folded)
        regexes = self._regexes
        return {pos for pos in candidates if regexes[pos].fullmatch(key)}
