"""How the CLI prints: every outside string escaped, JSON, colour only on a terminal.

Text the CLI prints that came from outside: file names, store keys, memory, driver errors.

A store key or file name is data, and may be hostile: a newline in it would forge a line of
`sync` output, an ANSI escape would reach the terminal (recolour, retitle, hide text), a bidi
override would show `txt.exe` as `exe.txt`. Every such string goes through `printable` before
it is printed; JSON goes through `dumps_json`. One helper, used by every subcommand.

Colour: one rule for every subcommand (https://no-color.org): colour is added only when the
stream is a TTY and `NO_COLOR` is unset or empty; `--json` output is never coloured.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO

# -- escaping what came from outside ----------------------------------------------------------

__all__ = ["dumps_json", "escaped_output", "printable", "printable_url", "takes_any_text"]

# Every control (Cc), format (Cf: bidi overrides and isolates, zero-width characters, the BOM,
# tag characters), line/paragraph separator (Zl, Zp) and lone surrogate (Cs: a file name that
# is not UTF-8) of Unicode 14. `tests/cli/test_faults_cli_output.py` checks the list
# against `unicodedata`, so a newer Python with more such characters fails loudly.
_CONTROLS = "\x00-\x1f"
_CONTROLS_BUT_TAB_AND_NEWLINE = "\x00-\x08\x0b-\x1f"
_OTHERS = (
    "\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f"
)
_ONE_LINE = re.compile(f"[{_CONTROLS}{_OTHERS}]")
_MULTI_LINE = re.compile(f"[{_CONTROLS_BUT_TAB_AND_NEWLINE}{_OTHERS}]")
# In JSON text these can only stand inside strings (json.dumps escapes C0 controls itself).
_JSON_UNSAFE = re.compile(f"[{_OTHERS}]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: object, *, multiline: bool = False) -> str:
    r"""``text`` with every control and invisible character shown as an escape (``\x1b``).

    Args:
        text: Anything; printed as ``str(text)``.
        multiline: Keep newlines and tabs (a memory block); otherwise they are escaped too,
            so one value stays on one line.

    Example:
        >>> printable("/a\nb\x1b[2J\u202etxt.exe")
        '/a\\nb\\x1b[2J\\u202etxt.exe'
    """
    pattern = _MULTI_LINE if multiline else _ONE_LINE
    return pattern.sub(_escape, str(text))


def printable_url(url: str) -> str:
    """A store URL fit to print: password hidden, controls escaped."""
    from layered_memory.sessions.stores.urls import redact_url

    return printable(redact_url(url))


def takes_any_text(stream: Any) -> bool:
    """Whether `stream` can write every character: UTF-8, or text kept as text (`StringIO`,
    which has no encoding)."""
    encoding = getattr(stream, "encoding", None)
    if encoding is None:
        return True
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


@contextmanager
def escaped_output(*streams: Any) -> Iterator[None]:
    r"""Meanwhile, streams that cannot write every character (a cp1252 console, `C` locale,
    `PYTHONIOENCODING=ascii`) write the rest as escapes (``\u9879``) instead of raising
    UnicodeEncodeError halfway through a report; each is put back as it was afterwards."""
    changed = []
    for stream in streams:
        if takes_any_text(stream) or not hasattr(stream, "reconfigure"):
            continue
        changed.append((stream, stream.errors))
        stream.reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        for stream, errors in changed:
            # Restoring flushes: a reader gone away (EPIPE) or a stream closed meanwhile
            # must not hide what the command returned or raised.
            with suppress(OSError, ValueError):
                stream.reconfigure(errors=errors)


def dumps_json(
    data: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> str:
    r"""JSON text for stdout that is safe on a terminal and decodes to exactly ``data``.

    Non-ASCII text stays readable (``ensure_ascii=False``) when stdout takes UTF-8; otherwise
    it is written as ``\uXXXX`` escapes (a surrogate pair beyond the BMP), so the JSON stays
    valid on any encoding (``escaped_output`` would write ``\U0001f680``, which is not JSON).
    DEL, C1 controls, bidi and zero-width characters are always escaped; JSON decodes them all
    back.
    """
    readable = takes_any_text(sys.stdout)
    text = json.dumps(data, indent=indent, ensure_ascii=not readable, default=default)
    return _JSON_UNSAFE.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    # JSON has no astral escapes: a UTF-16 surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`1 relation`, `2 relations`, `1,024 entities` (with `plural`): every count the CLI prints."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


# -- colour -----------------------------------------------------------------------------------

_STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
}

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def use_colour(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Painter:
    """Wraps text in an ANSI style when enabled; the identity otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{_STYLES[style]}m{text}\x1b[0m"
