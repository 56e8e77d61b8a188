"""Every file that reaches the prompt as writable memory is redacted when written, by the parent
or a subagent, and memory text is redacted again when rendered (issue 22, class 5a).

Before: the agent adds `See @notes/keys.md` to MEMORY.md, then writes a token into
notes/keys.md: stored in clear and shown in the next run's prompt; edits of `nested_writable`
files alike. A secret that reached a memory file another way (a shell command, the user, a
store written by other code) went into every prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from test_redaction_paths import RecordingStore

from layered_memory import Layer, MemoryMiddleware, MemoryOptions
from layered_memory.testing import ScriptedChatModel, tool_call

USE_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
# Assembled at run time so that secret scanners never flag this file.
GITHUB = "ghp_" + "k3Y5" * 9
STRIPE = "sk_" + "live_" + "51HxQz" * 4


async def _run(agent: Any, text: str, *, use_async: bool, thread: str = "t") -> dict[str, Any]:
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    config = {"configurable": {"thread_id": thread}}
    if use_async:
        return await agent.ainvoke(payload, config)  # type: ignore[no-any-return]
    return agent.invoke(payload, config)  # type: ignore[no-any-return]


def _memory(tmp_path: Path, **kwargs: Any) -> MemoryMiddleware:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    return MemoryMiddleware(
        backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)], **kwargs
    )


def _deep_agent(memory: MemoryMiddleware, script: list[Any], *, protected: bool = False) -> Any:
    model = ScriptedChatModel(script=script, default="done")
    backend = memory.protected_backend if protected else memory.assembler.backend
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    return agent, model


def _notes(result: dict[str, Any], name: str) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, ToolMessage) and m.name == name]


@USE_ASYNC
async def test_a_file_the_agent_imports_into_writable_memory_is_redacted(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n")
    memory = _memory(tmp_path)
    agent, model = _deep_agent(
        memory,
        [
            tool_call(
                "edit_file",
                file_path="/MEMORY.md",
                old_string="# Notes\n",
                new_string="# Notes\nSee @notes/keys.md\n",
            ),
            tool_call("write_file", file_path="/notes/keys.md", content=f"CI: {GITHUB}\n"),
        ],
    )
    result = await _run(agent, "keep the CI token", use_async=use_async)

    stored = (tmp_path / "notes" / "keys.md").read_text()
    assert GITHUB not in stored
    assert "[REDACTED:github_token]" in stored
    assert "1 secret was redacted before saving (github_token)" in _notes(result, "write_file")[0]
    await _run(agent, "what is the CI token?", use_async=use_async, thread="next")
    assert GITHUB not in model.system_prompts[-1]
    assert "[REDACTED:github_token]" in model.system_prompts[-1]


@USE_ASYNC
async def test_a_subagent_writing_the_import_on_the_protected_backend_is_redacted(
    tmp_path: Path, use_async: bool
) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\nSee @notes/keys.md\n")
    memory = _memory(tmp_path)
    agent, _model = _deep_agent(
        memory,
        [
            tool_call("task", description="save the key", subagent_type="general-purpose"),
            tool_call("write_file", file_path="/notes/keys.md", content=f"Billing: {STRIPE}\n"),
            "subagent finished",
        ],
        protected=True,
    )
    await _run(agent, "save the key", use_async=use_async)

    stored = (tmp_path / "notes" / "keys.md").read_text()
    assert STRIPE not in stored
    assert "[REDACTED:stripe_key]" in stored


@USE_ASYNC
@pytest.mark.parametrize("protected", [False, True], ids=["parent", "subagent-view"])
async def test_writable_nested_memory_is_redacted(
    tmp_path: Path, use_async: bool, protected: bool
) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n")
    (tmp_path / "svc").mkdir()
    memory = _memory(tmp_path, nested=["AGENTS.md"], options=MemoryOptions(nested_writable=True))
    write = tool_call("write_file", file_path="/svc/AGENTS.md", content=f"token {GITHUB}\n")
    script = (
        [tool_call("task", description="note it", subagent_type="general-purpose"), write, "ok"]
        if protected
        else [write]
    )
    agent, _model = _deep_agent(memory, script, protected=protected)
    await _run(agent, "note the token", use_async=use_async)

    stored = (tmp_path / "svc" / "AGENTS.md").read_text()
    assert GITHUB not in stored
    assert "[REDACTED:github_token]" in stored


def test_a_path_holding_a_secret_is_refused_for_an_imported_file_too(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(f"# Notes\nSee @notes/{GITHUB}.md\n")
    memory = _memory(tmp_path)
    agent, _model = _deep_agent(
        memory, [tool_call("write_file", file_path=f"/notes/{GITHUB}.md", content="x")]
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert "refused" in _notes(result, "write_file")[0]
    assert not (tmp_path / "notes").exists()


# -- defence in depth: what reached memory another way is redacted when rendered -------------


def test_a_secret_written_to_memory_outside_the_tools_never_reaches_the_prompt(
    tmp_path: Path,
) -> None:
    (tmp_path / "MEMORY.md").write_text(f"# Notes\nBilling key {STRIPE}\nSee @keys.md\n")
    (tmp_path / "keys.md").write_text(f"DB_PASSWORD=hunter2-{GITHUB[4:12]}\n")
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "AGENTS.md").write_text(f"deploy with {GITHUB}\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "ci.md").write_text(
        f"---\nalwaysApply: true\ndescription: uses {GITHUB}\n---\nCI token {GITHUB}\n"
    )
    store = RecordingStore()  # a store written by other code: it redacts nothing
    store.set("t", {"api_token": GITHUB, "note": f"key {STRIPE}"})
    memory = _memory(tmp_path, rules=["/rules"], nested=["AGENTS.md"], session_store=store)
    model = ScriptedChatModel(
        script=[tool_call("read_file", file_path="/svc/app.py")], default="done"
    )
    agent = create_deep_agent(
        model=model, backend=memory.assembler.backend, memory=[], middleware=[memory]
    )
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "t"}}
    )

    prompt = model.system_prompts[-1]
    assert "deploy with" in prompt  # the nested file was loaded
    for secret in (STRIPE, GITHUB, GITHUB[4:12]):
        assert secret not in prompt
    assert prompt.count("[REDACTED:") >= 6
    # The files are the user's: rendering never rewrites them.
    assert STRIPE in (tmp_path / "MEMORY.md").read_text()


def test_a_huge_memory_file_is_redacted_as_far_as_it_can_be_shown(tmp_path: Path) -> None:
    """Only the head that can be shown is redacted (and a margin), before it is cut: a secret
    straddling the budget's edge is recognized whole; the rest of a huge file costs nothing."""
    shown = []
    for offset in range(2_300, 2_700, 20):
        (tmp_path / "MEMORY.md").write_text("a" * offset + f" {STRIPE} " + "y " * 500_000)
        model = ScriptedChatModel(script=[], default="done")
        memory = _memory(tmp_path, max_chars=4_000)
        agent = create_agent(model, tools=[], middleware=[memory])
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
        prompt = model.system_prompts[0]
        assert "truncated" in prompt
        assert "sk_live" not in prompt, offset
        shown.append("[REDACTED:" in prompt)
    assert any(shown)
    assert not all(shown)  # the edge moved across the secret


def test_a_subagent_writing_a_writable_rule_folder_is_redacted(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n")
    (tmp_path / "rules").mkdir()
    memory = _memory(tmp_path, rules=["/rules"], options=MemoryOptions(rules_writable=True))
    agent, _model = _deep_agent(
        memory,
        [
            tool_call("task", description="add a rule", subagent_type="general-purpose"),
            tool_call("write_file", file_path="/rules/ci.md", content=f"Use {GITHUB} in CI.\n"),
            "subagent finished",
        ],
        protected=True,
    )
    agent.invoke({"messages": [{"role": "user", "content": "add a CI rule"}]})
    stored = (tmp_path / "rules" / "ci.md").read_text()
    assert GITHUB not in stored
    assert "[REDACTED:github_token]" in stored
