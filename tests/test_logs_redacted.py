"""No log line or refusal names a secret in clear (issue 22, class 5b).

Before: the backend guard logged `refused write of /.agents/rules/ghp_....md: read-only
memory`, and so did every log line that names a path or key a file, the agent or the
application chose (a planted rule file, an import, a thread id, a hook's exception). Every
logger of the package now redacts what it logs (`layered_memory._logs.get_logger`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.backends.local_shell import LocalShellBackend
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage

from layered_memory import HookEvent, HookRegistry, Layer, MemoryMiddleware
from layered_memory.testing import ScriptedChatModel, tool_call

# Assembled at run time so that secret scanners never flag this file.
TOKEN = "ghp_" + "Zq9X" * 9
SOURCE = Path(__file__).resolve().parents[1] / "src" / "layered_memory"


def _assert_clean(text: str) -> None:
    assert TOKEN not in text
    assert TOKEN[4:20] not in text


def test_every_logger_of_the_package_redacts() -> None:
    """A logger made with `logging.getLogger` would log secrets as given: none is."""
    plain = [
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if re.search(r"^logger = logging\.getLogger", path.read_text(), re.MULTILINE)
    ]
    assert plain == []


def test_the_guard_never_logs_a_refused_path_in_clear(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / ".agents" / "rules").mkdir(parents=True)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/.agents/rules"],
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        result = memory.protected_backend.write(f"/.agents/rules/{TOKEN}.md", "planted")
    assert result.error
    _assert_clean(result.error)
    assert "[REDACTED:github_token]" in result.error
    assert "refused write of /.agents/rules/[REDACTED:github_token].md" in caplog.text
    _assert_clean(caplog.text)


def test_the_tool_hooks_refusal_shows_the_path_redacted(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[], rules=["/rules"])
    model = ScriptedChatModel(
        script=[tool_call("write_file", file_path=f"/rules/{TOKEN}.md", content="x")],
        default="done",
    )
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    refusal = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "refused" in refusal.text
    _assert_clean(refusal.text)


def test_files_imports_and_keys_are_logged_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / f"{TOKEN}.md").write_text("---\nalwaysApply: [\n---\nbroken\n")
    (tmp_path / "MEMORY.md").write_text(f"See @{TOKEN}/notes.md\n")
    (tmp_path / "AGENTS.md").write_bytes(b"\xff\xfe not UTF-8")

    class FailingStore:
        def get(self, key: str) -> Any:
            raise ConnectionError(f"cannot read {key}")

        get_entry = get

        async def aget(self, key: str) -> Any:
            raise ConnectionError(f"cannot read {key}")

        aget_entry = aget

    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(
        backend=backend,
        layers=[Layer("p", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)],
        rules=["/rules"],
        session_store=FailingStore(),  # type: ignore[arg-type]
    )
    model = ScriptedChatModel(script=[], default="done")
    agent = create_agent(model, tools=[], middleware=[memory])
    with caplog.at_level(logging.DEBUG, logger="layered_memory"):
        agent.invoke(
            {"messages": [{"role": "user", "content": "hi"}]},
            {"configurable": {"thread_id": f"user-{TOKEN}"}},
        )
    assert "rule file /rules/[REDACTED:github_token].md" in caplog.text
    assert "imports @[REDACTED:github_token]/notes.md, which names no file" in caplog.text
    assert "cannot read user-[REDACTED:github_token]" in caplog.text
    _assert_clean(caplog.text)


def test_a_hooks_traceback_is_logged_redacted(caplog: pytest.LogCaptureFixture) -> None:
    hooks = HookRegistry()

    def failing(_event: HookEvent, _data: Any) -> None:
        raise ValueError(f"could not use {TOKEN}")

    hooks.register(HookEvent.PIPELINE_END, failing, name="failing")
    with caplog.at_level(logging.ERROR, logger="layered_memory"):
        hooks.trigger(HookEvent.PIPELINE_END, {})
    assert "ValueError: could not use [REDACTED:github_token]" in caplog.text
    _assert_clean(caplog.text)


def test_the_shell_put_back_logs_restored_paths_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rules").mkdir()
    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=[], rules=["/rules"])
    command = f"echo planted > {tmp_path}/rules/{TOKEN}.md"
    model = ScriptedChatModel(script=[tool_call("execute", command=command)], default="done")
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert not (tmp_path / "rules" / f"{TOKEN}.md").exists()
    assert "restored" in caplog.text
    _assert_clean(caplog.text)
