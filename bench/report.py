"""The Markdown report: workloads, spreads, the pool, targets, machine and method.

bench/results.md is this text; the documentation includes it verbatim, so it starts with no
page title and uses bold captions rather than headings.
"""

from __future__ import annotations

from dataclasses import dataclass

import earlier_figures
from batch_bench import BatchResult
from fork_floor import ForkFloor
from heavy_bench import HeavyRow
from machine import Machine
from memory_bench import MemoryResult
from modes_bench import ModeResult
from pool_bench import (
    BACK_TO_BACK_WORKERS,
    COSTS_WORKERS,
    IDLE_SECONDS,
    TMPFS,
    PoolResults,
    ScratchComparison,
    StepCosts,
)
from pool_costs import PoolCosts
from ray_bench import RayBatchResult, ray_table
from runners import PYTHON, RUNNERS
from targets import Target
from timing import Summary
from workload_bench import WorkloadResult


@dataclass(frozen=True)
class Method:
    warmup_rounds: int
    settle_ms: float
    pool_workers: int


def _ms(value: float) -> str:
    return f"{value:.2f} ms"


def _spread(summary: Summary) -> str:
    return f"{summary.p10:.2f}–{summary.p90:.2f}"


def _table(header: list[str], align: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def workload_tables(results: list[WorkloadResult]) -> list[str]:
    labels = [runner.label for runner in RUNNERS]
    medians = []
    spreads = []
    for result in results:
        base = result.summaries[PYTHON.key]
        cells = [result.title]
        for runner in RUNNERS:
            summary = result.summaries[runner.key]
            cells.append(f"{_ms(summary.median)} ({summary.ratio_to(base):.2f}x)")
        medians.append(cells)
        runs = {summary.runs for summary in result.summaries.values()}
        spreads.append(
            [result.title, "/".join(str(n) for n in sorted(runs))]
            + [_spread(result.summaries[runner.key]) for runner in RUNNERS]
        )
    right = ["---:"] * len(RUNNERS)
    return [
        "**Workloads.** Median wall time of one run, start to exit (the pool: request to "
        "result), and its ratio to CPython's median in the same run; lower is faster.",
        "",
        *_table(["Workload", *labels], ["---", *right], medians),
        "",
        "**Spread.** 10th to 90th percentile of the same runs, in milliseconds.",
        "",
        *_table(["Workload", "Runs", *labels], ["---", "---:", *right], spreads),
    ]


def earlier_table(results: list[WorkloadResult]) -> list[str]:
    """Our ratios to CPython beside those the earlier implementation published."""
    labels = [runner.label for runner in RUNNERS if runner is not PYTHON]
    rows = []
    for result in results:
        theirs = earlier_figures.ratios(result.workload.key)
        if theirs is None:
            continue
        base = result.summaries[PYTHON.key]
        cells = [result.title]
        for runner in RUNNERS:
            if runner is not PYTHON:
                ours = result.summaries[runner.key].ratio_to(base)
                cells.append(f"{ours:.2f}x / {theirs[runner.key]:.2f}x")
        rows.append(cells)
    if not rows:
        return []
    return [
        "**Beside the earlier implementation.** Each runner's median over CPython's, ours "
        f"(above) / the figures published in {earlier_figures.SOURCE}; lower is faster. "
        "The machines differ, so only the ratios compare.",
        "",
        *_table(["Workload", *labels], ["---", *["---:"] * len(labels)], rows),
    ]


def pool_table(pool: PoolResults) -> list[str]:
    cold = pool.cold_python
    batches = "one batch" if pool.batches == 1 else f"the median of {pool.batches} batches"
    rows = [
        [
            str(row.workers),
            _ms(row.latency.median),
            _ms(row.latency.p90),
            f"{row.latency.median / cold.median:.2f}x",
            f"{row.throughput:.0f}/s",
            _ms(row.session_step.median),
            _ms(row.session_step.p90),
        ]
        for row in pool.rows
    ]
    header = [
        "Workers",
        "Request p50",
        "Request p90",
        "p50 / cold python",
        "Throughput",
        "Session step p50",
        "Session step p90",
    ]
    return [
        f"**Pool.** `print(sum(range(10)))` from sending the request line to reading its "
        f"result, one request in flight, {pool.requests} requests per pool; a cold "
        f"`python -I -c pass` timed between them took {_ms(cold.median)} "
        f"(p10–p90 {_spread(cold)} ms). Throughput: {batches} of {pool.batch_size} requests "
        "written at once. A session step runs "
        "`steps += 1; print(steps)` in a session kept between requests.",
        "",
        *_table(header, ["---:"] * len(header), rows),
        *_pause_costs(pool),
        *_scratch_comparison(pool.scratch),
        *_costs_table(pool.costs, pool.fork_floor),
    ]


def _pause_costs(pool: PoolResults) -> list[str]:
    row = next(row for row in pool.rows if row.workers == BACK_TO_BACK_WORKERS)
    back, steps_idle = pool.steps_back_to_back, pool.steps_after_idle
    requests_idle, kept_busy = pool.requests_after_idle, pool.steps_kept_busy
    return [
        "",
        "**What a pause costs.** In the rounds above, every request and step comes after a "
        "pause and after the other subjects ran. Shown, not judged: four pipe hops between "
        "two Python processes that do nothing else (the hops of a session step: client, "
        f"relay, echo and back), timed in the same rounds: p50 {_ms(pool.hops.median)} "
        f"(p10–p90 {_spread(pool.hops)} ms); the session step of {BACK_TO_BACK_WORKERS} "
        f"workers, {back.runs} times back to back with nothing between: p50 "
        f"{_ms(back.median)} (p10–p90 {_spread(back)} ms), against "
        f"{_ms(row.session_step.median)} in the rounds; and the same pool with nothing else "
        f"running, each after {IDLE_SECONDS * 1000:g} ms idle, {steps_idle.runs} session "
        f"steps: p50 {_ms(steps_idle.median)} (p10–p90 {_spread(steps_idle)} ms), and "
        f"{requests_idle.runs} requests: p50 {_ms(requests_idle.median)} "
        f"(p10–p90 {_spread(requests_idle)} ms), against {_ms(row.latency.median)} in the "
        "rounds. With every CPU kept from idling by a busy loop at the lowest priority "
        f"(nice 19), which any other process preempts, {kept_busy.runs} more session steps, "
        f"each after {IDLE_SECONDS * 1000:g} ms: p50 {_ms(kept_busy.median)} "
        f"(p10–p90 {_spread(kept_busy)} ms).",
        *_step_costs(pool.step_costs),
    ]


def _step_costs(costs: StepCosts | None) -> list[str]:
    if costs is None:
        return []
    return [
        "",
        "**Where a session step's CPU time goes.** Over the steps back to back, from "
        "`/proc/PID/task/TID/schedstat` (time on a CPU, user and kernel): the pool server, "
        f"with its threads, {_ms(costs.server_ms)} per step; the session's process "
        f"{_ms(costs.session_ms)}.",
    ]


def _scratch_comparison(scratch: ScratchComparison | None) -> list[str]:
    if scratch is None:
        return []
    return [
        "",
        "**Where the pool makes scratch directories.** Each request gets one from the pool: "
        "made, or one an earlier request left as it was made, renamed; removed after unless "
        f"it is left so. Throughput of 2 workers with them in {scratch.default_place}, as above: "
        f"{scratch.default_throughput:.0f}/s; in a pool whose `TMPDIR` is `{TMPFS}` (tmpfs), "
        f"its batches taking turns with the table's: {scratch.tmpfs_throughput:.0f}/s. "
        "Shown, not judged: files a program writes to a tmpfs are memory that `--memory` "
        "does not count (see docs/performance.md).",
    ]


def _costs_table(costs: PoolCosts | None, floor: ForkFloor | None) -> list[str]:
    if costs is None:
        return []
    shares = [
        ("pool server, with its threads", costs.server),
        ("zygote, forking spares", costs.zygote),
        ("children: a spare each, then its request", costs.children),
    ]
    rows = [
        [
            name,
            _ms(share.cpu_ms),
            _ms(share.system_ms),
            f"{share.minor_faults:.0f}",
        ]
        for name, share in shares
    ]
    total_cpu = sum(share.cpu_ms for _, share in shares)
    total_system = sum(share.system_ms for _, share in shares)
    total_faults = sum(share.minor_faults for _, share in shares)
    rows.append(["all", _ms(total_cpu), _ms(total_system), f"{total_faults:.0f}"])
    header = ["Process", "CPU per request", "of it in the kernel", "Page faults per request"]
    return [
        "",
        f"**Where a pool request's CPU time goes.** The pool of {COSTS_WORKERS} workers "
        f"over its throughput batches ({costs.requests} requests), from `/proc/PID/stat`: "
        "user and system time, and minor page faults (a page first touched, or copied "
        "after a fork). A child's figures reach its zygote when the zygote reaps it.",
        "",
        *_table(header, ["---", "---:", "---:", "---:"], rows),
        *_fork_floor(floor),
    ]


def _fork_floor(floor: ForkFloor | None) -> list[str]:
    if floor is None:
        return []
    return [
        "",
        "For scale, what forking alone costs: a `python -I` that imported the pool server's "
        f"modules forked {floor.forks} children with `os.fork`, each exiting at once: "
        f"{_ms(floor.parent_ms)} of CPU per fork in the parent and {_ms(floor.child_ms)} in "
        f"the child, with {floor.child_faults:.0f} page faults, before any request runs.",
    ]


def modes_table(results: list[ModeResult]) -> list[str]:
    rows = [
        [
            result.mode.label,
            _ms(result.pynox.median),
            _ms(result.python.median),
            f"{result.paired:.3f}x",
            f"{_spread(result.pynox)} / {_spread(result.python)}",
        ]
        for result in results
    ]
    header = ["Mode", "pynox p50", "python p50", "Paired ratio", "p10–p90 ms (pynox / python)"]
    return [
        "**Command-line modes.** The tiny script under each way of calling pynox, each beside "
        "`python -I` called the same way (`-c` with its text, `-m` with `-E -s`, which is "
        f"`-I` without `-P`), all interleaved in the same {results[0].pynox.runs} rounds. "
        "pynox's start imports no `os`, where python's `site` does; the first row with no "
        "target runs the script with `import os` on top, as a program that imports it pays "
        "for it. The second is granted an empty folder to write, which pynox first checks "
        "against everything a later run trusts (a run with no write grant skips that).",
        "",
        *_table(header, ["---", "---:", "---:", "---:", "---:"], rows),
    ]


def batch_table(batch: BatchResult) -> list[str]:
    header = ["Programs", "Failing", "Pool, all at once", "python -I each", "Paired ratio"]
    row = [
        str(batch.programs),
        str(batch.failing),
        _ms(batch.pool.median),
        _ms(batch.python.median),
        f"{batch.paired:.3f}x",
    ]
    return [
        f"**Batch.** {batch.programs} small programs, each a function and its asserts (every "
        "tenth assert is wrong), as code-evaluation harnesses run them: written at once to a "
        "pool of 2 workers, against a fresh `python -I -c` for each in turn; wall time of the "
        f"whole batch, median of {batch.pool.runs} rounds. Both gave every program the same "
        "verdict.",
        "",
        *_table(header, ["---:"] * len(header), [row]),
    ]


def memory_table(memory: MemoryResult) -> list[str]:
    header = ["Workers", "Processes", "PSS idle", f"PSS after {memory.requests} requests"]
    row = [
        str(memory.workers),
        str(memory.processes),
        f"{memory.idle_kib / 1024:.1f} MiB",
        f"{memory.after_kib / 1024:.1f} MiB",
    ]
    return [
        "**Pool memory.** The proportional set size of the pool server, its zygote and its "
        "spare children (`/proc/PID/smaps_rollup`), idle, then after "
        f"{memory.requests} requests of `print(1)` written in batches of 100, each 1 s after "
        "the last result.",
        "",
        *_table(header, ["---:"] * len(header), [row]),
    ]


def heavy_table(rows: list[HeavyRow]) -> list[str]:
    header = ["Request", "Pool p50", "Pool p90", "Cold python p50", "Paired ratio",
              "Same code in a warm python p50"]  # fmt: skip
    cells = [
        [row.label, _ms(row.pool.median), _ms(row.pool.p90), _ms(row.python.median),
         f"{row.paired:.3f}x", _ms(row.in_process.median)]
        for row in rows
    ]  # fmt: skip
    return [
        "**Warm heavy imports.** A request that uses numpy, pandas or matplotlib in a pool of 2 "
        "workers that preloaded them from a package directory (warmed up: a pool that "
        "also runs the request's own code as its `--warmup`), against a cold `python -I` "
        f"doing the same, interleaved in {rows[0].pool.runs} rounds. The chart's request "
        "closes its figure once saved: one left open, the pool would also render and "
        "send back as an image, work that python does not do. The last column is the work's "
        "own cost, which no request can undercut: the same code run again, in the same "
        "rounds, in one python process that ran it before (imports loaded, caches filled, "
        "no process started or ended).",
        "",
        *_table(header, ["---", "---:", "---:", "---:", "---:", "---:"], cells),
    ]


def targets_table(targets: list[Target]) -> list[str]:
    rows = [[t.goal, t.measured, "met" if t.met else "**not met**"] for t in targets]
    caption = (
        "**Targets.** Judged on the median of the per-round ratios: in every round the "
        "subjects ran side by side, so a slow stretch of the machine falls on both and "
        "cancels out; the ratio of the medians shown above is given beside it."
    )
    return [caption, "", *_table(["Target", "Measured", "Status"], ["---"] * 3, rows)]


def machine_and_method(
    machine: Machine, method: Method, workloads: list[WorkloadResult], pool: bool
) -> list[str]:
    rounds = ", ".join(
        f"{result.workload.title} {result.summaries[PYTHON.key].runs}" for result in workloads
    )
    lines = [
        "**Machine.**",
        "",
        f"- CPU: {machine.cpu}, {machine.cores} cores available",
        f"- Kernel: {machine.kernel}",
        f"- Python: {machine.python}; {machine.pynox}",
        f"- Date: {machine.date}",
        f"- Scratch directories of runs and pools: {machine.scratch}",
        "",
        "**Method.**",
        "",
        "- One interpreter for everything: `python -I` is the interpreter of the environment "
        "`pynox` is installed in, and `pynox --no-sandbox` hands the command line to it.",
    ]
    if workloads:
        lines += [
            "- Each workload is a script file, run the same way four times per round: "
            "`python -I SCRIPT`, `pynox SCRIPT`, `pynox --no-sandbox -I SCRIPT` (start to exit of "
            f"the process, output discarded) and a `script` request to a `pynox pool` with "
            f"{method.pool_workers} workers, started once (request line to result line). "
            "The workloads that write a file (the JSON pipeline, the CSV round trip, JSON load) "
            "write and read it in a temporary directory that `pynox` and the pool request are "
            "granted to read and write; the pool request for printing keeps up to 16 MiB of "
            "output.",
            f"- Rounds: {rounds}, after {method.warmup_rounds} untimed round; the order of the "
            f"four rotates from round to round, with a {method.settle_ms:g} ms pause between "
            "runs. Before timing, each runner's output is checked against CPython's.",
        ]
    if pool:
        lines.append(
            "- The pool rows: a pool of 1 and one of 2 workers run side by side; each round "
            "times a cold `python -I -c pass`, the four pipe hops, a request and a session "
            "step in each pool, in rotating order, after 5 untimed rounds; the session steps "
            "back to back come after the rounds."
        )
    lines.append(
        "- Times are wall clock (`time.perf_counter_ns`) in the benchmark process. "
        "Medians and percentiles come from `statistics` (inclusive method)."
    )
    return lines


def render(
    machine: Machine,
    method: Method,
    workloads: list[WorkloadResult],
    modes: list[ModeResult],
    pool: PoolResults | None,
    batch: BatchResult | None,
    memory: MemoryResult | None,
    heavy: list[HeavyRow],
    targets: list[Target],
    ray: RayBatchResult | None = None,
) -> str:
    lines = ["<!-- Written by `make bench` (bench/suite.py); edit the suite, not this file. -->"]
    if workloads:
        lines += ["", *workload_tables(workloads)]
        if earlier := earlier_table(workloads):
            lines += ["", *earlier]
    if modes:
        lines += ["", *modes_table(modes)]
    if pool is not None:
        lines += ["", *pool_table(pool)]
    if batch is not None:
        lines += ["", *batch_table(batch)]
    if ray is not None:
        lines += ["", *ray_table(ray)]
    if memory is not None:
        lines += ["", *memory_table(memory)]
    if heavy:
        lines += ["", *heavy_table(heavy)]
    if targets:
        lines += ["", *targets_table(targets)]
    lines += ["", *machine_and_method(machine, method, workloads, pool is not None)]
    return "\n".join(lines) + "\n"
