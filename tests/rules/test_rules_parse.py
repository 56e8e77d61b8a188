"""Parsing and validating rule files: fields, aliases, modes, and every malformed case."""

from __future__ import annotations

import logging

import pytest

from layered_memory.rules import (
    MAX_FRONTMATTER_CHARS,
    MAX_RULE_FILE_CHARS,
    Rule,
    RuleProblem,
    build_rule_set,
    default_rule_name,
    is_rule_file,
    parse_loaded,
    parse_rule_file,
)


def parse(text: str, path: str = "/rules/r.md") -> tuple[Rule | None, list[RuleProblem]]:
    return parse_rule_file(path, text, folder_index=0)


def fm(frontmatter: str, body: str = "Body.") -> str:
    return f"---\n{frontmatter}\n---\n{body}\n"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/rules/a.md", True),
        ("/rules/a.mdc", True),
        ("/rules/py.instructions.md", True),
        ("/rules/A.MD", True),
        ("/rules/a.txt", False),
        ("/rules/.hidden.md", False),
        ("/rules/md", False),
    ],
)
def test_is_rule_file(path: str, expected: bool) -> None:
    assert is_rule_file(path) is expected


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/r/python.md", "python"),
        ("/r/react.mdc", "react"),
        ("/r/ts.instructions.md", "ts"),
        ("/r/deep/x.y.md", "x.y"),
    ],
)
def test_name_defaults_to_the_file_stem(path: str, name: str) -> None:
    text = "---\napplyTo: '**/*.ts'\n---\nBody." if "instructions" in path else "Body."
    rule, problems = parse(text, path)
    assert rule is not None
    assert rule.name == name
    assert problems == []


def test_all_fields() -> None:
    text = fm(
        "name: python-style\ndescription: Python  conventions\n"
        'paths: ["**/*.py", "src/**"]\nalwaysApply: false',
        "Use ruff.\n<!-- maintainer note, not for the model -->\nType everything.",
    )
    rule, problems = parse_rule_file("/rules/py.md", text, folder_index=3)
    assert problems == []
    assert rule == Rule(
        name="python-style",
        path="/rules/py.md",
        description="Python conventions",
        paths=("**/*.py", "src/**"),
        always_apply=False,
        body="Use ruff.\n\nType everything.",
        folder_index=3,
    )
    assert rule.mode == "paths"


def test_no_frontmatter_is_an_always_rule() -> None:
    rule, problems = parse("# Heading\n\nAlways.")
    assert rule is not None
    assert (rule.mode, rule.body, problems) == ("always", "# Heading\n\nAlways.", [])


def test_bom_crlf_and_empty_frontmatter() -> None:
    rule, problems = parse("\ufeff---\r\n---\r\nBody.\r\n")
    assert rule is not None
    assert (rule.body, rule.mode, problems) == ("Body.", "always", [])


@pytest.mark.parametrize(
    ("frontmatter", "globs"),
    [
        ("paths: '**/*.py'", ("**/*.py",)),
        ("globs: *.ts, *.tsx", ("*.ts", "*.tsx")),  # Cursor writes globs unquoted
        ("globs:\n  - *.ts\n  - src/**", ("*.ts", "src/**")),
        # A YAML comment after an unquoted glob is a comment, as it is after `src/*.py`.
        ("globs: *.ts  # typescript", ("*.ts",)),
        ("globs:\n  - *.ts\t# ts\n  - src/**  # sources", ("*.ts", "src/**")),
        ("globs: src/*.py  # python", ("src/*.py",)),
        ("applyTo: '**/*.{ts,tsx}, docs/**'", ("**/*.{ts,tsx}", "docs/**")),
        ("applyTo: {src,lib}/**", ("{src,lib}/**",)),
        ("globs: docs/**, '*.rst'", ("docs/**", "*.rst")),
        ("paths: ['a/**', ' b/** ']", ("a/**", "b/**")),
        ("globs:", ()),
        ("paths: ''", ()),
        ("paths: []", ()),
    ],
)
def test_glob_fields_and_aliases(frontmatter: str, globs: tuple[str, ...]) -> None:
    rule, problems = parse(fm(frontmatter))
    assert rule is not None, problems
    assert rule.paths == globs
    assert [p for p in problems if p.severity == "error"] == []


@pytest.mark.parametrize(
    ("frontmatter", "mode", "warning"),
    [
        ("description: x", "always", None),
        ("alwaysApply: true", "always", None),
        ("alwaysApply: true\npaths: '**'", "always", "alwaysApply: true makes the paths"),
        ("paths: '**'", "paths", None),
        ("paths: '**'\nalwaysApply: false", "paths", None),
        ("description: Deploy steps\nalwaysApply: false", "requested", None),
        ("alwaysApply: false", "manual", "never injected nor listed"),
    ],
)
def test_modes(frontmatter: str, mode: str, warning: str | None) -> None:
    rule, problems = parse(fm(frontmatter))
    assert rule is not None
    assert rule.mode == mode
    if warning is None:
        assert problems == []
    else:
        assert [p.severity for p in problems] == ["warning"]
        assert warning in problems[0].reason


def test_empty_body_is_a_warning() -> None:
    rule, problems = parse(fm("paths: '**'", ""))
    assert rule is not None
    assert problems == [
        RuleProblem("/rules/r.md", "empty body: the rule injects nothing", "warning")
    ]


def test_unknown_field_is_a_warning_and_the_rule_is_still_used() -> None:
    rule, problems = parse(fm("owner: me\nname: x"))
    assert rule is not None
    assert rule.name == "x"
    assert problems == [RuleProblem("/rules/r.md", "unknown field 'owner' (ignored)", "warning")]


MALFORMED = [
    pytest.param("---\npaths: [unclosed\n---\nBody", "malformed YAML frontmatter", id="yaml"),
    pytest.param(fm("- a\n- b"), "frontmatter is not a mapping (got a YAML list)", id="list"),
    pytest.param(fm("just text"), "frontmatter is not a mapping (got a YAML str)", id="scalar"),
    pytest.param("---\npaths: x\nBody", "never closed", id="unclosed"),
    pytest.param(fm("paths: 3"), "paths must be a string or a list of strings (got int)", id="int"),
    pytest.param(fm("globs:\n  a: b"), "globs must be a string or a list", id="mapping"),
    pytest.param(fm("paths: ['a', 2]"), "paths item 2 is not a string (got int)", id="item"),
    pytest.param(fm("paths: ['a', null]"), "paths item 2 is not a string", id="null-item"),
    pytest.param(fm("paths: 'src/[ab'"), "invalid glob 'src/[ab' in paths: unclosed '['", id="["),
    pytest.param(fm("paths: 'a{b,c'"), "invalid glob 'a{b,c' in paths: unbalanced '{'", id="{"),
    pytest.param(fm("paths: 'a}'"), "invalid glob 'a}' in paths: unbalanced '}'", id="}"),
    pytest.param(fm("paths: ['']"), "invalid glob '' in paths: empty pattern", id="empty"),
    pytest.param(fm("paths: 'a,,b'"), "invalid glob '' in paths: empty pattern", id="empty-item"),
    pytest.param(fm("paths: '!a/**'"), "negated patterns", id="negated"),
    pytest.param(fm("paths: '../x/**'"), "'..' segments never match", id="dotdot"),
    pytest.param(fm("paths: '[z-a]'"), "reversed range", id="range"),
    pytest.param(fm("paths: 'a\\'"), "trailing backslash", id="backslash"),
    pytest.param(
        fm("paths: '{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}'"), "brace", id="braces"
    ),
    pytest.param(fm("paths: a\nglobs: b"), "give only one of paths, globs", id="aliases"),
    pytest.param(fm("alwaysApply: 'yes'"), "alwaysApply must be true or false", id="always"),
    pytest.param(fm("name: 12"), "name must be a string (got int)", id="name-int"),
    pytest.param(fm("name: ''"), "name must be a non-empty single line", id="name-empty"),
    pytest.param(fm("description: [a]"), "description must be a string (got list)", id="desc"),
    pytest.param("x" * (MAX_RULE_FILE_CHARS + 1), "file longer than", id="file-size"),
    pytest.param(
        fm("description: " + "x" * MAX_FRONTMATTER_CHARS), "frontmatter longer than", id="fm-size"
    ),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED)
def test_malformed_file_is_skipped_with_a_logged_warning_naming_file_and_reason(
    text: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = "/rules/bad.md"
    rule, problems = parse(text, path)
    assert rule is None
    errors = [p for p in problems if p.severity == "error"]
    assert errors, problems
    assert all(p.path == path for p in problems)
    assert any(reason in p.reason for p in errors), errors

    good = parse_rule_file("/rules/good.md", "Good.", folder_index=0)
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        rule_set = build_rule_set([(rule, problems), good])
    assert [r.name for r in rule_set.rules] == ["good"]  # the run goes on without the bad file
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(path in message and reason in message for message in logged), logged


def test_unknown_field_warning_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        rule_set = build_rule_set([parse(fm("owner: me"), "/rules/o.md")])
    assert [r.name for r in rule_set.rules] == ["o"]
    assert "Rule file /rules/o.md: unknown field 'owner' (ignored)" in caplog.messages


def test_yaml_error_reason_does_not_echo_file_contents() -> None:
    _, problems = parse("---\nname: x\nsecret: sk-THE-SECRET: y\n---\nBody")
    assert problems
    assert all("sk-THE-SECRET" not in p.reason for p in problems)
    assert "line 3" in problems[0].reason  # the position points into the file


def test_all_errors_of_a_file_are_reported() -> None:
    _, problems = parse(fm("paths: 3\nalwaysApply: 1\nbogus: x"))
    assert [p.severity for p in problems] == ["error", "error", "warning"]


def test_long_description_is_truncated_with_a_warning() -> None:
    rule, problems = parse(fm("description: " + "d" * 2000))
    assert rule is not None
    assert len(rule.description) == 1024
    assert [p.severity for p in problems] == ["warning"]


def test_parse_loaded_turns_read_errors_into_problems() -> None:
    """Rules come through the engine's one decoder (`download_texts`), errors included."""
    from layered_memory.core.loading import DownloadResult, SourceProblem

    loaded = DownloadResult(
        texts={"/r/ok.md": "Hi."},
        missing=frozenset({"/r/gone.md"}),
        problems=(SourceProblem("/r/bin.md", "not valid UTF-8 (byte 3)", unreadable=True),),
    )
    files = [(0, "/r/gone.md"), (0, "/r/bin.md"), (2, "/r/ok.md")]
    (gone, gone_problems), (binary, binary_problems), (ok, ok_problems) = parse_loaded(
        files, loaded
    )
    assert gone is None
    assert gone_problems == [
        RuleProblem("/r/gone.md", "cannot read: file not found (deleted after it was listed?)")
    ]
    assert binary is None
    assert binary_problems == [RuleProblem("/r/bin.md", "not valid UTF-8 (byte 3)")]
    assert ok == Rule(name="ok", path="/r/ok.md", body="Hi.", folder_index=2)
    assert ok_problems == []


def test_default_rule_name_keeps_odd_names() -> None:
    assert default_rule_name("/r/.md") == ".md"


@pytest.mark.parametrize(
    ("frontmatter", "mode", "globs"),
    [
        # As VS Code reads them (computeAutomaticInstructions): no applyTo, never automatic.
        ("description: Deploy steps", "requested", ()),
        ("", "manual", ()),
        ("applyTo: '*'", "always", ()),
        ("applyTo: '**'", "always", ()),
        ("applyTo: '**/*'", "always", ()),
        ("applyTo: '*.py'", "paths", ("**/*.py",)),  # a relative pattern, at any depth
        ("applyTo: 'src/**, **/*.ts, /docs/**'", "paths", ("**/src/**", "**/*.ts", "/docs/**")),
        ("applyTo: '*.py'\nalwaysApply: true", "always", ("*.py",)),  # explicit wins
    ],
)
def test_copilot_instructions_files_apply_as_vs_code_applies_them(
    frontmatter: str, mode: str, globs: tuple[str, ...]
) -> None:
    text = f"---\n{frontmatter}\n---\nBody." if frontmatter else "Body."
    rule, _problems = parse(text, "/rules/x.instructions.md")
    assert rule is not None
    assert (rule.mode, rule.paths) == (mode, globs)


def test_a_relative_copilot_pattern_matches_at_any_depth() -> None:
    rule, _ = parse("---\napplyTo: '*.py'\n---\nPY.", "/rules/py.instructions.md")
    assert rule is not None
    rule_set = build_rule_set([(rule, [])])
    assert [r.name for r in rule_set.match(["/src/app.py"]).applied] == ["py"]
