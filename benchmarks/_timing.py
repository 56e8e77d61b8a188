"""A tiny timing helper: warm-up, interleaved samples, medians.

Two cores are shared with other people's test runs, so absolute times drift. Our case and the
baseline are therefore sampled alternately in one process (the order flips every round so
neither always runs right after the other), and what we compare is the ratio of medians.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Case:
    """One thing to time.

    Attributes:
        name: Key of its samples in the result.
        run: The timed call; gets what `setup` returned.
        setup: Untimed preparation before each sample (a fresh middleware, a fresh thread).
    """

    name: str
    run: Callable[[Any], object]
    setup: Callable[[], Any] = field(default=lambda: None)


@dataclass(slots=True)
class Samples:
    """Wall times of one case in nanoseconds, one per sample, and the process CPU time.

    CPU time is reported beside wall time because it barely moves when another process
    takes the core: a wall-time ratio far from the CPU-time ratio means the machine was busy.
    """

    ns: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)

    @property
    def cpu_median(self) -> float:
        """Median process CPU time per sample, in nanoseconds."""
        return float(statistics.median(self.cpu_ns)) if self.cpu_ns else float("nan")

    @property
    def median(self) -> float:
        """Median sample in nanoseconds."""
        return float(statistics.median(self.ns)) if self.ns else float("nan")

    @property
    def p90(self) -> float:
        """90th percentile in nanoseconds (spread: how noisy the machine was)."""
        if not self.ns:
            return float("nan")
        ordered = sorted(self.ns)
        return float(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))])


def interleaved(
    cases: Sequence[Case],
    *,
    rounds: int,
    warmup: int = 1,
    collect: bool = False,
    cpu: bool = False,
) -> dict[str, Samples]:
    """Time every case once per round, alternating their order each round.

    Args:
        cases: What to time (typically ours and the baseline).
        rounds: Samples per case.
        warmup: Untimed rounds first (imports, first-call caches, branch predictors).
        collect: Run the garbage collector before each sample, so one case does not pay for
            the garbage the other left (worth it when a sample takes milliseconds).
        cpu: Also record process CPU time (two more clock reads per sample: leave it off for
            microsecond samples, where they would blur the ratio).

    Returns:
        Case name -> its samples.
    """
    results = {case.name: Samples() for case in cases}
    for round_index in range(warmup + rounds):
        order = cases if round_index % 2 == 0 else list(reversed(cases))
        for case in order:
            prepared = case.setup()
            if collect:
                gc.collect()
            cpu_start = time.process_time_ns() if cpu else 0
            start = time.perf_counter_ns()
            case.run(prepared)
            elapsed = time.perf_counter_ns() - start
            cpu_used = time.process_time_ns() - cpu_start if cpu else 0
            if round_index >= warmup:
                results[case.name].ns.append(elapsed)
                if cpu:
                    results[case.name].cpu_ns.append(cpu_used)
    return results


def paired_ratio(ours: Samples, base: Samples, *, cpu: bool = False) -> float:
    """Median over rounds of ours / baseline, each pair taken in the same round.

    Pairing cancels slow drifts in machine load that a ratio of two medians would keep.
    """
    left, right = (ours.cpu_ns, base.cpu_ns) if cpu else (ours.ns, base.ns)
    ratios = [a / b for a, b in zip(left, right, strict=True) if b]
    return float(statistics.median(ratios)) if ratios else float("nan")


def time_once(call: Callable[[], object]) -> int:
    """Wall time of one call in nanoseconds."""
    start = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - start


def fmt_ns(ns: float) -> str:
    """A duration for humans: `812 ns`, `23.4 µs`, `4.56 ms`, `1.23 s`."""
    if ns != ns:  # NaN: nothing measured
        return "—"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    return f"{ns / 1_000_000_000:.2f} s"
