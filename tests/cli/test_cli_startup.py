"""What a command imports: `--version`, parsing rule files and `lint` of rule files on disk
need none of deepagents, LangChain or LangGraph (about 2 s to import; issue 26). Behaviour, not
timing: each check runs in a fresh interpreter and reads `sys.modules`.
`benchmarks/cli_startup.py` measures the time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HEAVY = ("deepagents", "langchain", "langchain_core", "langgraph", "numpy")


def imported_after(code: str) -> tuple[str, list[str]]:
    """Run `code` in a new interpreter: its stdout, and the heavy packages it imported."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import sys as _sys
        _heavy = sorted({{m.split(".")[0] for m in _sys.modules}} & set({HEAVY!r}))
        print("HEAVY=" + ",".join(_heavy))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    out, _, heavy = result.stdout.rpartition("HEAVY=")
    return out, [name for name in heavy.strip().split(",") if name]


def test_version_prints_the_version_and_imports_no_framework() -> None:
    out, heavy = imported_after(
        """
        from layered_memory.cli import main
        assert main(["--version"]) == 0
        """
    )
    from layered_memory import __version__

    assert out == f"layered-memory {__version__}\n"
    assert heavy == []


def test_the_package_and_the_rule_parser_import_no_framework() -> None:
    out, heavy = imported_after(
        """
        import layered_memory
        from layered_memory.rules import build_rule_set, parse_rule_file
        text = "---\\npaths: ['src/**']\\n---\\nRuff."
        parsed = parse_rule_file("/rules/py.md", text, folder_index=0)
        rules = build_rule_set([parsed], log=False)
        applied = rules.match(["src/app.py"]).applied
        print(parsed[0].name, parsed[1], [rule.name for rule in applied])
        """
    )
    assert out == "py [] ['py']\n"
    assert heavy == []


def test_a_public_name_is_imported_on_first_use() -> None:
    out, heavy = imported_after(
        """
        import layered_memory
        print(layered_memory.MemoryMiddleware.__name__, "MemoryMiddleware" in dir(layered_memory))
        """
    )
    assert out == "MemoryMiddleware True\n"
    assert "deepagents" in heavy


def test_lint_of_rule_folders_and_files_imports_no_framework(tmp_path: Path) -> None:
    # The pre-commit hook's command: rule files on local disk are listed and read as the
    # agent's `FilesystemBackend` would, without importing it (issue 26).
    folder = tmp_path / "rules"
    (folder / "sub").mkdir(parents=True)
    (folder / "py.md").write_text("---\npaths: ['./src/**']\n---\nRuff.\n", encoding="utf-8")
    (folder / "sub" / "bad.md").write_text("---\npaths: [oops\n---\nx", encoding="utf-8")
    (folder / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    single = tmp_path / "deploy.mdc"
    single.write_text("---\ndescription: Deploying\n---\nBlue-green.\n", encoding="utf-8")
    out, heavy = imported_after(
        f"""
        from layered_memory.cli import main
        code = main(["lint", {str(folder)!r}, {str(single)!r}, "--explain", "src/app.py"])
        print("EXIT", code)
        """
    )
    assert "EXIT 1" in out  # findings: the malformed file and the latin-1 one
    for finding in ("not valid UTF-8", "malformed YAML", "can never match"):
        assert finding in out
    assert "4 rule files" in out
    assert heavy == []
