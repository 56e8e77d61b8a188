"""The debate example end to end: FOCUSED debaters, a FULL judge, one shared conversation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from views_helpers import assert_provider_valid

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "debate.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("debate_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def conversation(prompt: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in prompt if not isinstance(m, SystemMessage)]


@pytest.mark.parametrize("use_async", [False, True])
def test_debate(use_async: bool) -> None:
    example = load_example()
    models = example.scripted_models(12)

    state = example.run(models, rounds=12, use_async=use_async)

    messages = state["messages"]
    assert len(messages) == 1 + 24 + 1  # topic, 12 exchanges, verdict: nothing removed
    assert [m.name for m in messages[1:]] == ["optimist", "pessimist"] * 12 + ["judge"]
    for name in ("optimist", "pessimist"):
        prompts = models[name].prompts
        assert len(prompts) == 12
        sizes = [len(conversation(p)) for p in prompts]
        assert max(sizes) <= 20  # FOCUSED: the last 20, by whole pairs
        assert sizes[-1] == 19  # the request, then 9 (opponent -> me) pairs
        for prompt in prompts:
            assert_provider_valid(prompt, person=name)
            assert prompt[0].text == example.PROMPTS[name]
    judge_prompt = conversation(models["judge"].prompts[0])
    assert len(judge_prompt) == 25  # FULL: every argument
    assert all(isinstance(m, HumanMessage) for m in judge_prompt)
    assert sum(m.text.startswith("[optimist]: ") for m in judge_prompt) == 12
    assert sum(m.text.startswith("[pessimist]: ") for m in judge_prompt) == 12
    assert messages[-1].text.startswith("I see 25 messages: 12 arguments for, 12 against")
    assert isinstance(messages[-1], AIMessage)


def test_debate_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()

    state = example.main(["--rounds", "2"])

    out = capsys.readouterr().out
    assert "judge: I see 5 messages: 2 arguments for, 2 against" in out
    assert "The shared conversation holds 6 messages; none was removed." in out
    assert len(state["messages"]) == 6
