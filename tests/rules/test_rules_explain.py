"""`RuleSet.explain`: for every rule file, its dialect, whether it applies, and the true reason."""

from __future__ import annotations

from layered_memory.rules import RuleDecision, build_rule_set, parse_rule_file

FILES = [
    ("/org/python.md", "---\npaths: ['**/*.py']\n---\nOrg python.", 0),
    ("/team/python.md", "---\npaths: ['**/*.py', 'src/**']\n---\nTeam python.", 1),
    ("/team/docs.md", "---\nglobs: docs/**, '*.rst'\n---\nDocs.", 1),
    ("/team/acme.md", "---\npaths: '*acme*'\n---\nAcme.", 1),
    ("/team/base.md", "Always.", 1),
    ("/team/pinned.md", "---\nalwaysApply: true\n---\nPinned.", 1),
    ("/team/deploy.md", "---\ndescription: Deploy\nalwaysApply: false\n---\nSteps.", 1),
    ("/team/manual.md", "---\nalwaysApply: false\n---\nManual.", 1),
    ("/team/broken.md", "---\npaths: [unclosed\n---\nBroken.", 1),
    ("/team/ts.mdc", "---\nglobs: *.ts\n---\nTS.", 1),
    ("/team/release.mdc", "Release.", 1),
    ("/team/py.instructions.md", "---\napplyTo: ['**/*.py']\n---\nPY.", 1),
    ("/team/cs.instructions.md", "---\napplyTo: '*.cs'\n---\nCS.", 1),
    ("/.claude/rules/go.md", "---\nalwaysApply: false\n---\nGo.", 1),
]


def decisions(keys: list[str]) -> list[RuleDecision]:
    rule_set = build_rule_set(
        [parse_rule_file(p, t, folder_index=i) for p, t, i in FILES], log=False
    )
    return rule_set.explain(keys)


def test_every_status_dialect_and_reason() -> None:
    found = decisions(["README.md", "/src/app.py", "acme_corp", "web/Main.ts", "/App/X.CS"])
    assert [str(d) for d in found[:-1]] == [
        "applied: acme (/team/acme.md) [layered-memory]: key 'acme_corp' matched glob '*acme*'",
        "applied: base (/team/base.md) [layered-memory]: always applies: no paths",
        "applied: cs (/team/cs.instructions.md) [VS Code Copilot]: key '/App/X.CS' matched "
        "glob '*.cs' (as '**/*.cs'), ignoring case",
        "listed: deploy (/team/deploy.md) [layered-memory]: alwaysApply: false, a description "
        "and no paths: listed by name, description and path",
        "skipped: docs (/team/docs.md) [layered-memory]: no key matched any of "
        "['docs/**', '*.rst']",
        "applied: go (/.claude/rules/go.md) [Claude Code]: always applies: no paths "
        "(Claude Code loads it at session start)",
        "skipped: manual (/team/manual.md) [layered-memory]: alwaysApply: false, no paths and no "
        "description: injected only when a match key names it ('manual' or '@manual')",
        "applied: pinned (/team/pinned.md) [layered-memory]: always applies: alwaysApply: true",
        "listed: py (/team/py.instructions.md) [VS Code Copilot]: applyTo is a list, which "
        "VS Code ignores: listed by name, description and path",
        "applied: python (/team/python.md) [layered-memory]: key '/src/app.py' matched glob "
        "'**/*.py'",
        "skipped: release (/team/release.mdc) [Cursor]: no frontmatter (Cursor: Manual): "
        "injected only when a match key names it ('release' or '@release')",
        "applied: ts (/team/ts.mdc) [Cursor]: key 'web/Main.ts' matched glob '*.ts' (as '**/*.ts')",
        "replaced: python (/org/python.md) [layered-memory]: replaced by /team/python.md "
        "(same name 'python', later folder)",
    ]
    assert str(found[-1]).startswith(
        "invalid: broken (/team/broken.md) [layered-memory]: malformed YAML frontmatter: "
    )
    acme = found[0]
    assert (acme.status, acme.mode, acme.key, acme.glob, acme.dialect) == (
        "applied",
        "paths",
        "acme_corp",
        "*acme*",
        "layered-memory",
    )


def test_a_named_rule_says_which_key_named_it() -> None:
    found = {d.name: d for d in decisions(["@release", "deploy"])}
    assert (
        found["release"].reason == "key '@release' names the rule; no frontmatter (Cursor: Manual)"
    )
    assert (found["release"].status, found["release"].key) == ("applied", "@release")
    assert found["deploy"].status == "applied"


def test_explain_agrees_with_match() -> None:
    rule_set = build_rule_set(
        [
            parse_rule_file("/r/a.md", "---\npaths: 'src/**'\n---\nA", folder_index=0),
            parse_rule_file("/r/b.md", "---\npaths: 'lib/**'\n---\nB", folder_index=0),
        ],
        log=False,
    )
    keys = ["/home/p/src/x.py"]
    applied = {d.path for d in rule_set.explain(keys, root="/home/p") if d.status == "applied"}
    assert applied == {r.path for r in rule_set.match(keys, root="/home/p").applied} == {"/r/a.md"}


def test_no_keys_says_so() -> None:
    rule_set = build_rule_set(
        [parse_rule_file("/r/a.md", "---\npaths: 'src/**'\n---\nA", folder_index=0)], log=False
    )
    assert rule_set.explain([])[0].reason == "no match keys for ['src/**']"


def test_first_key_in_order_is_reported() -> None:
    rule_set = build_rule_set(
        [parse_rule_file("/r/a.md", "---\npaths: ['*.md', 'src/**']\n---\nA", folder_index=0)],
        log=False,
    )
    decision = rule_set.explain(["src/z.py", "a.md", "src/z.py"])[0]
    assert (decision.key, decision.glob) == ("src/z.py", "src/**")
