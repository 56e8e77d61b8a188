"""`@path` imports in memory files: placed after their importer, at most 5 hops, each file once,
never from code, missing ones marked, and read-only when a read-only file imports them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.protocol import FileDownloadResponse
from deepagents.backends.utils import create_file_data
from langchain_core.messages import ToolMessage
from langgraph.store.memory import InMemoryStore

from layered_memory import Layer, MemoryAssembler, MemoryMiddleware, MemoryOptions
from layered_memory.core.imports import import_cycles
from layered_memory.testing import ScriptedChatModel, tool_call

FILES = {
    "/AGENTS.md": (
        "Project rules. See @docs/style.md and @/shared/ops.md.\n"
        "```\n@docs/in-code.md is not an import\n```\n"
        "Also `@docs/inline.md` is code, and @docs/missing.md is gone."
    ),
    "/docs/style.md": "STYLE: tabs. More in @./deeper/a.md",
    "/docs/deeper/a.md": "A_TEXT @b.md",
    "/docs/deeper/b.md": "B_TEXT @c.md",
    "/docs/deeper/c.md": "C_TEXT @d.md",
    "/docs/deeper/d.md": "D_TEXT @e.md",
    "/docs/deeper/e.md": "E_TEXT @f.md",
    "/docs/deeper/f.md": "F_TEXT (six hops: never loaded)",
    "/shared/ops.md": "OPS: deploy on Fridays. Back to @../AGENTS.md (a cycle).",
    "/docs/in-code.md": "IN_CODE_TEXT",
    "/docs/inline.md": "INLINE_TEXT",
    "/MEMORY.md": "# Notes\nSee @notes/detail.md",
    "/notes/detail.md": "DETAIL_TEXT",
}


def write_tree(root: Path) -> None:
    for path, text in FILES.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


class CountingBackend(FilesystemBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.downloads: list[list[str]] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.downloads.append(list(paths))
        return super().download_files(paths)


LAYERS = [Layer("project", "/AGENTS.md"), Layer("notes", "/MEMORY.md", writable=True)]


def test_imports_follow_five_hops_each_file_once_never_from_code(tmp_path: Path) -> None:
    write_tree(tmp_path)
    backend = CountingBackend(tmp_path)
    assembler = MemoryAssembler(backend=backend, layers=LAYERS)
    snapshot = assembler.load()
    imports = snapshot.extras.imports
    assert set(imports) == {
        "/docs/style.md",
        "/shared/ops.md",
        "/docs/deeper/a.md",
        "/docs/deeper/b.md",
        "/docs/deeper/c.md",
        "/docs/deeper/d.md",
        "/notes/detail.md",
    }  # e.md is hop 6, f.md hop 7; code and the cycle back to AGENTS.md add nothing
    assert snapshot.extras.missing == {"/AGENTS.md": ("docs/missing.md",)}
    # One batched download for the configured files, then one per import depth.
    assert len(backend.downloads) == 1 + 5
    block = assembler.render(snapshot)
    assert block.index("Project rules") < block.index("STYLE: tabs") < block.index("A_TEXT")
    assert block.index("A_TEXT") < block.index("OPS: deploy")  # depth first after its importer
    assert "IN_CODE_TEXT" not in block
    assert "INLINE_TEXT" not in block
    assert "[import @docs/missing.md: no such file]" in block
    assert 'name="project, imported by /AGENTS.md" path="/docs/style.md" access="read-only"' in (
        block
    )
    assert 'path="/notes/detail.md" access="writable"' in block


def test_cycles_and_imports_past_five_hops_are_reported_for_lint(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), layers=LAYERS
    )
    extras = assembler.load().extras
    # AGENTS.md -> shared/ops.md -> AGENTS.md; reported once, from its smallest path.
    assert extras.cycles == [("/AGENTS.md", "/shared/ops.md")]
    # d.md is hop 5: its own import of e.md is the one left unfollowed.
    assert extras.too_deep == ("/docs/deeper/d.md",)


def test_import_cycles_are_found_once_each_and_deep_graphs_do_not_recurse() -> None:
    assert import_cycles({"/b": ["/a"], "/a": ["/b", "/c"], "/c": ["/d"], "/d": ["/c"]}) == [
        ("/a", "/b"),
        ("/c", "/d"),
    ]
    assert import_cycles({"/a": ["/b"], "/b": ["/c"]}) == []
    ring = {f"/{i}": [f"/{i + 1}"] for i in range(50_000)}
    ring["/50000"] = ["/0"]
    assert len(import_cycles(ring)[0]) == 50_001


def test_a_missing_import_is_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_tree(tmp_path)
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), layers=LAYERS
    )
    with caplog.at_level(logging.WARNING):
        assembler.load()
        assembler.load()
    found = [r.getMessage() for r in caplog.records if "docs/missing.md" in r.getMessage()]
    assert len(found) == 1


def test_imports_can_be_turned_off(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=LAYERS,
        options=MemoryOptions(imports=False),
    )
    assert not assembler.load().extras.imports


@pytest.mark.parametrize("kind", ["state", "store"])
def test_imports_on_virtual_backends(kind: str) -> None:
    store = InMemoryStore()
    files = {path: create_file_data(text) for path, text in FILES.items()}
    if kind == "store":
        for path, data in files.items():
            store.put(("memory",), path, dict(data))
        backend: Any = StoreBackend(namespace=lambda _rt: ("memory",), store=store)
    else:
        backend = StateBackend()
    memory = MemoryMiddleware(backend=backend, layers=LAYERS)
    model = ScriptedChatModel(script=["ok"])
    agent = create_deep_agent(model=model, backend=backend, memory=[], middleware=[memory])
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
    if kind == "state":
        payload["files"] = files
    agent.invoke(payload)
    assert "STYLE: tabs" in model.system_prompts[0]
    assert "DETAIL_TEXT" in model.system_prompts[0]


def test_files_imported_by_read_only_memory_are_read_only(tmp_path: Path) -> None:
    write_tree(tmp_path)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, layers=LAYERS)
    model = ScriptedChatModel(
        script=[
            tool_call("edit_file", file_path="/docs/style.md", old_string="tabs", new_string="x"),
            tool_call(
                "edit_file", file_path="/notes/detail.md", old_string="DETAIL", new_string="NEW"
            ),
            "done",
        ]
    )
    agent = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "edit"}]})
    statuses = [m.status for m in result["messages"] if isinstance(m, ToolMessage)]
    assert statuses == ["error", "success"]
    assert (tmp_path / "docs" / "style.md").read_text().startswith("STYLE: tabs")
    assert (tmp_path / "notes" / "detail.md").read_text() == "NEW_TEXT"
    # The writable import's edit is in the very next prompt.
    assert "NEW_TEXT" in model.system_prompts[-1]
    # A subagent's tools go through the same backend: the import stays protected there too.
    assert memory.protected_backend.write("/docs/style.md", "pwned").error is not None


def test_a_warm_load_parses_no_import_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import layered_memory.core.loading as discovery

    write_tree(tmp_path)
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), layers=LAYERS
    )
    first = assembler.load()
    calls: list[str] = []
    real = discovery.find_imports
    monkeypatch.setattr(discovery, "find_imports", lambda text: calls.append(text) or real(text))
    second = assembler.load()
    assert second.digest == first.digest
    assert calls == []  # every text was parsed once already (cached by content)
