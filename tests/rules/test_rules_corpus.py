"""Real public rule files decide as the tools they were written for document (`corpus/`)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory.rules import RuleDecision, load_rule_set

CORPUS = Path(__file__).parent / "corpus"
ROWS = list(csv.DictReader((CORPUS / "expected.csv").read_text(encoding="utf-8").splitlines()))


def decisions_by_group() -> dict[tuple[str, str], dict[tuple[str, str], RuleDecision]]:
    """For each (project, folders) of the table: the decision on each (file, key) it lists."""
    keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in ROWS:
        keys[(row["project"], row["folders"])].add(row["key"])
    found: dict[tuple[str, str], dict[tuple[str, str], RuleDecision]] = {}
    for (project, folders), group_keys in keys.items():
        backend = FilesystemBackend(root_dir=CORPUS / project, virtual_mode=True)
        rule_set = load_rule_set(backend, folders.split(";"), log=False)
        found[(project, folders)] = {
            (decision.path, key): decision
            for key in group_keys
            for decision in rule_set.explain([key] if key else [])
        }
    return found


DECISIONS = decisions_by_group()


@pytest.mark.parametrize(
    "row", ROWS, ids=[f"{r['project']}{r['file']}@{r['key'] or '-'}" for r in ROWS]
)
def test_each_file_decides_as_its_tool_documents(row: dict[str, str]) -> None:
    decision = DECISIONS[(row["project"], row["folders"])][(row["file"], row["key"])]
    assert decision.status == row["expected"], (row["basis"], str(decision))


def test_every_corpus_file_is_sourced_and_tested() -> None:
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    files = {
        path.relative_to(CORPUS).as_posix()
        for path in CORPUS.rglob("*")
        if path.is_file() and path.parts[len(CORPUS.parts)] != "LICENSES"
    } - {"SOURCES.md", "expected.csv"}
    tested = {f"{row['project']}{row['file']}" for row in ROWS}
    assert files == tested
    for name in files:
        assert f"| `{name}` |" in sources, name


def test_every_project_license_text_is_kept() -> None:
    licenses = {path.name for path in (CORPUS / "LICENSES").iterdir()}
    for row in ROWS:
        assert any(name.startswith(f"{row['project']}-") for name in licenses), row["project"]
