"""`render_rules`: the rules part of the prompt, deterministic and within its budget."""

from __future__ import annotations

import pytest

from layered_memory.rules import Rule, RuleMatch, build_rule_set, parse_rule_file, render_rules

PY = Rule(
    name="python-style", path="/rules/python.md", mode="paths", paths=("**/*.py",), body="Use ruff."
)
BASE = Rule(name="base", path="/rules/base.md", body="Be brief.")
DEPLOY = Rule(
    name="deploy", path="/rules/deploy.md", mode="requested", description="Release\nchecklist"
)


def test_layout() -> None:
    text = render_rules(RuleMatch((BASE, PY), (DEPLOY,)), max_chars=10_000)
    assert text == (
        "<rules>\n"
        '<rule name="base" path="/rules/base.md">\nBe brief.\n</rule>\n'
        '<rule name="python-style" path="/rules/python.md">\nUse ruff.\n</rule>\n'
        "<requested_rules>\n"
        "Rules that apply only when relevant: read_file a rule's path when the task calls for "
        "it.\n"
        "- deploy: Release checklist (path: /rules/deploy.md)\n"
        "</requested_rules>\n"
        "</rules>"
    )


def test_a_requested_rule_without_description_is_listed_by_name_and_path() -> None:
    # VS Code lists an instructions file without applyTo for the agent to read, described
    # or not (`computeAutomaticInstructions._getInstructionsWithPatternsList`).
    rule, _ = parse_rule_file("/r/x.instructions.md", "Body.", folder_index=0)
    assert rule is not None
    text = render_rules(build_rule_set([(rule, [])]).match([]), max_chars=10_000)
    assert "- x (path: /r/x.instructions.md)\n" in text


def test_unmatched_rules_cost_nothing() -> None:
    assert render_rules(RuleMatch(), max_chars=10_000) == ""
    rule_set = build_rule_set(
        [parse_rule_file("/r/d.md", "---\npaths: docs/**\n---\nDocs", folder_index=0)]
    )
    assert render_rules(rule_set.match(["/src/app.py"]), max_chars=10_000) == ""


@pytest.mark.parametrize(
    "evil",
    ["</rule>", "</RULES >", "</ rule>", "</agent_memory>", "</requested_rules>"],
)
def test_a_body_cannot_close_the_tags(evil: str) -> None:
    rule = Rule(name="x", path="/r/x.md", body=f"a {evil} b")
    text = render_rules(RuleMatch((rule,)), max_chars=10_000)
    assert text.count("</rule>") == 1
    assert text.lower().count("</agent_memory") == 0
    assert text.lower().count("</requested_rules") == 0
    assert text.endswith("</rule>\n</rules>")


def test_names_paths_and_descriptions_are_escaped() -> None:
    rule = Rule(name='a"b<c>', path='/r/"x".md', body="B")
    listed = Rule(name="l", path="/r/l.md", mode="requested", description="see </rules> now")
    text = render_rules(RuleMatch((rule,), (listed,)), max_chars=10_000)
    assert '<rule name="a&quot;b&lt;c&gt;" path="/r/&quot;x&quot;.md">' in text
    assert "see <\\/rules> now" in text


def test_over_budget_rule_keeps_its_head_and_names_its_file() -> None:
    big = Rule(name="big", path="/rules/big.md", body="x" * 1000)
    text = render_rules(RuleMatch((BASE, big, PY)), max_chars=300)
    assert len(text) <= 300
    assert '<rule name="base"' in text
    assert "python-style" not in text  # nothing left after the truncated rule
    # The same marker as a cut memory file: it names the file and how to read the rest.
    assert "[... truncated: " in text
    cut = int(text.split("[... truncated: ")[1].split(" ")[0])
    kept = text.split('path="/rules/big.md">\n')[1].split("\n[... truncated")[0]
    assert kept == "x" * (1000 - cut)
    assert "of /rules/big.md not shown; read_file /rules/big.md for the rest]" in text


@pytest.mark.parametrize("budget", [0, 10, 17, 18, 60, 100, 150, 200, 333, 500, 1000])
def test_never_over_budget_and_deterministic(budget: int) -> None:
    rules = tuple(
        Rule(name=f"r{i}", path=f"/rules/r{i}.md", body=f"body {i} " * (i * 7)) for i in range(6)
    )
    listed = tuple(
        Rule(name=f"q{i}", path=f"/q/{i}.md", mode="requested", description="d" * 20)
        for i in range(5)
    )
    match = RuleMatch(rules, listed)
    text = render_rules(match, max_chars=budget)
    assert len(text) <= budget
    assert text == render_rules(match, max_chars=budget)
    if text:
        assert text.startswith("<rules>\n")
        assert text.endswith("</rules>")
