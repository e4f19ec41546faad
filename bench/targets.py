"""The speed targets the project tracks, checked against one run's medians."""

from __future__ import annotations

from dataclasses import dataclass

from pool_bench import PoolResults
from runners import POOL, PYNOX, PYTHON
from workload_bench import WorkloadResult

TINY_MAX_RATIO = 1.15
POOL_MAX_RATIO_TO_COLD = 0.2
JSON_MIN_SPEEDUP = 1.9


@dataclass(frozen=True)
class Target:
    """`measured` has three decimals, so that a figure near the bound shows its side."""

    goal: str
    measured: str
    met: bool


def _by_key(results: list[WorkloadResult]) -> dict[str, WorkloadResult]:
    return {result.workload.key: result for result in results}


def evaluate(workloads: list[WorkloadResult], pool: PoolResults | None) -> list[Target]:
    """The targets whose measurements this run has (a partial run checks fewer)."""
    targets = []
    measured = _by_key(workloads)
    if "tiny" in measured:
        summaries = measured["tiny"].summaries
        ratio = summaries[PYNOX.key].ratio_to(summaries[PYTHON.key])
        targets.append(
            Target(
                f"Tiny script: `pynox` ≤ {TINY_MAX_RATIO}x `python -I`",
                f"{ratio:.3f}x",
                ratio <= TINY_MAX_RATIO,
            )
        )
    if pool is not None:
        for row in pool.rows:
            ratio = row.latency.median / pool.cold_python.median
            workers = f"{row.workers} worker{'s' if row.workers > 1 else ''}"
            targets.append(
                Target(
                    f"Pool p50 ({workers}) ≤ {POOL_MAX_RATIO_TO_COLD}x cold `python -I -c pass`",
                    f"{ratio:.3f}x",
                    ratio <= POOL_MAX_RATIO_TO_COLD,
                )
            )
    if "json_pipeline" in measured:
        summaries = measured["json_pipeline"].summaries
        for runner, name in ((PYNOX, "`pynox` (sandboxed)"), (POOL, "the pool")):
            speedup = summaries[PYTHON.key].median / summaries[runner.key].median
            targets.append(
                Target(
                    f"JSON pipeline: {name} ≥ {JSON_MIN_SPEEDUP}x faster than CPython",
                    f"{speedup:.3f}x speed-up",
                    speedup >= JSON_MIN_SPEEDUP,
                )
            )
    return targets
