"""Parsing rule files: each read with the semantics of the tool its type and place name."""

from __future__ import annotations

import logging

import pytest

from layered_memory.rules import (
    MAX_FRONTMATTER_CHARS,
    MAX_RULE_FILE_CHARS,
    Rule,
    RuleProblem,
    build_rule_set,
    dialect_of,
    is_rule_file,
    parse_loaded,
    parse_rule_file,
)


def parse(text: str, path: str = "/rules/r.md") -> tuple[Rule | None, list[RuleProblem]]:
    return parse_rule_file(path, text, folder_index=0)


def fm(frontmatter: str, body: str = "Body.") -> str:
    return f"---\n{frontmatter}\n---\n{body}\n"


def errors_of(problems: list[RuleProblem]) -> list[str]:
    return [p.reason for p in problems if p.severity == "error"]


def warnings_of(problems: list[RuleProblem]) -> list[str]:
    return [p.reason for p in problems if p.severity == "warning"]


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
    ("path", "dialect"),
    [
        ("/x/.cursor/rules/a.mdc", "cursor"),
        ("/rules/a.MDC", "cursor"),
        ("/.claude/rules/a.mdc", "cursor"),  # Claude Code reads only .md there
        ("/.github/instructions/py.instructions.md", "copilot"),
        ("/rules/py.instructions.md", "copilot"),
        ("/.claude/rules/a.md", "claude"),
        ("/home/me/.claude/rules/lang/go.md", "claude"),  # user-level rules
        (".claude/rules/a.md", "claude"),
        ("/.claude/rules/py.instructions.md", "copilot"),  # the name says who it was for
        ("/rules/a.md", "layered-memory"),
        ("/x.claude/rules/a.md", "layered-memory"),
        ("/.claude/rulesets/a.md", "layered-memory"),
    ],
)
def test_the_dialect_comes_from_type_and_place(path: str, dialect: str) -> None:
    assert dialect_of(path) == dialect
    rule, _ = parse("Body.", path)
    assert rule is not None
    assert rule.dialect == dialect


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/r/python.md", "python"),
        ("/r/react.mdc", "react"),
        ("/r/ts.instructions.md", "ts"),
        ("/r/deep/x.y.md", "x.y"),
        ("/r/.md", ".md"),
    ],
)
def test_name_defaults_to_the_file_stem(path: str, name: str) -> None:
    rule, _ = parse("Body.", path)
    assert rule is not None
    assert rule.name == name


def test_all_fields_of_the_own_dialect() -> None:
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
        mode="paths",
        why="paths",
        dialect="layered-memory",
        description="Python conventions",
        paths=("**/*.py", "src/**"),
        patterns=("**/*.py", "src/**"),
        body="Use ruff.\n\nType everything.",
        folder_index=3,
    )


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
        # Quoted globs in a comma list: YAML reads only the first; each is a glob.
        ('globs: "**/*.{ts,tsx}", "next.config.js"', ("**/*.{ts,tsx}", "next.config.js")),
        ("globs: '*.ts', \"*.tsx\"  # both", ("*.ts", "*.tsx")),
        ("paths: 'a,,b,'", ("a", "b")),  # empty items of a comma list say nothing
        ("globs:", ()),
        ("paths: ''", ()),
        ("paths: []", ()),
    ],
)
def test_glob_fields_as_written(frontmatter: str, globs: tuple[str, ...]) -> None:
    rule, problems = parse(fm(frontmatter))
    assert rule is not None, problems
    assert rule.paths == globs
    assert errors_of(problems) == []


# (path, frontmatter or None for no frontmatter, mode, why contains)
MODES = [
    # layered-memory's own dialect (DESIGN.md: no paths and no `alwaysApply: false` is always)
    ("/r/x.md", None, "always", "no paths"),
    ("/r/x.md", "description: x", "always", "no paths"),
    ("/r/x.md", "alwaysApply: true", "always", "alwaysApply: true"),
    ("/r/x.md", "paths: '**'", "paths", "paths"),
    ("/r/x.md", "globs: '**'\nalwaysApply: false", "paths", "globs"),
    ("/r/x.md", "description: Deploy\nalwaysApply: false", "requested", "a description"),
    ("/r/x.md", "alwaysApply: false", "manual", "no paths and no description"),
    # Cursor (cursor.com/docs/rules: the three fields pick one of four rule types)
    ("/r/x.mdc", "alwaysApply: true\nglobs: src/**", "always", "Cursor: Always"),
    ("/r/x.mdc", "globs: src/**\nalwaysApply: false", "paths", "Cursor: Auto Attached"),
    ("/r/x.mdc", "globs: src/**", "paths", "Cursor: Auto Attached"),
    ("/r/x.mdc", "description: Deploy\nalwaysApply: false", "requested", "Agent Requested"),
    ("/r/x.mdc", "description: Deploy\nglobs:", "requested", "Agent Requested"),
    ("/r/x.mdc", "alwaysApply: false", "manual", "Cursor: Manual"),
    ("/r/x.mdc", "description:\nglobs:", "manual", "no alwaysApply, globs or description"),
    ("/r/x.mdc", None, "manual", "no frontmatter (Cursor: Manual)"),
    ("/r/x.mdc", "alwaysApply: 'true'", "manual", "Cursor: Manual"),  # a string is not true
    # VS Code (computeAutomaticInstructions: applyTo, a string)
    ("/r/x.instructions.md", "applyTo: '**'", "always", "every request"),
    ("/r/x.instructions.md", "applyTo: '*, src/**'", "always", "every request"),
    ("/r/x.instructions.md", "applyTo: '**/*'", "always", "every request"),
    ("/r/x.instructions.md", "applyTo: '*.py'", "paths", "applyTo"),
    ("/r/x.instructions.md", "description: Deploy", "requested", "no applyTo"),
    ("/r/x.instructions.md", None, "requested", "no applyTo"),
    ("/r/x.instructions.md", "applyTo: ['*']", "requested", "VS Code ignores"),
    ("/r/x.instructions.md", "applyTo:\n  - '**/*.py'", "requested", "VS Code ignores"),
    ("/r/x.instructions.md", "applyTo: 3", "requested", "VS Code ignores"),
    ("/r/x.instructions.md", "alwaysApply: true", "requested", "no applyTo"),  # not VS Code's
    # Claude Code (memory docs: paths scopes a rule; without paths it loads at session start)
    ("/.claude/rules/x.md", None, "always", "Claude Code loads it at session start"),
    ("/.claude/rules/x.md", "paths: src/**", "paths", "Claude Code"),
    ("/.claude/rules/x.md", "paths:\n  - src/**", "paths", "Claude Code"),
    ("/.claude/rules/x.md", "globs: src/**", "always", "no paths"),
    ("/.claude/rules/x.md", "alwaysApply: false", "always", "no paths"),
    ("/.claude/rules/x.md", "paths: []", "always", "no paths"),
]


@pytest.mark.parametrize(("path", "frontmatter", "mode", "why"), MODES)
def test_each_dialect_picks_the_mode_its_tool_documents(
    path: str, frontmatter: str | None, mode: str, why: str
) -> None:
    rule, problems = parse(fm(frontmatter) if frontmatter is not None else "Body.", path)
    assert rule is not None, problems
    assert rule.mode == mode
    assert why in rule.why
    assert errors_of(problems) == []


@pytest.mark.parametrize(
    ("path", "frontmatter", "patterns", "ignore_case"),
    [
        # VS Code: a relative pattern matches at any depth, case ignored.
        ("/r/x.instructions.md", "applyTo: '*.py, src/**, /abs/**, **/*.ts'",
         ("**/*.py", "**/src/**", "/abs/**", "**/*.ts"), True),
        # Cursor: read as .gitignore reads a pattern (a chosen reading; Cursor is silent).
        ("/r/x.mdc", "globs: '*.rs, Dockerfile, docs/, src/**, /app/*.ts'",
         ("**/*.rs", "**/Dockerfile", "**/docs/", "src/**", "app/*.ts"), False),
        # Claude Code and this package: as written, relative to the project root.
        ("/.claude/rules/x.md", "paths: '*.md, src/**'", ("*.md", "src/**"), False),
        ("/r/x.md", "paths: '*.md, src/**'", ("*.md", "src/**"), False),
    ],
)  # fmt: skip
def test_what_each_glob_matches_as(
    path: str, frontmatter: str, patterns: tuple[str, ...], ignore_case: bool
) -> None:
    rule, _ = parse(fm(frontmatter), path)
    assert rule is not None
    assert (rule.patterns, rule.ignore_case) == (patterns, ignore_case)


@pytest.mark.parametrize(
    ("path", "frontmatter", "warning"),
    [
        # A .claude/rules file written for Claude Code and Copilot at once is Claude Code's.
        ("/.claude/rules/x.md", "paths: src/**\napplyTo: src/**", "applyTo is a VS Code field"),
        ("/.claude/rules/x.md", "paths: src/**\nglobs: src/**", "rename globs to paths"),
        (
            "/.claude/rules/x.md",
            "description: d",
            "description is a Cursor, VS Code, Windsurf and Kiro field",
        ),
        ("/.claude/rules/x.md", "alwaysApply: true", "alwaysApply is a Cursor field"),
        ("/r/x.mdc", "globs: a/**\npaths: b/**", "paths is a Claude Code and Cline field"),
        ("/r/x.mdc", "applyTo: a/**", "Cursor scopes a rule with globs"),
        ("/r/x.instructions.md", "applyTo: a/**\nglobs: b/**", "VS Code Copilot scopes a rule"),
        ("/r/x.instructions.md", "alwaysApply: false", "alwaysApply is a Cursor field"),
        ("/r/x.md", "owner: me", "unknown field 'owner' (ignored)"),
    ],
)
def test_a_field_foreign_to_the_dialect_is_a_warning(
    path: str, frontmatter: str, warning: str
) -> None:
    rule, problems = parse(fm(frontmatter), path)
    assert rule is not None
    assert errors_of(problems) == []
    assert any(warning in reason for reason in warnings_of(problems)), problems


def test_a_claude_rule_with_paths_and_apply_to_is_scoped_by_paths() -> None:
    rule, _ = parse(fm("paths: ['src/**']\napplyTo: '**'"), "/.claude/rules/x.md")
    assert rule is not None
    rule_set = build_rule_set([(rule, [])])
    assert rule_set.match(["/src/a.py"]).applied == (rule,)
    assert rule_set.match(["/lib/a.py"]).applied == ()


def test_an_invalid_glob_drops_only_itself() -> None:
    # The issue's own example: a brace set split at its commas.
    text = fm("paths: ['resources/**/*.{js', 'ts', 'vue}', 'src/**']")
    rule, problems = parse(text)
    assert rule is not None
    assert (rule.mode, rule.paths) == ("paths", ("ts", "src/**"))
    assert errors_of(problems) == [
        "invalid glob 'resources/**/*.{js' in paths (dropped): unbalanced '{'",
        "invalid glob 'vue}' in paths (dropped): unbalanced '}'",
    ]
    rule_set = build_rule_set([(rule, problems)], log=False)
    assert rule_set.invalid == ()
    assert rule_set.match(["/src/app.vue"]).applied == (rule,)


def test_a_rule_left_with_no_valid_glob_never_applies() -> None:
    rule, problems = parse(fm("globs: 'src/[ab'"), "/r/x.mdc")
    assert rule is not None
    assert (rule.mode, rule.paths) == ("paths", ())
    assert errors_of(problems) == ["invalid glob 'src/[ab' in globs (dropped): unclosed '['"]
    assert build_rule_set([(rule, [])]).match(["src/a", "x"]).applied == ()


@pytest.mark.parametrize(
    ("frontmatter", "error"),
    [
        ("paths: 3", "paths must be a string or a list of strings (got int)"),
        ("globs:\n  a: b", "globs must be a string or a list of strings (got dict)"),
        ("paths: ['a', 2]", "paths item 2 is not a string (got int): dropped"),
        ("paths: ['a', null]", "paths item 2 is not a string (got NoneType): dropped"),
        ("paths: 'src/[ab'", "invalid glob 'src/[ab' in paths (dropped): unclosed '['"),
        ("paths: 'a{b,c'", "invalid glob 'a{b,c' in paths (dropped): unbalanced '{'"),
        ("paths: 'a}'", "invalid glob 'a}' in paths (dropped): unbalanced '}'"),
        ("paths: ['']", "invalid glob '' in paths (dropped): empty pattern"),
        ("paths: '!a/**'", "negated patterns ('!...') are not supported"),
        ("paths: '../x/**'", "'..' segments never match"),
        ("paths: '[z-a]'", "reversed range"),
        ("paths: 'a\\'", "trailing backslash"),
        ("paths: '{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}'", "brace expansion"),
    ],
)
def test_a_glob_field_error_keeps_the_rule_scoped(frontmatter: str, error: str) -> None:
    rule, problems = parse(fm(frontmatter))
    assert rule is not None
    assert rule.mode == "paths"  # never read as "no paths", which would apply everywhere
    assert any(error in reason for reason in errors_of(problems)), problems


MALFORMED = [
    pytest.param("---\npaths: [unclosed\n---\nBody", "malformed YAML frontmatter", id="yaml"),
    pytest.param(fm("- a\n- b"), "frontmatter is not a mapping (got a YAML list)", id="list"),
    pytest.param(fm("just text"), "frontmatter is not a mapping (got a YAML str)", id="scalar"),
    pytest.param("---\npaths: x\nBody", "never closed", id="unclosed"),
    pytest.param(fm("alwaysApply: 'yes'"), "alwaysApply must be true or false", id="always"),
    pytest.param("x" * (MAX_RULE_FILE_CHARS + 1), "file longer than", id="file-size"),
    pytest.param(
        fm("description: " + "x" * MAX_FRONTMATTER_CHARS), "frontmatter longer than", id="fm-size"
    ),
    pytest.param(fm("globs: " + ", ".join(["a"] * 1025)), "globs lists 1025 globs", id="many"),
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
    assert any(f"{path} skipped" in m and reason in m for m in logged), logged


@pytest.mark.parametrize(
    ("frontmatter", "warning", "name", "description"),
    [
        ("name: 12", "name must be a string (got int): ignored", "r", ""),
        ("name: ''", "name must be a non-empty single line: the file stem is used", "r", ""),
        ("description: [a]", "description must be a string (got list): ignored", "r", ""),
        ("description: " + "d" * 2000, "description longer than 1024", "r", "d" * 1024),
    ],
)
def test_a_name_or_description_that_cannot_be_used_is_a_warning(
    frontmatter: str, warning: str, name: str, description: str
) -> None:
    rule, problems = parse(fm(frontmatter))
    assert rule is not None
    assert (rule.name, rule.description) == (name, description)
    assert any(warning in reason for reason in warnings_of(problems)), problems


def test_a_dropped_glob_is_logged_without_saying_the_file_was_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="layered_memory"):
        build_rule_set([parse(fm("paths: ['a/**', 'b/[x']"), "/rules/g.md")])
    assert caplog.messages == [
        "Rule file /rules/g.md: invalid glob 'b/[x' in paths (dropped): unclosed '['"
    ]


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


@pytest.mark.parametrize(
    ("path", "frontmatter", "warning"),
    [
        ("/r/x.md", "paths: '**'", "empty body: the rule injects nothing"),
        ("/r/x.md", "alwaysApply: true\npaths: '**'", "alwaysApply: true makes the paths globs"),
        ("/r/x.mdc", "alwaysApply: true\nglobs: '**'", "alwaysApply: true makes the globs"),
        ("/r/x.md", "paths: a/**\napplyTo: b/**", "paths and applyTo are aliases here"),
        ("/r/x.mdc", None, "injected only when a match key names it ('x' or '@x')"),
        ("/r/x.md", "alwaysApply: false", "injected only when a match key names it"),
    ],
)
def test_warnings_say_what_the_rule_will_do(
    path: str, frontmatter: str | None, warning: str
) -> None:
    body = "" if "empty" in warning else "B"
    text = fm(frontmatter, body) if frontmatter is not None else body
    rule, problems = parse(text, path)
    assert rule is not None
    assert any(warning in reason for reason in warnings_of(problems)), problems


def test_own_dialect_aliases_are_combined() -> None:
    rule, _ = parse(fm("paths: a/**\napplyTo: b/**"))
    assert rule is not None
    assert rule.paths == ("a/**", "b/**")


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
    assert ok == Rule(name="ok", path="/r/ok.md", why="no paths", body="Hi.", folder_index=2)
    assert ok_problems == []


@pytest.mark.parametrize(
    ("applyto", "key", "applies"),
    [
        ("**/*.Tests.ps1", "/tests/Get-Item.tests.ps1", True),  # VS Code ignores case
        ("**/Dockerfile", "/app/dockerfile", True),
        ("*.py", "/src/deep/app.py", True),  # relative: any depth
        ("src/**", "/lib/src/a.ts", True),
        ("/src/**", "/lib/src/a.ts", False),
        ("**/*.py", "/src/app.pyc", False),
    ],
)
def test_copilot_files_match_as_vs_code_matches(applyto: str, key: str, applies: bool) -> None:
    rule, _ = parse(fm(f"applyTo: '{applyto}'"), "/rules/x.instructions.md")
    assert rule is not None
    assert bool(build_rule_set([(rule, [])]).match([key]).applied) is applies
