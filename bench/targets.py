"""The speed targets the project tracks, checked against one run's paired ratios.

Each target is judged on the median of the per-round ratios (see timing.paired_ratio):
the subjects ran side by side in every round, so the machine's slow stretches cancel out.
The ratio of the medians the tables show is given beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from batch_bench import BatchResult
from heavy_bench import HeavyRow
from memory_bench import MemoryResult
from modes_bench import ModeResult
from pool_bench import PoolResults
from runners import NO_SANDBOX, POOL, PYNOX, PYTHON
from workload_bench import WorkloadResult

TINY_MAX_RATIO = 1.15
TINY_NO_SANDBOX_MAX_RATIO = 1.05
POOL_MAX_RATIO_TO_COLD = 0.2
JSON_MIN_SPEEDUP = 1.9
# The pool at the floor of this 2-core machine: a fork round trip of a warm CPython is
# about 0.65 ms, a pipe round trip about 0.05 ms, confining a child about 0.4 ms.
POOL_MAX_P50_MS = 1.0
SESSION_MAX_P50_MS = 0.3
POOL_MIN_THROUGHPUT = 1000
POOL_FLOOR_WORKERS = 2
BATCH_MAX_RATIO = 0.2
POOL_MAX_IDLE_MIB = 40
POOL_MAX_GROWTH_MIB = 2
HEAVY_MAX_P50_MS = 10.0


@dataclass(frozen=True)
class Target:
    """`measured` has three decimals, so that a figure near the bound shows its side."""

    goal: str
    measured: str
    met: bool


def _measured(paired: float, of_medians: float, unit: str = "x") -> str:
    return f"{paired:.3f}{unit} (ratio of medians {of_medians:.3f}{unit})"


def _by_key(results: list[WorkloadResult]) -> dict[str, WorkloadResult]:
    return {result.workload.key: result for result in results}


def _modes(results: list[ModeResult]) -> list[Target]:
    targets = []
    for result in results:
        if not result.mode.judged:
            continue
        bound = TINY_NO_SANDBOX_MAX_RATIO if result.mode.key == "no_sandbox" else TINY_MAX_RATIO
        of_medians = result.pynox.ratio_to(result.python)
        targets.append(
            Target(
                f"Mode {result.mode.label} ≤ {bound}x python",
                _measured(result.paired, of_medians),
                result.paired <= bound,
            )
        )
    return targets


def _pool_floor(pool: PoolResults) -> list[Target]:
    targets = []
    for row in pool.rows:
        if row.workers != POOL_FLOOR_WORKERS:
            continue
        workers = f"{row.workers} workers"
        for goal, measured, met in (
            (f"Pool request p50 ({workers}) ≤ {POOL_MAX_P50_MS} ms",
             f"{row.latency.median:.3f} ms", row.latency.median <= POOL_MAX_P50_MS),
            (f"Session step p50 ({workers}) ≤ {SESSION_MAX_P50_MS} ms",
             f"{row.session_step.median:.3f} ms", row.session_step.median <= SESSION_MAX_P50_MS),
            (f"Pool throughput ({workers}) ≥ {POOL_MIN_THROUGHPUT}/s",
             f"{row.throughput:.0f}/s", row.throughput >= POOL_MIN_THROUGHPUT),
        ):  # fmt: skip
            targets.append(Target(goal, measured, met))
    return targets


def evaluate(
    workloads: list[WorkloadResult],
    modes: list[ModeResult],
    pool: PoolResults | None,
    batch: BatchResult | None = None,
    memory: MemoryResult | None = None,
    heavy: list[HeavyRow] | None = None,
) -> list[Target]:
    """The targets whose measurements this run has (a partial run checks fewer)."""
    targets = []
    measured = _by_key(workloads)
    if "tiny" in measured:
        tiny = measured["tiny"]
        for runner, command, bound in (
            (PYNOX, "`pynox`", TINY_MAX_RATIO),
            (NO_SANDBOX, "`pynox --no-sandbox`", TINY_NO_SANDBOX_MAX_RATIO),
        ):
            of_medians = tiny.summaries[runner.key].ratio_to(tiny.summaries[PYTHON.key])
            ratio = tiny.paired[runner.key]
            targets.append(
                Target(
                    f"Tiny script: {command} ≤ {bound}x `python -I`",
                    _measured(ratio, of_medians),
                    ratio <= bound,
                )
            )
    if pool is not None:
        for row in pool.rows:
            of_medians = row.latency.median / pool.cold_python.median
            ratio = row.paired_to_cold
            workers = f"{row.workers} worker{'s' if row.workers > 1 else ''}"
            targets.append(
                Target(
                    f"Pool p50 ({workers}) ≤ {POOL_MAX_RATIO_TO_COLD}x cold `python -I -c pass`",
                    _measured(ratio, of_medians),
                    ratio <= POOL_MAX_RATIO_TO_COLD,
                )
            )
        targets += _pool_floor(pool)
    if "json_pipeline" in measured:
        pipeline = measured["json_pipeline"]
        summaries = pipeline.summaries
        for runner, name in ((PYNOX, "`pynox` (sandboxed)"), (POOL, "the pool")):
            of_medians = summaries[PYTHON.key].median / summaries[runner.key].median
            speedup = 1 / pipeline.paired[runner.key]
            targets.append(
                Target(
                    f"JSON pipeline: {name} ≥ {JSON_MIN_SPEEDUP}x faster than CPython",
                    _measured(speedup, of_medians, "x speed-up"),
                    speedup >= JSON_MIN_SPEEDUP,
                )
            )
    if batch is not None:
        of_medians = batch.pool.ratio_to(batch.python)
        targets.append(
            Target(
                f"Batch of {batch.programs} programs: the pool ≤ {BATCH_MAX_RATIO}x python each",
                _measured(batch.paired, of_medians),
                batch.paired <= BATCH_MAX_RATIO,
            )
        )
    if memory is not None:
        idle, growth = memory.idle_kib / 1024, (memory.after_kib - memory.idle_kib) / 1024
        targets.append(
            Target(
                f"Pool memory, idle ({memory.workers} workers) ≤ {POOL_MAX_IDLE_MIB} MiB PSS",
                f"{idle:.1f} MiB", idle <= POOL_MAX_IDLE_MIB,
            )
        )  # fmt: skip
        targets.append(
            Target(
                f"Pool memory after {memory.requests} requests ≤ idle + {POOL_MAX_GROWTH_MIB} MiB",
                f"{growth:+.1f} MiB", growth <= POOL_MAX_GROWTH_MIB,
            )
        )  # fmt: skip
    # The bound is for each request, preloaded, and also warmed up: numpy's, pandas' and
    # the chart's, which the issue names alike. Beside each, the work alone (the same code
    # again in a warm python): where that is over the bound, no pool can meet it.
    for row in heavy or []:
        pool = "Preloaded, warmed-up pool" if row.key.endswith("-warmed") else "Preloaded pool"
        targets.append(
            Target(
                f"{pool}: {row.label} p50 ≤ {HEAVY_MAX_P50_MS:g} ms",
                f"{row.pool.median:.3f} ms (the work alone {row.in_process.median:.3f} ms)",
                row.pool.median <= HEAVY_MAX_P50_MS,
            )
        )  # fmt: skip
    return targets + _modes(modes)
