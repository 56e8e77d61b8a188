"""The public names are a contract: adding or removing one is a deliberate, reviewed change."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import layered_memory

CONTRACT = {  # from DESIGN.md: users and acceptance checks import these
    "MemoryMiddleware",
    "Layer",
    "HookEvent",
    "HookRegistry",
    "MemoryWriter",
    "MemoryConsolidator",
    "register_write_back",
    "build_session_key",
    "parse_session_key",
    "build_thread_config",
    "InMemorySessionStore",
    "FileSessionStore",
    "RedisSessionStore",
    "PostgresSessionStore",
    "HybridSessionStore",
}


def test_all_is_pinned() -> None:
    assert sorted(layered_memory.__all__) == sorted(
        [
            *CONTRACT,
            "InsightNotebook",
            "LayeredMemoryError",
            "MemoryAssembler",
            "MemoryOptions",
            "MemorySnapshot",
            "MemorySourceError",
            "MemoryWriteError",
            "ReviewError",
            "RuleFileError",
            "SessionKeyError",
            "SessionStore",
            "SessionStoreError",
            "StoreUnavailableError",
            "__version__",
            # write-back's notebook and tool, the guard, redaction, shared memory on a store
            "record_insight_tool",
            "protect",
            "ProtectedPaths",
            "redact",
            "ORG_AGENTS",
            "ORG_RULES",
            "PROJECT_AGENTS",
            "PROJECT_MEMORY",
            "USER_MEMORY",
            "shared_memory_backend",
            "shared_memory_layers",
            "user_namespace",
            # forgetting a subject everywhere (issue 38)
            "ForgetReport",
            "aforget",
            "forget",
        ]
    )


def test_every_exported_name_exists() -> None:
    for name in layered_memory.__all__:
        assert getattr(layered_memory, name) is not None, name


SUBPACKAGE_NAMESPACES = {  # rules, views, graph and tiers are pinned beside their own tests
    "layered_memory.sessions": [
        "KEY_PREFIX",
        "SESSION_SAVE_HANDLER_NAME",
        "SessionKey",
        "alist_thread_ids",
        "build_session_key",
        "build_thread_config",
        "current_memory",
        "default_session_formatter",
        "fan_out",
        "list_thread_ids",
        "memory_context",
        "normalize_key_part",
        "parse_session_key",
        "register_session_save",
    ],
    "layered_memory.sessions.stores": [
        "MIGRATIONS",
        "ConditionalSessionStore",
        "ExpiryAwareSessionStore",
        "FileSessionStore",
        "GenerationalSessionStore",
        "HybridSessionStore",
        "InMemorySessionStore",
        "ListableSessionStore",
        "PostgresSessionStore",
        "RedisSessionStore",
        "SessionStore",
        "StoredSession",
    ],
    "layered_memory.checkpoint": ["DEFAULT_PREFIX", "CachedCheckpointSaver"],
    "layered_memory.process_state": ["PROCESS_STATE", "ProcessState", "clear_process_caches"],
    "layered_memory.cli": [
        "EXIT_FINDINGS",
        "EXIT_OK",
        "EXIT_USAGE",
        "build_parser",
        "demo",
        "main",
    ],
    # The demo and the helpers the examples share with it (`model_failure`).
    "layered_memory.cli.demo": [
        "build_agent",
        "main",
        "make_model",
        "model_failure",
        "run",
        "run_demo",
        "scripted_model",
        "succeeded",
    ],
    # Packages whose users import from `layered_memory`: `__all__` names their modules.
    "layered_memory.core": [
        "assembler",
        "disk_cache",
        "files",
        "guard",
        "imports",
        "internals",
        "layers",
        "loading",
        "nested",
        "path_access",
        "places",
        "protection",
        "put_back",
        "render",
        "render_cache",
        "report",
        "run_data",
        "shared_memory",
        "snapshot",
        "staleness",
        "state",
        "system_message",
        "tokens",
        "tool_calls",
        "unrestored",
        "validation",
    ],
    "layered_memory.writeback": [
        "consolidation",
        "consolidation_prompt",
        "hooks",
        "insights",
        "learned",
        "lesson_effects",
        "lesson_hold",
        "review_queue",
        "sections",
    ],
    "layered_memory.safety": ["defuse", "redaction"],
    "layered_memory.forgetting": [
        "ForgetReport",
        "SessionForgotten",
        "TierForgotten",
        "aforget",
        "forget",
    ],
    "layered_memory.recall": [
        "Entry",
        "RecallQuery",
        "choose_entries",
        "split_entries",
        "tokens",
    ],
}


@pytest.mark.parametrize("module_name", sorted(SUBPACKAGE_NAMESPACES))
def test_subpackage_namespaces_are_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(SUBPACKAGE_NAMESPACES[module_name])
    for name in module.__all__:
        assert resolves(module_name, name), name


def resolves(module_name: str, name: str) -> bool:
    """`name` is an attribute of the module, or (for a package) one of its submodules."""
    module = importlib.import_module(module_name)
    if getattr(module, name, None) is not None:
        return True
    if not hasattr(module, "__path__"):
        return False
    try:
        importlib.import_module(f"{module_name}.{name}")
    except ModuleNotFoundError:
        return False
    return True


PACKAGE = Path(layered_memory.__file__).parent


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [name for name in names if not name.endswith("__main__")]


@pytest.mark.parametrize("package", [n for n in module_names() if n.count(".") < 3])
def test_every_package_declares_all(package: str) -> None:
    """A package says what it offers (its names, or its modules); every name resolves."""
    module = importlib.import_module(package)
    if not hasattr(module, "__path__"):
        return  # a module: the next test
    assert isinstance(getattr(module, "__all__", None), list), f"{package} has no __all__"
    assert [name for name in module.__all__ if not resolves(package, name)] == []


@pytest.mark.parametrize("module_name", module_names())
def test_every_name_in_an_all_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [])
    assert [name for name in names if not resolves(module_name, name)] == []
    assert len(set(names)) == len(names), f"{module_name}.__all__ repeats a name"


EXAMPLES = sorted((PACKAGE.parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_examples_import_only_public_names(example: Path) -> None:
    """An example is copied into users' code: it imports only what an `__all__` offers."""
    tree = ast.parse(example.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("layered_memory"):
            module_name = node.module or ""
            assert not any(part.startswith("_") for part in module_name.split(".")), module_name
            offered = importlib.import_module(module_name).__all__
            for alias in node.names:
                assert alias.name in offered, f"{example.name}: {module_name}.{alias.name}"


def test_no_compatibility_shims() -> None:
    """Only the public API, the middleware, errors, testing, the logger and the list of
    process-wide state live at the top."""
    top = sorted(p.name for p in Path(layered_memory.__file__).parent.glob("*.py"))
    assert top == [
        "__init__.py",
        "_logs.py",
        "errors.py",
        "middleware.py",
        "process_state.py",
        "testing.py",
    ]


DOCUMENTED_HOMES = [  # the public API and each capability's
    "layered_memory",
    "layered_memory.checkpoint",
    "layered_memory.forgetting",
    "layered_memory.process_state",
    "layered_memory.recall",
    "layered_memory.sessions",
    "layered_memory.sessions.stores",
    "layered_memory.rules",
    "layered_memory.views",
    "layered_memory.graph",
    "layered_memory.tiers",
    "layered_memory.testing",
]


def _undocumented(home: str, name: str, value: object) -> str | None:
    doc = inspect.getdoc(value) or ""
    if inspect.isclass(value):
        # A dataclass or exception documents its fields as `Attributes:`; a port (Protocol)
        # its methods.
        init = vars(value).get("__init__")
        if getattr(value, "_is_protocol", False) or not inspect.isfunction(init):
            return None
        parameters = [p for p in inspect.signature(init).parameters if p != "self"]
        if parameters and not any(s in doc for s in ("Args:", "Attributes:")):
            return f"{home}.{name}: no Args: or Attributes:"
        return None
    if not inspect.isfunction(value) or doc.startswith("Async"):  # an async twin names its twin
        return None
    signature = inspect.signature(value)
    if signature.parameters and "Args:" not in doc:
        return f"{home}.{name}: no Args:"
    returned = signature.return_annotation
    gives = "Returns:" in doc or "Yields:" in doc
    if returned not in (None, "None", inspect.Signature.empty) and not gives:
        return f"{home}.{name}: no Returns:"
    return None


@pytest.mark.parametrize("home", DOCUMENTED_HOMES)
def test_public_functions_and_classes_say_args_and_returns(home: str) -> None:
    """Google style, as deepagents: `Args:` for every parameter list, `Returns:` for a value."""
    module = importlib.import_module(home)
    found = [
        problem
        for name in module.__all__
        if (problem := _undocumented(home, name, getattr(module, name))) is not None
    ]
    assert found == []
