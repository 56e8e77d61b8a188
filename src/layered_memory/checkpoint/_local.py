"""The per-process tier: deserialized tuples kept as private snapshots, checked against Redis.

Deserializing a 200-message checkpoint is most of what ``get_tuple`` costs, so a hit must not
deserialize: it restores an in-process snapshot (see `_codec.snapshot`) after one Redis round
trip has confirmed the thread's version is unchanged.

Admission: a version is snapshotted on its second read in this process (async reads without a
signing key: on its third, because their first reads overlap the Redis and database calls,
which is only safe when nothing is kept). A thread read once per version (a chat turn reads its
thread once, then writes) never pays for a snapshot, so the cold path stays as cheap as the
wrapped saver; a thread read again (state polling, history views, several graphs on one thread)
becomes hot after that.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["LocalTuples"]


@dataclass(slots=True)
class _Entry:
    version: str
    blob: bytes | None  # None: read once under `version`, not kept yet
    ready: bool = False  # read twice, concurrently with Redis: the next read keeps it


class LocalTuples:
    """An LRU of snapshots by thread and namespace, bounded in entries and bytes.

    Args:
        max_entries: Threads kept (0 turns the tier off).
        max_bytes: Total snapshot bytes kept.
    """

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._threads: OrderedDict[str, dict[str, _Entry]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything is ever kept."""
        return self._max_entries > 0

    def version_of(self, thread_id: str, checkpoint_ns: str) -> str | None:
        """The version of the kept snapshot, if any (sent to Redis to skip the payload)."""
        with self._lock:
            entry = self._threads.get(thread_id, {}).get(checkpoint_ns)
            return entry.version if entry is not None and entry.blob is not None else None

    def wants_ordered_read(self, thread_id: str, checkpoint_ns: str) -> bool:
        """Whether the next read may keep a snapshot, so Redis must answer before the database.

        True when a snapshot is held (it may be a hit) or the version was already read twice.
        """
        with self._lock:
            entry = self._threads.get(thread_id, {}).get(checkpoint_ns)
            return entry is not None and (entry.blob is not None or entry.ready)

    def note_unordered_read(self, thread_id: str, checkpoint_ns: str, version: str) -> None:
        """Record a read whose Redis and database calls overlapped (nothing is kept)."""
        if not self.enabled:
            return
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            entry = spaces.get(checkpoint_ns)
            if entry is not None and entry.version == version:
                entry.ready = True
            else:
                self._replace(spaces, checkpoint_ns, _Entry(version, None))
            self._evict()

    def get(self, thread_id: str, checkpoint_ns: str, version: str) -> bytes | None:
        """The snapshot kept under exactly ``version``, or None."""
        with self._lock:
            spaces = self._threads.get(thread_id)
            entry = spaces.get(checkpoint_ns) if spaces else None
            if entry is None or entry.version != version or entry.blob is None:
                return None
            self._threads.move_to_end(thread_id)
            return entry.blob

    def admit(self, thread_id: str, checkpoint_ns: str, version: str) -> bool:
        """Record a read of ``version`` that missed; True when it is the second one."""
        if not self.enabled:
            return False
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            entry = spaces.get(checkpoint_ns)
            if entry is not None and entry.version == version:
                return True
            self._replace(spaces, checkpoint_ns, _Entry(version, None))
            self._evict()
            return False

    def put(self, thread_id: str, checkpoint_ns: str, version: str, blob: bytes) -> None:
        """Keep a snapshot of ``version`` (dropped at once when larger than the byte budget)."""
        if not self.enabled or len(blob) > self._max_bytes:
            return
        with self._lock:
            spaces = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            self._replace(spaces, checkpoint_ns, _Entry(version, blob))
            self._evict()

    def drop_thread(self, thread_id: str) -> None:
        """Forget every namespace of a thread."""
        with self._lock:
            for entry in self._threads.pop(thread_id, {}).values():
                self._bytes -= len(entry.blob or b"")

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._threads.clear()
            self._bytes = 0

    def _replace(self, spaces: dict[str, _Entry], checkpoint_ns: str, entry: _Entry) -> None:
        old = spaces.get(checkpoint_ns)
        if old is not None:
            self._bytes -= len(old.blob or b"")
        spaces[checkpoint_ns] = entry
        self._bytes += len(entry.blob or b"")

    def _evict(self) -> None:
        while self._threads and (
            len(self._threads) > self._max_entries or self._bytes > self._max_bytes
        ):
            _, spaces = self._threads.popitem(last=False)
            self._bytes -= sum(len(e.blob or b"") for e in spaces.values())
