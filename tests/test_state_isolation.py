"""A test run never records into the user's state folder (`~/.local/state/layered-memory`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from layered_memory.core.unrestored import STATE_DIR_ENV, ledger_path


@pytest.fixture(scope="module")
def seen_by_a_module_fixture() -> str | None:
    """Module-scoped fixtures (a child process started once per module) run before any
    function-scoped autouse fixture: they must see a private state folder already."""
    return os.environ.get(STATE_DIR_ENV)


def test_module_fixtures_see_a_private_state_folder(seen_by_a_module_fixture: str | None) -> None:
    assert seen_by_a_module_fixture is not None
    home_state = Path("~/.local/state").expanduser()
    assert not Path(seen_by_a_module_fixture).is_relative_to(home_state)


def test_tests_see_a_private_state_folder() -> None:
    home_state = Path("~/.local/state").expanduser()
    assert not Path(ledger_path()).is_relative_to(home_state)
