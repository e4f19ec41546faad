"""The workload table: every workload under every runner, interleaved round by round."""

from __future__ import annotations

from dataclasses import dataclass

from pool_process import PoolProcess
from runners import RUNNERS, Invocations
from timing import Summary, interleave, paired_ratio, summarize
from workloads import Workload

POOL_WORKERS = 2


@dataclass(frozen=True)
class WorkloadResult:
    workload: Workload
    title: str
    summaries: dict[str, Summary]
    """By runner key, in the order of RUNNERS."""
    paired: dict[str, float]
    """By runner key: the median of its per-round ratios to CPython (see paired_ratio)."""


def _title(workload: Workload, size: int | None) -> str:
    return f"{workload.title}, {size / 2**20:.2f} MiB" if size else workload.title


def measure_workloads(
    workloads: list[tuple[Workload, int]], python: str, pynox: str, workdir: str
) -> list[WorkloadResult]:
    """Each (workload, rounds): checked once under every runner, then timed interleaved."""
    results = []
    with PoolProcess(pynox, POOL_WORKERS, workdir) as pool:
        for workload, rounds in workloads:
            invocations = Invocations(workload, python, pynox, workdir)
            invocations.check_output(pool)
            samples = interleave(invocations.measures(pool), rounds)
            summaries = {runner.key: summarize(samples[runner.key]) for runner in RUNNERS}
            baseline = samples[RUNNERS[0].key]
            paired = {runner.key: paired_ratio(samples[runner.key], baseline) for runner in RUNNERS}
            title = _title(workload, invocations.output_size())
            results.append(WorkloadResult(workload, title, summaries, paired))
    return results
