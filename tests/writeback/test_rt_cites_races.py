"""Expiry, `review drop` and `review refresh` race write-back on one memory file (red team of
issue 38 part 1): three real processes, no acknowledged write lost; and a reviewing process
killed with SIGKILL at random points of its writes leaves the file whole.

A consolidator with `expire_after_days` moves the old learned entries to the archive while
adding lessons; a reviewer drops half the stale insights and refreshes the other half, one id
at a time; a writer adds insights. Afterwards every acknowledged lesson and insight is in the
memory file, each expired entry is in the archive (and only there), each dropped entry is
gone and each refreshed one is fresh.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import multiprocessing
import os
import random
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import MemoryConsolidator, MemoryWriter
from layered_memory.testing import ScriptedChatModel, tool_call
from layered_memory.writeback.cites import decide_stale, stale_lessons
from process_signals import die_at_file_call
from worker_processes import HANG_GUARD_SECONDS, forkserver, run_processes

pytestmark = pytest.mark.slow  # real processes

DAY = dt.date(2026, 12, 7)
OLD = 12
STALE = 12
ROUNDS = 8
INSIGHTS = 30


def _today() -> dt.date:
    return DAY


def _backend(root: str) -> FilesystemBackend:
    return FilesystemBackend(root_dir=root, virtual_mode=True)


def _consolidator(root: str, acks: str, barrier: Any) -> None:
    done = []
    barrier.wait()
    for n in range(ROUNDS):
        text = f"consolidated lesson number {n}"
        model = ScriptedChatModel(
            script=[tool_call("update_memory", operations=[{"op": "add", "text": text}])]
        )
        consolidator = MemoryConsolidator(
            model,
            backend=_backend(root),
            path="/MEMORY.md",
            max_entries=500,
            clock=_today,
            expire_after_days=30,
        )
        result = consolidator.consolidate([{"role": "user", "content": f"remember: {text}"}])
        done += [change.text for change in result.applied]
    Path(acks, "consolidator.json").write_text(json.dumps(done))


def _reviewer(root: str, acks: str, barrier: Any) -> None:
    backend = _backend(root)
    text = Path(root, "MEMORY.md").read_text()
    lessons = stale_lessons(backend, {"/MEMORY.md": text})
    done: dict[str, str] = {}
    barrier.wait()
    for n, lesson in enumerate(lessons):
        action = "drop" if n % 2 else "refresh"
        [decision] = decide_stale(
            backend, "/MEMORY.md", [lesson.id], action=action, today="2026-12-07"
        )
        done[lesson.entry] = decision.outcome
    Path(acks, "reviewer.json").write_text(json.dumps(done))


def _writer(root: str, acks: str, barrier: Any) -> None:
    writer = MemoryWriter(_backend(root), "/MEMORY.md", clock=_today, max_insights=500)
    done = []
    barrier.wait()
    for n in range(INSIGHTS):
        if writer.add_insight(f"written insight number {n}"):
            done.append(f"written insight number {n}")
    Path(acks, "writer.json").write_text(json.dumps(done))


def test_expiry_drop_and_refresh_lose_no_write(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("now\n")
    old_digest = hashlib.sha256(b"then\n").hexdigest()[:12]
    learned = [
        f"- old lesson number {n} <!-- learned id=o{n:03d} date=2026-01-01 model=m -->"
        for n in range(OLD)
    ]
    stale = [
        f"- 2026-11-01: stale insight number {n} <!-- cites=/src/app.py@{old_digest} "
        "date=2026-11-01 -->"
        for n in range(STALE)
    ]
    memory = "\n".join(
        ["# Memory", "", "## Learned", "", *learned, "", "## Recent Insights", "", *stale, ""]
    )
    (root / "MEMORY.md").write_text(memory)
    acks = tmp_path / "acks"
    acks.mkdir()
    context = forkserver("layered_memory", "deepagents")
    barrier = context.Barrier(3)
    jobs = [
        (target, (str(root), str(acks), barrier)) for target in (_consolidator, _reviewer, _writer)
    ]
    assert run_processes(context, jobs) == [0, 0, 0]

    memory = (root / "MEMORY.md").read_text()
    archive = (root / "MEMORY.archive.md").read_text()
    consolidated = json.loads((acks / "consolidator.json").read_text())
    reviewed = json.loads((acks / "reviewer.json").read_text())
    written = json.loads((acks / "writer.json").read_text())
    assert len(consolidated) == ROUNDS
    assert len(written) == INSIGHTS
    assert len(reviewed) == STALE
    for text in consolidated:
        assert memory.count(f"- {text} <!--") == 1, text
    for text in written:
        assert memory.count(f": {text}\n") == 1, text
    for n in range(OLD):
        assert f"old lesson number {n} " not in memory
        assert archive.count(f"old lesson number {n} ") == 1
    for entry, outcome in reviewed.items():
        dropped = outcome == "dropped"
        assert outcome == ("dropped" if dropped else "refreshed"), (entry, outcome)
        assert (f"{entry} <!--" in memory) != dropped, entry
    assert stale_lessons(_backend(str(root)), {"/MEMORY.md": memory}) == []


def _review_until_killed(root: Path, kill_at: int) -> None:
    """Drop or refresh the stale entries one at a time, killed at file system call `kill_at`."""
    calls = die_at_file_call(kill_at)
    backend = _backend(str(root))
    while True:
        lessons = stale_lessons(backend, {"/MEMORY.md": (root / "MEMORY.md").read_text()})
        for n, lesson in enumerate(lessons):
            action = "drop" if n % 2 else "refresh"
            decide_stale(backend, "/MEMORY.md", [lesson.id], action=action, today="2026-12-07")
        (root / "src/app.py").write_text(f"changed {os.getpid()} {calls[0]}\n")  # stale again


KILLS = 30


def test_kill_9_during_drop_and_refresh_leaves_a_whole_file(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("now\n")
    hand = [f"- a line the user wrote, number {n}" for n in range(5)]
    stale = [
        f"- 2026-11-01: stale insight number {n} <!-- cites=/src/app.py@000000000000 "
        "date=2026-11-01 -->"
        for n in range(40)
    ]
    (root / "MEMORY.md").write_text("\n".join(["# Memory", "", *hand, "", *stale, ""]))
    context = multiprocessing.get_context("fork")
    chooser = random.Random(38)
    seen: set[int] = set(range(40))
    for _ in range(KILLS):
        process = context.Process(target=_review_until_killed, args=(root, chooser.randint(1, 40)))
        process.start()
        process.join(timeout=HANG_GUARD_SECONDS)
        assert process.exitcode == -signal.SIGKILL, process.exitcode
        memory = (root / "MEMORY.md").read_text()
        assert memory.startswith("# Memory\n")
        assert memory.endswith("\n")
        for line in hand:
            assert memory.count(line + "\n") == 1, line
        left = {
            int(found.group(1)) for found in re.finditer(r"stale insight number (\d+) <!--", memory)
        }
        assert left <= seen  # a dropped entry never comes back
        assert len(re.findall(r"stale insight number", memory)) == len(left)  # no duplicate
        seen = left
    assert len(seen) < 40  # the kills landed after real work
