"""The middleware's hooks called directly with hand-built state and requests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import SystemMessage, ToolMessage
from langgraph.types import Command

from layered_memory import InMemorySessionStore, Layer, MemoryMiddleware, MemoryOptions
from layered_memory.core.render import SessionEntry
from layered_memory.testing import ScriptedChatModel

RUNTIME = SimpleNamespace(context={"entity_name": "acme_corp", "tags": ["billing", 3]})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("project")
    (tmp_path / "MEMORY.md").write_text("notes")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "r.md").write_text("rule")
    return tmp_path


def middleware(root: Path, **kwargs: Any) -> MemoryMiddleware:
    return MemoryMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/rules"],
        **kwargs,
    )


def tool_request(name: str, **args: Any) -> Any:
    return SimpleNamespace(
        tool_call={"name": name, "args": args, "id": "call-1", "type": "tool_call"},
        runtime=SimpleNamespace(config={"configurable": {"thread_id": "t1"}}),
        state={},
    )


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("edit_file", {"file_path": "/AGENTS.md", "old_string": "p", "new_string": "q"}),
        ("write_file", {"file_path": "/AGENTS.md", "content": "q"}),
        ("delete", {"file_path": "/AGENTS.md"}),
        ("write_file", {"file_path": "/./x/../AGENTS.md", "content": "q"}),
        ("write_file", {"file_path": "/rules/r.md", "content": "q"}),
        ("write_file", {"file_path": "/rules/new.md", "content": "q"}),
    ],
)
def test_mutations_of_read_only_memory_are_refused(
    root: Path, name: str, args: dict[str, Any]
) -> None:
    calls: list[Any] = []
    result = middleware(root).wrap_tool_call(tool_request(name, **args), calls.append)
    assert calls == []  # the tool never ran
    assert isinstance(result, ToolMessage)
    assert result.status == "error"
    assert result.tool_call_id == "call-1"
    assert "cannot be changed by the agent" in result.text
    assert (root / "AGENTS.md").read_text() == "project"


def test_tool_notes_ride_on_the_tool_result_as_a_state_update(root: Path) -> None:
    mw = middleware(root)
    ok = ToolMessage("ok", tool_call_id="call-1")
    read = mw.wrap_tool_call(tool_request("read_file", file_path="/AGENTS.md"), lambda r: ok)
    assert isinstance(read, Command)
    assert read.update == {"messages": [ok], "memory_touched_paths": ["/AGENTS.md"]}
    edit = mw.wrap_tool_call(tool_request("edit_file", file_path="/MEMORY.md"), lambda r: ok)
    assert isinstance(edit, Command)
    assert edit.update == {
        "messages": [ok],
        "memory_touched_paths": ["/MEMORY.md"],
        "memory_edits": 1,
    }
    # A path the thread already touched adds nothing: the tool's own message comes back.
    request = tool_request("ls", path="/AGENTS.md")
    request.state = {"memory_touched_paths": ["/AGENTS.md"]}
    assert mw.wrap_tool_call(request, lambda r: ok) is ok


def test_a_tools_own_command_keeps_its_update(root: Path) -> None:
    mw = middleware(root)
    ok = ToolMessage("ok", tool_call_id="call-1")
    own = Command(update={"messages": [ok], "files": {"/MEMORY.md": {"content": "x"}}})
    result = mw.wrap_tool_call(tool_request("write_file", file_path="/MEMORY.md"), lambda r: own)
    assert isinstance(result, Command)
    assert result.update == {
        "messages": [ok],
        "files": {"/MEMORY.md": {"content": "x"}},
        "memory_touched_paths": ["/MEMORY.md"],
        "memory_edits": 1,
    }


def test_rules_writable_allows_rule_edits(root: Path) -> None:
    ok = ToolMessage("ok", tool_call_id="call-1")
    mw = middleware(root, options=MemoryOptions(rules_writable=True))
    result = mw.wrap_tool_call(tool_request("write_file", file_path="/rules/r.md"), lambda r: ok)
    assert isinstance(result, Command)
    assert result.update["messages"] == [ok]  # the tool ran
    assert result.update["memory_edits"] == 1  # and the rules reload before the next call


def test_context_keys_come_from_runtime_state_config_and_callables(root: Path) -> None:
    mw = middleware(
        root,
        match_keys=("entity_name", "tags", "phase", lambda state, runtime: ["from-callable"]),
    )
    update = mw.before_agent({"messages": [], "phase": "evaluation"}, RUNTIME)  # type: ignore[arg-type]
    assert update is not None
    assert update["memory_loaded"]["match_context"] == [
        "acme_corp",
        "billing",
        "evaluation",
        "from-callable",
    ]


def test_unchanged_memory_writes_no_state_and_renders_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import layered_memory.core.assembler as assembler_module

    renders: list[int] = []
    real_render = assembler_module.render_memory_report

    def counting_render(*args: Any, **kwargs: Any) -> str:
        renders.append(1)
        return real_render(*args, **kwargs)

    monkeypatch.setattr(assembler_module, "render_memory_report", counting_render)
    mw = middleware(root)
    state: dict[str, Any] = {"messages": []}
    state.update(mw.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    assert mw.before_agent(state, RUNTIME) is None  # type: ignore[arg-type]
    request = ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[],
        system_message=SystemMessage("base"),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )
    first = mw.modify_request(request).system_message
    second = mw.modify_request(request).system_message
    assert first is not None
    assert second is not None
    assert first.content_blocks == second.content_blocks
    assert len(renders) == 1


def test_the_last_block_is_reused_only_while_digest_and_match_keys_are_unchanged(
    root: Path,
) -> None:
    (root / "rules" / "py.md").write_text('---\npaths: ["**/*.py"]\n---\nPY_RULE')
    mw = middleware(root)
    state: dict[str, Any] = {"messages": []}
    state.update(mw.before_agent(state, RUNTIME, {}) or {})  # type: ignore[arg-type]
    state["memory_touched_paths"] = ["/README.md"]
    first = mw._memory_block(state)
    assert mw._memory_block(dict(state)) is first
    assert "PY_RULE" not in first
    state["memory_touched_paths"].append("/src/b.py")  # changed in place: seen all the same
    assert "PY_RULE" in mw._memory_block(state)
    state["memory_touched_paths"] = ["/README.md"]
    assert mw._memory_block(state) == first
    (root / "MEMORY.md").write_text("notes, edited")
    state.update(mw.before_agent(state, RUNTIME, {}) or {})  # type: ignore[arg-type]
    assert "notes, edited" in mw._memory_block(state)


def test_model_call_reloads_after_a_memory_edit_and_returns_the_state_update(
    root: Path,
) -> None:
    from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
    from langchain_core.messages import AIMessage

    (root / "rules" / "py.md").write_text('---\npaths: ["**/*.py"]\n---\nPY_RULE')
    mw = middleware(root)
    state: dict[str, Any] = {"messages": []}
    state.update(mw.before_agent(state, RUNTIME, {}) or {})  # type: ignore[arg-type]
    # What LangGraph applies from the tool calls' commands (reducers: union, sum).
    state["memory_touched_paths"] = ["/MEMORY.md", "/src/b.py"]
    state["memory_edits"] = 1
    (root / "MEMORY.md").write_text("notes\n- EDITED")
    seen: list[str] = []

    def handler(request: Any) -> ModelResponse[Any]:
        seen.append(request.system_message.text)
        return ModelResponse(result=[AIMessage("hi")])

    request = ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[],
        system_message=SystemMessage("base"),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )
    result = mw.wrap_model_call(request, handler)
    assert isinstance(result, ExtendedModelResponse)
    assert result.command is not None
    assert result.command.update["memory_edits"] == -1  # the reload caught up
    assert "EDITED" in result.command.update["memory_contents"]["/MEMORY.md"]
    assert "PY_RULE" in seen[0]  # this very call has the rule and the edit
    assert "EDITED" in seen[0]
    state.update(result.command.update)
    # Nothing new since: a plain response, no state update.
    assert isinstance(mw.wrap_model_call(request.override(state=state), handler), ModelResponse)


def test_the_class_is_what_the_user_asked_for(root: Path) -> None:
    from layered_memory import HookRegistry

    class Custom(MemoryMiddleware):  # type: ignore[type-arg]
        pass

    assert type(middleware(root)) is MemoryMiddleware
    hooked = middleware(root, hooks=HookRegistry())
    assert isinstance(hooked, MemoryMiddleware)
    assert (type(hooked) is hooked.__class__, hooked.name) == (True, "MemoryMiddleware")
    custom = Custom(backend=FilesystemBackend(root_dir=root), sources=["/AGENTS.md"])
    assert type(custom) is Custom
    assert custom.name == "Custom"


def test_session_store_entry_is_the_top_layer(root: Path) -> None:
    store = InMemorySessionStore()
    store.set("entity:acme:eval", {"stage": "draft"})
    mw = middleware(root, session_store=store)
    snapshot = mw.assembler.load(session_key="entity:acme:eval")
    assert snapshot.session == SessionEntry("entity:acme:eval", {"stage": "draft"})
    block = mw.assembler.render(snapshot)
    assert block.index('<layer name="notes"') < block.index('<layer name="session"')
    assert '"stage": "draft"' in block
    assert mw.assembler.load(session_key="entity:other:eval").session is None


def test_failing_session_store_is_logged_and_skipped(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class DownStore:
        def get(self, key: str) -> Any:
            msg = "redis://127.0.0.1:1 refused"
            raise ConnectionError(msg)

    mw = middleware(root, session_store=DownStore())  # type: ignore[arg-type]
    snapshot = mw.assembler.load(session_key="k1")
    assert snapshot.session is None
    assert "project" in snapshot.files["/AGENTS.md"]
    assert any("k1" in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)


def test_budget_too_small_for_the_template_is_rejected(root: Path) -> None:
    with pytest.raises(ValueError, match="max_chars=100 is too small"):
        middleware(root, max_chars=100)


def test_huge_memory_file_stays_inside_the_budget(root: Path) -> None:
    (root / "AGENTS.md").write_text("\n".join(f"fact {i}: " + "x" * 60 for i in range(5_000)))
    mw = middleware(root, max_chars=6_000)
    state: dict[str, Any] = {"messages": []}
    state.update(mw.before_agent(state, RUNTIME) or {})  # type: ignore[arg-type]
    block = mw._memory_block(state)
    assert len(block) <= 6_000
    assert block.count("fact 0: ") == 1
    assert "of /AGENTS.md not shown; read_file /AGENTS.md for the rest]" in block
    assert '<layer name="notes" path="/MEMORY.md" access="writable">\nnotes' in block


def test_every_alias_of_a_read_only_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("project")
    (tmp_path / "alias.md").symlink_to(tmp_path / "AGENTS.md")
    real_path = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=False),
        layers=[Layer("project", "AGENTS.md")],
    )
    virtual = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md")],
    )
    attempts = [
        (real_path, str(tmp_path / "AGENTS.md")),
        (real_path, "./AGENTS.md"),
        (real_path, str(tmp_path / "alias.md")),
        (virtual, "/alias.md"),
    ]
    for mw, path in attempts:
        result = mw.wrap_tool_call(tool_request("write_file", file_path=path), lambda r: None)
        assert isinstance(result, ToolMessage), path
        assert result.status == "error", path
    assert (tmp_path / "AGENTS.md").read_text() == "project"
