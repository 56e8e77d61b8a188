"""The import graph of a package's own modules, lazy (function-level) imports included.

Used by `tests/test_layout.py` to fail on a circle of modules. A package's module importing its
parent package is how packages are built and is not an edge; a package's `__init__` importing
its own submodules is.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """The dotted name of `path`, a file of the package folder `root`."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def edges_of(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` -> the package's modules it imports, anywhere."""
    files = {module_name(root, p): p for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for imported in targets:
                target = imported
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted.

    Recursion is as deep as the longest import chain (about a hundred modules); the process-wide
    recursion limit is never raised: other tests rely on the default one.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def describe(edges: dict[str, set[str]], group: list[str]) -> str:
    """One circle as text: each module and the modules of the circle it imports."""
    inside = set(group)
    lines = [f"circle of {len(group)} modules:"]
    lines.extend(f"  {m} -> {', '.join(sorted(edges[m] & inside))}" for m in group)
    return "\n".join(lines)
