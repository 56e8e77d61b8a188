"""Text as the recall engine sees it: content words, normalized, stop words out.

One tokenizer for every index and every query of the package (the tiers' pages, the entries
of a memory file over its budget, the lexical test embedding of `layered_memory.testing`):
a query and what it is matched against must be cut into words the same way. Linear in the
text: one regex with one unbounded run per word.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Final

__all__ = ["STOPWORDS", "tokens", "word_counts"]

_WORD_RE: Final = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

# A short English stop list: function words carry no topic, and dropping them keeps the
# keyword sets (and the lexical embedding) about what was said.
_STOP_TEXT: Final = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each else
    ever few for from further get got had has have having he her here hers herself him himself
    his how i i'm i've if in into is it it's its itself just let like me might mine more most
    much must my myself no nor not now of off oh ok okay on once only or other our ours
    ourselves out over own please really same shall she should so some such sure than thank
    thanks that that's the their theirs them themselves then there these they this those
    through to too under until up us very was we well were what what's when where which while
    who whom why will with would yes yet you you're your yours yourself yourselves
    tell know remember think want need one two
"""
STOPWORDS: Final = frozenset(_STOP_TEXT.split())
"""Words no index or query keeps."""


@lru_cache(maxsize=65536)
def _normalize(word: str) -> str:
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    # A light plural strip: "appointments" and "appointment" should meet.
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """The content words of `text`, normalized (lowercase, light plural strip), stop words out.

    Args:
        text: Any text.

    Returns:
        Its content words in order, repeated as often as they occur.
    """
    words = (_normalize(match) for match in _WORD_RE.findall(text))
    return [word for word in words if word not in STOPWORDS and len(word) > 1]


@lru_cache(maxsize=8192)
def word_counts(text: str) -> Counter[str]:
    """How often each content word occurs in `text`.

    Cached: short-term pages and long-term entries are scored on every retrieval. Shared:
    never change the result.

    Args:
        text: Any text.

    Returns:
        Content word -> count.
    """
    return Counter(tokens(text))
