"""`layered_memory.rules` is one public namespace: its names are pinned, its modules private."""

from __future__ import annotations

import ast
from pathlib import Path

import layered_memory
import layered_memory.rules as rules

SRC = Path(layered_memory.__file__).parent


def test_all_is_pinned() -> None:
    assert sorted(rules.__all__) == [
        "DIALECT_NAMES",
        "DecisionStatus",
        "Dialect",
        "GlobError",
        "MAX_FRONTMATTER_CHARS",
        "MAX_RULE_FILE_CHARS",
        "PARTIAL_LISTING",
        "Rule",
        "RuleDecision",
        "RuleHit",
        "RuleMatch",
        "RuleMode",
        "RuleProblem",
        "RuleSet",
        "alist_rule_files",
        "aload_rule_set",
        "build_rule_set",
        "compile_glob",
        "dialect_of",
        "is_rule_file",
        "list_rule_files",
        "load_rule_set",
        "parse_loaded",
        "parse_rule_file",
        "render_rules",
    ]
    for name in rules.__all__:
        assert getattr(rules, name) is not None, name


def test_no_module_outside_rules_imports_a_private_rules_module() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.parent == SRC / "rules":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(name.startswith("layered_memory.rules._") for name in names):
                offenders.append(path.relative_to(SRC).as_posix())
    assert offenders == []
