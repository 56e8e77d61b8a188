"""The README's first command runs examples/quickstart.py: it must keep showing what it claims."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_quickstart_shows_every_promised_behaviour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = load_example("quickstart").main([], root=tmp_path)
    printed = capsys.readouterr().out
    assert [call["name"] for call in outcome["edit_calls"]] == ["edit_file"]
    assert outcome["edit_calls"][0]["args"]["file_path"] == "/MEMORY.md"
    assert outcome["edit_seen_per_call"] == [False, True]  # seen on the very next model call
    assert "make test" in outcome["first_answer"]
    assert outcome["second_prompt_has_new_agents_md"] is True
    assert "make check" in outcome["second_answer"]
    assert "The user prefers short answers." in outcome["memory_md"]
    assert "model call 2: MEMORY.md edit in its system prompt: yes" in printed
    assert "model's system prompt has the new AGENTS.md: yes" in printed
    assert 0 < outcome["block_chars"] <= 48_000
