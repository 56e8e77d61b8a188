"""Issue 36, section 1: every common wiring mistake ends in a clear message naming the fix (an
error at construction when the mistake is visible then, else one warning at the first run)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent

from layered_memory import (
    HookRegistry,
    Layer,
    MemoryMiddleware,
    MemoryWriter,
    register_write_back,
)
from layered_memory.testing import ScriptedChatModel, tool_call


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name.startswith("layered_memory")
    ]


@pytest.fixture
def backend(tmp_path: Path) -> FilesystemBackend:
    (tmp_path / "AGENTS.md").write_text("# Project\n")
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


# -- booleans and numbers are type-checked -------------------------------------------------------


@pytest.mark.parametrize("value", ["false", "False", 0, 1, None, "yes"])
def test_layer_writable_must_be_a_bool(value: Any) -> None:
    with pytest.raises(TypeError, match=r"Layer 'notes': writable must be True or False"):
        Layer("notes", "/MEMORY.md", writable=value)


@pytest.mark.parametrize("keyword", ["strict", "add_cache_control"])
def test_middleware_flags_must_be_bools(backend: FilesystemBackend, keyword: str) -> None:
    with pytest.raises(TypeError, match=rf"{keyword} must be True or False; got str"):
        MemoryMiddleware(backend=backend, layers=[Layer("p", "/AGENTS.md")], **{keyword: "false"})


def test_other_flags_must_be_bools(backend: FilesystemBackend) -> None:
    from layered_memory import FileSessionStore, MemoryConsolidator
    from layered_memory.graph import KnowledgeGraphMiddleware

    model = ScriptedChatModel(script=[])
    with pytest.raises(TypeError, match="review must be True or False"):
        MemoryConsolidator(model, backend=backend, review="false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read_only must be True or False"):
        KnowledgeGraphMiddleware(backend=backend, read_only="false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fsync must be True or False"):
        FileSessionStore(backend.cwd, fsync="false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="strict of hook handler 'h' must be True or False"):
        HookRegistry().register("pipeline_end", print, name="h", strict="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_chars must be an int"):
        MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], max_chars="4000")  # type: ignore[arg-type]


# -- writable memory the agent has no tool to write ------------------------------------------------


def test_writable_layer_without_a_writing_tool_warns_once(
    backend: FilesystemBackend, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    agent = create_agent(model=ScriptedChatModel(script=["a", "b"]), middleware=[memory])
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
        agent.invoke({"messages": [{"role": "user", "content": "again"}]})
    (message,) = [m for m in warnings_of(caplog) if "no tool that can write" in m]
    assert "notes" in message
    assert "FilesystemMiddleware(backend=memory.protected_backend)" in message


def test_read_only_memory_or_file_tools_say_nothing(
    backend: FilesystemBackend, caplog: pytest.LogCaptureFixture
) -> None:
    read_only = MemoryMiddleware(backend=backend, layers=[Layer("p", "/AGENTS.md")])
    writable = MemoryMiddleware(
        backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)]
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        create_agent(model=ScriptedChatModel(script=["a"]), middleware=[read_only]).invoke(
            {"messages": [{"role": "user", "content": "hi"}]}
        )
        create_deep_agent(
            model=ScriptedChatModel(script=["a"]),
            backend=writable.protected_backend,
            memory=[],
            middleware=[writable],
        ).invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert warnings_of(caplog) == []


# -- create_deep_agent without backend=: a new memory file written into the state -----------


def test_write_of_new_memory_file_into_the_default_state_backend_warns(
    backend: FilesystemBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/MEMORY.md", content="- learned\n"), "done"]
    )
    agent = create_deep_agent(model=model, memory=[], middleware=[memory])  # no backend=
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        result = agent.invoke({"messages": [{"role": "user", "content": "note it"}]})
    assert not (tmp_path / "MEMORY.md").exists()
    (message,) = [m for m in warnings_of(caplog) if "/MEMORY.md" in m]
    assert "backend=memory.protected_backend" in message
    tool_text = next(m.text for m in result["messages"] if m.type == "tool")
    assert "do not reach that memory" in tool_text


def test_write_of_new_memory_file_through_the_memory_backend_says_nothing(
    backend: FilesystemBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path="/MEMORY.md", content="- learned\n"), "done"]
    )
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        agent.invoke({"messages": [{"role": "user", "content": "note it"}]})
    assert (tmp_path / "MEMORY.md").read_text() == "- learned\n"
    assert warnings_of(caplog) == []


# -- write-back registered on a registry nobody fires ---------------------------------------------


def test_write_back_on_a_registry_never_passed_as_hooks_warns_once(
    backend: FilesystemBackend, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryMiddleware(backend=backend, layers=[Layer("notes", "/MEMORY.md", writable=True)])
    registry = HookRegistry()
    register_write_back(registry, MemoryWriter(memory.protected_backend, "/MEMORY.md"))
    agent = create_deep_agent(
        model=ScriptedChatModel(script=["INSIGHT: x", "INSIGHT: y"]),
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
        agent.invoke({"messages": [{"role": "user", "content": "again"}]})
    (message,) = [m for m in warnings_of(caplog) if "write-back" in m]
    assert "/MEMORY.md" in message
    assert "hooks=registry" in message
    assert "write_back='/MEMORY.md'" in message


def test_write_back_given_to_the_middleware_lands(
    backend: FilesystemBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("p", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        write_back="/MEMORY.md",
    )
    assert memory.hooks is not None
    agent = create_deep_agent(
        model=ScriptedChatModel(script=["done.\nINSIGHT: the build needs make."]),
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        agent.invoke(
            {"messages": [{"role": "user", "content": "hi"}]}, context={"entity_name": "acme"}
        )
    assert "[acme] the build needs make." in (tmp_path / "MEMORY.md").read_text()
    assert warnings_of(caplog) == []


def test_write_back_to_read_only_or_unknown_memory_is_refused(backend: FilesystemBackend) -> None:
    layers = [Layer("p", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]
    with pytest.raises(ValueError, match=r"write_back='/AGENTS.md' is read-only memory"):
        MemoryMiddleware(backend=backend, layers=layers, write_back="/AGENTS.md")
    with pytest.raises(ValueError, match=r"not a layer file.*writable=True"):
        MemoryMiddleware(backend=backend, layers=layers, write_back="/NOTES.md")
    with pytest.raises(TypeError, match="write_back must be the path of a writable layer"):
        MemoryMiddleware(backend=backend, layers=layers, write_back=True)  # type: ignore[arg-type]


# -- a name imported from the wrong module ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ScriptedChatModel", "layered_memory.testing"),
        ("load_rule_set", "layered_memory.rules"),
        ("CachedCheckpointSaver", "layered_memory.checkpoint"),
    ],
)
def test_import_from_the_package_names_the_module(name: str, home: str) -> None:
    with pytest.raises(ImportError, match=rf"`from {home} import {name}`"):
        exec(f"from layered_memory import {name}", {})


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import layered_memory

    assert not hasattr(layered_memory, "NoSuchThing")
    with pytest.raises(ImportError, match="cannot import name 'NoSuchThing'"):
        exec("from layered_memory import NoSuchThing", {})
