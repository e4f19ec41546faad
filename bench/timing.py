"""The interleaved runner and the statistics every table reports.

Subjects run in rounds: each round runs every subject once, and the order rotates from one
round to the next, so that a slow moment of the machine, and the position in a round, fall
on all subjects alike. Times are wall-clock nanoseconds from `time.perf_counter_ns`.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Measure = Callable[[], int]
"""Runs a subject once and returns its wall time in nanoseconds."""

SETTLE_SECONDS = 0.005
"""A pause between two runs, so that one run's tail (a pool refilling its spare children,
a process being reaped) does not land in the next run's time."""


def time_command(command: Sequence[str], cwd: str) -> int:
    """Runs a command to its end with output discarded; its wall time in nanoseconds."""
    started = time.perf_counter_ns()
    subprocess.run(
        command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True
    )
    return time.perf_counter_ns() - started


def interleave(subjects: dict[str, Measure], rounds: int, warmup: int = 1) -> dict[str, list[int]]:
    """Runs every subject `rounds` times, interleaved, after `warmup` untimed rounds."""
    names = list(subjects)
    samples: dict[str, list[int]] = {name: [] for name in names}
    for round_number in range(warmup + rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed = subjects[name]()
            if round_number >= warmup:
                samples[name].append(elapsed)
            time.sleep(SETTLE_SECONDS)
    return samples


@dataclass(frozen=True)
class Summary:
    """Milliseconds: the median and the spread of one subject's samples."""

    runs: int
    median: float
    p10: float
    p90: float

    def ratio_to(self, baseline: Summary) -> float:
        return self.median / baseline.median


def summarize(samples_ns: Sequence[int]) -> Summary:
    """Median, 10th and 90th percentile (inclusive method) in milliseconds."""
    if not samples_ns:
        raise ValueError("no samples to summarize")
    values = [sample / 1e6 for sample in samples_ns]
    if len(values) == 1:
        return Summary(1, values[0], values[0], values[0])
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return Summary(len(values), statistics.median(values), deciles[0], deciles[8])


def paired_ratio(samples_ns: Sequence[int], baseline_ns: Sequence[int]) -> float:
    """The median of the per-round ratios of two subjects interleaved in the same rounds.

    Both ran within moments of each other in every round, so a slow stretch of the
    machine falls on both and cancels out of each ratio; a ratio of medians keeps it
    when the slow stretch hits one subject's runs more than the other's.
    """
    if len(samples_ns) != len(baseline_ns) or not samples_ns:
        raise ValueError("paired samples need the same, non-zero number of rounds")
    return statistics.median(s / b for s, b in zip(samples_ns, baseline_ns, strict=True))
