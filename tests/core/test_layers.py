"""Layer values and the path checks done before any I/O."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend, StateBackend

from layered_memory import Layer
from layered_memory.core.layers import (
    check_unique_layer_names,
    layers_from_sources,
    normalize_backend_path,
)


def test_layer_accepts_one_path_or_many_and_is_frozen() -> None:
    single = Layer("project", "/AGENTS.md")
    many = Layer("team", ["/a.md", "/b.md"], writable=True, max_lines=10, max_chars=500)
    assert single.paths == ("/AGENTS.md",)
    assert many.paths == ("/a.md", "/b.md")
    assert many.writable is True
    with pytest.raises(AttributeError):
        single.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "", "paths": "/a.md"}, "name"),
        ({"name": "x", "paths": []}, "at least one"),
        ({"name": "x", "paths": ["/a.md", ""]}, "at least one"),
        ({"name": "x", "paths": "/a.md", "max_lines": 0}, "max_lines"),
        ({"name": "x", "paths": "/a.md", "max_chars": -5}, "max_chars"),
    ],
)
def test_layer_rejects_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Layer(**kwargs)  # type: ignore[arg-type]


def test_memory_md_defaults_to_200_lines_and_explicit_cap_wins() -> None:
    assert Layer("notes", "/x/MEMORY.md").line_cap("/x/MEMORY.md") == 200
    assert Layer("project", "/AGENTS.md").line_cap("/AGENTS.md") is None
    assert Layer("notes", "/MEMORY.md", max_lines=5).line_cap("/MEMORY.md") == 5


def test_duplicate_layer_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="'project'"):
        check_unique_layer_names([Layer("project", "/a.md"), Layer("project", "/b.md")])


def test_sources_become_one_layer_each_in_order() -> None:
    layers = layers_from_sources(["/a.md", "/b.md"])
    assert [layer.paths for layer in layers] == [("/a.md",), ("/b.md",)]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/AGENTS.md", "/AGENTS.md"),
        ("AGENTS.md", "/AGENTS.md"),
        ("/docs/./x/../AGENTS.md", "/docs/AGENTS.md"),
        ("/../etc/passwd", None),
        ("/docs/../../etc/passwd", None),
    ],
)
def test_virtual_backend_paths_never_escape_the_root(
    tmp_path: Path, path: str, expected: str | None
) -> None:
    for backend in (FilesystemBackend(root_dir=tmp_path, virtual_mode=True), StateBackend()):
        normalized, reason = normalize_backend_path(path, backend)
        assert normalized == expected
        assert (reason is None) == (expected is not None)
        if expected is None:
            assert "escapes" in (reason or "")


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    normalized, reason = normalize_backend_path("/link/secret.md", backend)
    assert normalized is None
    assert "symlink" in (reason or "")


def test_tilde_expands_for_a_real_path_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    normalized, reason = normalize_backend_path("~/.agent/AGENTS.md", backend)
    assert reason is None
    assert normalized == os.path.join(tmp_path, "home", ".agent", "AGENTS.md")


def test_tilde_maps_into_a_virtual_root_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    inside = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assert normalize_backend_path("~/AGENTS.md", inside) == ("/home/AGENTS.md", None)
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    outside = FilesystemBackend(root_dir=elsewhere, virtual_mode=True)
    normalized, reason = normalize_backend_path("~/AGENTS.md", outside)
    assert normalized is None
    assert "outside the backend root" in (reason or "")


def test_host_path_backend_reads_any_absolute_path(tmp_path: Path) -> None:
    # virtual_mode=False reads host paths as deepagents does: there is no root to escape.
    project = tmp_path / "project"
    project.mkdir()
    backend = FilesystemBackend(root_dir=project, virtual_mode=False)
    outside = tmp_path / "home" / "AGENTS.md"
    assert normalize_backend_path(str(outside), backend) == (str(outside), None)
    assert normalize_backend_path("../x.md", backend) == (str(tmp_path / "x.md"), None)


def test_virtual_backend_refusing_home_names_the_composite_route(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    backend = FilesystemBackend(root_dir=project, virtual_mode=True)
    normalized, reason = normalize_backend_path("~/.deepagents/AGENTS.md", backend)
    assert normalized is None
    assert "CompositeBackend" in (reason or "")
