"""`layered_memory.testing.ScriptedChatModel`: what a script step may be, `default` included."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import ValidationError

from layered_memory.testing import ScriptedChatModel, tool_call


def test_a_callable_default_answers_every_extra_call_from_the_prompt() -> None:
    """Issue 26: `default=callable` failed with a pydantic error though script steps may be
    callables."""

    def answer(messages: list[BaseMessage]) -> str:
        return f"{len(messages)} messages, system: {messages[0].text}"

    model = ScriptedChatModel(script=["first"], default=answer)
    prompt = [SystemMessage("Be brief."), HumanMessage("hi")]
    assert model.invoke(prompt).content == "first"
    assert model.invoke(prompt).content == "2 messages, system: Be brief."
    assert model.invoke(prompt[:1]).content == "1 messages, system: Be brief."


def test_a_message_default_is_replayed_as_a_fresh_copy() -> None:
    step = tool_call("ls", path="/")
    model = ScriptedChatModel(script=[], default=step)
    first, second = model.invoke("a"), model.invoke("b")
    assert first.tool_calls == second.tool_calls == step.tool_calls
    assert first is not second


def test_a_callable_default_may_return_a_message() -> None:
    model = ScriptedChatModel(script=[], default=lambda messages: AIMessage("from a message"))
    assert model.invoke("q").content == "from a message"


@pytest.mark.parametrize("value", [3, ["done"], b"done"])
def test_a_default_that_is_no_step_is_refused_by_name(value: object) -> None:
    with pytest.raises(ValidationError, match=r"default must be a script step .* got"):
        ScriptedChatModel(script=[], default=value)


def test_without_default_an_extra_call_raises() -> None:
    model = ScriptedChatModel(script=["only"])
    model.invoke("q")
    with pytest.raises(RuntimeError, match="script exhausted after 1 steps"):
        model.invoke("q")
