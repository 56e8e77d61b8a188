"""Rule files: Markdown with YAML frontmatter, injected when what the agent works on matches.

A rule file is any `*.md` (Claude Code), `*.mdc` (Cursor) or `*.instructions.md` (Copilot)
below a rule folder. Its frontmatter may set `name` (default: the file stem), `description`,
`paths` (globs; `globs:` and `applyTo:` are aliases, as a list or a comma-separated string)
and `alwaysApply`. See `Rule.mode` for how these combine.

How the middleware (and `load_rule_set`, and `layered-memory lint`) read rules, each step a
pure function except the two backend calls:

    files, listing_problems = list_rule_files(backend, folders)      # one glob per folder
    loaded = download_texts(backend, [path for _, path in files])    # one batched call
    rule_set = build_rule_set([*parse_loaded(files, loaded), (None, listing_problems)])
    match = rule_set.match(["/src/app.py", "acme_corp"], root="/")
    prompt_part = render_rules(match, max_chars=4000)

`download_texts` (`layered_memory.core.loading`) is the one decoder of every memory and rule
file; `load_rule_set(backend, folders)` does the first three lines; `rule_set.explain(keys)`
says for every rule file whether it applies and why.
"""

from __future__ import annotations

from layered_memory.rules._glob import GlobError, compile_glob, split_glob_list
from layered_memory.rules._listing import (
    LISTING_PATTERN,
    PARTIAL_LISTING,
    alist_rule_files,
    aload_rule_set,
    list_rule_files,
    load_rule_set,
    parse_loaded,
)
from layered_memory.rules._parse import (
    GLOB_FIELDS,
    KNOWN_FIELDS,
    MAX_FRONTMATTER_CHARS,
    MAX_RULE_FILE_CHARS,
    default_rule_name,
    is_rule_file,
    parse_rule_file,
)
from layered_memory.rules._render import neutralize, render_rules
from layered_memory.rules._set import RuleSet, build_rule_set
from layered_memory.rules._types import (
    DecisionStatus,
    Rule,
    RuleDecision,
    RuleHit,
    RuleMatch,
    RuleMode,
    RuleProblem,
    Severity,
)

__all__ = [
    "GLOB_FIELDS",
    "KNOWN_FIELDS",
    "LISTING_PATTERN",
    "MAX_FRONTMATTER_CHARS",
    "MAX_RULE_FILE_CHARS",
    "PARTIAL_LISTING",
    "DecisionStatus",
    "GlobError",
    "Rule",
    "RuleDecision",
    "RuleHit",
    "RuleMatch",
    "RuleMode",
    "RuleProblem",
    "RuleSet",
    "Severity",
    "alist_rule_files",
    "aload_rule_set",
    "build_rule_set",
    "compile_glob",
    "default_rule_name",
    "is_rule_file",
    "list_rule_files",
    "load_rule_set",
    "neutralize",
    "parse_loaded",
    "parse_rule_file",
    "render_rules",
    "split_glob_list",
]
