"""How a memory file's text is prepared and cut: HTML comments out, a line cap, a character
cap whose marker names the file, and defusing of the part that can be shown.

One marker for every cut (memory files, imported files, rules, the session layer), so the
agent always learns the same way that there is more to `read_file`.
"""

from __future__ import annotations

import functools

from layered_memory.core._defuse import defuse, defuse_name, drop_invisible
from layered_memory.core.loading import strip_html_comments
from layered_memory.writeback.redaction import redact_text


def defuse_within(text: str, limit: int) -> str:
    """`text` defused as far as `limit` characters, the one part that can ever be shown.

    A piece is cut to at most `limit` characters (its head kept), so the rest never reaches
    the prompt; leaving it as it is keeps the cost of a huge file bounded by the budget.
    """
    if len(text) <= limit:
        return defuse(text)
    head = max(limit, 0)
    text = _visible_within(text, head)
    return defuse(text[:head]) + text[head:]


_VISIBLE_MARGIN = 64
"""Characters past the limit made visible too: defusing the head at the limit may shorten it
by a few (a joiner or a flag cut in two), and what follows comes into view."""


def _visible_within(text: str, limit: int) -> str:
    """`drop_invisible(text)` as far as `limit` characters and a margin, the rest as it is.

    Removed characters pull later ones into the part that can be shown, so the cleaned head
    grows until it is long enough (doubling: linear in all).
    """
    end = limit + 2 * _VISIBLE_MARGIN
    while True:
        shown = drop_invisible(text[:end])
        if len(shown) >= limit + _VISIBLE_MARGIN or end >= len(text):
            return shown + text[end:]
        end *= 2


def truncate_text(text: str, limit: int, path: str) -> str:
    """`text` cut to at most `limit` chars, keeping the head and ending with a marker.

    The marker names `path` and how much was cut. When not even the marker fits, returns "".
    """
    if len(text) <= limit:
        return text
    estimate = len(_cut_marker(path, len(text), text.count("\n") + 1))
    keep = max(0, limit - estimate)
    head = text[:keep]
    newline = head.rfind("\n")
    if newline >= keep // 2:
        head = head[:newline]  # cut at a line end when that loses little
    rest = text[len(head) :]
    marker = _cut_marker(path, len(rest), rest.count("\n") + (0 if rest.startswith("\n") else 1))
    result = f"{head}{marker}" if head else marker.lstrip("\n")
    return result if len(result) <= limit else ""


def omitted_marker(path: str, chars: int) -> str:
    """What stands for a file's whole text when not even a cut of it fits: never an empty
    body, which reads as an empty file (and invites a `write_file` over it)."""
    shown = defuse_name(path)
    return f"[... {shown} not shown ({chars} chars): read_file {shown} to read it]"


def cap_lines(text: str, max_lines: int | None, path: str) -> str:
    """`text` limited to its first `max_lines` lines, with a marker when lines were cut.

    Splits off only the first `max_lines` lines: a file of millions of empty lines costs what
    its head costs, not a list of millions of strings.
    """
    if max_lines is None:
        return text
    parts = text.split("\n", max_lines)
    if len(parts) <= max_lines:
        return text
    cut = parts[-1].count("\n") + 1
    kept = "\n".join(parts[:-1])
    shown = defuse_name(path)
    return (
        f"{kept}\n[... {cut} more lines of {shown} not shown (first {max_lines} lines kept); "
        f"read_file {shown} for the rest]"
    )


def clean_memory_text(text: str) -> str:
    """File text as injected: HTML comments removed, outer blank lines trimmed."""
    return strip_html_comments(text).strip("\n").rstrip()


REDACTION_MARGIN = 4096
"""Characters past the shown part that are redacted too: a secret that starts in the shown
part is recognized whole (vendor tokens, URLs and assignment values are far shorter; a key
block cut short is recognized by its BEGIN line)."""


def redact_within(text: str, limit: int) -> str:
    """`text` with secrets redacted as far as `limit` characters (and `REDACTION_MARGIN`), the
    part that can ever be shown.

    Every write of memory the package sees is redacted already; this is the second line, for
    what reached a file another way (a shell command, a subagent on the plain backend, the
    user, a store written by other code): no secret in memory reaches the prompt. Remembered
    by text, so a render costs one lookup per unchanged file; a huge file costs its head only.
    """
    head = max(limit, 0) + REDACTION_MARGIN
    if len(text) <= head:
        return _redacted(text)
    return _redacted(text[:head]) + text[head:]


@functools.lru_cache(maxsize=256)
def _redacted(text: str) -> str:
    return redact_text(text).text


def _cut_marker(path: str, cut_chars: int, cut_lines: int) -> str:
    shown = defuse_name(path)
    return (
        f"\n[... truncated: {cut_chars} more chars ({cut_lines} lines) of {shown} not shown; "
        f"read_file {shown} for the rest]"
    )
