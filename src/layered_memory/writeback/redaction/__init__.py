"""Secret redaction: credentials are cut out of text before it can reach memory.

Memory files are read back into every later prompt and often committed to version control, and
session stores outlive the run, so a key that slips into either leaks for good. `redact`
replaces each recognized secret with a `[REDACTED:<kind>]` marker and reports the kinds it
found, so callers can log *that* something was redacted without logging the secret itself.

How a text is scanned:

1. A scanning view is built (`scanning_view`, below): invisible characters removed, ASCII
   percent-escapes decoded, a token cut by a line break joined again.
2. Detectors (`_detectors`) run on the view: vendor tokens (``sk_live_``, ``ghp_``, ``hf_``,
   JWTs, ...), secrets with a structure (key blocks, URL credentials, Authorization headers,
   bare AWS secret keys), values of secret-named fields (``DB_PASSWORD=``, ``"password":``,
   ``*_TOKEN=``, ...) and passwords where a tool or a credential file puts them.
3. Overlapping findings merge into one span; each span is mapped back to the original text and
   replaced there. Nothing outside the spans changes, byte for byte.

Why not `detect-secrets` at run time (measured, `benchmarks/scenarios/redaction.py`): its
plugins report secret *values* per line, not spans, so they cannot see a key split over two
lines or percent-encoded, and cutting a value back out of the text by searching for it is
fragile; its keyword plugin only knows quoted or code-shaped assignments (no ``DB_PASSWORD=x``
in prose, no ``Authorization: Basic``, no Stripe ``rk_``/``whsec_``, no Hugging Face, Google
OAuth or AWS session tokens); and its plugin set costs several times this whole engine per
insight. It is used instead as an oracle in the tests: nothing it flags in the test corpus may
survive `redact`.

Example:
    >>> redact("use key sk-proj-" + "A1b2C3d4" * 4 + " please")
    ('use key [REDACTED:openai_api_key] please', ['openai_api_key'])
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from layered_memory.writeback.redaction._detectors import (
    TOKEN_DETECTORS,
    Detector,
    Finding,
    assignments,
    credentials,
    field_kind,
)

__all__ = [
    "REDACTION_KINDS",
    "Finding",
    "Redaction",
    "find_secrets",
    "redact",
    "redact_json",
    "redact_text",
]

REDACTION_KINDS: Final[tuple[str, ...]] = (
    "private_key",
    "jwt",
    "anthropic_api_key",
    "openai_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "github_token",
    "gitlab_token",
    "slack_token",
    "webhook_url",
    "stripe_key",
    "google_api_key",
    "google_oauth_secret",
    "huggingface_token",
    "npm_token",
    "pypi_token",
    "azure_storage_key",
    "sendgrid_api_key",
    "twilio_api_key",
    "mailchimp_api_key",
    "square_token",
    "telegram_bot_token",
    "discord_bot_token",
    "service_token",
    "softlayer_api_key",
    "bearer_token",
    "basic_auth",
    "authorization_header",
    "url_credentials",
    "password",
    "secret_assignment",
)
"""Every kind `redact` can report, most specific first: when findings overlap, the merged span
is reported under the earliest kind (``api_key=sk-proj-...`` is an `openai_api_key`)."""

_PRECEDENCE: Final = {kind: index for index, kind in enumerate(REDACTION_KINDS)}
_DETECTORS: Final[tuple[Detector, ...]] = (*TOKEN_DETECTORS, assignments, credentials)


@dataclass(frozen=True, slots=True)
class Redaction:
    """The result of redacting one text (or one JSON value).

    Attributes:
        text: The text with every secret replaced by ``[REDACTED:<kind>]``.
        kinds: The kinds replaced, each once, in `REDACTION_KINDS` order.
        count: How many secrets were replaced.
    """

    text: str
    kinds: tuple[str, ...]
    count: int


def find_secrets(text: str) -> list[Finding]:
    """The secrets in ``text``, as disjoint spans of ``text`` sorted by position.

    Args:
        text: Any text.

    Returns:
        One `Finding` per secret; overlapping detections are merged into one.
    """
    view = scanning_view(text)
    found = [finding for detector in _DETECTORS for finding in detector(view.text)]
    merged: list[Finding] = []
    for finding in sorted(found, key=lambda f: (f.start, -f.end)):
        if finding.start >= finding.end:
            continue
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            kind = min(last.kind, finding.kind, key=_PRECEDENCE.__getitem__)
            merged[-1] = Finding(last.start, max(last.end, finding.end), kind)
        else:
            merged.append(finding)
    return [Finding(*view.source_span(f.start, f.end), f.kind) for f in merged]


def redact_text(text: str) -> Redaction:
    """Replace every recognized secret in ``text`` with a ``[REDACTED:<kind>]`` marker.

    Args:
        text: Any text about to be persisted.

    Returns:
        The redacted text, the kinds found and how many secrets were replaced.
    """
    findings = find_secrets(text)
    if not findings:
        return Redaction(text, (), 0)
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts.append(text[last : finding.start])
        parts.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
    parts.append(text[last:])
    kinds = sorted({f.kind for f in findings}, key=_PRECEDENCE.__getitem__)
    return Redaction("".join(parts), tuple(kinds), len(findings))


def redact(text: str) -> tuple[str, list[str]]:
    """Replace every recognized secret in ``text`` with a ``[REDACTED:<kind>]`` marker.

    Args:
        text: Any text about to be persisted.

    Returns:
        The redacted text and the kinds found, each once, in `REDACTION_KINDS` order (empty
        when the text was left unchanged).
    """
    result = redact_text(text)
    return result.text, list(result.kinds)


def redact_json(value: Any) -> tuple[Any, Redaction]:
    """Redact every string of a JSON-like value: dict keys and string leaves, at any depth,
    and the whole string value of a secret-named key (``{"db_password": "..."}``, judged as
    ``db_password=...`` would be in text).

    Dicts, lists and tuples (any sequence but text and bytes: what `json.dumps` writes as an
    array) are copied only where something changed (a tuple stays a tuple, another sequence
    becomes a list); other leaves are kept as they are.
    Two keys of one dict that redact to the same text keep apart with a ``#2``, ``#3`` suffix,
    so no entry is lost. Walks iteratively: nesting depth is bounded only by memory.

    Args:
        value: A dict, list, tuple, str or any other leaf.

    Returns:
        The redacted value and a summary (its ``text`` is empty: there is no single text).
    """
    kinds: set[str] = set()
    count = 0

    def clean(text: str) -> str:
        nonlocal count
        result = redact_text(text)
        if result.count:
            kinds.update(result.kinds)
            count += result.count
        return result.text

    def field(name: str, text: str) -> str | None:
        nonlocal count
        kind = field_kind(name, text)
        if kind is None:
            return None
        kinds.add(kind)
        count += 1
        return f"[REDACTED:{kind}]"

    redacted = _walk(value, clean, field)
    ordered = tuple(sorted(kinds, key=_PRECEDENCE.__getitem__))
    return redacted, Redaction("", ordered, count)


def _is_container(value: Any) -> bool:
    """Whether ``value`` holds values to walk into: a dict, or any sequence but text and bytes.

    Not only `list`: a tuple (or another sequence) is written as a JSON array by `json.dumps`
    and the stores, so a secret inside one is persisted like one inside a list.
    """
    if isinstance(value, dict | list | tuple):
        return True
    return isinstance(value, Sequence) and not isinstance(
        value, str | bytes | bytearray | memoryview
    )


def _walk(value: Any, clean: Callable[[str], str], field: Callable[[str, str], str | None]) -> Any:
    """Apply ``clean`` to every str key and leaf of ``value`` without recursion; a str value
    of a str key goes to ``field`` first (its replacement, or None: cleaned as any leaf)."""
    if isinstance(value, str):
        return clean(value)
    if not _is_container(value):
        return value
    # Post-order over an explicit stack of frames (container, its keys when a dict, cleaned
    # children so far): a container is rebuilt once all its children are done.
    stack: list[tuple[Any, list[Any] | None, list[Any]]] = [(value, _keys(value), [])]
    while True:
        container, keys, done = stack[-1]
        items = keys if keys is not None else container
        if len(done) < len(items):
            item = items[len(done)]
            child = container[item] if keys is not None else item
            if isinstance(child, str):
                # A secret-named key makes its whole value a secret, judged as given (then
                # `clean` does not see it: one secret, counted once).
                named = field(item, child) if keys is not None and isinstance(item, str) else None
                done.append(clean(child) if named is None else named)
            elif isinstance(child, int | float) and not isinstance(child, bool):
                # A number under a secret-named key (`{"password": 20240917}`) is
                # judged by its digits; any other number stays a number.
                named = (
                    field(item, str(child)) if keys is not None and isinstance(item, str) else None
                )
                done.append(child if named is None else named)
            elif _is_container(child):
                stack.append((child, _keys(child), []))
            else:
                done.append(child)
            continue
        stack.pop()
        rebuilt = _rebuild(container, keys, done, clean)
        if not stack:
            return rebuilt
        stack[-1][2].append(rebuilt)


def _keys(container: Any) -> list[Any] | None:
    return list(container) if isinstance(container, dict) else None


def _rebuild(
    container: Any, keys: list[Any] | None, children: list[Any], clean: Callable[[str], str]
) -> Any:
    if keys is None:
        unchanged = all(new is old for new, old in zip(children, container, strict=True))
        if unchanged:
            return container
        return tuple(children) if isinstance(container, tuple) else children
    out: dict[Any, Any] = {}
    changed = False
    for key, child in zip(keys, children, strict=True):
        new_key = clean(key) if isinstance(key, str) else key
        if new_key in out:
            suffix = 2
            while f"{new_key}#{suffix}" in out:
                suffix += 1
            new_key = f"{new_key}#{suffix}"
        changed = changed or new_key is not key or child is not container[key]
        out[new_key] = child
    return out if changed else container


# ================================================================================================
# The scanning view
#
# The scanning view of a text: what a secret looks like once its disguises are taken off.
#
# Detectors run on a *view* of the text in which
#
# 1. invisible characters are gone (zero-width spaces and joiners, soft hyphens, bidi controls,
#    variation selectors, Unicode tag characters: every format character, category Cf),
# 2. percent-escapes of ASCII characters are decoded (``sk%5Flive%5F...`` reads ``sk_live_...``),
# 3. a line break between two pieces of one token is removed (a key wrapped over two lines, a
#    URL's password on the line after its `user:`).
#
# The view keeps a map back to the original, so a secret found in the view is cut out of the
# original text at exactly the characters it spans there (its invisible characters, escapes and
# line breaks included), and every other character of the original is left as it was.
#
# Each step is one linear regex pass; a text without anything to undo is its own view (no copy,
# no map), which is the common case for write-back.
# ================================================================================================

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
    for stage in (_undo_hidden, _undo_hidden, _join_broken_tokens):
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
