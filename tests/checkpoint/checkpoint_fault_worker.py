"""Scenarios run in a separate process by `test_checkpoint_faults.py` (prints one JSON line).

``frozen URL``: workers on one InMemorySaver keep a thread hot, Redis is frozen (SIGSTOP, by
the PID given), one worker writes, Redis is thawed; every answer must be the wrapped saver's.
``serve CONNINFO REDIS_URL PREFIX THREAD``: another worker process; each line N on stdin makes
it write a checkpoint of N messages (0: a pending write, -1: delete the thread) through the
cache and answer one JSON line.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

# This folder (the harness) and the tests folder (`process_signals`), as pytest sets them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoint_harness import conversation, latest, put_messages
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory.checkpoint import CachedCheckpointSaver
from process_signals import wait_until_stopped


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def frozen(url: str, pid: int) -> dict[str, Any]:
    warnings = _Count()
    logging.getLogger("layered_memory.checkpoint").addHandler(warnings)
    inner = InMemorySaver()
    options: dict[str, Any] = {
        "redis_url": url,
        "prefix": "frozen:",
        "timeout": 0.2,
        "retry_after": 0,
    }
    writer, reader, idle = (CachedCheckpointSaver(inner, **options) for _ in range(3))
    put_messages(inner, "t", conversation(6))
    for saver in (writer, reader, idle):
        for _ in range(3):
            saver.get_tuple(latest("t"))  # hot everywhere
    put_messages(inner, "u", conversation(2))
    for _ in range(3):
        idle.get_tuple(latest("u"))

    os.kill(pid, signal.SIGSTOP)
    wait_until_stopped(pid)
    try:
        new = put_messages(writer, "t", conversation(8, tag="during"))
        put_messages(writer, "u", conversation(3, tag="during"))  # breaker already open
        during = {
            "writer": writer.get_tuple(latest("t")) == inner.get_tuple(latest("t")),
            "reader": reader.get_tuple(latest("t")) == inner.get_tuple(latest("t")),
        }
    finally:
        os.kill(pid, signal.SIGCONT)
    after = {
        # The idle worker saw no failure and reads first: the mark the writer sent before its
        # write was queued in the frozen server and ran when it woke up.
        "idle": idle.get_tuple(latest("t")) == inner.get_tuple(latest("t")),
        "reader": reader.get_tuple(latest("t")) == inner.get_tuple(latest("t")),
        "writer": writer.get_tuple(latest("t")) == inner.get_tuple(latest("t")),
        # Thread u was written while the writer's breaker was open; the writer's repair (its
        # next call, above) bumped the epoch before the idle worker reads it.
        "idle_u": idle.get_tuple(latest("u")) == inner.get_tuple(latest("u")),
    }
    hot = [writer.get_tuple(latest("t")) for _ in range(3)]
    result = {
        "new_id": new["configurable"]["checkpoint_id"],
        "during": during,
        "after": after,
        "hot_after": all(h == inner.get_tuple(latest("t")) for h in hot),
        "warnings": len(warnings.records),
        "open": [s._redis_side.breaker.is_open for s in (writer, reader, idle)],
    }
    for saver in (writer, reader, idle):
        saver.close()
    return result


def serve(conninfo: str, redis_url: str, prefix: str, thread: str) -> None:
    """Another worker: for each line N on stdin, write through the cache and answer one line."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with (
        PostgresSaver.from_conn_string(conninfo) as inner,
        CachedCheckpointSaver(inner, redis_url=redis_url, prefix=prefix) as saver,
    ):
        for line in sys.stdin:
            print(json.dumps(write(saver, thread, int(line))), flush=True)


def write(saver: CachedCheckpointSaver, thread: str, n: int) -> dict[str, Any]:
    if n < 0:
        saver.delete_thread(thread)
        return {"deleted": thread}
    current = saver.get_tuple(latest(thread))
    if n == 0:
        assert current is not None
        saver.put_writes(current.config, [("messages", "from the other process")], "task")
        return {"pending_write": current.config["configurable"]["checkpoint_id"]}
    stored = put_messages(
        saver, thread, conversation(n, tag="proc"), parent=current.config if current else None
    )
    return {"checkpoint_id": stored["configurable"]["checkpoint_id"]}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "frozen":
        print(json.dumps(frozen(args[0], int(args[1]))))
    else:
        serve(args[0], args[1], args[2], args[3])
