"""The scanning view of a text, in which the detectors look for secrets.

The scanning view of a text: what a secret looks like once its disguises are taken off.

Detectors run on a *view* of the text in which

1. invisible characters are gone (zero-width spaces and joiners, soft hyphens, bidi controls,
   variation selectors, Unicode tag characters: every format character, category Cf),
2. percent-escapes of ASCII characters are decoded (``sk%5Flive%5F...`` reads ``sk_live_...``),
3. a line break between two pieces of one token is removed (a key wrapped over two lines, a
   URL's password on the line after its `user:`).

The view keeps a map back to the original, so a secret found in the view is cut out of the
original text at exactly the characters it spans there (its invisible characters, escapes and
line breaks included), and every other character of the original is left as it was.

Each step is one linear regex pass; a text without anything to undo is its own view (no copy,
no map), which is the common case for write-back.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Final

_INVISIBLE: Final = (
    "\x00-\x08\x0e-\x1f\x7f"  # C0 controls but tab and line breaks, and DEL: `PASSWORD\x00=`
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef"
)
"""Control characters a terminal shows as nothing, format characters (Unicode category Cf)
plus the other code points that render as nothing
(combining grapheme joiner, Hangul fillers, variation selectors): written out rather than
computed from `unicodedata` at import, which would walk all 1.1 million code points."""

# Stage 1: invisible characters and percent-escapes (ASCII ones, and UTF-8 sequences, which
# may spell an invisible character: `%E2%80%8B`). Run twice: `%255F` is `_` encoded twice.
_HIDDEN: Final = re.compile(
    f"[{_INVISIBLE}]+|%[0-7][0-9A-Fa-f]|%[C-Fc-f][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){{1,3}}"
)
_INVISIBLE_CHAR: Final = re.compile(f"[{_INVISIBLE}]")
_ASCII_CONTROL: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f]")

# Stage 2: a line break (an optional shell continuation `\`, CR, indentation of the next line)
# between two visible characters. Whether it really cuts a token is decided in Python.
# A line ending in `:`, `=`, `,`, `;` or an opening bracket ends a statement (`if x:`,
# `key =`), so the next line is never read as its continuation.
_BREAK: Final = re.compile(r"(?<=[^\s:=,;(\[{])\\?\r?\n[ \t]*(?=\S)")
# The one `:` a line may end with and still continue: a URL's `user:` (`postgres://admin:`,
# the password and `@host` on the next line). Only a view: the URL detector still decides
# whether a password and a host follow. Starts with the literal `://` and is bounded: linear.
_URL_USER_BREAK: Final = re.compile(r"://[^\s:/?#@\[\]\"'<>`]{0,128}:(?P<brk>\r?\n[ \t]*)(?=\S)")
# `NAME=value`, `name: value`, `name = value`; not base64 padding (`...b3==`, `...==;k=v`,
# `...I="}}` closing a JSON string).
_ASSIGNMENT: Final = re.compile(
    r"[A-Za-z_][\w.-]*(?:[ \t]+[=:]|:(?!//)|=(?!=|[ \t]*\Z|[\"'][\s,;)\]}]*\Z))"
)
_WORD_LIKE: Final = re.compile(r"[a-z]+|[A-Z][a-z]+|[A-Z]+|[0-9]{1,5}")
_LINE_WORD_LIKE: Final = re.compile(r"[a-z]+|[A-Z][a-z]+|[0-9]{1,5}")
_FRAMING: Final = "()[]{}<>\"'*_`,.;:!?"


@dataclass(frozen=True, slots=True)
class _Edits:
    """Where a view differs from its source: parallel sorted lists, one entry per edit.

    Edit ``i`` replaced ``src_len[i]`` source characters at ``src_at[i]`` by ``view_len[i]``
    view characters at ``view_at[i]``.
    """

    view_at: list[int]
    view_len: list[int]
    src_at: list[int]
    src_len: list[int]

    def start(self, position: int) -> int:
        """Source offset of the view character at ``position`` (removed text before it is not
        part of it)."""
        i = bisect_right(self.view_at, position) - 1
        if i < 0:
            return position
        if position < self.view_at[i] + self.view_len[i]:
            return self.src_at[i]
        return self.src_at[i] + self.src_len[i] + position - self.view_at[i] - self.view_len[i]

    def end(self, position: int) -> int:
        """Source offset just after the view character before ``position`` (removed text after
        it is not part of it)."""
        i = bisect_left(self.view_at, position) - 1
        if i < 0:
            return position
        if position < self.view_at[i] + self.view_len[i]:
            return self.src_at[i] + self.src_len[i]
        return self.src_at[i] + self.src_len[i] + position - self.view_at[i] - self.view_len[i]


@dataclass(frozen=True, slots=True)
class View:
    """A text as the detectors see it, with the way back to the original.

    Attributes:
        text: The scanning view.
    """

    text: str
    _maps: tuple[_Edits, ...]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The original text's span covered by the view's ``[start, end)``."""
        for edits in reversed(self._maps):
            start, end = edits.start(start), edits.end(end)
        return start, end


def scanning_view(text: str) -> View:
    """Build the scanning view of ``text`` (see the module docstring)."""
    maps: list[_Edits] = []
    current = text
    for stage in (_undo_hidden, _undo_hidden, _join_broken_tokens, _join_quoted_pieces):
        result = stage(current)
        if result is not None:
            current, edits = result
            maps.append(edits)
    return View(current, tuple(maps))


def _apply(text: str, edits: list[tuple[int, int, str]]) -> tuple[str, _Edits]:
    """Apply ``(start, end, replacement)`` edits (sorted, disjoint) and record the map."""
    parts: list[str] = []
    view_at: list[int] = []
    view_len: list[int] = []
    src_at: list[int] = []
    src_len: list[int] = []
    last = 0
    size = 0
    for start, end, replacement in edits:
        parts.append(text[last:start])
        size += start - last
        parts.append(replacement)
        view_at.append(size)
        view_len.append(len(replacement))
        src_at.append(start)
        src_len.append(end - start)
        size += len(replacement)
        last = end
    parts.append(text[last:])
    return "".join(parts), _Edits(view_at, view_len, src_at, src_len)


def _undo_hidden(text: str) -> tuple[str, _Edits] | None:
    if "%" not in text and text.isascii() and _ASCII_CONTROL.search(text) is None:
        return None
    edits = [(m.start(), m.end(), _decoded(m[0])) for m in _HIDDEN.finditer(text)]
    return _apply(text, edits) if edits else None


def _decoded(found: str) -> str:
    if found[0] != "%":
        return ""  # invisible characters
    raw = bytes(int(found[i + 1 : i + 3], 16) for i in range(0, len(found), 3))
    try:
        char = raw.decode("utf-8")
    except UnicodeDecodeError:
        return found
    return "" if _INVISIBLE_CHAR.fullmatch(char) else char


def _join_broken_tokens(text: str) -> tuple[str, _Edits] | None:
    if "\n" not in text:
        return None
    edits = [
        (m.start(), m.end(), "") for m in _BREAK.finditer(text) if _continues_token(text, m.end())
    ]
    if "://" in text:
        # Disjoint from the breaks above, which never follow a `:`.
        edits.extend((m.start("brk"), m.end("brk"), "") for m in _URL_USER_BREAK.finditer(text))
        edits.sort()
    return _apply(text, edits) if edits else None


# Stage 3: a key written as two string literals joined by an operator or by adjacency
# (`"sk-proj-Ab12" + "Cd34..."`, Python's `"ghp_Ab" "Cd..."`, `'...' . '...'`, `||`, `&`), on
# one line or across a break: the quotes and the operator between two token characters go.
# Blanks are possessive and bounded: one try per quote, linear.
_QUOTED_JOIN: Final = re.compile(
    r"(?<=[A-Za-z0-9_+/=-])(?P<q>[\"'])[ \t]{0,16}+(?:\\?\r?\n[ \t]{0,64}+)?"
    r"(?:(?:\+|\.\.?|\|\||&)[ \t]{0,16}+(?:\\?\r?\n[ \t]{0,64}+)?)?(?P=q)(?=[A-Za-z0-9_+/=-])"
)


def _join_quoted_pieces(text: str) -> tuple[str, _Edits] | None:
    if '"' not in text and "'" not in text:
        return None
    edits = [(m.start(), m.end(), "") for m in _QUOTED_JOIN.finditer(text)]
    return _apply(text, edits) if edits else None


def _continues_token(text: str, start: int) -> bool:
    """Whether the line starting at ``start`` begins with the rest of a cut token.

    Joining is only a view, but a secret found across the join is cut out through it, so the
    next line must not look like the start of ordinary text: a word (``Rotate it``, ``Done``),
    a list marker (``- item``, ``1. step``) or a new assignment (``DB_HOST=...``, ``user: x``).
    Its first word is taken as the tail of the token above when it is the whole line (and not
    a plain word), or when it is unlike a word (digits, inner capitals, symbols) and not
    shorter than four characters.
    """
    end = text.find("\n", start)
    line = text[start : len(text) if end == -1 else end].rstrip()
    word = line.split(None, 1)[0] if line else ""
    if not any(char.isalnum() for char in word) or _ASSIGNMENT.match(line):
        return False
    core = word.strip(_FRAMING)
    if word == line:
        return _LINE_WORD_LIKE.fullmatch(core) is None
    return len(word) >= 4 and _WORD_LIKE.fullmatch(core) is None
