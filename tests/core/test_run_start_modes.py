"""The run-start snapshot's permission bits come from the load's own `lstat` of each file.

Issue 35 keeps the modes of read-only files and rule files at run start (a `chmod 000` is put
back); taking them with a second `lstat` per file cost a 200-rule conversation 1.05x -> 1.33x
deepagents' Python calls (`benchmarks/run.py --only end_to_end`). The read cache stats every
file of a load already: the snapshot reuses that stat, and still records the same modes.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from deepagents.backends.filesystem import FilesystemBackend

from layered_memory import Layer
from layered_memory.core.assembler import MemoryAssembler
from layered_memory.core.snapshot import disk_modes

RULES = "/.agents/rules"


def _project(root: Path, n_rules: int) -> MemoryAssembler:
    rules = root / ".agents" / "rules"
    rules.mkdir(parents=True)
    (root / "AGENTS.md").write_text("PROJECT: run make test.\n")
    for index in range(n_rules):
        (rules / f"rule{index}.md").write_text(
            f"---\nalwaysApply: true\n---\nRULE_{index}: keep it short.\n"
        )
    # A rule file of its own mode: the recorded bits are the file's, not a default.
    (rules / "rule0.md").chmod(0o600)
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    return MemoryAssembler(backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=[RULES])


def test_run_start_modes_match_the_disk_and_stat_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled_files: None
) -> None:
    assembler = _project(tmp_path, 20)
    assembler.load()  # a warm process: the read cache holds every (settled) file

    stats: Counter[str] = Counter()
    lstat = os.lstat

    def counting(path: str | os.PathLike[str], *args: object, **kwargs: object) -> os.stat_result:
        stats[os.path.normpath(os.fspath(path))] += 1
        return lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(os, "lstat", counting)
        snapshot = assembler.load()
        data = assembler.run_start(snapshot)

    backend = assembler.backend
    assert len(snapshot.rule_files) == 20
    expected_rules = disk_modes(backend, list(snapshot.rule_files), [RULES])
    expected_layers = disk_modes(backend, list(snapshot.files), [])
    assert data["rule_modes"] == expected_rules
    assert data["modes"] == expected_layers
    rule0 = os.path.normpath(tmp_path / ".agents" / "rules" / "rule0.md")
    assert data["rule_modes"][rule0] == 0o600
    for path in (tmp_path / ".agents" / "rules").iterdir():
        assert stats[os.path.normpath(path)] == 1, path
