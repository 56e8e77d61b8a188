"""The floor plan holds: private modules stay in their package, imports run downward.

The layers and the independence of the capabilities are import-linter contracts in
pyproject.toml (`make lint` runs them too); what import-linter has no contract type for (an
underscore module imported from outside its own package, a circle of modules through lazy
imports) is checked here.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from import_graph import circles, describe, edges_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "layered_memory"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    """The package a module belongs to (a package's `__init__` belongs to that package)."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_modules(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [name for name in names if name.startswith("layered_memory.")]


def test_private_modules_are_imported_only_inside_their_package() -> None:
    modules = {module_name(path) for path in PACKAGE.rglob("*.py")}
    crossings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = package_of(path)
        for name in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            if name not in modules:
                continue  # a name imported from a module, not a module
            owner, _, last = name.rpartition(".")
            private = last.startswith("_") and last != "__init__"
            # The top package's private modules (the logger) serve every subpackage.
            if (
                private
                and owner != "layered_memory"
                and not (importer == owner or importer.startswith(owner + "."))
            ):
                crossings.append(f"{module_name(path)} imports {name}")
    assert crossings == []


def test_no_circle_of_modules() -> None:
    """No module reaches itself through imports, function-level (lazy) imports included:
    import-linter ignores those, and a lazy import is how a circle hides."""
    edges = edges_of(PACKAGE)
    assert [describe(edges, group) for group in circles(edges)] == []


def test_the_circle_check_finds_a_lazy_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub import a\n")
    (package / "sub" / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.sub.a import x\n")
    (package / "c.py").write_text("from . import b\n")  # one way: not a circle
    edges = edges_of(package)
    assert circles(edges) == [["pkg.b", "pkg.sub.a"]]


def test_every_core_module_has_a_layer() -> None:
    """core is layered module by module in pyproject.toml: a new module must take its place."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "Imports run downward"
    ]
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    core = PACKAGE / "core"
    modules = {
        f"layered_memory.core.{path.stem if path.is_file() else path.name}"
        for path in core.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()
    }
    assert sorted(modules - layered) == []


def test_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.fail("lint-imports is missing: install the dev extra (pip install -e '.[dev]')")
    result = subprocess.run(
        [lint_imports, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_every_exception_class_is_in_errors() -> None:
    exceptions = {"Exception", "ValueError", "TypeError", "LookupError", "OSError", "KeyError"}
    errors = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    exceptions |= {node.name for node in errors.body if isinstance(node, ast.ClassDef)}
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
                if bases & exceptions or node.name.endswith(("Error", "Exception")):
                    elsewhere.append(f"{module_name(path)}.{node.name}")
    assert elsewhere == []
