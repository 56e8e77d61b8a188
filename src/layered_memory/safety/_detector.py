"""What a detector finds, and the text tests the detectors share.

A detector scans the scanning view of a text (`_scanning_view`) and yields the secrets it
recognizes as `Finding` spans; the engine (`redaction`) merges them. The families, one module
each: tokens that announce themselves (`_vendor_tokens`), values of secret-named fields
(`_named_fields`), passwords where a tool or a credential file puts them (`_command_lines`),
secrets with a structure (`_structured_secrets`).

Every scan is linear on any input; `tests/writeback/redaction` runs megabytes of adversarial
text through all of them in a subprocess with a time limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret: ``text[start:end]`` is to be replaced by ``[REDACTED:<kind>]``.

    Attributes:
        start: First character of the secret.
        end: One past its last character.
        kind: One of `REDACTION_KINDS`.
    """

    start: int
    end: int
    kind: str


Detector = Callable[[str], Iterable[Finding]]
"""Scans a text (the scanning view) and yields the secrets it recognizes, in any order."""


Check = Callable[[str], bool]


def mixed(secret: str) -> bool:
    """Random keys mix digits and both cases; a kebab-case name (``sk-learn-pipeline``) does
    not."""
    return (
        any(c.isdigit() for c in secret)
        and any(c.isupper() for c in secret)
        and any(c.islower() for c in secret)
    )


def has_digit_or_caps(secret: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in secret)


def always(_secret: str) -> bool:
    return True


_ASCII_LOWER: Final = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def fold_case(text: str) -> str:
    """``text`` lower-cased without changing its length (``str.lower`` may, for a few
    non-ASCII letters), so positions in it are positions in ``text``."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def word_start(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def longest_word(text: str) -> int:
    """The length of the longest whitespace-separated word of ``text``: a cheap gate that spares
    ordinary prose the regex scans of tokens longer than its words."""
    return max(map(len, text.split()), default=0)  # no Python call per word


def has_long_word(text: str, size: int) -> bool:
    """Whether some whitespace-separated word of ``text`` has ``size`` characters or more."""
    return longest_word(text) >= size
