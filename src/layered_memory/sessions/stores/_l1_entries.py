"""What `HybridSessionStore` keeps in its L1, and when an L1 entry may be served.

Every L1 value is an envelope stamped with the L1 *generation* it was written under (Redis:
the server's replication id) and the writer's wall-clock time::

    {"lm": {"g": "<replid>", "t": 1700000000.123}, "value": {...}}       # a cached value
    {"lm": {"g": "<replid>", "t": 1700000000.123, "pending": "<nonce>"}}  # a write in progress

An entry is *fresh* (served) when it was written under the current generation and after the
last moment L1 is known to have missed a write (`trusted_after`); otherwise it is *suspect* and
checked against L2 before use. A *pending* entry (a tombstone a writer puts before it writes
L2) sends readers to L2 and blocks their backfills until the writer replaces it.

Pure functions and one small piece of thread-safe state (`L1Trust`): the sync and async
halves of the store share them; only the I/O is written twice.
"""

from __future__ import annotations

import math
import secrets
import threading
from dataclasses import dataclass
from typing import Literal

from layered_memory.sessions.stores._common import Clock, JsonDict

__all__ = [
    "CLOCK_MARGIN",
    "MARKER_KEY",
    "PENDING_TTL",
    "RESERVED_PREFIX",
    "L1Trust",
    "L1View",
    "classify",
    "marker_time",
    "marker_value",
    "pending",
    "wrap",
]

STAMP = "lm"

PENDING_TTL = 60.0
"""Seconds a write-in-progress tombstone lives: longer than any L2 write may take."""

RESERVED_PREFIX = "layered_memory:hybrid:"
"""L2 keys starting with it are the hybrid store's own: it refuses them as session keys."""

MARKER_KEY = RESERVED_PREFIX + "l1-missed-writes"
"""The L2 entry through which workers tell each other that L1 missed a write."""

CLOCK_MARGIN = 1.0
"""Seconds worker clocks may disagree: a missed write distrusts entries stamped this much later."""

Kind = Literal["fresh", "suspect", "pending"]


@dataclass(frozen=True, slots=True)
class L1View:
    """An L1 entry as the store sees it.

    Attributes:
        kind: ``fresh`` (serve ``value``), ``suspect`` (check L2 first) or ``pending``.
        value: The cached value (fresh entries only).
    """

    kind: Kind
    value: JsonDict | None = None


def _stamp(generation: str, now: float) -> dict[str, object]:
    return {"g": generation, "t": round(now, 3)}


def wrap(value: JsonDict, *, generation: str, now: float) -> JsonDict:
    """The L1 envelope of ``value``."""
    return {STAMP: _stamp(generation, now), "value": value}


def pending(*, generation: str, now: float) -> JsonDict:
    """A unique write-in-progress tombstone (unique, so a writer replaces only its own)."""
    return {STAMP: {**_stamp(generation, now), "pending": secrets.token_hex(8)}}


def classify(stored: JsonDict, *, generation: str, trusted_after: float) -> L1View:
    """Whether an L1 entry may be served as it is.

    Args:
        stored: The value L1 returned.
        generation: L1's generation, read with the entry (atomically) or after it, never
            before: a stale entry may be what a newer generation brought back.
        trusted_after: Entries stamped before this wall-clock time are suspect.
    """
    stamp = stored.get(STAMP)
    if not isinstance(stamp, dict):
        return L1View("suspect")  # not written by this version: an unknown age
    if "pending" in stamp:
        return L1View("pending")
    value = stored.get("value")
    written_at = stamp.get("t")
    if (
        not isinstance(value, dict)
        or stamp.get("g") != generation
        or not isinstance(written_at, int | float)
        or written_at < trusted_after
    ):
        return L1View("suspect")
    return L1View("fresh", value)


def marker_value(before: float) -> JsonDict:
    """The L2 marker saying: L1 entries stamped before ``before`` may be stale."""
    return {"l1_missed_writes_before": round(before, 3)}


def marker_time(value: JsonDict | None) -> float | None:
    """The time a marker read from L2 carries, or None."""
    if value is None:
        return None
    before = value.get("l1_missed_writes_before")
    return float(before) if isinstance(before, int | float) else None


class L1Trust:
    """What one store knows about its L1's entries: which may be served, when to ask L2.

    Thread-safe. ``trusted_after``: L1 entries stamped before it are suspect (raised by a write
    L1 missed here, or by the marker another worker left in L2).

    Args:
        check_interval: Seconds between two reads of the L2 marker.
        clock: Wall-clock seconds.
    """

    def __init__(self, *, check_interval: float, clock: Clock) -> None:
        self.check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self.trusted_after = -math.inf
        self._marker_until = -math.inf
        self._marker_checked_at = -math.inf

    def view(self, stored: JsonDict, *, generation: str) -> L1View:
        """`classify` against what this store knows."""
        return classify(stored, generation=generation, trusted_after=self.trusted_after)

    def marker_due(self, *, force: bool) -> bool:
        """Whether to read the L2 marker now (and note that it is being read)."""
        now = self._clock()
        with self._lock:
            if not force and now < self._marker_checked_at + self.check_interval:
                return False
            self._marker_checked_at = now
            return True

    def distrust_before(self, before: float | None) -> None:
        """Treat L1 entries stamped before ``before`` as suspect (None: no change)."""
        if before is not None:
            with self._lock:
                self.trusted_after = max(self.trusted_after, before)

    def missed_write(self) -> float | None:
        """L1 missed a write: distrust older entries; the marker time to publish, if due."""
        now = self._clock()
        before = now + 2 * CLOCK_MARGIN  # covers this write and the next second's
        self.distrust_before(before)
        with self._lock:
            return before if self._marker_until < now + CLOCK_MARGIN else None

    def published(self, before: float) -> None:
        """The marker ``before`` is in L2: no need to write it again for a second."""
        with self._lock:
            self._marker_until = max(self._marker_until, before)
