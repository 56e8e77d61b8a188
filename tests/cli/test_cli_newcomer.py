"""The command line a newcomer meets (issue 36): an unknown flag is named, `--help` says what
`--version` does and that `--config` imports (runs) the module it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from layered_memory.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "--bogus"],
        ["doctor", "--bogus", "--root", "."],
        ["lint", "--bogus=1"],
    ],
)
def test_an_unknown_flag_is_named(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "unrecognized arguments: --bogus" in error
    assert "is required" not in error


def test_a_prefix_of_a_known_flag_and_a_negative_number_still_parse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["inspect", "--roo", str(tmp_path), "--json"]) == 0
    assert main(["inspect", "--root", str(tmp_path), "--max-chars", "-5"]) == 2
    assert "unrecognized" not in capsys.readouterr().err


def test_help_says_what_version_does_and_that_config_imports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    assert "--version   print the version and exit" in capsys.readouterr().out
    assert main(["inspect", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "The module is imported, which runs its top-level code" in text
    assert "Nothing is run" not in text
