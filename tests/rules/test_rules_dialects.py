"""Issue 39: the held-out classes of the first round and the dialects users bring next
(Windsurf / Devin, Kiro, Cline), each read as its own tool reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from layered_memory.rules import (
    Rule,
    RuleProblem,
    dialect_of,
    is_rule_file,
    load_rule_set,
    parse_rule_file,
    render_rules,
)


def parse(path: str, text: str) -> tuple[Rule | None, list[RuleProblem]]:
    return parse_rule_file(path, text, folder_index=0)


def warnings_of(problems: list[RuleProblem]) -> list[str]:
    return [p.reason for p in problems if p.severity == "warning"]


def errors_of(problems: list[RuleProblem]) -> list[str]:
    return [p.reason for p in problems if p.severity == "error"]


def tree(root: Path, files: dict[str, str]) -> FilesystemBackend:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return FilesystemBackend(root_dir=root, virtual_mode=True)


def statuses(rule_set, keys: list[str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {d.path: d.status for d in rule_set.explain(keys)}


# -- 1. `.md` inside `.cursor/rules` is Cursor's ---------------------------------------------


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/.cursor/rules/style.md", "cursor"),
        ("/app/.cursor/rules/nested/style.md", "cursor"),
        ("/.windsurf/rules/style.md", "windsurf"),
        ("/.devin/rules/style.md", "windsurf"),
        ("/.windsurfrules", "windsurf"),
        ("/.kiro/steering/tech.md", "kiro"),
        ("/.clinerules/01-style.md", "cline"),
        ("/.clinerules/notes.txt", "cline"),
        ("/.cline/rules/style.md", "cline"),
        ("/.clinerules", "cline"),
        ("/rules/style.md", "layered-memory"),
    ],
)
def test_each_tool_folder_names_its_dialect(path: str, dialect: str) -> None:
    assert dialect_of(path) == dialect


def test_an_md_in_cursor_rules_with_only_foreign_fields_is_manual_as_in_cursor() -> None:
    rule, problems = parse("/.cursor/rules/meta.md", "---\nauthor: me\nversion: 2\n---\nBody.\n")
    assert rule is not None
    assert rule.dialect == "cursor"
    assert rule.mode == "manual"  # the package's own dialect applied it always
    assert not errors_of(problems)


def test_an_md_in_cursor_rules_reads_globs_as_cursor_does() -> None:
    rule, _ = parse("/.cursor/rules/ts.md", "---\nglobs: *.ts\n---\nTyped.\n")
    assert rule is not None
    assert rule.mode == "paths"
    assert rule.patterns == ("**/*.ts",)


# -- 2. only `*.instructions.md` in `.github/instructions` -----------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/.github/instructions/README.md", False),
        ("/.github/instructions/memory.instruction.md", False),
        ("/.github/instructions/py.instructions.md", True),
        ("/.github/instructions/sub/py.instructions.md", True),
        ("/.clinerules/notes.txt", True),
        ("/rules/notes.txt", False),
        ("/.windsurfrules", True),
        ("/.clinerules", True),
    ],
)
def test_rule_files_are_the_files_each_tool_reads(path: str, expected: bool) -> None:
    assert is_rule_file(path) is expected


def test_a_plain_md_in_github_instructions_is_never_injected(tmp_path: Path) -> None:
    backend = tree(
        tmp_path,
        {
            ".github/instructions/README.md": "How to write instructions.\n",
            ".github/instructions/py.instructions.md": "---\napplyTo: '**/*.py'\n---\nTyped.\n",
        },
    )
    rule_set = load_rule_set(backend, ["/.github/instructions"], log=False)
    assert [rule.path for rule in rule_set.rules] == ["/.github/instructions/py.instructions.md"]
    assert any("README.md" in p.path and "instructions.md" in p.reason for p in rule_set.problems)
    assert "How to write" not in render_rules(rule_set.match([]), max_chars=10_000)


# -- 3. a colon inside a Cursor (or VS Code) `description` -----------------------------------


@pytest.mark.parametrize(
    "path", ["/.cursor/rules/ts.mdc", "/.github/instructions/ts.instructions.md"]
)
def test_a_colon_in_the_description_keeps_the_file(path: str) -> None:
    field = "globs" if path.endswith(".mdc") else "applyTo"
    text = f"---\ndescription: Rules for TypeScript code : style\n{field}: '**/*.ts'\n---\nX.\n"
    rule, problems = parse(path, text)
    assert rule is not None, problems
    assert rule.mode == "paths"
    assert rule.paths == ("**/*.ts",)
    assert rule.description == "Rules for TypeScript code : style"
    assert any("YAML" in w for w in warnings_of(problems))


def test_a_broken_line_does_not_take_the_next_fields_with_it() -> None:
    text = "---\ndescription: a: b: c\nglobs:\n  - src/**\n  - lib/**\nalwaysApply: false\n---\nX\n"
    rule, _ = parse("/.cursor/rules/x.mdc", text)
    assert rule is not None
    assert rule.paths == ("src/**", "lib/**")


def test_the_own_dialect_stays_strict() -> None:
    rule, problems = parse("/rules/x.md", "---\ndescription: a : b: c\n---\nX\n")
    assert rule is None
    assert errors_of(problems)


# -- 4. `---# Title` and frontmatter never closed --------------------------------------------


def test_a_closing_line_running_into_a_title_closes_the_frontmatter() -> None:
    rule, _ = parse("/.cursor/rules/x.mdc", "---\nglobs: *.py\n---# Python\nType all.\n")
    assert rule is not None
    assert rule.mode == "paths"
    assert rule.patterns == ("**/*.py",)
    assert rule.body == "# Python\nType all."


def test_unclosed_cursor_frontmatter_is_manual_and_reachable_by_name(tmp_path: Path) -> None:
    text = "---\ndescription: Deploying\nglobs: *.py\n# Deploy\nRun make deploy.\n"
    rule, problems = parse("/.cursor/rules/deploy.mdc", text)
    assert rule is not None
    assert rule.mode == "manual"
    assert any("never closed" in w for w in warnings_of(problems))
    backend = tree(tmp_path, {".cursor/rules/deploy.mdc": text})
    rule_set = load_rule_set(backend, ["/.cursor/rules"], log=False)
    assert [r.name for r in rule_set.match(["@deploy"]).applied] == ["deploy"]
    assert rule_set.match(["src/app.py"]).applied == ()


# -- 5. same-named rules of two tools both apply ---------------------------------------------


def test_same_named_rules_in_two_tools_folders_both_apply(tmp_path: Path) -> None:
    backend = tree(
        tmp_path,
        {
            ".cursor/rules/go.mdc": "---\nglobs: '*.go'\n---\nCursor's Go rule.\n",
            ".claude/rules/go.md": "---\npaths: ['**/*.go']\n---\nClaude's Go rule.\n",
        },
    )
    rule_set = load_rule_set(backend, ["/.cursor/rules", "/.claude/rules"], log=False)
    applied = rule_set.match(["/cmd/main.go"]).applied
    assert [rule.path for rule in applied] == ["/.cursor/rules/go.mdc", "/.claude/rules/go.md"]
    assert not rule_set.replaced


def test_identical_bodies_are_shown_once(tmp_path: Path) -> None:
    body = "Never use relative imports.\n"
    backend = tree(
        tmp_path,
        {
            ".cursor/rules/imports.mdc": "---\nalwaysApply: true\n---\n" + body,
            ".claude/rules/imports.md": body,
        },
    )
    rule_set = load_rule_set(backend, ["/.cursor/rules", "/.claude/rules"], log=False)
    block = render_rules(rule_set.match([]), max_chars=10_000)
    assert block.count("Never use relative imports.") == 1
    why = {d.path: d.reason for d in rule_set.explain([])}
    assert "shown once" in why["/.claude/rules/imports.md"]


def test_a_later_folder_of_the_same_tool_still_replaces(tmp_path: Path) -> None:
    backend = tree(tmp_path, {"team/py.md": "Team.\n", "user/py.md": "User.\n"})
    rule_set = load_rule_set(backend, ["/team", "/user"], log=False)
    assert [rule.body for rule in rule_set.rules] == ["User."]


# -- 6. VS Code's listing of instruction files that did not attach ---------------------------


def test_unmatched_scoped_rules_are_listed_on_request(tmp_path: Path) -> None:
    backend = tree(
        tmp_path,
        {".github/instructions/py.instructions.md": "---\napplyTo: '**/*.py'\n---\nTyped.\n"},
    )
    rule_set = load_rule_set(backend, ["/.github/instructions"], log=False)
    assert rule_set.match(["/web/app.ts"]).requested == ()
    listed = rule_set.match(["/web/app.ts"], list_unmatched=True)
    assert [rule.name for rule in listed.requested] == ["py"]
    assert [r.name for r in rule_set.match(["py"], list_unmatched=True).applied] == ["py"]
    assert [r.name for r in rule_set.match(["/a.py"], list_unmatched=True).applied] == ["py"]


# -- Windsurf / Devin ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "mode"),
    [
        ("trigger: always_on", "always"),
        ("trigger: manual", "manual"),
        ("trigger: model_decision\ndescription: When deploying", "requested"),
        ("trigger: glob\nglobs: *.py", "paths"),
        ("", "always"),
    ],
)
def test_windsurf_triggers(frontmatter: str, mode: str) -> None:
    text = f"---\n{frontmatter}\n---\nBody.\n" if frontmatter else "Body.\n"
    rule, problems = parse("/.windsurf/rules/r.md", text)
    assert rule is not None, problems
    assert rule.mode == mode, problems
    assert rule.dialect == "windsurf"


def test_windsurf_glob_matches_at_any_depth() -> None:
    rule, _ = parse("/.devin/rules/r.md", "---\ntrigger: glob\nglobs: *.py\n---\nB\n")
    assert rule is not None
    assert rule.patterns == ("**/*.py",)


def test_windsurf_unknown_trigger_is_a_warning() -> None:
    rule, problems = parse("/.windsurf/rules/r.md", "---\ntrigger: sometimes\n---\nB\n")
    assert rule is not None
    assert rule.mode == "manual"
    assert any("trigger" in w for w in warnings_of(problems))


def test_windsurf_character_limit_is_reported() -> None:
    rule, problems = parse("/.windsurf/rules/big.md", "x" * 12_001)
    assert rule is not None
    assert any("12,000" in w for w in warnings_of(problems))
    _, problems = parse("/.windsurf/rules/ok.md", "x" * 12_000)
    assert not any("12,000" in w for w in warnings_of(problems))


def test_legacy_single_rule_files_are_always_on(tmp_path: Path) -> None:
    backend = tree(
        tmp_path,
        {".windsurfrules": "Use bun.\n", ".clinerules": "Use pnpm.\n"},
    )
    rule_set = load_rule_set(backend, ["/.windsurfrules", "/.clinerules", "/.nothing"], log=False)
    assert sorted(rule.body for rule in rule_set.match([]).applied) == ["Use bun.", "Use pnpm."]
    assert not rule_set.problems


# -- Kiro ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "mode"),
    [
        ("inclusion: always", "always"),
        ("", "always"),
        ("inclusion: fileMatch\nfileMatchPattern: 'components/**/*.tsx'", "paths"),
        ("inclusion: fileMatch\nfileMatchPattern: ['**/*.ts', '**/*.tsx']", "paths"),
        ("inclusion: manual", "manual"),
        ("inclusion: auto\nname: api\ndescription: REST design", "requested"),
    ],
)
def test_kiro_inclusion_modes(frontmatter: str, mode: str) -> None:
    text = f"---\n{frontmatter}\n---\nBody.\n" if frontmatter else "Body.\n"
    rule, problems = parse("/.kiro/steering/s.md", text)
    assert rule is not None, problems
    assert rule.mode == mode, problems


def test_kiro_manual_steering_is_named_with_a_hash(tmp_path: Path) -> None:
    backend = tree(tmp_path, {".kiro/steering/release.md": "---\ninclusion: manual\n---\nTag.\n"})
    rule_set = load_rule_set(backend, ["/.kiro/steering"], log=False)
    assert [r.name for r in rule_set.match(["#release"]).applied] == ["release"]


# -- Cline -----------------------------------------------------------------------------------


def test_cline_paths_are_anchored_at_the_root() -> None:
    rule, _ = parse("/.clinerules/web.md", "---\npaths:\n  - 'src/**'\n  - '*.md'\n---\nB\n")
    assert rule is not None
    assert rule.mode == "paths"
    assert rule.patterns == ("src/**", "*.md")


def test_cline_empty_paths_never_activates() -> None:
    rule, _ = parse("/.clinerules/off.md", "---\npaths: []\n---\nB\n")
    assert rule is not None
    assert rule.mode == "manual"


def test_cline_fails_open_on_invalid_frontmatter() -> None:
    text = "---\npaths: [unclosed\n---\nBody.\n"
    rule, problems = parse("/.clinerules/broken.md", text)
    assert rule is not None
    assert rule.mode == "always"
    assert rule.body.startswith("---")  # Cline shows the raw content
    assert warnings_of(problems)
    assert not errors_of(problems)


def test_cline_txt_rules_are_listed(tmp_path: Path) -> None:
    backend = tree(tmp_path, {".clinerules/01-style.txt": "Tabs.\n"})
    rule_set = load_rule_set(backend, ["/.clinerules"], log=False)
    assert [rule.body for rule in rule_set.match([]).applied] == ["Tabs."]


def test_a_rule_in_the_packages_own_dialect_replaces_any_tools_rule(tmp_path: Path) -> None:
    backend = tree(
        tmp_path,
        {".claude/rules/py.md": "Claude's.\n", "rules/py.md": "Ours.\n"},
    )
    rule_set = load_rule_set(backend, ["/.claude/rules", "/rules"], log=False)
    assert [rule.body for rule in rule_set.rules] == ["Ours."]
    reversed_set = load_rule_set(backend, ["/rules", "/.claude/rules"], log=False)
    assert sorted(rule.body for rule in reversed_set.rules) == ["Claude's.", "Ours."]


def test_a_legacy_rule_file_is_read_only_to_the_agent(tmp_path: Path) -> None:
    from deepagents import create_deep_agent
    from langchain_core.messages import ToolMessage

    from layered_memory import Layer, MemoryMiddleware
    from layered_memory.testing import ScriptedChatModel, tool_call

    backend = tree(tmp_path, {".windsurfrules": "Use bun.\n", "AGENTS.md": "Project.\n"})
    memory = MemoryMiddleware(
        backend=backend, layers=[Layer("project", "/AGENTS.md")], rules=["/.windsurfrules"]
    )
    edit = tool_call("edit_file", file_path="/.windsurfrules", old_string="bun", new_string="npm")
    model = ScriptedChatModel(script=[edit, "done"])
    graph = create_deep_agent(
        model=model, backend=memory.protected_backend, memory=[], middleware=[memory]
    )
    result = graph.invoke({"messages": [{"role": "user", "content": "go"}]})
    replies = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "Use bun." in model.system_prompts[0]
    assert (tmp_path / ".windsurfrules").read_text() == "Use bun.\n", replies
