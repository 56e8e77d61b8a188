"""What a detector reports: a span of the scanning view and the kind of secret it holds."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Detector", "Finding"]


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
