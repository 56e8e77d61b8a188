"""Matching: glob semantics, key forms, overrides, ordering, and the index against brute force."""

from __future__ import annotations

import random
import re

import pytest

from layered_memory.rules import (
    Rule,
    RuleHit,
    RuleSet,
    build_rule_set,
    compile_glob,
    parse_rule_file,
)


def rule_set_of(*files: tuple[str, str, int]) -> RuleSet:
    return build_rule_set(
        [parse_rule_file(path, text, folder_index=index) for path, text, index in files], log=False
    )


def globs_rule(*globs: str, name: str = "r", folder: int = 0) -> tuple[str, str, int]:
    listed = ", ".join(f"'{glob}'" for glob in globs)
    return (f"/rules{folder}/{name}.md", f"---\npaths: [{listed}]\n---\nBody of {name}.", folder)


def matches(glob: str, key: str, root: str = "/") -> bool:
    return bool(rule_set_of(globs_rule(glob)).match([key], root=root).applied)


@pytest.mark.parametrize(
    ("glob", "key", "expected"),
    [
        # `**` crosses folders, `*` does not.
        ("**/*.py", "/src/app.py", True),
        ("**/*.py", "app.py", True),
        ("**/*.py", "src/deep/er/app.py", True),
        ("**/*.py", "src/app.pyc", False),
        ("*.py", "app.py", True),
        ("*.py", "src/app.py", False),
        ("src/**", "/src/app.py", True),
        ("src/**", "src/a/b/c.txt", True),
        ("src/**", "src", False),
        ("src/**", "/lib/src/app.py", False),
        ("src/*", "src/a/b.py", False),
        ("src/*", "src/a.py", True),
        ("docs/**/*.md", "docs/a.md", True),
        ("docs/**/*.md", "docs/x/y/a.md", True),
        ("docs/**/*.md", "docs/x/y/a.txt", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("tests/test_*.py", "/tests/test_api.py", True),
        ("tests/test_*.py", "tests/unit/test_api.py", False),
        ("docs/", "docs/guide/intro.md", True),
        ("/src/**", "/src/app.py", True),
        ("/src/**", "src/app.py", False),
        # ?, classes, braces, escapes
        ("file?.md", "file1.md", True),
        ("file?.md", "file10.md", False),
        ("?", "/", False),
        ("[abc].md", "b.md", True),
        ("[!abc].md", "b.md", False),
        ("[^abc].md", "d.md", True),
        ("[a-c]x", "bx", True),
        ("[]]x", "]x", True),
        ("a[/]b", "a/b", False),
        ("**/*.{ts,tsx}", "web/App.tsx", True),
        ("**/*.{ts,tsx}", "web/App.js", False),
        ("{src,lib/{a,b}}/**", "lib/b/x.py", True),
        ("{src,lib/{a,b}}/**", "lib/c/x.py", False),
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
        ("a**b", "a/b", False),  # `**` inside a segment is `*`
        ("a**b", "axxb", True),
        ("**", "anything/at/all", True),
        # `*` alone names something: never the empty first segment of an absolute key.
        ("*/README.md", "/README.md", False),
        ("*/README.md", "docs/README.md", True),
        ("*/src/**/*.*", "/src/index.ts", False),
        ("*/src/**/*.*", "/pkg/src/index.ts", True),
        ("**/*/x", "/x", False),
        ("*", "/", False),
        # Case matters, unless the rule is VS Code's (`test_rules_parse`).
        ("**/*.py", "src/APP.PY", False),
        # Context strings.
        ("*acme*", "acme_corp", True),
        ("*acme*", "globex", False),
        ("*acme*", "/clients/acme/notes.md", False),
        ("acme_corp", "acme_corp", True),
        ("acme_corp", "acme_corporation", False),
        ("task:*", "task:review", True),
    ],
)
def test_glob_semantics(glob: str, key: str, expected: bool) -> None:
    assert matches(glob, key) is expected


@pytest.mark.parametrize(
    ("key", "root", "expected"),
    [
        ("/home/u/proj/src/app.py", "/home/u/proj", True),
        ("/home/u/proj/src/app.py", "/home/u/proj/", True),
        ("/home/u/other/src/app.py", "/home/u/proj", False),
        ("/home/u/projx/src/app.py", "/home/u/proj", False),
        ("src/app.py", "/home/u/proj", True),
        ("./src/app.py", "/", True),
        ("/src//x/../app.py", "/", True),
        ("  src/app.py  ", "/", True),
    ],
)
def test_keys_are_tested_as_given_and_relative_to_root(key: str, root: str, expected: bool) -> None:
    assert matches("src/*.py", key, root) is expected


def test_acme_rule_for_acme_corp_not_globex() -> None:
    rule_set = rule_set_of(globs_rule("*acme*", name="acme"), ("/rules0/base.md", "Base.", 0))
    assert [r.name for r in rule_set.match(["acme_corp"]).applied] == ["acme", "base"]
    assert [r.name for r in rule_set.match(["globex"]).applied] == ["base"]


def test_match_result_fields_and_order() -> None:
    rule_set = rule_set_of(
        globs_rule("**/*.py", name="python", folder=1),
        globs_rule("docs/**", name="docs", folder=0),
        globs_rule("src/**", "**/*.py", name="src", folder=0),
        ("/rules0/always.md", "Always.", 0),
        ("/rules1/deploy.md", "---\ndescription: Deploy\nalwaysApply: false\n---\nSteps", 1),
        ("/rules1/manual.md", "---\nalwaysApply: false\n---\nHidden", 1),
    )
    match = rule_set.match(["README.md", "/src/app.py", "/src/b.py"])
    # lower folder first, then by name
    assert [r.name for r in match.applied] == ["always", "src", "python"]
    assert [r.name for r in match.requested] == ["deploy"]
    assert match.hits == (
        RuleHit("src", "/rules0/src.md", "/src/app.py", "src/**"),
        RuleHit("python", "/rules1/python.md", "/src/app.py", "**/*.py"),
    )
    assert hash(match) == hash(rule_set.match(["README.md", "/src/app.py", "/src/b.py"]))
    assert [r.name for r in rule_set.rules] == [
        "always",
        "docs",
        "src",
        "deploy",
        "manual",
        "python",
    ]


def test_no_keys_gives_only_always_and_requested_rules() -> None:
    rule_set = rule_set_of(globs_rule("**", name="all"), ("/rules0/base.md", "B", 0))
    match = rule_set.match([])
    assert [r.name for r in match.applied] == ["base"]
    assert match.hits == ()
    assert bool(build_rule_set([]).match(["x"])) is False


def test_higher_folder_replaces_same_name() -> None:
    rule_set = rule_set_of(
        ("/org/python.md", "---\npaths: '**/*.py'\n---\nOrg.", 0),
        ("/team/python.md", "---\npaths: 'src/**'\n---\nTeam.", 1),
    )
    assert [r.path for r in rule_set.rules] == ["/team/python.md"]
    assert rule_set.match(["lib/x.py"]).applied == ()  # the org globs are gone too
    assert [r.body for r in rule_set.match(["src/x.py"]).applied] == ["Team."]
    assert [(a.path, b.path) for a, b in rule_set.replaced] == [
        ("/org/python.md", "/team/python.md")
    ]


def test_within_one_folder_every_file_is_its_own_rule() -> None:
    # Cursor and Claude Code load every file they find: `python.mdc` and `python/python.mdc`.
    rule_set = rule_set_of(
        ("/rules/python/python.mdc", "---\nglobs: '*.py'\n---\nNested.", 0),
        ("/rules/python.mdc", "---\nalwaysApply: true\n---\nTop.", 0),
        ("/rules/b.md", "---\nname: style\n---\nB", 0),
        ("/rules/a.md", "---\nname: style\n---\nA", 0),
    )
    assert [r.path for r in rule_set.rules] == [
        "/rules/python.mdc",
        "/rules/python/python.mdc",
        "/rules/a.md",
        "/rules/b.md",
    ]
    assert (rule_set.problems, rule_set.replaced) == ((), ())
    assert [r.body for r in rule_set.match(["/src/app.py"]).applied] == [
        "Top.",
        "Nested.",
        "A",
        "B",
    ]


def test_a_later_folder_replaces_every_same_named_rule_of_earlier_ones() -> None:
    rule_set = rule_set_of(
        ("/org/python.md", "Org.", 0),
        ("/org/lang/python.md", "Org lang.", 0),
        ("/team/python.md", "Team.", 1),
        ("/team/x/python.md", "Team x.", 1),
    )
    assert [r.path for r in rule_set.rules] == ["/team/python.md", "/team/x/python.md"]
    assert [(a.path, b.path) for a, b in rule_set.replaced] == [
        ("/org/lang/python.md", "/team/python.md"),
        ("/org/python.md", "/team/python.md"),
    ]


@pytest.mark.parametrize("key", ["deploy", "@deploy", " @deploy "])
def test_a_key_naming_a_manual_or_requested_rule_applies_it(key: str) -> None:
    rule_set = rule_set_of(
        ("/r/deploy.mdc", "Deploy steps.", 0),  # Cursor Manual: no frontmatter
        ("/r/howto.mdc", "---\ndescription: How to\n---\nHow.", 0),  # Agent Requested
        ("/r/py.mdc", "---\nglobs: '*.py'\n---\nPy.", 0),
    )
    match = rule_set.match([key, "howto", "py"])
    assert [r.name for r in match.applied] == ["deploy", "howto"]
    assert match.requested == ()
    assert match.hits[0] == RuleHit("deploy", "/r/deploy.mdc", key, None)
    assert [r.name for r in rule_set.match(["deploy-x"]).requested] == ["howto"]
    assert rule_set.match(["deploy-x", "@py"]).applied == ()  # a paths rule is never named


def test_the_memo_does_not_change_results() -> None:
    rule_set = rule_set_of(globs_rule("src/**", name="s"))
    for _ in range(3):
        assert [r.name for r in rule_set.match(["/src/a.py"]).applied] == ["s"]
        assert rule_set.match(["/lib/a.py"]).applied == ()


def _random_glob(rng: random.Random) -> str:
    atoms = ["src", "docs", "a", "b", "*", "**", "*.py", "test_*", "?", "[ab]", "{a,b}", "x*y"]
    depth = rng.randint(1, 4)
    glob = "/".join(rng.choice(atoms) for _ in range(depth))
    return ("/" + glob) if rng.random() < 0.1 else glob


def _random_key(rng: random.Random) -> str:
    atoms = ["src", "docs", "a", "b", "app.py", "test_x.py", "xy", "x1y", "q", ".hidden"]
    key = "/".join(rng.choice(atoms) for _ in range(rng.randint(1, 5)))
    return ("/" + key) if rng.random() < 0.5 else key


def test_index_agrees_with_brute_force() -> None:
    rng = random.Random(1234)
    globs = sorted({_random_glob(rng) for _ in range(300)})
    rules = [globs_rule(glob, name=f"g{i}") for i, glob in enumerate(globs)]
    rule_set = rule_set_of(*rules)
    compiled = {glob: [c.regex for c in compile_glob(glob)] for glob in globs}
    for _ in range(300):
        key = _random_key(rng)
        forms = [key, key[1:]] if key.startswith("/") else [key]
        expected = {
            f"g{i}"
            for i, glob in enumerate(globs)
            if any(regex.fullmatch(form) for regex in compiled[glob] for form in forms)
        }
        assert {r.name for r in rule_set.match([key]).applied} == expected, key


def test_compiled_regexes_never_cross_a_slash_with_a_single_star() -> None:
    for glob in ("*", "?", "[!a]", "x*y"):
        for compiled in compile_glob(glob):
            assert not compiled.crosses
            assert not re.fullmatch(compiled.regex, "a/b")


def test_rule_is_a_frozen_value() -> None:
    rule = Rule(name="n", path="/p.md")
    with pytest.raises(AttributeError):
        rule.name = "m"  # type: ignore[misc]
