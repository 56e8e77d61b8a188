"""Rule files, each read as the tool it was written for, injected when the agent's work matches.

A rule file is any `*.md` or `*.mdc` below a rule folder. Its type and place pick the dialect
it is read in (`dialect_of`): `.mdc` and any `.md` below `.cursor/rules/` are Cursor's (Always
/ Auto Attached by `globs` / Agent Requested by `description` / Manual), `*.instructions.md` is
VS Code Copilot's (`applyTo`, a string of comma-separated globs, relative ones at any depth,
ignoring case), another `.md` below `.claude/rules/` is Claude Code's (`paths`; none loads it
always), below `.windsurf/rules/` or `.devin/rules/` Windsurf's (`trigger`), below
`.kiro/steering/` Kiro's (`inclusion`), below `.clinerules/` Cline's (`paths`), any other `.md`
is this package's own dialect (`paths`, `globs` or `applyTo`, `alwaysApply`, `description`).
`name` (default: the file stem) is read in all: a later folder's rule replaces an earlier
folder's rules of the same name and tool (a rule of this package's own dialect: of any tool).

How the middleware (and `load_rule_set`, and `layered-memory lint`) read rules, each step a
pure function except the two backend calls:

    files, listing_problems = list_rule_files(backend, folders)      # one glob per folder
    loaded = download_texts(backend, [path for _, path in files])    # one batched call
    rule_set = build_rule_set([*parse_loaded(files, loaded), (None, listing_problems)])
    match = rule_set.match(["/src/app.py", "acme_corp"], root="/")
    prompt_part = render_rules(match, max_chars=4000)

`download_texts` (`layered_memory.core.loading`) is the one decoder of every memory and rule
file; `load_rule_set(backend, folders)` does the first three lines; `rule_set.explain(keys)`
says for every rule file which dialect it was read in, whether it applies, and why.
`layered-memory lint` of rule files on local disk makes the two backend calls with
`rules.disk` instead, as a `FilesystemBackend(virtual_mode=False)` would, without importing
deepagents (a quick pre-commit hook).
"""

from __future__ import annotations

from layered_memory.errors import GlobError
from layered_memory.rules._frontmatter import MAX_FRONTMATTER_CHARS
from layered_memory.rules._glob import compile_glob
from layered_memory.rules._parse import (
    DIALECT_NAMES,
    MAX_RULE_FILE_CHARS,
    Dialect,
    Rule,
    RuleMode,
    RuleProblem,
    dialect_of,
    is_rule_file,
    parse_rule_file,
)
from layered_memory.rules._set import (
    PARTIAL_LISTING,
    DecisionStatus,
    RuleDecision,
    RuleHit,
    RuleMatch,
    RuleSet,
    alist_rule_files,
    aload_rule_set,
    build_rule_set,
    list_rule_files,
    load_rule_set,
    parse_loaded,
    render_rules,
)

__all__ = [
    "DIALECT_NAMES",
    "MAX_FRONTMATTER_CHARS",
    "MAX_RULE_FILE_CHARS",
    "PARTIAL_LISTING",
    "DecisionStatus",
    "Dialect",
    "GlobError",
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
