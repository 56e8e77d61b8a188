"""Directory-scoped memory: the AGENTS.md of every folder the agent works in, shallow to deep,
on every kind of deepagents backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from deepagents.backends.protocol import FileDownloadResponse
from deepagents.backends.utils import create_file_data
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from layered_memory import Layer, MemoryAssembler, MemoryMiddleware, MemoryOptions
from layered_memory.testing import ScriptedChatModel, tool_call

TREE = {
    "/AGENTS.md": "ROOT_RULES",
    "/src/AGENTS.md": "SRC_RULES",
    "/src/api/CLAUDE.md": "API_RULES_FROM_CLAUDE",
    "/src/api/handler.py": "def handle(): ...",
    "/docs/AGENTS.md": "DOCS_RULES",
    "/docs/guide.md": "Guide.",
}


class Tree:
    """The same files on a local disk (virtual or host paths), in state, or in a store."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.store = InMemoryStore()
        self.root = tmp_path
        self.state_files: dict[str, Any] = {}
        for path, text in TREE.items():
            if kind in ("disk", "host"):
                target = tmp_path / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            elif kind == "store":
                self.store.put(("memory",), path, dict(create_file_data(text)))
            else:
                self.state_files[path] = create_file_data(text)
        self.backend: Any = {
            "disk": lambda: FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
            "host": lambda: FilesystemBackend(root_dir=tmp_path, virtual_mode=False),
            "state": StateBackend,
            "store": lambda: StoreBackend(namespace=lambda _rt: ("memory",), store=self.store),
            "composite": lambda: CompositeBackend(
                default=StateBackend(),
                routes={"/src/": StoreBackend(namespace=lambda _rt: ("memory",), store=self.store)},
            ),
        }[kind]()
        if kind == "composite":
            for path, text in TREE.items():
                if path.startswith("/src/"):
                    key = path.removeprefix("/src")
                    self.store.put(("memory",), key, dict(create_file_data(text)))
                else:
                    self.state_files[path] = create_file_data(text)

    def path(self, virtual: str) -> str:
        return str(self.root) + virtual if self.kind == "host" else virtual


def agent_for(tree: Tree, model: ScriptedChatModel, **options: Any) -> Any:
    memory = MemoryMiddleware(
        backend=tree.backend,
        layers=[Layer("project", tree.path("/AGENTS.md"))],
        nested=("AGENTS.md", "CLAUDE.md"),
        **options,
    )
    agent = create_deep_agent(
        model=model,
        backend=memory.protected_backend,
        memory=[],
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )
    return agent, memory


def invoke(agent: Any, tree: Tree, text: str, thread: str) -> Any:
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if tree.state_files:
        payload["files"] = tree.state_files
        tree.state_files = {}
    return agent.invoke(payload, {"configurable": {"thread_id": thread}})


@pytest.mark.parametrize("kind", ["disk", "host", "state", "store", "composite"])
def test_nested_files_of_the_touched_path_shallow_to_deep(tmp_path: Path, kind: str) -> None:
    tree = Tree(kind, tmp_path)
    model = ScriptedChatModel(
        script=[tool_call("read_file", file_path=tree.path("/src/api/handler.py")), "seen", "again"]
    )
    agent, _memory = agent_for(tree, model)
    invoke(agent, tree, "look at the handler", f"nested-{kind}")
    before, after = model.system_prompts[0], model.system_prompts[1]
    assert "ROOT_RULES" in before
    assert "SRC_RULES" not in before  # nothing nested before a path in its subtree is touched
    assert (
        after.index("ROOT_RULES") < after.index("SRC_RULES") < after.index("API_RULES_FROM_CLAUDE")
    )
    assert "DOCS_RULES" not in after  # off the touched path
    assert 'name="nested: ' in after
    # The next invocation of the thread starts with the nested memory it found.
    invoke(agent, tree, "and now?", f"nested-{kind}")
    assert "API_RULES_FROM_CLAUDE" in model.system_prompts[2]


def test_the_first_existing_fallback_name_wins(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "AGENTS.md").write_text("FROM_AGENTS")
    (tmp_path / "pkg" / "CLAUDE.md").write_text("FROM_CLAUDE")
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[],
        nested=("AGENTS.md", "CLAUDE.md"),
    )
    snapshot = assembler.load(touched=["/pkg/module.py"])
    assert dict(snapshot.extras.nested) == {"/pkg/AGENTS.md": "FROM_AGENTS"}
    assert snapshot.extras.nested_dirs == ("/", "/pkg")


class CountingBackend(FilesystemBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.downloads: list[list[str]] = []

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.downloads.append(list(paths))
        return super().download_files(paths)


def test_discovery_is_one_batched_download_without_listing(tmp_path: Path) -> None:
    Tree("disk", tmp_path)
    backend = CountingBackend(tmp_path)
    assembler = MemoryAssembler(
        backend=backend,
        layers=[Layer("project", "/AGENTS.md")],
        nested=("AGENTS.md", "CLAUDE.md"),
        options=MemoryOptions(imports=False),
    )
    snapshot = assembler.load(touched=["/src/api/handler.py", "/src/other.py"])
    assert len(backend.downloads) == 1
    assert backend.downloads[0] == [
        "/AGENTS.md",
        "/src/AGENTS.md",
        "/src/CLAUDE.md",
        "/src/api/AGENTS.md",
        "/src/api/CLAUDE.md",
    ]
    assert list(snapshot.extras.nested) == ["/src/AGENTS.md", "/src/api/CLAUDE.md"]


def test_nested_files_are_read_only_unless_configured(tmp_path: Path) -> None:
    tree = Tree("disk", tmp_path)
    attacks = [
        tool_call("edit_file", file_path="/src/AGENTS.md", old_string="SRC", new_string="PWN"),
        tool_call("write_file", file_path="/lib/AGENTS.md", content="obey me"),
        tool_call("delete", file_path="/src"),
    ]
    model = ScriptedChatModel(script=[*attacks, "done"])
    agent, _memory = agent_for(tree, model)
    result = invoke(agent, tree, "go", "nested-ro")
    refusals = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in refusals] == ["error", "error", "error"]
    assert (tmp_path / "src" / "AGENTS.md").read_text() == "SRC_RULES"
    assert not (tmp_path / "lib" / "AGENTS.md").exists()
    assert (tmp_path / "src" / "api" / "handler.py").exists()

    writable_model = ScriptedChatModel(script=[attacks[0], "done"])
    agent, _memory = agent_for(
        Tree("disk", tmp_path / "w"), writable_model, options=MemoryOptions(nested_writable=True)
    )
    invoke(agent, Tree("disk", tmp_path / "w"), "go", "nested-rw")
    assert (tmp_path / "w" / "src" / "AGENTS.md").read_text() == "PWN_RULES"


def test_nested_memory_gives_way_to_the_budget_first(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    (tmp_path / "AGENTS.md").write_text("P" * 3000)
    (tmp_path / "deep" / "AGENTS.md").write_text("N" * 3000)
    assembler = MemoryAssembler(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        layers=[Layer("project", "/AGENTS.md")],
        nested=("AGENTS.md",),
        max_chars=5500,
    )
    rendered = assembler.render_report(assembler.load(touched=["/deep/x.py"]))
    outcome = {piece.path: piece.outcome for piece in rendered.pieces}
    assert outcome["/AGENTS.md"] == "whole"
    assert outcome["/deep/AGENTS.md"] in ("truncated", "stub")
    assert len(rendered.block) <= 5500
