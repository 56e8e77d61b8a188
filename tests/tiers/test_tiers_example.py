"""The tiered-memory example end to end (scripted model, lexical embedding), sync and async."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiered_memory.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiered_memory_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_example_remembers_across_sessions_and_keeps_users_apart(use_async, capsys):
    result = await load_example().run(use_async=use_async)
    dentist, cat = result["answers"]["ada"]
    assert "Dr Alvarez" in dentist
    assert "Rua Augusta" in dentist
    assert "Pixel" in cat
    assert result["answers"]["bob"] == ["I don't remember anything about you yet."]
    assert any("Pixel" in text for text in result["long_term"])
    assert any(segment.promoted for segment in result["segments"])
    assert "ada's tiers:" in capsys.readouterr().out
