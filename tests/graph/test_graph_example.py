"""examples/knowledge_graph.py keeps showing what its docstring promises."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "knowledge_graph.py"


def test_knowledge_graph_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("example_knowledge_graph", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)

    outcome = module.main([], root=tmp_path)

    printed = capsys.readouterr().out
    assert outcome["in_focus"] == ["acme_corp", "Jane_Doe"]
    assert outcome["fact_seen_per_call"] == [False, True]
    assert "reach her by email" in outcome["answer"]
    assert "I noted the Friday request." in outcome["answer"]
    assert outcome["same_format"] is True
    jane = json.loads(outcome["file"].split("\n")[1])
    assert jane["observations"][-1] == module.NEW_FACT
    assert "still the server's format: True" in printed
    assert 0 < outcome["block_chars"] <= 6_000
