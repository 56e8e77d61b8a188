"""Every public method of deepagents' `MemoryMiddleware`, called the way deepagents' own unit
tests call it, on deepagents' class and on ours side by side.

Each test runs once per class. Where the two are meant to differ (ours reloads memory that is
already in state, refuses a non-backend, skips an undecodable file), the difference is spelled
out in `INTENDED_DIFFERENCES` and asserted for each class, so a change in a future deepagents
release shows up here as a failing test instead of a silent drift.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.middleware.memory import MemoryMiddleware as DeepagentsMemoryMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest, ModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from layered_memory import MemoryMiddleware
from layered_memory.testing import ScriptedChatModel

CLASSES = {"deepagents": DeepagentsMemoryMiddleware, "layered_memory": MemoryMiddleware}

INTENDED_DIFFERENCES = {
    "reloads_memory_already_in_state": {"deepagents": False, "layered_memory": True},
    "accepts_backend_none": {"deepagents": True, "layered_memory": False},
    "undecodable_file_aborts_the_run": {"deepagents": True, "layered_memory": False},
    # A byte-order mark is an editor artefact, not memory; blank lines around a file's text
    # are trimmed; a source listed twice is shown once.
    "keeps_a_byte_order_mark": {"deepagents": True, "layered_memory": False},
    "keeps_leading_blank_lines": {"deepagents": True, "layered_memory": False},
    "shows_a_duplicated_source_twice": {"deepagents": True, "layered_memory": False},
}
"""What deepagents' class does (0.7.32) vs what ours does on purpose (docs/deepagents.md)."""


@pytest.fixture(params=list(CLASSES))
def which(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def cls(which: str) -> type[Any]:
    return CLASSES[which]


def agents_md(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n"


def write(backend: FilesystemBackend, path: str, text: str) -> None:
    responses = backend.upload_files([(path, text.encode("utf-8"))])
    assert responses[0].error is None


def request_for(state: dict[str, Any], system: str | None = "You are helpful.") -> ModelRequest:
    return ModelRequest(
        model=ScriptedChatModel(script=[]),
        messages=[HumanMessage("hi")],
        system_message=SystemMessage(system) if system is not None else None,
        state=state,  # type: ignore[arg-type]
        runtime=None,
    )


def memory_section(request: ModelRequest) -> str:
    """The `<agent_memory>` element of the request's system prompt (the guidelines differ)."""
    assert request.system_message is not None
    text = request.system_message.text
    return text[text.index("<agent_memory>") : text.index("</agent_memory>") + 15]


# -- construction ---------------------------------------------------------------------------


def test_constructor_keeps_sources_and_template(cls: type[Any], tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    middleware = cls(backend=backend, sources=["/a/AGENTS.md", "/b/AGENTS.md"])
    assert middleware.sources == ["/a/AGENTS.md", "/b/AGENTS.md"]
    assert "{agent_memory}" in middleware.system_prompt
    custom = cls(backend=backend, sources=[], system_prompt="Memory: {agent_memory}")
    assert custom.system_prompt == "Memory: {agent_memory}"
    assert cls(backend=backend, sources=[], system_prompt=None).system_prompt is None


def test_constructor_rejects_bad_templates(cls: type[Any], tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path)
    with pytest.raises(TypeError, match="system_prompt must be str or None"):
        cls(backend=backend, sources=[], system_prompt=42)
    with pytest.raises(ValueError, match=r"\{agent_memory\}"):
        cls(backend=backend, sources=[], system_prompt="no slot here")


def test_backend_none(cls: type[Any], which: str) -> None:
    accepts = INTENDED_DIFFERENCES["accepts_backend_none"][which]
    if accepts:
        cls(backend=None, sources=["/AGENTS.md"])
    else:
        with pytest.raises(TypeError, match="backend must be a deepagents backend"):
            cls(backend=None, sources=["/AGENTS.md"])


def test_state_schema_keeps_memory_contents_private(cls: type[Any]) -> None:
    hints = get_type_hints(cls.state_schema, include_extras=True)
    assert "memory_contents" in hints
    assert PrivateStateAttr in getattr(hints["memory_contents"].__args__[0], "__metadata__", ())


def test_name_is_the_class_name(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(backend=FilesystemBackend(root_dir=tmp_path), sources=[])
    assert middleware.name == "MemoryMiddleware"


# -- before_agent / abefore_agent: (state, runtime, config) ---------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_before_agent_loads_sources(cls: type[Any], tmp_path: Path, use_async: bool) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    user_path = str(tmp_path / "user" / "AGENTS.md")
    project_path = str(tmp_path / "project" / "AGENTS.md")
    write(backend, user_path, agents_md("User", "- Use Python 3.11+\n- Follow PEP 8"))
    write(backend, project_path, agents_md("Project", "## Architecture\nFastAPI."))
    middleware = cls(backend=backend, sources=[user_path, project_path])

    if use_async:
        result = asyncio.run(middleware.abefore_agent({}, None, {}))
    else:
        result = middleware.before_agent({}, None, {})

    assert result is not None
    assert set(result["memory_contents"]) == {user_path, project_path}
    assert "Python 3.11" in result["memory_contents"][user_path]
    assert "FastAPI" in result["memory_contents"][project_path]


def test_before_agent_skips_missing_files(cls: type[Any], tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    user_path = str(tmp_path / "user" / "AGENTS.md")
    missing_path = str(tmp_path / "nonexistent" / "AGENTS.md")
    write(backend, user_path, agents_md("User", "- Be helpful"))
    middleware = cls(backend=backend, sources=[missing_path, user_path])
    result = middleware.before_agent({}, None, {})
    assert result is not None
    assert list(result["memory_contents"]) == [user_path]


def test_before_agent_with_no_sources(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(backend=FilesystemBackend(root_dir=str(tmp_path)), sources=[])
    result = middleware.before_agent({}, None, {})
    assert result is not None
    assert result["memory_contents"] == {}


@pytest.mark.parametrize(
    "body",
    [
        "- Use `backticks`\n- <xml> tags\n- \"Quotes\" and 'apostrophes'\n- {braces} [brackets]",
        "- 日本語\n- 中文\n- Emoji: 🚀 🎉 ✨\n- Math: ∀x∈ℝ, x² ≥ 0",
        "Line of content\n" * 500,
    ],
    ids=["special-characters", "unicode", "large"],
)
def test_before_agent_keeps_text_verbatim(cls: type[Any], tmp_path: Path, body: str) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    path = str(tmp_path / "test" / "AGENTS.md")
    write(backend, path, agents_md("Memory", body))
    result = cls(backend=backend, sources=[path]).before_agent({}, None, {})
    assert result is not None
    assert result["memory_contents"][path] == agents_md("Memory", body)


def test_before_agent_with_memory_already_in_state(
    cls: type[Any], which: str, tmp_path: Path
) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    path = str(tmp_path / "AGENTS.md")
    write(backend, path, "On disk now.")
    middleware = cls(backend=backend, sources=[path])
    result = middleware.before_agent({"memory_contents": {path: "Loaded earlier."}}, None, {})
    if INTENDED_DIFFERENCES["reloads_memory_already_in_state"][which]:
        assert result is not None
        assert result["memory_contents"] == {path: "On disk now."}
    else:
        assert result is None


def test_before_agent_on_an_undecodable_file(
    cls: type[Any], which: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_bytes("caf\xe9".encode("latin-1"))
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    middleware = cls(backend=backend, sources=[str(path)])
    if INTENDED_DIFFERENCES["undecodable_file_aborts_the_run"][which]:
        with pytest.raises(UnicodeDecodeError):
            middleware.before_agent({}, None, {})
    else:
        with caplog.at_level(logging.WARNING):
            result = middleware.before_agent({}, None, {})
        assert result is not None
        assert result["memory_contents"] == {}
        assert "not valid UTF-8" in caplog.text


def test_before_agent_accepts_the_langchain_call_form_too(cls: type[Any], tmp_path: Path) -> None:
    """LangChain's base hook takes `(state, runtime)`; ours accepts both forms."""
    backend = FilesystemBackend(root_dir=str(tmp_path))
    middleware = cls(backend=backend, sources=[])
    if cls is DeepagentsMemoryMiddleware:
        with pytest.raises(TypeError):
            middleware.before_agent({}, None)
    else:
        assert middleware.before_agent({}, None) is not None


# -- modify_request / wrap_model_call / awrap_model_call ------------------------------------


def test_modify_request_formats_in_sources_order(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(
        backend=FilesystemBackend(root_dir=str(tmp_path)),
        sources=["/first/AGENTS.md", "/second/AGENTS.md", "/empty/AGENTS.md"],
        system_prompt="<agent_memory>\n{agent_memory}\n</agent_memory>",
    )
    state = {
        "memory_contents": {
            "/second/AGENTS.md": "Second content",
            "/first/AGENTS.md": "First content <!-- hidden -->",
            "/empty/AGENTS.md": "<!-- only a comment -->",
        }
    }
    modified = middleware.modify_request(request_for(state))
    assert memory_section(modified) == (
        "<agent_memory>\n/first/AGENTS.md\n\nFirst content\n\n"
        "/second/AGENTS.md\n\nSecond content\n</agent_memory>"
    )


def test_modify_request_without_memory(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(backend=FilesystemBackend(root_dir=str(tmp_path)), sources=["/a.md"])
    modified = middleware.modify_request(request_for({"memory_contents": {}}))
    assert "(No memory loaded)" in memory_section(modified)
    blocks = modified.system_message.content_blocks  # type: ignore[union-attr]
    assert blocks[0]["text"] == "You are helpful."  # type: ignore[typeddict-item]


def test_modify_request_with_template_none_is_a_no_op(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(
        backend=FilesystemBackend(root_dir=str(tmp_path)), sources=["/a.md"], system_prompt=None
    )
    request = request_for({"memory_contents": {"/a.md": "text"}})
    assert middleware.modify_request(request) is request


def test_modify_request_without_a_system_message(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(backend=FilesystemBackend(root_dir=str(tmp_path)), sources=["/a.md"])
    modified = middleware.modify_request(request_for({"memory_contents": {"/a.md": "A"}}, None))
    assert "/a.md\n\nA" in memory_section(modified)


def test_cache_control_only_for_anthropic_models(cls: type[Any], tmp_path: Path) -> None:
    middleware = cls(
        backend=FilesystemBackend(root_dir=str(tmp_path)), sources=["/a.md"], add_cache_control=True
    )
    modified = middleware.modify_request(request_for({"memory_contents": {"/a.md": "A"}}))
    assert all("cache_control" not in block for block in modified.system_message.content_blocks)  # type: ignore[union-attr]


@pytest.mark.parametrize("use_async", [False, True])
def test_wrap_model_call_hands_the_modified_request_on(
    cls: type[Any], tmp_path: Path, use_async: bool
) -> None:
    middleware = cls(backend=FilesystemBackend(root_dir=str(tmp_path)), sources=["/a.md"])
    seen: list[ModelRequest] = []
    answer = ModelResponse(result=[AIMessage("ok")])

    def handler(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return answer

    async def ahandler(request: ModelRequest) -> ModelResponse:
        return handler(request)

    request = request_for({"memory_contents": {"/a.md": "Remember A."}})
    if use_async:
        result = asyncio.run(middleware.awrap_model_call(request, ahandler))
    else:
        result = middleware.wrap_model_call(request, handler)
    assert result is answer
    assert "/a.md\n\nRemember A." in memory_section(seen[0])


# -- end to end, as deepagents' tests do ----------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_create_agent_injects_every_source(cls: type[Any], tmp_path: Path, use_async: bool) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=False)
    user_path = str(tmp_path / "user" / "AGENTS.md")
    project_path = str(tmp_path / "project" / "AGENTS.md")
    write(backend, user_path, agents_md("User Style", "- Use Python 3.11+"))
    write(backend, project_path, agents_md("Project Info", "- FastAPI backend"))
    model = ScriptedChatModel(script=["I see both."])
    agent = create_agent(
        model=model, middleware=[cls(backend=backend, sources=[user_path, project_path])]
    )
    run: Callable[..., Any] = agent.ainvoke if use_async else agent.invoke
    result = run({"messages": [HumanMessage("Help me")]})
    if use_async:
        result = asyncio.run(result)
    assert result["messages"][-1].text == "I see both."
    system = model.system_prompts[0]
    assert "Python 3.11" in system
    assert "FastAPI" in system
    assert system.index(user_path) < system.index(project_path)


def test_small_formatting_differences_on_purpose(
    cls: type[Any], which: str, tmp_path: Path
) -> None:
    backend = FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)
    (tmp_path / "A.md").write_bytes("\ufeff\n\n# Title\nBody.\n".encode())
    middleware = cls(
        backend=backend,
        sources=["/A.md", "/A.md"],
        system_prompt="<agent_memory>\n{agent_memory}\n</agent_memory>",
    )
    update = middleware.before_agent({}, None, {})
    assert update is not None
    section = memory_section(middleware.modify_request(request_for(dict(update))))
    differences = INTENDED_DIFFERENCES
    assert ("\ufeff" in section) is differences["keeps_a_byte_order_mark"][which]
    assert ("/A.md\n\n\ufeff\n\n# Title" in section or "/A.md\n\n\n\n# Title" in section) is (
        differences["keeps_leading_blank_lines"][which]
    )
    assert (section.count("# Title") == 2) is differences["shows_a_duplicated_source_twice"][which]
