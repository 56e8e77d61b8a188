"""Process-wide state is listed, bounded and cleared in one place (`layered_memory.process_state`).

The first test reads the source: a module-level cache (`lru_cache`/`cache` decorator) or a
mutable container made at import time that is not in `PROCESS_STATE`, nor a constant named in
`CONSTANTS` below, fails it. A new cache gets an entry (with its bound); a new table that is
never changed gets a line in `CONSTANTS`.
"""

from __future__ import annotations

import ast
import gc
import importlib
from pathlib import Path

import layered_memory
from layered_memory.process_state import PROCESS_STATE, clear_process_caches

PACKAGE = Path(layered_memory.__file__).parent

# Module-level values that look mutable but are never changed after import: tables, sentinels,
# type variables, per-context (not per-process) variables. Module -> names.
CONSTANTS: dict[str, set[str]] = {
    "layered_memory": {"_HOMES", "_HOME_OF"},
    "layered_memory._logs": {"_FILTER"},  # a stateless logging filter
    "layered_memory.checkpoint._redis_side": {"_SCRIPTS"},
    "layered_memory.cli": {"CHECKS"},
    "layered_memory.cli._output": {"_NAMED", "_STYLES", "SEVERITY_STYLE"},
    "layered_memory.cli.doctor": {"_ORDER"},
    "layered_memory.cli.inspect": {"_STATUS_STYLE", "_SHOWN_WORDS", "_RULE_WHY"},
    "layered_memory.cli.sync": {"_STATUS_STYLE"},
    "layered_memory.core.guard": {"REDACTED_ARGUMENTS", "MEMORY_TOOL_WRITES"},
    "layered_memory.core.guard._view": {"_BUSY"},  # a ContextVar: per context
    "layered_memory.core.internals": {"WRITTEN_FOR", "_BACKEND_HOMES"},
    "layered_memory.core.loading": {"_DOWNLOAD_ERROR_REASONS", "_NO_EXTRAS"},
    "layered_memory.core.put_back": {"_RUN"},  # a ContextVar: per context
    "layered_memory.core.render": {"CHARS"},  # a frozen value: cut markers count characters
    "layered_memory.core.tool_calls": {"MUTATING_TOOLS", "MEMORY_TOOL_CHANGES"},
    "layered_memory.graph._format": {
        "_DECODER",
        "_ENTITY_ORDER",
        "_RELATION_ORDER",
        "_GRAPH_ORDER",
    },
    "layered_memory.graph._tools": {"_DATA_KEYS", "SPECS"},
    "layered_memory.middleware": {"MemoryMiddleware.trace_policy"},
    "layered_memory.rules._parse": {
        "DIALECT_NAMES",
        "LEGACY_RULE_FILES",
        "_NATIVE_FIELDS",
        "_FIELD_OWNERS",
        "_SCOPE_FIELD",
        "_READERS",
    },
    "layered_memory.safety.defuse": {"LOOKALIKES", "_EXTRA_LOOKALIKES", "_ALL_LOOKALIKES"},
    "layered_memory.safety._detector": {"_ASCII_LOWER"},
    "layered_memory.safety._named_fields": {"_CLOSERS"},
    "layered_memory.safety.redaction": {"_PRECEDENCE"},
    "layered_memory.sessions.fanout": {"_memory"},  # a ContextVar: per context
    "layered_memory.sessions.stores.hybrid": {"SKIPPED"},  # a sentinel
    # The deadline watchdog holds the deadlines of sockets in use (not a cache): see its class.
    "layered_memory.sessions.stores.resilience": {"_WATCHDOG"},
    "layered_memory.sessions.stores.postgres": {"MIGRATIONS"},
    "layered_memory.tiers._editing": {"_KINDS"},
    "layered_memory.recall.periods": {"_MONTHS", "_RELATIVE"},
    "layered_memory.views._conversation": {"_KINDS"},
    "layered_memory.views._view": {"VISIBLE"},
    "layered_memory.views.settings": {"MemoryProfileFactory._PROFILES"},
    "layered_memory.writeback.consolidation": {"_OWN_RUN"},
    "layered_memory.writeback.consolidation_prompt": {"UPDATE_MEMORY_TOOL"},
}

# Calls whose result is never a cache: type-level helpers and locks.
NOT_STATE_CALLS = {
    *("TypeVar", "TypedDict", "NewType", "ParamSpec"),
    *("Lock", "RLock", "Condition"),
    *("PrivateAttr", "Field"),  # pydantic field declarations: per instance
}
MUTABLE_CALLS = {
    "dict",
    "list",
    "set",
    "OrderedDict",
    "defaultdict",
    "deque",
    "Counter",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "WeakSet",
    "ContextVar",
}
MUTABLE_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _looks_mutable(value: ast.expr) -> bool:
    if isinstance(value, MUTABLE_DISPLAYS):
        return True
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in NOT_STATE_CALLS:
        return False
    # An instance of a class (CamelCase, private or not) may hold anything: list it or allow it.
    return name in MUTABLE_CALLS or name.lstrip("_")[:1].isupper()


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import: the body, and inside its `if`/`try`/`with` blocks."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.With):
            found += _statements(node.body) + _statements(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try):
            found += _statements(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                found += _statements(handler.body)
    return found


def _assigned(body: list[ast.stmt], prefix: str = "") -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in _statements(body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id != "__all__" and _looks_mutable(value):
                found.append((prefix + target.id, node.lineno))
    return found


def process_state_in_source() -> dict[tuple[str, str], str]:
    """(module, name) -> where, for every cache and module-level mutable value in src."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        candidates = _assigned(tree.body)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                candidates += _assigned(node.body, f"{node.name}.")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    text = ast.unparse(decorator)
                    if "cache" in text and "cached_property" not in text:
                        candidates.append((node.name, node.lineno))
            if isinstance(node, ast.Global):
                candidates += [(name, node.lineno) for name in node.names]
        for name, line in candidates:
            found[(module, name)] = f"{path.relative_to(PACKAGE.parent)}:{line}"
    return found


def test_every_module_level_cache_and_registry_is_listed() -> None:
    listed = {(entry.module, entry.name) for entry in PROCESS_STATE}
    allowed = {(module, name) for module, names in CONSTANTS.items() for name in names}
    unlisted = {
        where: name
        for (module, name), where in process_state_in_source().items()
        if (module, name) not in listed | allowed
    }
    assert not unlisted, (
        "module-level state not in layered_memory.process_state.PROCESS_STATE (a cache or "
        f"registry: add an entry with its bound) nor in CONSTANTS here (never changed): {unlisted}"
    )


def test_every_listed_entry_exists_with_its_bound() -> None:
    for entry in PROCESS_STATE:
        found: object = importlib.import_module(entry.module)
        for part in entry.name.split("."):
            found = getattr(found, part)
        cache_info = getattr(found, "cache_info", None)
        if entry.kind == "lru_cache":
            assert cache_info is not None, entry
            assert entry.maxsize is not None, f"{entry.name}: an unbounded cache"
            assert cache_info().maxsize == entry.maxsize, entry
        else:
            assert cache_info is None, f"{entry.name} is an lru_cache: say so"
        module = importlib.import_module(entry.module)
        if entry.clear is not None:
            assert callable(getattr(module, entry.clear)), entry
        if entry.lock is not None:
            assert hasattr(getattr(module, entry.lock), "acquire"), entry


def test_nothing_stale_is_listed() -> None:
    in_source = process_state_in_source()
    stale = [e for e in PROCESS_STATE if (e.module, e.name) not in in_source]
    assert not stale


def test_clear_process_caches_empties_every_cache(tmp_path: Path) -> None:
    from deepagents.backends import FilesystemBackend

    from layered_memory import Layer, MemoryAssembler
    from layered_memory.core import disk_cache, loading

    for entry in PROCESS_STATE:  # every clearing path runs, not only the core's
        importlib.import_module(entry.module)
    (tmp_path / "AGENTS.md").write_text("# Project\n\n@notes.md\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("notes\n", encoding="utf-8")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "py.md").write_text("---\npaths: ['**/*.py']\n---\nUse ruff.\n", encoding="utf-8")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assembler = MemoryAssembler(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/rules"]
    )
    assembler.render(assembler.load())
    lru_caches = [
        getattr(importlib.import_module(entry.module), entry.name)
        for entry in PROCESS_STATE
        if entry.kind == "lru_cache"
    ]
    filled = [cache for cache in lru_caches if cache.cache_info().currsize]
    assert loading._references in filled
    assert disk_cache._read_caches

    clear_process_caches()

    assert [cache for cache in lru_caches if cache.cache_info().currsize] == []
    assert not disk_cache._read_caches
    assert not disk_cache._listing_caches
    assert not loading._lexical_plans


def test_file_locks_live_only_while_used(tmp_path: Path) -> None:
    from layered_memory.core import files

    path = str(tmp_path / "MEMORY.md")
    held = files._lock_for_file(path)
    assert files._lock_for_file(path) is held  # one lock per file while anyone uses it
    with held.hold():
        assert files._lock_for_file(path) is held
    del held
    gc.collect()
    assert path not in files._file_locks

    backend = object.__new__(type("Backend", (), {}))
    lock = files._lock_for_backend(backend, "/MEMORY.md")
    assert files._lock_for_backend(backend, "/MEMORY.md") is lock
    del lock
    gc.collect()
    assert not files._backend_locks.get(backend)


def test_disk_cache_registries_are_bounded(tmp_path: Path) -> None:
    from deepagents.backends import FilesystemBackend

    from layered_memory.core import disk_cache

    disk_cache.clear_shared_caches()
    bound = disk_cache.MAX_SHARED_FOLDERS
    backends = []
    for number in range(bound + 5):
        folder = tmp_path / f"user{number}"
        folder.mkdir()
        backends.append(FilesystemBackend(root_dir=folder, virtual_mode=True))
        disk_cache.read_cache_for(backends[-1])
        disk_cache.listing_cache_for(backends[-1], ["/rules"])
    assert len(disk_cache._read_caches) == bound
    assert len(disk_cache._listing_caches) == bound
    # The most recently used folder is kept; the first ones went.
    assert disk_cache.read_cache_for(backends[-1]) is disk_cache.read_cache_for(backends[-1])
    assert (str(backends[0].cwd), True) not in disk_cache._read_caches
