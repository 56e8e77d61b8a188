"""Entity names found in free text by `NameMatcher`, in time linear in the text.

Names and text are cut into the same tokens: NFKC, casefolded, runs of letters and digits,
except that each CJK character (Han, kana, Hangul syllables) is a token on its own because
those scripts do not put spaces between words. `John_Smith`, `john smith` and `JOHN-SMITH`
therefore all read as `("john", "smith")`, and `존스미스는` contains `존스미스`.

The index maps each name's token tuple to the names, and each first token to the lengths (in
tokens) that names starting with it have. Scanning a message costs one dict lookup per token,
plus one per candidate length at tokens that start a name: the graph's size does not enter.
A substring automaton (Aho-Corasick) would find `ann` inside `annual`; token tuples respect
word boundaries and treat `_`, `-` and spaces alike, which entity names need, and no library
offers that, hence this small index.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

MAX_NAME_TOKENS = 16
"""Names longer than this (in tokens) are found by `open_nodes`/`search_nodes` only."""

MAX_SCAN_CHARS = 20_000
"""Only this much of a message is scanned for names (a pasted log cannot slow a call)."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff"
_TOKEN_RE = re.compile(f"[{_CJK}]|(?:(?![{_CJK}])[^\\W_])+")


def tokens(text: str) -> tuple[str, ...]:
    """The match tokens of `text` (see the module docstring)."""
    return tuple(_TOKEN_RE.findall(unicodedata.normalize("NFKC", text).casefold()))


def _matchable(key: tuple[str, ...]) -> bool:
    # A one-letter Latin name ("a", "I") would match nearly every message.
    return 0 < len(key) <= MAX_NAME_TOKENS and (len(key) > 1 or len(key[0]) > 1)


class NameMatcher:
    """Which of a graph's entity names occur in a text, and names by normalized form."""

    __slots__ = ("_by_key", "_lengths")

    def __init__(self, names: Iterable[str]) -> None:
        by_key: dict[tuple[str, ...], list[str]] = {}
        lengths: dict[str, set[int]] = {}
        for name in names:
            key = tokens(name)
            if not _matchable(key):
                continue
            by_key.setdefault(key, []).append(name)
            lengths.setdefault(key[0], set()).add(len(key))
        self._by_key = by_key
        # Longest first: the scan takes the longest name starting at each token.
        self._lengths = {first: sorted(found, reverse=True) for first, found in lengths.items()}

    def named(self, value: str) -> list[str]:
        """Names whose tokens equal `value`'s (`acme_corp` -> `Acme Corp`), in graph order."""
        return list(self._by_key.get(tokens(value[:MAX_SCAN_CHARS]), ()))

    def find(self, text: str, *, limit: int) -> list[str]:
        """Names mentioned in `text`, in order of first mention, at most `limit`.

        At each token the longest name starting there wins and the scan continues after it, so
        `New York Times` finds that entity and not also `New York`.
        """
        found: dict[str, None] = {}
        words = tokens(text[:MAX_SCAN_CHARS])
        lengths, by_key = self._lengths, self._by_key
        position, end = 0, len(words)
        while position < end and len(found) < limit:
            candidates = lengths.get(words[position])
            step = 1
            if candidates is not None:
                for length in candidates:
                    names = by_key.get(words[position : position + length])
                    if names is not None and position + length <= end:
                        for name in names:
                            found.setdefault(name, None)
                        step = length
                        break
            position += step
        return list(found)[:limit]
