"""The docs are part of the product.

Every Python block of README.md and docs/ runs as a test of its own (conftest.py). Here: the
README's program prints what the README says it prints, run in a fresh process in an empty
folder; the site builds with `--strict` and its API reference has an entry for every public
name and every parameter of `MemoryMiddleware`; the pages import only from public homes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# The modules users import from; each is documented on a page of docs/reference/.
PUBLIC_HOMES = {
    "layered_memory": "layered_memory",
    "layered_memory.rules": "rules",
    "layered_memory.sessions": "sessions",
    "layered_memory.sessions.stores": "sessions",
    "layered_memory.views": "views",
    "layered_memory.graph": "graph",
    "layered_memory.tiers": "tiers",
    "layered_memory.recall": "recall",
    "layered_memory.checkpoint": "checkpoint",
    "layered_memory.testing": "testing",
    "layered_memory.errors": "errors",
}


def fences(path: Path) -> list[tuple[list[str], str]]:
    """(info words, code) of every fenced block, `{.python notest}` read as `python notest`."""
    blocks = []
    for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
        if token.type == "fence":
            info = token.info.strip().strip("{}").split()
            blocks.append(([word.removeprefix(".") for word in info], token.content))
    return blocks


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:  # errors, testing: what the module itself defines
        names = [
            name
            for name, value in vars(module).items()
            if getattr(value, "__module__", None) == module_name
            and (inspect.isclass(value) or inspect.isfunction(value))
        ]
    return [name for name in names if not name.startswith("_")]


def test_the_readme_program_prints_what_the_readme_shows(tmp_path: Path) -> None:
    blocks = fences(ROOT / "README.md")
    program = next(code for info, code in blocks if info[:1] == ["python"])
    shown = next(code for info, code in blocks if info[:1] == ["text"])
    (tmp_path / "program.py").write_text(program, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "program.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LAYERED_MEMORY_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )
    assert result.returncode == 0, result.stderr

    def dated(text: str) -> str:
        return re.sub(r"\b\d{4}-\d{2}-\d{2}\b", "<date>", text).strip()

    assert dated(result.stdout) == dated(shown)


def test_the_readme_stays_a_front_page() -> None:
    assert len((ROOT / "README.md").read_bytes()) <= 15_000


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_pages_import_only_public_names(page: Path) -> None:
    """A page that imports from a private or internal module teaches a path that breaks."""
    for info, code in fences(page):
        if info[:1] != ["python"]:
            continue
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "layered_memory"
            ):
                assert node.module in PUBLIC_HOMES, f"{page.name}: {node.module}"
                names = public_names(node.module)
                for alias in node.names:
                    assert alias.name in names, f"{page.name}: {node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("layered_memory"):
                        assert alias.name in PUBLIC_HOMES, f"{page.name}: {alias.name}"


def test_every_python_block_is_run_or_says_why_not() -> None:
    """`notest` blocks are the exception: each needs a sentence saying why just above it."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```\s*\{?\.?python[^\n]*\bnotest\b", text, re.MULTILINE):
            before = text[: match.start()].rstrip().rsplit("\n\n", 1)[-1]
            assert "because" in before or "needs" in before, (page.name, before)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(built)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return built


def test_the_site_builds_strict_with_every_page_in_the_nav(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if relative.name == "index" else relative / "index.html")
        assert built.exists(), page


@pytest.mark.parametrize("module_name", sorted(PUBLIC_HOMES))
def test_the_api_reference_has_every_public_name(site: Path, module_name: str) -> None:
    html = (site / "reference" / PUBLIC_HOMES[module_name] / "index.html").read_text()
    anchors = set(re.findall(r'id="([\w.]+)"', html))
    missing = [name for name in public_names(module_name) if f"{module_name}.{name}" not in anchors]
    assert not missing, f"{module_name}: {missing}"


def test_every_parameter_of_memory_middleware_is_documented(site: Path) -> None:
    from layered_memory import MemoryMiddleware

    html = (site / "reference" / "layered_memory" / "index.html").read_text()
    start = html.index('id="layered_memory.MemoryMiddleware"')
    section = html[start : html.index('id="layered_memory.MemoryMiddleware.', start)]
    parameters = list(inspect.signature(MemoryMiddleware).parameters)
    assert len(parameters) >= 15
    undocumented = [name for name in parameters if f"<code>{name}</code>" not in section]
    assert not undocumented


def test_the_package_reference_opens_with_the_main_use_case(site: Path) -> None:
    """Issue 36: the page opened with five path constants; MemoryMiddleware was 18th."""
    html = (site / "reference" / "layered_memory" / "index.html").read_text()
    first = re.findall(r'id="layered_memory\.(\w+)"', html)[:3]
    assert first == ["MemoryMiddleware", "Layer", "MemoryOptions"]
