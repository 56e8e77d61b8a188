"""`RuleSet.explain`: for every rule file, applied or skipped, and why."""

from __future__ import annotations

from layered_memory.rules import RuleDecision, build_rule_set, parse_rule_file


def test_every_status_and_reason() -> None:
    files = [
        ("/org/python.md", "---\npaths: ['**/*.py']\n---\nOrg python.", 0),
        ("/team/python.md", "---\npaths: ['**/*.py', 'src/**']\n---\nTeam python.", 1),
        ("/team/docs.md", "---\nglobs: docs/**, '*.rst'\n---\nDocs.", 1),
        ("/team/acme.md", "---\npaths: '*acme*'\n---\nAcme.", 1),
        ("/team/base.md", "Always.", 1),
        ("/team/pinned.md", "---\nalwaysApply: true\n---\nPinned.", 1),
        ("/team/deploy.md", "---\ndescription: Deploy\nalwaysApply: false\n---\nSteps.", 1),
        ("/team/manual.md", "---\nalwaysApply: false\n---\nManual.", 1),
        ("/team/z-dup.md", "---\nname: base\n---\nDuplicate.", 1),
        ("/team/broken.md", "---\npaths: 3\n---\nBroken.", 1),
    ]
    rule_set = build_rule_set(
        [parse_rule_file(p, t, folder_index=i) for p, t, i in files], log=False
    )
    decisions = rule_set.explain(["README.md", "/src/app.py", "acme_corp"])
    assert decisions == [
        RuleDecision(
            "acme",
            "/team/acme.md",
            "applied",
            "key 'acme_corp' matched glob '*acme*'",
            "paths",
            "acme_corp",
            "*acme*",
        ),
        RuleDecision("base", "/team/base.md", "applied", "always applies (no paths)", "always"),
        RuleDecision(
            "deploy",
            "/team/deploy.md",
            "listed",
            "agent-requested: listed by name, description and path only",
            "requested",
        ),
        RuleDecision(
            "docs",
            "/team/docs.md",
            "skipped",
            "no key matched any of ['docs/**', '*.rst']",
            "paths",
        ),
        RuleDecision(
            "manual",
            "/team/manual.md",
            "skipped",
            "alwaysApply: false with no paths and no description: never injected",
            "manual",
        ),
        RuleDecision(
            "pinned", "/team/pinned.md", "applied", "always applies (alwaysApply: true)", "always"
        ),
        RuleDecision(
            "python",
            "/team/python.md",
            "applied",
            "key '/src/app.py' matched glob '**/*.py'",
            "paths",
            "/src/app.py",
            "**/*.py",
        ),
        RuleDecision(
            "python",
            "/org/python.md",
            "replaced",
            "replaced by /team/python.md (same name 'python', higher folder)",
            "paths",
        ),
        RuleDecision(
            "base",
            "/team/z-dup.md",
            "replaced",
            "duplicate name 'base' in the same folder: /team/base.md is used",
            "always",
        ),
        RuleDecision(
            "broken",
            "/team/broken.md",
            "invalid",
            "paths must be a string or a list of strings (got int)",
        ),
    ]
    assert str(decisions[0]) == (
        "applied: acme (/team/acme.md): key 'acme_corp' matched glob '*acme*'"
    )


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
