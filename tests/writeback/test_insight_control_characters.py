"""Control characters in an insight never reach MEMORY.md.

A NUL byte written into MEMORY.md made every later load skip the whole file as binary: the
user's own notes vanished from the prompt. Each control character (and a lone surrogate, which
UTF-8 cannot encode) becomes U+FFFD in the stored line.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, StoreBackend
from deepagents.backends.protocol import BackendProtocol
from langgraph.store.memory import InMemoryStore

from layered_memory import HookRegistry, Layer, MemoryMiddleware, MemoryWriter, register_write_back
from layered_memory.testing import ScriptedChatModel

USER_NOTE = "the user prefers short answers"


@pytest.fixture(params=["filesystem", "store"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendProtocol:
    if request.param == "filesystem":
        return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    return StoreBackend(namespace=lambda rt: ("memory",), store=InMemoryStore())


def memory_bytes(backend: BackendProtocol) -> bytes:
    [response] = backend.download_files(["/MEMORY.md"])
    assert response.content is not None
    return response.content


@pytest.mark.parametrize("use_async", [False, True])
async def test_control_characters_become_replacement_characters(
    backend: BackendProtocol, use_async: bool
) -> None:
    backend.upload_files([("/MEMORY.md", f"# Memory\n- {USER_NOTE}\n".encode())])
    writer = MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.date(2025, 3, 14))
    text, entity = "use the \x00 separator, ESC \x1b[31m red, BEL\x07, DEL\x7f", "e\x00x"
    if use_async:
        await writer.aadd_insight(text, entity=entity)
    else:
        writer.add_insight(text, entity=entity)

    data = memory_bytes(backend)
    assert all(byte >= 0x20 or byte in b"\n" for byte in data)  # no control byte but newlines
    line = "- 2025-03-14: [e\ufffdx] use the \ufffd separator, ESC \ufffd[31m red, BEL\ufffd"
    assert line + ", DEL\ufffd" in data.decode("utf-8")
    assert USER_NOTE in data.decode("utf-8")


def test_a_lone_surrogate_is_written_as_a_replacement_character(
    backend: BackendProtocol,
) -> None:
    writer = MemoryWriter(backend, "/MEMORY.md", clock=lambda: dt.date(2025, 3, 14))
    assert writer.add_insight("half a pair: \ud83d here", entity="acme")
    assert "half a pair: \ufffd here" in memory_bytes(backend).decode("utf-8")


def test_a_nul_in_the_models_insight_keeps_the_users_notes_in_the_next_prompt(
    tmp_path: Path,
) -> None:
    """The reviewer's run: the model ends with a NUL in its INSIGHT line."""
    (tmp_path / "AGENTS.md").write_text("# Project\n")
    (tmp_path / "MEMORY.md").write_text(f"# Memory\n- {USER_NOTE}\n")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    layers = [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]
    config: Any = {"configurable": {"thread_id": "t1", "entity_name": "acme"}}

    def run(script: list[Any], hooks: HookRegistry | None = None) -> ScriptedChatModel:
        memory = MemoryMiddleware(backend=backend, layers=layers, hooks=hooks)
        model = ScriptedChatModel(script=script, default="done")
        agent = create_deep_agent(
            model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
        )
        agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config=config)
        return model

    registry = HookRegistry()
    register_write_back(registry, MemoryWriter(backend, "/MEMORY.md"))
    run(["INSIGHT: use the \x00 separator"], hooks=registry)
    assert b"\x00" not in (tmp_path / "MEMORY.md").read_bytes()

    following = run(["ok"])
    prompt = following.system_prompts[0]
    assert USER_NOTE in prompt
    assert "use the \ufffd separator" in prompt
