"""Scenario 4: match 1,000 rules against 100 touched paths (plus two context strings).

The rules are the fixtures' realistic mix (Claude `paths:`, Cursor `globs:`, Copilot
`applyTo:`, always-on, agent-requested; extensions, folder prefixes, brace sets, entity
names). "Cold" means every run brings keys the rule set has never seen, so its per-key memo
never helps; "memoized" repeats one run's keys, as the next model call of a thread does.
deepagents has no rules; the baseline is the naive approach: every glob's regex against every
key, which is what the index replaces.
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks._fixtures import RULES_FOLDER, rule_texts
from benchmarks._plan import Plan
from benchmarks._report import Row, ScenarioResult, verdict
from benchmarks._timing import Samples, fmt_ns
from layered_memory.rules import RuleSet, build_rule_set, compile_glob, parse_rule_file

TARGET_NS = 10_000_000
"""Issue 6: well under 10 ms."""


def build(n_rules: int) -> RuleSet:
    """Parse and index `n_rules` fixture rules (once, as a run does on its first model call)."""
    parsed = [
        parse_rule_file(path, text, folder_index=0) for path, text in rule_texts(n_rules).items()
    ]
    return build_rule_set(parsed, log=False)


def fresh_keys(run: int, n_paths: int) -> list[str]:
    """`n_paths` paths never seen before (unique per run) and two context strings."""
    shapes = (
        "/src/module{k}/r{run}/service.py",
        "/docs/topic{k}/r{run}/guide.md",
        "/tests/r{run}/test_mod{k}_api.py",
        "/web/app/r{run}/component{k}/Button.tsx",
        "/services/svc{k}/r{run}/handler_users.go",
        "/lib/pkg{k}/r{run}/models/core.py",
        "/scripts/r{run}/deploy{k}.sh",
        "/config/r{run}/settings{k}.toml",
    )
    keys = [shapes[j % len(shapes)].format(k=(j * 7 + run) % 1000, run=run) for j in range(n_paths)]
    return [*keys, f"client{run % 1000}_run{run}", f"globex_run{run}"]


def naive_match_ns(rule_set: RuleSet, keys: list[str]) -> int:
    """Every compiled glob's regex against every key form: the work the index avoids."""
    regexes = [
        c.regex
        for rule in rule_set.rules
        for pattern in rule.patterns
        for c in compile_glob(pattern, ignore_case=rule.ignore_case)
    ]
    forms = [form for key in keys for form in (key, key.removeprefix("/"))]
    start = time.perf_counter_ns()
    for form in forms:
        for regex in regexes:
            regex.fullmatch(form)
    return time.perf_counter_ns() - start


def run(plan: Plan, workdir: Path) -> ScenarioResult:
    """Time cold and memoized matches; the naive loop once per run as the baseline."""
    del workdir  # pure computation: nothing on disk
    start = time.perf_counter_ns()
    rule_set = build(plan.match_rules)
    build_ns = time.perf_counter_ns() - start
    cold, memo, naive = Samples(), Samples(), Samples()
    applied: list[int] = []
    for run_index in range(plan.match_runs + 1):  # run 0 warms imports and code paths
        keys = fresh_keys(run_index, plan.match_paths)
        start = time.perf_counter_ns()
        match = rule_set.match(keys, root="/")
        elapsed = time.perf_counter_ns() - start
        start = time.perf_counter_ns()
        rule_set.match(keys, root="/")
        memo_elapsed = time.perf_counter_ns() - start
        naive_elapsed = naive_match_ns(rule_set, keys)
        if run_index:
            cold.ns.append(elapsed)
            memo.ns.append(memo_elapsed)
            naive.ns.append(naive_elapsed)
            applied.append(len(match.applied))
    n_globs = sum(len(rule.paths) for rule in rule_set.rules)
    label = f"{plan.match_rules} rules x {plan.match_paths} paths"
    rows = [
        Row(
            f"4. rule matching, cold: {label}",
            cold.median,
            None,
            "< 10 ms",
            verdict(cold.median < TARGET_NS),
            base_text=f"naive {fmt_ns(naive.median)}",
            ratio=cold.median / naive.median,
            facts={"rules_applied_median": sorted(applied)[len(applied) // 2]},
        ),
        Row(
            f"4. rule matching, memoized keys: {label}",
            memo.median,
            None,
            "info",
            "info",
        ),
    ]
    notes = [
        f"{len(rule_set.rules)} active rules ({n_globs} globs; folder {RULES_FOLDER}), "
        f"{plan.match_paths} fresh paths + 2 context strings per run, {plan.match_runs} runs: "
        f"cold median {fmt_ns(cold.median)} (p90 {fmt_ns(cold.p90)}), memoized "
        f"{fmt_ns(memo.median)}; {sorted(applied)[len(applied) // 2]} rules applied per run.",
        f"Baseline (no deepagents equivalent): every glob's regex against every key form, "
        f"median {fmt_ns(naive.median)}; the ratio column is ours / naive.",
        f"Parsing and indexing the {plan.match_rules} rule files once: {fmt_ns(build_ns)}.",
    ]
    return ScenarioResult("rule_matching", "4. Rule matching", rows, notes)
