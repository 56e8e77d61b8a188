"""`layered-memory tiers` after an install without the `tiers` extra: one line naming it."""

from __future__ import annotations

import sys

import pytest

from layered_memory.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["tiers"],
        ["tiers", "--user", "u1", "--store", "postgresql://app:pw@db/x", "--json"],
        ["tiers", "--help"],
    ],
)
def test_without_the_tiers_extra_the_subcommand_names_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "layered_memory.cli.tiers", None)  # its import fails
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "layered-memory tiers needs the tiers extra: pip install 'layered-memory[tiers]'\n"
    )


def test_with_the_extra_the_real_subcommand_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tiers"]) == 2  # argparse: --user and --store are required
    assert "the following arguments are required: --user, --store" in capsys.readouterr().err
