"""Benchmark: how long `layered-memory` takes to start, against importing deepagents.

Every command used to import deepagents first (through `layered_memory/__init__`): 2-3 s before
`--version` printed. Each command now imports what it needs (issue 26). Timed in fresh
processes, interleaved (a busy machine slows all three alike), median of `--runs` each:

- `layered-memory --version`;
- `layered-memory lint RULES`, a folder of 10 rule files;
- `python -c "import deepagents"`, the baseline.

Target: both commands at most 0.4x the baseline. `lint` lists and reads the folder as the
agent's `FilesystemBackend(virtual_mode=False)` would, without importing it (`rules.disk`; it
was 1.26x while it went through the backend).

Run: `.venv/bin/python benchmarks/cli_startup.py [--runs 5]`
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.4


def _rules(folder: Path) -> None:
    for n in range(10):
        text = f"---\npaths: ['src/module{n}/**/*.py']\n---\nRule {n}: use ruff.\n"
        (folder / f"rule{n}.md").write_text(text, encoding="utf-8")


def _seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    cli = [sys.executable, "-m", "layered_memory.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp, "rules")
        rules.mkdir()
        _rules(rules)
        commands = {
            "layered-memory --version": [*cli, "--version"],
            "layered-memory lint RULES (10 files)": [*cli, "lint", str(rules)],
            'python -c "import deepagents"': [sys.executable, "-c", "import deepagents"],
        }
        for argv in commands.values():  # warm the file cache and the bytecode
            _seconds(argv)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(_seconds(argv))
    medians = {name: statistics.median(times) for name, times in samples.items()}
    baseline = medians['python -c "import deepagents"']
    print(f"median of {runs} fresh processes each; ratio = time / import deepagents")
    for name, median in medians.items():
        ratio = median / baseline
        verdict = "" if name.startswith("python") else f"  (target <= {TARGET}: "
        if verdict:
            verdict += ("PASS" if ratio <= TARGET else "over") + ")"
        print(f"{name:<40} {median * 1000:8.0f} ms  {ratio:5.2f}x{verdict}")


if __name__ == "__main__":
    main()
