"""Output on a stdout that is not UTF-8 (a Windows console, `PYTHONIOENCODING=ascii`, a `C`
locale): --json stays valid JSON decoding to the exact text, text output shows what the
encoding cannot hold as escapes, and nothing ends in a UnicodeEncodeError."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from cli_config_helpers import write

from layered_memory.cli import main

TITLE = "# 项目 🚀 café"  # CJK, an astral character (a surrogate pair in JSON), Latin-1
ENCODINGS = ["cp1252", "ascii"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, {"AGENTS.md": f"{TITLE}\n- Run `make test`.\n"})
    return tmp_path


def cli(folder: Path, encoding: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The CLI in a child process whose stdout and stderr use `encoding`, output as bytes."""
    environment = {**os.environ, "PYTHONIOENCODING": encoding, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "layered_memory.cli", *args],
        cwd=folder,
        env=environment,
        capture_output=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_is_valid_on_any_stdout_encoding(project: Path, encoding: str) -> None:
    result = cli(project, encoding, "inspect", "--root", ".", "--json")
    assert result.returncode == 0, result.stderr.decode(encoding, "replace")
    data = json.loads(result.stdout.decode(encoding))
    assert TITLE in data["block"]
    assert f"{TITLE}\n" in data["block"]  # the exact text, not an escaped copy of it


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_lint_json_names_a_non_ascii_file_exactly(project: Path, encoding: str) -> None:
    write(project, {"项目/AGENTS.md": "x" * 60_000})
    result = cli(project, encoding, "lint", "项目/AGENTS.md", "--json")
    assert result.returncode == 1, result.stderr.decode(encoding, "replace")
    data = json.loads(result.stdout.decode(encoding))
    assert [Path(problem["path"]).parent.name for problem in data["problems"]] == ["项目"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_text_output_shows_escapes_instead_of_failing(project: Path, encoding: str) -> None:
    result = cli(project, encoding, "inspect", "--root", ".")
    assert result.returncode == 0, result.stderr.decode(encoding, "replace")
    out = result.stdout.decode(encoding)
    assert "# \\u9879\\u76ee \\U0001f680" in out
    # What the encoding holds is written as it is.
    assert ("café" if encoding == "cp1252" else "caf\\xe9") in out


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_errors_on_a_strict_stderr_show_escapes_instead_of_failing(
    project: Path, encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python's own stderr escapes by default, but a host embedding the CLI may hand it a
    # strict one; the CLI leaves the stream as it found it.
    monkeypatch.chdir(project)
    streams = {
        name: io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="strict")
        for name in ("stdout", "stderr")
    }
    for name, stream in streams.items():
        monkeypatch.setattr(sys, name, stream)
    assert main(["lint", "项目🚀.md"]) == 2
    for stream in streams.values():
        stream.flush()
        assert stream.errors == "strict"
    written = cast("io.BytesIO", streams["stderr"].buffer).getvalue()
    for stream in streams.values():
        stream.close()
    assert written.decode(encoding) == (
        "\\u9879\\u76ee\\U0001f680.md: error: no such file or directory\n"
    )
