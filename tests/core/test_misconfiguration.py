"""Configuration mistakes are reported once per middleware and path, never silently ignored."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory import Layer, MemoryMiddleware, MemorySourceError
from layered_memory.cli import main


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def run_three_times(memory: MemoryMiddleware) -> None:
    for _ in range(3):
        memory.before_agent({"messages": []}, None, {})


def test_missing_read_only_layer_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "MEMORY.md").write_text("notes")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("org", "/org/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
    )
    with caplog.at_level(logging.WARNING):
        run_three_times(memory)
    found = warnings_of(caplog)
    assert len(found) == 1
    assert "/org/AGENTS.md" in found[0]
    assert "read-only layer 'org' has no file" in found[0]
    assert "fix the path or remove the layer" in found[0]


def test_missing_writable_file_is_normal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "AGENTS.md").write_text("project")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
    )
    with caplog.at_level(logging.DEBUG):
        run_three_times(memory)
    assert warnings_of(caplog) == []


def test_empty_backend_root_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
    )
    with caplog.at_level(logging.WARNING):
        run_three_times(memory)
    found = warnings_of(caplog)
    assert len(found) == 2
    assert any(str(tmp_path) in line and "root_dir" in line for line in found)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_rules_folder_is_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    (tmp_path / "AGENTS.md").write_text("project")
    if kind == "file":
        (tmp_path / "rules").write_text("not a folder")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/rules"]
    )
    with caplog.at_level(logging.WARNING):
        run_three_times(memory)
    found = warnings_of(caplog)
    assert len(found) == 1
    assert "/rules" in found[0]
    expected = "rules folder not found" if kind == "missing" else "rules folder is a file"
    assert expected in found[0]


def test_empty_rules_folder_is_fine(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "AGENTS.md").write_text("project")
    (tmp_path / "rules").mkdir()
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/rules"]
    )
    with caplog.at_level(logging.WARNING):
        run_three_times(memory)
    assert warnings_of(caplog) == []


def test_strict_mode_raises_for_a_missing_read_only_layer(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[Layer("org", "/AGENTS.md")], strict=True)
    with pytest.raises(MemorySourceError) as raised:
        memory.before_agent({"messages": []}, None, {})
    assert raised.value.path == "/AGENTS.md"


def test_sources_mode_skips_missing_files_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    with caplog.at_level(logging.DEBUG, logger="layered_memory"):
        memory.before_agent({"messages": []}, None, {})
        memory.before_agent({"messages": []}, None, {})
    records = [r for r in caplog.records if "/AGENTS.md" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.INFO]


def test_inspect_lists_the_misconfiguration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "MEMORY.md").write_text("notes")
    code = main(
        [
            "inspect",
            "--root",
            str(tmp_path),
            "--layer",
            "org=/org/AGENTS.md",
            "--layer",
            "notes=/MEMORY.md:rw",
            "--rules",
            "/rules",
            "--json",
        ]
    )
    assert code == 0
    problems = json.loads(capsys.readouterr().out)["problems"]
    reasons = {problem["path"]: problem["reason"] for problem in problems}
    assert "read-only layer 'org' has no file" in reasons["/org/AGENTS.md"]
    assert "rules folder not found" in reasons["/rules"]
