"""No object lies about its class: `type(obj) is obj.__class__` for every public class, and no
`__class__` property or assignment anywhere in the package (issue 34)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend, StateBackend
from langchain.agents import create_agent

from layered_memory import HookEvent, HookRegistry, Layer, MemoryMiddleware, protect
from layered_memory.testing import ScriptedChatModel

SRC = Path(__file__).resolve().parents[1] / "src" / "layered_memory"


def test_no_class_property_or_assignment_in_src() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "__class__":
                found.append(f"{path.name}:{node.lineno} defines __class__")
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "__class__":
                    found.append(f"{path.name}:{node.lineno} assigns __class__")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "__class__"
            ):
                found.append(f"{path.name}:{node.lineno} sets __class__")
    assert found == []


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "with-hooks"])
def test_middleware_is_what_it_says(tmp_path: Path, hooks: bool) -> None:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    registry = HookRegistry() if hooks else None
    for memory in (
        MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], hooks=registry),
        MemoryMiddleware(backend=backend, layers=[Layer("p", "/AGENTS.md")], hooks=registry),
    ):
        assert type(memory) is memory.__class__
        assert isinstance(memory, MemoryMiddleware)
        assert memory.name == "MemoryMiddleware"  # deepagents replaces its memory slot by name
        twin = memory.read_only()
        assert type(twin) is twin.__class__
        assert twin.hooks is None


def test_protected_backend_is_what_it_says(tmp_path: Path) -> None:
    for backend in (FilesystemBackend(root_dir=tmp_path, virtual_mode=True), StateBackend()):
        memory = MemoryMiddleware(backend=backend, layers=[Layer("p", "/AGENTS.md")])
        view = memory.protected_backend
        assert type(view) is view.__class__
        assert isinstance(view, type(backend))
        plain = protect(backend, memory.protected_paths)
        assert type(plain) is plain.__class__


def test_every_public_class_instance_is_its_type() -> None:
    """Every public class of the package whose instances carry their class honestly: no
    class of the package overrides `__class__`."""
    names = importlib.import_module("layered_memory").__all__
    for name in names:
        value = getattr(importlib.import_module("layered_memory"), name)
        if inspect.isclass(value):
            assert "__class__" not in vars(value), name
            for klass in value.__mro__:
                if klass.__module__.startswith("layered_memory"):
                    assert "__class__" not in vars(klass), klass


def _nodes(memory: MemoryMiddleware) -> set[str]:
    agent = create_agent(model=ScriptedChatModel(script=["done"]), middleware=[memory])
    return set(agent.get_graph().nodes)


def test_end_of_run_node_only_with_write_back(tmp_path: Path) -> None:
    """The drop-in adds no end-of-run node; with hooks the node runs and PIPELINE_END fires."""
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    plain = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    assert not any("after_agent" in node for node in _nodes(plain))
    seen: list[str] = []
    registry = HookRegistry()
    registry.register(HookEvent.PIPELINE_END, lambda e, _d: seen.append(e.name), name="seen")
    hooked = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], hooks=registry)
    assert "MemoryMiddleware.after_agent" in _nodes(hooked)
    agent = create_agent(model=ScriptedChatModel(script=["done"]), middleware=[hooked])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert seen == ["PIPELINE_END"]


def test_hooks_and_consolidator_are_fixed_at_construction(tmp_path: Path) -> None:
    """Setting them later could not add the graph node: an error naming the fix, never silence."""
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    memory = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    with pytest.raises(AttributeError, match=r"MemoryMiddleware\(\.\.\., hooks="):
        memory.hooks = HookRegistry()  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"MemoryMiddleware\(\.\.\., consolidator="):
        memory.consolidator = None  # type: ignore[misc]


def test_subclass_keeps_its_own_end_of_run(tmp_path: Path) -> None:
    seen: list[str] = []

    class Mine(MemoryMiddleware):  # type: ignore[type-arg]
        def after_agent(self, state, runtime):  # type: ignore[no-untyped-def]
            seen.append("mine")
            return super().after_agent(state, runtime)

    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    for hooks in (None, HookRegistry()):
        memory = Mine(backend=backend, sources=["/AGENTS.md"], hooks=hooks)
        assert type(memory) is memory.__class__
        assert isinstance(memory, Mine)
        agent = create_agent(model=ScriptedChatModel(script=["done"]), middleware=[memory])
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert seen == ["mine", "mine"]
