"""Benchmark: match 1,000 rules against 100 touched paths (plus context strings), cold.

"Cold" means every `match` call gets keys the rule set has never seen, so the per-key memo
never helps; globs are compiled once at build time, as in a real run. The rule globs are a
realistic mix: extensions, folder prefixes, nested doc trees, entity names, test-file
patterns, brace sets, and a few shapes that fall back to the always-tested list.

Run: `.venv/bin/python benchmarks/bench_rules.py [--runs 50]`
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from layered_memory.rules import RuleSet, build_rule_set, compile_glob, parse_rule_file

EXTENSIONS = ["py", "md", "ts", "tsx", "js", "go", "rs", "yaml", "json", "toml", "sql", "sh"]


def rule_globs(i: int) -> list[str]:
    """The globs of rule number `i`: a rotating mix of the shapes people write."""
    ext = EXTENSIONS[i % len(EXTENSIONS)]
    shapes = [
        [f"**/*.{ext}"],
        [f"src/module{i}/**"],
        [f"docs/topic{i}/**/*.md"],
        [f"*client{i}*"],
        [f"tests/test_mod{i}_*.py"],
        [f"**/*.{{{ext},{EXTENSIONS[(i + 1) % len(EXTENSIONS)]}}}"],
        [f"{{src,lib}}/pkg{i}/**/*.py", f"packages/p{i}/**"],
        [f"**/component{i}/*.tsx"],
        [f"services/svc{i % 40}/**/handler_*.go"],
        [f"**/*{i}*/**"],  # no literal prefix or suffix: the always-tested list
    ]
    return shapes[i % len(shapes)]


def build(n_rules: int) -> RuleSet:
    parsed = []
    for i in range(n_rules):
        globs = ", ".join(f'"{glob}"' for glob in rule_globs(i))
        text = f"---\nname: rule-{i}\npaths: [{globs}]\n---\nBody of rule {i}.\n"
        parsed.append(parse_rule_file(f"/rules/r{i}.md", text, folder_index=0))
    return build_rule_set(parsed, log=False)


def keys_for(run: int, n_paths: int, rng: random.Random) -> list[str]:
    """`n_paths` fresh absolute paths (unique per run, so nothing is memoized) + 2 entities."""
    keys = []
    for j in range(n_paths):
        ext = rng.choice(EXTENSIONS)
        top = rng.choice(["src", "docs", "tests", "lib", "packages", "services", "web/app"])
        inner = f"module{rng.randrange(1500)}/sub{run}_{j}"
        name = rng.choice(["main", "test_mod7_api", "handler_x", "index", "README", "component3"])
        keys.append(f"/home/dev/project/{top}/{inner}/{name}.{ext}")
    keys.append(f"client{rng.randrange(1500)}_run{run}")
    keys.append(f"globex_run{run}")
    return keys


def naive_ms(rule_set: RuleSet, keys: list[str], root: str) -> float:
    """The same work without the index: every compiled glob against every key form."""
    regexes = [
        c.regex
        for rule in rule_set.rules
        for pattern in rule.patterns
        for c in compile_glob(pattern, ignore_case=rule.ignore_case)
    ]
    forms = [k for key in keys for k in (key, key.removeprefix(root + "/"))]
    start = time.perf_counter()
    for form in forms:
        for regex in regexes:
            regex.fullmatch(form)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--paths", type=int, default=100)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    start = time.perf_counter()
    rule_set = build(args.rules)
    build_ms = (time.perf_counter() - start) * 1000
    rng = random.Random(7)
    timings = []
    applied = []
    for run in range(args.runs):
        keys = keys_for(run, args.paths, rng)
        start = time.perf_counter()
        match = rule_set.match(keys, root="/home/dev/project")
        timings.append((time.perf_counter() - start) * 1000)
        applied.append(len(match.applied))
    print(
        f"{args.rules} rules x {args.paths} paths (+2 context keys), {args.runs} cold runs:\n"
        f"  match: median {statistics.median(timings):.2f} ms, "
        f"min {min(timings):.2f} ms, max {max(timings):.2f} ms\n"
        f"  rules applied per run: median {statistics.median(applied):.0f}\n"
        f"  build (parse + compile + index, once): {build_ms:.0f} ms\n"
        f"  naive baseline (every glob x every key, no index): "
        f"{naive_ms(rule_set, keys_for(-1, args.paths, rng), '/home/dev/project'):.1f} ms"
    )


if __name__ == "__main__":
    main()
