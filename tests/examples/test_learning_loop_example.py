"""The learning-loop example end to end: write-back at PIPELINE_END, read back on the next run."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "learning_loop.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learning_loop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def insight_lines(text: str) -> list[str]:
    return re.findall(r"^- \d{4}-\d{2}-\d{2}: (\[[^\]]+\] .*)$", text, re.MULTILINE)


@pytest.mark.parametrize("use_async", [False, True])
def test_learning_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str], use_async: bool) -> None:
    example = load_example()
    outcome = example.main(["--async"] if use_async else [], root=tmp_path)

    after = outcome["memory_after_run"]
    acme = f"[acme_corp] {example.ACME_INSIGHT}"
    globex = f"[globex] {example.GLOBEX_INSIGHT}"
    assert insight_lines(after[0]) == [acme]  # via the record_insight tool
    assert insight_lines(after[1]) == [globex, acme]  # via the INSIGHT: line, newest first
    assert insight_lines(after[2]) == [globex, acme]  # run 3 stated no insight
    assert outcome["third_prompt_has_first_two"] is True
    assert outcome["dry_run_wrote_nothing"] is True
    assert after[3] == after[2]
    assert example.UMBRELLA_INSIGHT not in (tmp_path / "MEMORY.md").read_text()
    assert all(text.startswith(example.MEMORY_MD) for text in after)  # the rest kept as is
    assert [event["entity"] for event in outcome["written"]] == ["acme_corp", "globex"]
    assert outcome["written"][0]["thread_id"] == "entity:acme_corp:report"
    assert outcome["archive_exists"] is False

    printed = capsys.readouterr().out
    assert printed.count("--- MEMORY.md after run") == 4
    assert "third run's system prompt holds the first two insights: yes" in printed
    assert "dry run left MEMORY.md unchanged: yes" in printed
