"""What a query says about time: a period it names ("in May 2023", "last week",
"2023-05-08"), or that it asks about the present ("now", "latest").

A page from the period a query names is relevant by its date alone ("what did I do on March
14?" shares no word with what was done); a query about the present prefers the newest
relevant pages (a changed preference outranks the old one).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["TimeHint", "time_hint"]

_MONTHS: Final = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_PRESENT: Final = frozenset(
    ("now", "currently", "current", "lately", "latest", "recent", "recently", "nowadays")
)
_DAY: Final = 86400.0
_RELATIVE: Final = {
    "today": (1.0, 0.0),
    "yesterday": (2.0, 0.0),
    "week": (14.0, 0.0),
    "month": (62.0, 0.0),
    "year": (731.0, 0.0),
}
_TIME_WORD_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}|[a-z]+|\d+")


@dataclass(frozen=True, slots=True)
class TimeHint:
    """What a query says about time: a period it names, or that it asks about the present."""

    start: float | None = None
    end: float | None = None
    present: bool = False


def _month_window(year: int, month: int, day: int | None) -> tuple[float, float] | None:
    try:
        if day is not None:
            first = dt.datetime(year, month, day, tzinfo=dt.UTC)
            return first.timestamp(), first.timestamp() + _DAY
        first = dt.datetime(year, month, 1, tzinfo=dt.UTC)
        after = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
    except ValueError:
        return None
    return first.timestamp(), after.timestamp()


def time_hint(query: str, now: float) -> TimeHint:
    """The period a query names (the first one), and whether it asks about the present.

    One pass over the query's words (linear in its length): ISO dates, a month name with an
    optional day and year (the year of `now` when none is given), a year alone, and "today",
    "yesterday", "last week / month / year". "may" counts as the month only beside a day or a
    year ("may I ..." names no period).
    """
    words = _TIME_WORD_RE.findall(query.lower()[:2000])
    present = not _PRESENT.isdisjoint(words)
    try:
        this_year = dt.datetime.fromtimestamp(now, tz=dt.UTC).year
    except (OverflowError, OSError, ValueError):
        this_year = 2000
    for i, word in enumerate(words):
        window: tuple[float, float] | None = None
        if len(word) == 10 and word[4] == "-":
            year, month, day = (int(part) for part in word.split("-"))
            window = _month_window(year, month, day) if 1 <= month <= 12 else None
        elif word in _MONTHS:
            near = words[max(0, i - 2) : i] + words[i + 1 : i + 3]
            numbers = [int(w) for w in near if w.isdigit() and len(w) <= 4]
            years = [n for n in numbers if 1900 <= n <= 2200]
            days = [n for n in numbers if 1 <= n <= 31]
            if word == "may" and not numbers:
                continue
            window = _month_window(
                years[0] if years else this_year, _MONTHS[word], days[0] if days else None
            )
        elif word.isdigit() and len(word) == 4 and 1900 <= int(word) <= 2200:
            start = dt.datetime(int(word), 1, 1, tzinfo=dt.UTC).timestamp()
            window = (start, dt.datetime(int(word) + 1, 1, 1, tzinfo=dt.UTC).timestamp())
        elif word in ("today", "yesterday") or (
            word in _RELATIVE and i > 0 and words[i - 1] in ("last", "past", "this")
        ):
            back, ahead = _RELATIVE[word]
            window = (now - back * _DAY, now + ahead * _DAY + 1.0)
        if window is not None:
            return TimeHint(window[0], window[1], present)
    return TimeHint(present=present)
