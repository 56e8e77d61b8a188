"""A wrong constructor argument fails at once, naming the parameter, what came and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StateBackend

from layered_memory import (
    HookRegistry,
    Layer,
    MemoryAssembler,
    MemoryMiddleware,
    MemoryOptions,
)


@pytest.fixture
def backend(tmp_path: Path) -> FilesystemBackend:
    return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)


LAYERS = [Layer("project", "/AGENTS.md")]

BAD_ARGUMENTS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    (
        "writable-file-in-read-only-folder",
        {"layers": [Layer("team", "/memories/"), Layer("notes", "/memories/n.md", writable=True)]},
        ValueError,
        r"'notes' makes /memories/n.md writable, but it is inside the read-only folder layer "
        r"'team'.*make layer 'team' writable",
    ),
    (
        "layer-as-path",
        {"layers": ["/AGENTS.md"]},
        TypeError,
        r"layers\[0\] must be a Layer.*sources=\[\.\.\.\]",
    ),
    (
        "one-layer",
        {"layers": Layer("project", "/AGENTS.md")},
        TypeError,
        r"layers must be a list of Layer objects.*not one Layer",
    ),
    (
        "layers-string",
        {"layers": "/AGENTS.md"},
        TypeError,
        r"layers must be a list.*sources=\[\.\.\.\]",
    ),
    (
        "layers-dict",
        {"layers": {"project": "/AGENTS.md"}},
        TypeError,
        r"layers must be a list of Layer objects; got dict",
    ),
    (
        "match-keys-string",
        {"layers": LAYERS, "match_keys": "entity_name"},
        TypeError,
        r"match_keys=\['entity_name'\]",
    ),
    (
        "match-keys-number",
        {"layers": LAYERS, "match_keys": [3]},
        TypeError,
        r"match_keys\[0\] must be a context name",
    ),
    (
        "max-chars-str",
        {"layers": LAYERS, "max_chars": "48000"},
        TypeError,
        r"max_chars must be an int.*got str",
    ),
    (
        "max-chars-float",
        {"layers": LAYERS, "max_chars": 4.8e4},
        TypeError,
        r"max_chars must be an int.*got float",
    ),
    (
        "max-chars-bool",
        {"layers": LAYERS, "max_chars": True},
        TypeError,
        r"max_chars must be an int.*got bool",
    ),
    (
        "options-dict",
        {"layers": LAYERS, "options": {"max_rules_chars": 100}},
        TypeError,
        r"options must be a MemoryOptions\(\.\.\.\) or None; got dict",
    ),
    (
        "hooks-list",
        {"layers": LAYERS, "hooks": [print]},
        TypeError,
        r"hooks must be a HookRegistry or None; got list.*HookRegistry\(\)",
    ),
    ("sources-string", {"sources": "/AGENTS.md"}, TypeError, r"sources=\['/AGENTS.md'\]"),
    ("rules-string", {"layers": LAYERS, "rules": "/rules"}, TypeError, r"rules=\['/rules'\]"),
    (
        "sources-item",
        {"sources": ["/AGENTS.md", 7]},
        TypeError,
        r"sources\[1\] must be a str or os.PathLike",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [case[1:] for case in BAD_ARGUMENTS],
    ids=[case[0] for case in BAD_ARGUMENTS],
)
def test_bad_argument_is_named(
    backend: FilesystemBackend, arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        MemoryMiddleware(backend=backend, **arguments)


@pytest.mark.parametrize("value", ["/srv/project", 42, None, FilesystemBackend])
def test_backend_must_be_a_backend_or_a_factory(value: Any) -> None:
    with pytest.raises(TypeError, match=r"backend must be a deepagents backend .* or a factory"):
        MemoryMiddleware(backend=value, layers=LAYERS)


def test_backend_factory_is_resolved_per_run(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("From the factory's backend.")
    seen: list[Any] = []

    def factory(runtime: Any) -> FilesystemBackend:
        seen.append(runtime)
        return FilesystemBackend(root_dir=tmp_path, virtual_mode=True)

    memory = MemoryMiddleware(backend=factory, layers=LAYERS)
    state = memory.before_agent({"messages": []}, None, {"configurable": {"thread_id": "t"}})
    assert state is not None
    assert state["memory_contents"] == {"/AGENTS.md": "From the factory's backend."}
    assert seen[0].config == {"configurable": {"thread_id": "t"}}
    assert memory.read_only().before_agent({"messages": []}, None, {}) is not None


def test_paths_may_be_path_objects(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Project.")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    layer = Layer("project", tmp_path / "AGENTS.md")
    assert layer.paths == (str(tmp_path / "AGENTS.md"),)
    assert Layer("both", [tmp_path / "a.md", "/b.md"]).paths == (str(tmp_path / "a.md"), "/b.md")
    memory = MemoryMiddleware(backend=backend, sources=[tmp_path / "AGENTS.md"])
    state = memory.before_agent({}, None, {})
    assert state is not None
    assert list(state["memory_contents"].values()) == ["Project."]


@pytest.mark.parametrize(
    ("paths", "error", "message"),
    [
        (b"/AGENTS.md", TypeError, "paths must be a str, an os.PathLike or a list of them"),
        ([1], TypeError, "path must be a str or os.PathLike path; got int"),
        ([], ValueError, "needs at least one non-empty path"),
        (["  "], ValueError, "needs at least one non-empty path"),
    ],
)
def test_layer_paths_are_checked(paths: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Layer("project", paths)


def test_layer_caps_reject_bools() -> None:
    with pytest.raises(ValueError, match="max_lines must be a positive int"):
        Layer("notes", "/MEMORY.md", max_lines=True)


def test_valid_arguments_still_work(backend: FilesystemBackend) -> None:
    MemoryMiddleware(
        backend=backend,
        layers=(Layer("project", "/AGENTS.md"),),
        match_keys=("entity_name", lambda state, runtime: ["x"]),
        hooks=HookRegistry(),
        max_chars=10_000,
        options=MemoryOptions(max_rules_chars=0),
    )
    MemoryMiddleware(backend=StateBackend(), sources=[])


SHARED_BAD_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("rules-string", {"rules": "/.agents/rules"}),
    ("rules-item", {"rules": ["/rules", 7]}),
    ("rules-dict", {"rules": {"/rules": True}}),
    ("layer-as-path", {"layers": ["/AGENTS.md"]}),
    ("one-layer", {"layers": Layer("project", "/AGENTS.md")}),
    ("layers-string", {"layers": "/AGENTS.md"}),
    ("duplicate-layer-names", {"layers": [Layer("p", "/A.md"), Layer("p", "/B.md")]}),
    ("max-chars-str", {"max_chars": "100"}),
    ("max-chars-bool", {"max_chars": True}),
    ("max-chars-too-small", {"max_chars": 10}),
    ("max-chars-zero", {"max_chars": 0}),
    ("options-dict", {"options": {"imports": False}}),
    ("system-prompt-number", {"system_prompt": 42}),
    ("system-prompt-no-slot", {"system_prompt": "no slot here"}),
    ("nested-string", {"nested": "AGENTS.md"}),
    ("nested-path", {"nested": ["docs/AGENTS.md"]}),
    ("backend-path", {"backend": "/srv/project"}),
    ("backend-class", {"backend": FilesystemBackend}),
]


@pytest.mark.parametrize(
    "arguments",
    [case[1] for case in SHARED_BAD_ARGUMENTS],
    ids=[case[0] for case in SHARED_BAD_ARGUMENTS],
)
def test_assembler_validates_as_the_middleware_does(
    backend: FilesystemBackend, arguments: dict[str, Any]
) -> None:
    """One validation path (issue 26): `MemoryAssembler(rules="/.agents/rules")` used to read
    the string letter by letter, and `layers=["/AGENTS.md"]` or `max_chars="100"` failed at
    the first load with a raw error, where `MemoryMiddleware` raised a clear `TypeError`."""
    options = {"backend": backend, "layers": LAYERS, **arguments}
    with pytest.raises((TypeError, ValueError)) as by_middleware:
        MemoryMiddleware(**options)
    with pytest.raises((TypeError, ValueError)) as by_assembler:
        MemoryAssembler(**options)
    assert type(by_assembler.value) is type(by_middleware.value)
    assert str(by_assembler.value) == str(by_middleware.value)
    assert "parameter" not in str(by_assembler.value)  # a named argument, not Python's message


def test_assembler_takes_path_objects_as_the_middleware_does(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "style.md").write_text("Use tabs.")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    assembler = MemoryAssembler(backend=backend, layers=[], rules=[tmp_path / "rules"])
    assert assembler.rule_folders == (str(tmp_path / "rules"),)
    assert list(assembler.load().rule_files) == [str(tmp_path / "rules" / "style.md")]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"max_rules_chars": None}, TypeError, r"MemoryOptions.max_rules_chars must be an int"),
        ({"max_rules_chars": -1}, ValueError, r"MemoryOptions.max_rules_chars must be >= 0"),
        ({"rules_writable": "false"}, TypeError, r"rules_writable must be True or False"),
        ({"nested_writable": 1}, TypeError, r"nested_writable must be True or False"),
        ({"imports": "yes"}, TypeError, r"imports must be True, False or 'anywhere'"),
    ],
)
def test_bad_option_is_named(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        MemoryOptions(**arguments)


def test_options_are_shared_by_the_assembler_and_the_read_only_twin(
    backend: FilesystemBackend,
) -> None:
    options = MemoryOptions(
        max_rules_chars=500, rules_writable=True, nested_writable=True, imports="anywhere"
    )
    memory = MemoryMiddleware(backend=backend, layers=LAYERS, nested=["AGENTS.md"], options=options)
    assert memory.assembler.options is options
    assert (memory.assembler.max_rules_chars, memory.assembler.follow_imports) == (500, "anywhere")
    twin = memory.read_only()
    assert twin.assembler.options == MemoryOptions(
        max_rules_chars=500, rules_writable=False, nested_writable=False, imports="anywhere"
    )
    drop_in = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    assert drop_in.assembler.follow_imports is False  # as deepagents: no imports
    assert drop_in.read_only().assembler.follow_imports is False
