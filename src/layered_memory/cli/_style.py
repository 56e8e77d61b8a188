"""Colour for the CLI's human output: only on a terminal, never when `NO_COLOR` is set.

One rule for every subcommand (https://no-color.org): colour is added only when the stream is
a TTY and `NO_COLOR` is unset or empty; `--json` output is never coloured.
"""

from __future__ import annotations

import os
from typing import TextIO

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
