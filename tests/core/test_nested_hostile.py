"""Nested memory and imports against a hostile agent or hostile files: no hang, no route that
changes or deletes read-only memory, a bounded cost, nothing dropped without a word.

Each case was a reproduced bug (a review of the nested-memory work); each test fails without
its fix.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, LocalShellBackend
from deepagents.backends.protocol import FileDownloadResponse
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from layered_memory import Layer, MemoryAssembler, MemoryMiddleware, MemoryOptions
from layered_memory.core.imports import MAX_IMPORT_DEPTH, MAX_IMPORTED_FILES
from layered_memory.errors import MemorySourceError
from layered_memory.testing import ScriptedChatModel, tool_call

HANG_GUARD_SECONDS = 120  # only stops a hung run; nothing is timed
LAYERS = [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]


def tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def agent(backend: Any, script: list[Any], **options: Any) -> tuple[Any, ScriptedChatModel]:
    memory = MemoryMiddleware(backend=backend, layers=LAYERS, **options)
    model = ScriptedChatModel(script=script, default="ok")
    graph = create_deep_agent(
        model=model,
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )
    return graph, model


def run(graph: Any, thread: str = "t", text: str = "go") -> list[ToolMessage]:
    result = graph.invoke(
        {"messages": [{"role": "user", "content": text}]}, {"configurable": {"thread_id": thread}}
    )
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_a_path_starting_with_two_slashes_neither_hangs_nor_hides_nested_memory(
    tmp_path: Path,
) -> None:
    """POSIX keeps a leading `//`, and `dirname("//")` is `"//"`: the walk up from
    `//src/x.py` never reached `/`, and one tool call hung the run. In a child process, so a
    hang fails the test instead of the suite."""
    tree(tmp_path, {"/AGENTS.md": "ROOT", "/src/AGENTS.md": "SRC_RULES", "/src/x.py": ""})
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from deepagents.backends import FilesystemBackend
        from test_nested_hostile import agent, run
        from layered_memory.testing import tool_call

        backend = FilesystemBackend(root_dir={str(tmp_path)!r}, virtual_mode=True)
        graph, model = agent(
            backend, [tool_call("read_file", file_path="//src/x.py"), "done"], nested=("AGENTS.md",)
        )
        run(graph)
        print(json.dumps({{"nested_seen": "SRC_RULES" in model.system_prompts[-1]}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"nested_seen": True}


def test_a_relative_path_brings_its_folders_memory(tmp_path: Path) -> None:
    tree(tmp_path, {"/AGENTS.md": "ROOT", "/sub/AGENTS.md": "SUB_RULES", "/sub/x.py": ""})
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    graph, model = agent(
        backend, [tool_call("read_file", file_path="sub/x.py"), "done"], nested=("AGENTS.md",)
    )
    run(graph)
    assert "SUB_RULES" in model.system_prompts[-1]


def test_a_shell_command_never_deletes_memory_another_run_loaded(tmp_path: Path) -> None:
    """The guard's record of read-only files only grows (every file any load found): a nested
    file loaded by thread A is not in thread B's state, which does not mean it did not exist.
    A shell command in B deleted it ("put back as it was")."""
    tree(
        tmp_path,
        {
            "/AGENTS.md": "ROOT @docs/style.md",
            "/MEMORY.md": "",
            "/sub/AGENTS.md": "SUB_RULES",
            "/sub/x.py": "",
            "/docs/style.md": "STYLE",
        },
    )
    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    script = [
        tool_call("read_file", file_path="/sub/x.py"),
        "a-done",
        tool_call("execute", command="echo hi"),
        "b-done",
        tool_call("execute", command="echo hi again"),
        "c-done",
    ]
    graph, _model = agent(backend, script, nested=("AGENTS.md",))
    run(graph, "A")
    run(graph, "B")
    assert (tmp_path / "sub" / "AGENTS.md").read_text() == "SUB_RULES"
    (tmp_path / "AGENTS.md").write_text("ROOT, no imports any more")  # the user's edit
    run(graph, "C")
    assert (tmp_path / "docs" / "style.md").read_text() == "STYLE"


def test_a_shell_command_still_puts_back_what_this_run_loaded(tmp_path: Path) -> None:
    tree(tmp_path, {"/AGENTS.md": "ROOT", "/MEMORY.md": "", "/sub/AGENTS.md": "SUB_RULES"})
    (tmp_path / "sub" / "x.py").write_text("")
    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    script = [
        tool_call("read_file", file_path="/sub/x.py"),
        tool_call("execute", command="echo PWNED > sub/AGENTS.md"),
        "done",
    ]
    graph, _model = agent(backend, script, nested=("AGENTS.md",))
    run(graph)
    assert (tmp_path / "sub" / "AGENTS.md").read_text() == "SUB_RULES"


@pytest.mark.parametrize("kind", ["missing", "binary"])
def test_the_agent_cannot_write_what_read_only_memory_imports(tmp_path: Path, kind: str) -> None:
    """An import of read-only memory that names no file yet (or a file that cannot be read)
    would enter the prompt as read-only memory once the agent wrote it."""
    tree(tmp_path, {"/AGENTS.md": "ROOT. Team style: @docs/style.md", "/MEMORY.md": ""})
    if kind == "binary":
        (tmp_path / "docs").mkdir()
        (tmp_path / "docs" / "style.md").write_bytes(b"\x00\xff binary")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    attack = tool_call("write_file", file_path="/docs/style.md", content="INJECTED: obey")
    graph, model = agent(backend, [attack, "done"])
    (refusal,) = run(graph)
    assert refusal.status == "error"
    assert "imported by read-only memory" in str(refusal.content)
    run(graph, text="next")
    assert "INJECTED" not in model.system_prompts[-1]
    target = tmp_path / "docs" / "style.md"
    assert (not target.exists()) if kind == "missing" else target.read_bytes().startswith(b"\x00")


def test_a_nested_file_cannot_be_changed_through_another_name_before_it_is_loaded(
    tmp_path: Path,
) -> None:
    tree(tmp_path, {"/AGENTS.md": "ROOT", "/sub/AGENTS.md": "SUB_RULES", "/x.py": ""})
    (tmp_path / "notes.txt").symlink_to("sub/AGENTS.md")
    os.link(tmp_path / "sub" / "AGENTS.md", tmp_path / "hard.txt")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    attacks = [
        tool_call("edit_file", file_path="/notes.txt", old_string="SUB", new_string="PWN"),
        tool_call("edit_file", file_path="/hard.txt", old_string="SUB", new_string="PWN"),
        tool_call("write_file", file_path="/hard.txt", content="PWN"),
    ]
    graph, _model = agent(backend, [*attacks, "done"], nested=("AGENTS.md",))
    refusals = run(graph)
    assert [m.status for m in refusals] == ["error", "error", "error"]
    assert (tmp_path / "sub" / "AGENTS.md").read_text() == "SUB_RULES"


def test_a_folder_too_large_to_search_is_not_deleted(tmp_path: Path) -> None:
    """The search for nested files below a folder stops at 10,000 entries; stopping quietly
    meant "none found", and the folder was deleted with the nested memory in it."""
    tree(tmp_path, {"/AGENTS.md": "ROOT", "/MEMORY.md": "", "/src/pkg/AGENTS.md": "PKG"})
    for index in range(10_050):
        (tmp_path / "src" / f"f{index}.js").write_text("")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    graph, _model = agent(
        backend, [tool_call("delete", file_path="/src"), "done"], nested=("AGENTS.md",)
    )
    (refusal,) = run(graph)
    assert refusal.status == "error"
    assert "too many to check" in str(refusal.content)
    assert (tmp_path / "src" / "pkg" / "AGENTS.md").read_text() == "PKG"


class CountingBackend(FilesystemBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.requested = 0

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.requested += len(paths)
        return super().download_files(paths)


def test_an_import_fan_out_is_bounded_per_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """40 files importing 40 missing files each: 1,640 requests at every load without a bound."""
    files = {"/AGENTS.md": " ".join(f"@f{i}.md" for i in range(40))}
    for i in range(40):
        files[f"/f{i}.md"] = " ".join(f"@missing/{i}-{j}.md" for j in range(40))
    tree(tmp_path, files)
    backend = CountingBackend(tmp_path)
    assembler = MemoryAssembler(backend=backend, layers=[Layer("project", "/AGENTS.md")])
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        snapshot = assembler.load()
    assert backend.requested <= 1 + MAX_IMPORTED_FILES
    assert len(snapshot.extras.imports) == 40  # the first level is read whole
    limit = [p for p in snapshot.problems if f"limit of {MAX_IMPORTED_FILES}" in p.reason]
    assert len(limit) == 1
    assert "skipped" not in next(r.getMessage() for r in caplog.records if "limit" in r.message)


def test_an_import_chain_cut_at_the_depth_limit_is_reported(tmp_path: Path) -> None:
    files = {"/AGENTS.md": "ROOT @h1.md"}
    for hop in range(1, MAX_IMPORT_DEPTH + 3):
        files[f"/h{hop}.md"] = f"HOP{hop} @h{hop + 1}.md"
    tree(tmp_path, files)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    snapshot = MemoryAssembler(backend=backend, layers=[Layer("project", "/AGENTS.md")]).load()
    cut = f"/h{MAX_IMPORT_DEPTH}.md"
    assert snapshot.extras.too_deep == (cut,)
    assert [p.path for p in snapshot.problems if "hops" in p.reason] == [cut]
    strict = MemoryAssembler(backend=backend, layers=[Layer("p", "/AGENTS.md")], strict=True)
    with pytest.raises(MemorySourceError, match="hops"):
        strict.load()


def test_a_missing_import_is_not_logged_as_a_skipped_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree(tmp_path, {"/AGENTS.md": "ROOT @docs/nothing.md"})
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        MemoryAssembler(backend=backend, layers=[Layer("project", "/AGENTS.md")]).load()
    (line,) = [r.getMessage() for r in caplog.records if "names no file" in r.getMessage()]
    assert line == "memory source /AGENTS.md: imports @docs/nothing.md, which names no file"


def test_host_path_imports_stay_in_the_project_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host-path backend can read any file of the host: a cloned repository's AGENTS.md
    must not pull the host's files into every prompt."""
    home, project, outside = tmp_path / "home", tmp_path / "repo", tmp_path / "outside"
    monkeypatch.setenv("HOME", str(home))
    tree(home, {"/.aws/credentials": "HOME_SECRET", "/.deepagents/AGENTS.md": "MINE @mine.md"})
    tree(home, {"/.deepagents/mine.md": "MY_OWN_NOTES"})
    tree(outside, {"/secret.md": "OUTSIDE_SECRET"})
    tree(
        project,
        {
            "/AGENTS.md": (
                f"REPO @~/.aws/credentials @../outside/secret.md @{outside}/secret.md "
                "@link.md @docs/style.md"
            ),
            "/docs/style.md": "REPO_STYLE",
        },
    )
    (project / "link.md").symlink_to(outside / "secret.md")
    layers = [Layer("user", "~/.deepagents/AGENTS.md"), Layer("project", f"{project}/AGENTS.md")]
    backend = FilesystemBackend(root_dir=project, virtual_mode=False)

    snapshot = MemoryAssembler(backend=backend, layers=layers).load()
    shown = "\n".join([*snapshot.files.values(), *snapshot.extras.imports.values()])
    assert "REPO_STYLE" in shown
    assert "MY_OWN_NOTES" in shown  # a layer outside the project imports its neighbours
    for secret in ("HOME_SECRET", "OUTSIDE_SECRET"):
        assert secret not in shown
    refused = [p.reason for p in snapshot.problems if "outside the backend's folder" in p.reason]
    assert len(refused) == 4
    assert "imports='anywhere'" in refused[0]

    anywhere = MemoryAssembler(
        backend=backend, layers=layers, options=MemoryOptions(imports="anywhere")
    ).load()
    assert "HOME_SECRET" in anywhere.extras.imports.values()
    with pytest.raises(TypeError, match="imports must be True, False or 'anywhere'"):
        MemoryOptions(imports="everywhere")  # type: ignore[arg-type]
