"""Real public rule files decide as the tools they were written for document (`corpus/`)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory.rules import RuleDecision, RuleSet, load_rule_set, render_rules

CORPUS = Path(__file__).parent / "corpus"
ROWS = list(csv.DictReader((CORPUS / "expected.csv").read_text(encoding="utf-8").splitlines()))
LISTED = "+list"
"""A `folders` value ending so is loaded with `list_unmatched=True` (VS Code's listing)."""


def rule_set_of(project: str, folders: str, root: Path = CORPUS) -> RuleSet:
    backend = FilesystemBackend(root_dir=root / project, virtual_mode=True)
    return load_rule_set(backend, folders.removesuffix(LISTED).split(";"), log=False)


def decisions_by_group(
    root: Path = CORPUS,
) -> dict[tuple[str, str], dict[tuple[str, str], RuleDecision]]:
    """For each (project, folders) of the table: the decision on each (file, key) it lists."""
    keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in ROWS:
        keys[(row["project"], row["folders"])].add(row["key"])
    found: dict[tuple[str, str], dict[tuple[str, str], RuleDecision]] = {}
    for (project, folders), group_keys in keys.items():
        rule_set = rule_set_of(project, folders, root)
        listed = folders.endswith(LISTED)
        found[(project, folders)] = {
            (decision.path, key): decision
            for key in group_keys
            for decision in rule_set.explain([key] if key else [], list_unmatched=listed)
        }
    return found


DECISIONS = decisions_by_group()


def status_of(decisions: dict[tuple[str, str], RuleDecision], row: dict[str, str]) -> str:
    """The row's decision; `not-read` when the file is no rule file to the engine at all."""
    decision = decisions.get((row["file"], row["key"]))
    return "not-read" if decision is None else decision.status


@pytest.mark.parametrize(
    "row", ROWS, ids=[f"{r['project']}{r['file']}@{r['key'] or '-'}" for r in ROWS]
)
def test_each_file_decides_as_its_tool_documents(row: dict[str, str]) -> None:
    decisions = DECISIONS[(row["project"], row["folders"])]
    decision = decisions.get((row["file"], row["key"]))
    assert status_of(decisions, row) == row["expected"], (row["basis"], str(decision))


def test_a_file_its_tool_does_not_read_is_named_with_the_reason() -> None:
    for row in ROWS:
        if row["expected"] == "not-read":
            problems = rule_set_of(row["project"], row["folders"]).problems
            assert any(p.path == row["file"] and "not read" in p.reason for p in problems), row


def test_two_tools_copies_of_one_rule_are_shown_once() -> None:
    rule_set = rule_set_of("stackone-ai-python", "/.cursor/rules;/.claude/rules")
    block = render_rules(rule_set.match(["/stackone_ai/toolset.py"]), max_chars=100_000)
    body = (CORPUS / "stackone-ai-python/.claude/rules/no-relative-imports.md").read_text()
    first_line = next(line for line in body.splitlines() if line.startswith("#"))
    assert block.count(first_line) == 1


def _with_colon(text: str) -> str | None:
    """The file with ` : see below` added to its `description:` value (None without one)."""
    lines = text.split("\n")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return None
        if line.startswith("description:") and line[len("description:") :].strip():
            value = line[len("description:") :].rstrip()
            if value.strip()[:1] in "'\"|>":
                return None  # quoted or block: a colon inside is valid YAML already
            lines[index] = f"description:{value} : see below"
            return "\n".join(lines)
    return None


def test_a_colon_in_a_cursor_or_vscode_description_changes_no_decision(tmp_path: Path) -> None:
    """Issue 39: adding a colon to `description` invalidated 151/151 Cursor and 117/117 VS
    Code files under strict YAML; their tools read the colon as text."""
    mutated = 0
    for path in CORPUS.rglob("*"):
        if not path.is_file() or "LICENSES" in path.parts:
            continue
        relative = path.relative_to(CORPUS)
        copy = tmp_path / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        name = path.name.lower()
        if name.endswith((".mdc", ".instructions.md")) or "/.cursor/rules/" in path.as_posix():
            changed = _with_colon(text)
            if changed is not None:
                text, mutated = changed, mutated + 1
        copy.write_text(text, encoding="utf-8")
    assert mutated >= 15
    decisions = decisions_by_group(tmp_path)
    for row in ROWS:
        found = status_of(decisions[(row["project"], row["folders"])], row)
        assert found == row["expected"], row


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


def test_windsurfs_character_limit_is_reported_on_a_real_file() -> None:
    problems = rule_set_of("wikipedia-reliable-sources", "/.windsurf/rules").problems
    over = [p.path for p in problems if "at most 12,000 characters" in p.reason]
    assert over == ["/.windsurf/rules/doc-as-code-guidelines.md"]
