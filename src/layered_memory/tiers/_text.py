"""Lexical text helpers: tokens, keywords, summary lines and the Jaccard similarity; and
`storable`, the text every stored page and model answer goes through.

Used when no chat model is configured (keywords and summaries are then made from the words
themselves, so the tiers work offline and in tests), for the keywords of a query on the
retrieval path (never a model call there), and by the lexical test embedding in
`layered_memory.testing`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Final

MAX_KEYWORDS: Final = 8
"""Keywords kept per page."""
MAX_SEGMENT_KEYWORDS: Final = 12
"""Keywords kept per segment (its keyword set K_s in F_score)."""
MAX_SUMMARY_LINE: Final = 200

_UNSTORABLE_RE = re.compile(r"[\x00\ud800-\udfff]")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")

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


def storable(text: str) -> tuple[str, int]:
    """`text` as PostgreSQL can store it, and how many characters were replaced.

    PostgreSQL refuses NUL (`\\u0000 cannot be converted to text`) and a lone surrogate
    (`Unicode low surrogate must follow a high surrogate`) in a JSON value, so a page holding
    one (a pasted log line, a mis-decoded byte) was refused whole and lost. Each is replaced
    by U+FFFD, not removed: the text still shows something was there, and the words on
    either side of it do not run together. A surrogate pair split into two code points
    becomes the one character it encodes.
    """
    if _UNSTORABLE_RE.search(text) is None:  # the common case: one scan, no copy
        return text, 0
    raw = text.replace("\x00", "\ufffd").encode("utf-16", "surrogatepass")
    fixed = raw.decode("utf-16", "replace")
    return fixed, fixed.count("\ufffd") - text.count("\ufffd")


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
    """The content words of `text`, normalized (lowercase, light plural strip), stop words out."""
    words = (_normalize(match) for match in _WORD_RE.findall(text))
    return [word for word in words if word not in STOPWORDS and len(word) > 1]


def keywords(text: str, *, limit: int = MAX_KEYWORDS) -> list[str]:
    """The most frequent content words of `text` (ties: first seen first)."""
    counts = Counter(tokens(text))
    return [word for word, _ in counts.most_common(limit)]


def keyword_tokens(phrases: Iterable[str]) -> list[str]:
    """Model-made keyword phrases as content words, so they compare with lexical ones."""
    seen: dict[str, None] = {}
    for phrase in phrases:
        for token in tokens(str(phrase)):
            seen.setdefault(token, None)
    return list(seen)


def top_keywords(counts: dict[str, int], *, limit: int = MAX_SEGMENT_KEYWORDS) -> list[str]:
    """The `limit` most counted keywords (ties broken alphabetically, for determinism)."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word for word, _ in ranked[:limit]]


def jaccard(left: Iterable[str], right: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B|, and 0.0 when both are empty."""
    a, b = set(left), set(right)
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def one_line(text: str, *, limit: int = MAX_SUMMARY_LINE) -> str:
    """`text` on one line, whitespace collapsed, cut at `limit` chars with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def summary_line(query: str, response: str) -> str:
    """A page's lexical summary: the user's first sentence (their words carry the facts)."""
    text = query.strip() or response.strip()
    first = _SENTENCE_END_RE.split(" ".join(text.split()), maxsplit=1)[0]
    return one_line(first)


def segment_summary(keyword_list: Sequence[str], lines: Sequence[str]) -> str:
    """A segment's lexical summary: its main keywords, then its latest page's summary line."""
    head = ", ".join(keyword_list[:5])
    latest = lines[-1] if lines else ""
    if head and latest:
        return one_line(f"{head}: {latest}", limit=2 * MAX_SUMMARY_LINE)
    return head or latest
