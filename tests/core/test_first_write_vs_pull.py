"""`sync pull` and the first write-back of a fresh checkout take the same lock (issue 33,
section 3): with no lock file beside MEMORY.md yet, a write-back that lands during a pull's
compare-and-replace is never lost. Real processes, started together at a barrier."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import MemoryWriter
from layered_memory.core.files import replace_unless_changed

ROUNDS = 150
CHECKOUT = b"# Memory\n\nChecked out.\n"
PULLED = b"# Memory\n\nFrom the store.\n"


def write_back(root: Path, barrier: Any, note: str) -> None:
    writer = MemoryWriter(FilesystemBackend(root_dir=root, virtual_mode=True), path="/MEMORY.md")
    barrier.wait()
    assert writer.add_insight(note)


def pull(root: Path, barrier: Any, answer: Any) -> None:
    target = root / "MEMORY.md"
    barrier.wait()
    answer.value = replace_unless_changed("/MEMORY.md", target, CHECKOUT, PULLED)


@pytest.mark.slow
def test_a_first_write_back_during_a_pull_is_never_lost(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    lost = []
    for round_ in range(ROUNDS):
        root = tmp_path / f"r{round_}"
        root.mkdir()
        (root / "MEMORY.md").write_bytes(CHECKOUT)  # a fresh checkout: no lock file yet
        barrier = context.Barrier(2)
        replaced = context.Value("b", -1)
        note = f"insight number {round_} was acknowledged"
        writer = context.Process(target=write_back, args=(root, barrier, note))
        puller = context.Process(target=pull, args=(root, barrier, replaced))
        writer.start()
        puller.start()
        writer.join(timeout=60)
        puller.join(timeout=60)
        assert (writer.exitcode, puller.exitcode) == (0, 0)
        if note not in (root / "MEMORY.md").read_text():
            lost.append(round_)
    assert lost == [], f"write-backs lost in {len(lost)} of {ROUNDS} rounds"
