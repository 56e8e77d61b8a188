"""Drop-in compatibility with deepagents' MemoryMiddleware (constructed with `sources=`)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import FileDownloadResponse
from deepagents.middleware.memory import MemoryMiddleware as DeepagentsMemoryMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import SystemMessage

from layered_memory import Layer, MemoryMiddleware, MemoryOptions, MemorySourceError
from layered_memory.core.render import NO_MEMORY
from layered_memory.testing import ScriptedChatModel

RUNTIME = SimpleNamespace(context=None)


class CountingBackend(FilesystemBackend):
    """A real FilesystemBackend that records every call made to it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.calls: list[str] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.calls.append("download_files")
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.calls.append("adownload_files")
        return super().download_files(paths)

    def ls(self, path: str) -> Any:
        self.calls.append("ls")
        return super().ls(path)

    def glob(self, pattern: str, path: str | None = None) -> Any:
        self.calls.append("glob")
        return super().glob(pattern, path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "AGENTS.md").write_text("# Project\nUse make test.\n<!-- private -->\n")
    (tmp_path / "user.md").write_text("Prefers tabs.")
    (tmp_path / "comments.md").write_text("<!-- nothing but a note -->")
    return tmp_path


def request_for(state: dict[str, Any], model: Any = None) -> ModelRequest[Any]:
    return ModelRequest(
        model=model or ScriptedChatModel(script=[]),
        messages=[],
        system_message=SystemMessage("You are helpful."),
        state=state,  # type: ignore[arg-type]
        runtime=RUNTIME,  # type: ignore[arg-type]
    )


def memory_body(system_message: SystemMessage) -> str:
    text = system_message.content_blocks[-1]["text"]  # type: ignore[typeddict-item]
    return text.split("<agent_memory>\n", 1)[1].split("</agent_memory>", 1)[0].strip()


SOURCES = ["/user.md", "/missing.md", "/comments.md", "/AGENTS.md"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_same_state_and_body_as_deepagents(project: Path, use_async: bool) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    ours = MemoryMiddleware(backend=backend, sources=SOURCES)
    theirs = DeepagentsMemoryMiddleware(backend=backend, sources=SOURCES)
    if use_async:
        our_update = await ours.abefore_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
        their_update = await theirs.abefore_agent({"messages": []}, RUNTIME, {})  # type: ignore[arg-type]
    else:
        our_update = ours.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
        their_update = theirs.before_agent({"messages": []}, RUNTIME, {})  # type: ignore[arg-type]
    assert our_update is not None
    assert their_update is not None
    assert our_update["memory_contents"] == their_update["memory_contents"]

    our_request = ours.modify_request(request_for(dict(our_update)))
    their_request = theirs.modify_request(request_for(dict(their_update)))
    assert our_request.system_message is not None
    assert their_request.system_message is not None
    assert memory_body(our_request.system_message) == memory_body(their_request.system_message)
    assert memory_body(our_request.system_message) == (
        "/user.md\n\nPrefers tabs.\n\n/AGENTS.md\n\n# Project\nUse make test."
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_all_sources_in_one_batched_download(project: Path, use_async: bool) -> None:
    backend = CountingBackend(project)
    middleware = MemoryMiddleware(backend=backend, sources=SOURCES)
    if use_async:
        await middleware.abefore_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    else:
        middleware.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    assert backend.calls == ["adownload_files" if use_async else "download_files"]


def test_memory_is_a_new_block_after_the_base_prompt(project: Path) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    middleware = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    state = middleware.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    message = middleware.modify_request(request_for(dict(state or {}))).system_message
    assert message is not None
    blocks = message.content_blocks
    assert len(blocks) == 2
    assert blocks[0]["text"] == "You are helpful."  # type: ignore[typeddict-item]
    assert blocks[1]["text"].startswith("\n\n<agent_memory>")  # type: ignore[typeddict-item]


def test_no_memory_loaded_placeholder(tmp_path: Path) -> None:
    middleware = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), sources=["/none.md"]
    )
    state = middleware.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    assert state is not None
    assert state["memory_contents"] == {}
    message = middleware.modify_request(request_for(dict(state))).system_message
    assert message is not None
    assert NO_MEMORY in message.text


def test_system_prompt_none_appends_nothing(project: Path) -> None:
    middleware = MemoryMiddleware(
        backend=FilesystemBackend(root_dir=project, virtual_mode=True),
        sources=["/AGENTS.md"],
        system_prompt=None,
    )
    state = middleware.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    assert state is not None
    assert "Use make test." in state["memory_contents"]["/AGENTS.md"]
    request = request_for(dict(state))
    assert middleware.modify_request(request) is request


def test_template_validation_messages(tmp_path: Path) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    with pytest.raises(ValueError, match=r"\{agent_memory\}"):
        MemoryMiddleware(backend=backend, sources=[], system_prompt="no slot here")
    with pytest.raises(TypeError, match="system_prompt must be str or None"):
        MemoryMiddleware(backend=backend, sources=[], system_prompt=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of"):
        MemoryMiddleware(backend=backend)
    custom = MemoryMiddleware(backend=backend, sources=[], system_prompt="MEM[{agent_memory}]")
    message = custom.modify_request(request_for({"memory_contents": {}})).system_message
    assert message is not None
    assert message.content_blocks[-1]["text"] == f"\n\nMEM[{NO_MEMORY}]"  # type: ignore[typeddict-item]


def test_cache_control_only_for_anthropic_models(project: Path) -> None:
    from langchain_anthropic import ChatAnthropic

    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    middleware = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], add_cache_control=True)
    state = dict(middleware.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
    anthropic = ChatAnthropic(model_name="claude-sonnet-4-5", api_key="sk-ant-test")  # type: ignore[call-arg,arg-type]
    tagged = middleware.modify_request(request_for(state, anthropic)).system_message
    assert tagged is not None
    assert tagged.content_blocks[-1].get("cache_control") == {"type": "ephemeral"}  # type: ignore[union-attr]
    assert "cache_control" not in tagged.content_blocks[0]
    plain = middleware.modify_request(request_for(state)).system_message
    assert plain is not None
    assert all("cache_control" not in block for block in plain.content_blocks)


def test_unreadable_source_is_skipped_where_deepagents_raises(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (project / "bad.md").write_bytes(b"\xff\xfe\x00garbage")
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    theirs = DeepagentsMemoryMiddleware(backend=backend, sources=["/bad.md", "/AGENTS.md"])
    with pytest.raises(UnicodeDecodeError):
        theirs.before_agent({"messages": []}, RUNTIME, {})  # type: ignore[arg-type]

    ours = MemoryMiddleware(backend=backend, sources=["/bad.md", "/AGENTS.md"])
    with caplog.at_level(logging.WARNING):
        state = ours.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    assert state is not None
    assert list(state["memory_contents"]) == ["/AGENTS.md"]
    assert any(
        "/bad.md" in record.getMessage() and "binary file" in record.getMessage()
        for record in caplog.records
    )

    strict = MemoryMiddleware(backend=backend, sources=["/bad.md"], strict=True)
    with pytest.raises(MemorySourceError, match=r"/bad\.md"):
        strict.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]


def test_changed_file_is_reloaded_where_deepagents_keeps_the_stale_copy(project: Path) -> None:
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    ours = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    theirs = DeepagentsMemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    our_state = dict(ours.before_agent({"messages": []}, RUNTIME) or {})  # type: ignore[arg-type]
    their_state = dict(theirs.before_agent({"messages": []}, RUNTIME, {}) or {})  # type: ignore[arg-type]
    (project / "AGENTS.md").write_text("Use make check.")
    assert theirs.before_agent(their_state, RUNTIME, {}) is None  # type: ignore[arg-type]
    update = ours.before_agent(our_state, RUNTIME)  # type: ignore[arg-type]
    assert update is not None
    assert update["memory_contents"] == {"/AGENTS.md": "Use make check."}
    # Unchanged memory: no state write at all.
    assert ours.before_agent({**our_state, **update}, RUNTIME) is None  # type: ignore[arg-type]


def test_the_drop_in_reads_no_imports_unless_asked(tmp_path: Path) -> None:
    """deepagents reads no `@imports`: a drop-in that did would put `.env` into the prompt of
    every project whose AGENTS.md names it."""
    (tmp_path / "AGENTS.md").write_text("# Project\nConfig lives in @.env\n")
    (tmp_path / ".env").write_text("DB_PASSWORD=hunter2-prod\n")
    backend = CountingBackend(tmp_path)
    ours = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    theirs = DeepagentsMemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    our_update = ours.before_agent({"messages": []}, RUNTIME)  # type: ignore[arg-type]
    their_update = theirs.before_agent({"messages": []}, RUNTIME, {})  # type: ignore[arg-type]
    assert our_update is not None
    assert their_update is not None
    ours_body = memory_body(ours.modify_request(request_for(dict(our_update))).system_message)  # type: ignore[arg-type]
    theirs_body = memory_body(
        theirs.modify_request(request_for(dict(their_update))).system_message  # type: ignore[arg-type]
    )
    assert ours_body == theirs_body
    assert "hunter2" not in ours_body
    assert backend.calls == ["download_files", "download_files"]  # one each
    asked = MemoryMiddleware(
        backend=backend, sources=["/AGENTS.md"], options=MemoryOptions(imports=True)
    )
    assert asked.assembler.follow_imports is True
    layered = MemoryMiddleware(backend=backend, layers=[Layer("p", "/AGENTS.md")])
    assert layered.assembler.follow_imports is True
