"""Pool latency, throughput and session steps, beside a cold `python -I -c pass`.

Two pools run at once, one with 1 worker and one with 2. One round times, in rotating
order: a cold `python -I -c pass`, a request to each pool (one in flight, from sending the
line to reading its result), and a session step in each pool. Throughput is timed after
that: batches of requests written all at once, each pool in turn, the result lines read
back as they come.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from pool_process import PoolProcess
from timing import Summary, interleave, paired_ratio, summarize, time_command

CODE = "print(sum(range(10)))"
STEP = "steps += 1\nprint(steps)"
WORKER_COUNTS = (1, 2)


@dataclass(frozen=True)
class PoolRow:
    workers: int
    latency: Summary
    session_step: Summary
    throughput: float
    """Requests per second, the median over the batches."""
    paired_to_cold: float
    """The median of each round's request time over that round's cold python."""


@dataclass(frozen=True)
class PoolResults:
    cold_python: Summary
    rows: list[PoolRow]
    requests: int
    batches: int
    batch_size: int


def _throughput(pool: PoolProcess, batch_size: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(batch_size):
        pool.send({"code": CODE})
    for _ in range(batch_size):
        pool.receive()
    return batch_size / ((time.perf_counter_ns() - started) / 1e9)


def measure_pool(
    python: str, pynox: str, workdir: str, requests: int, batches: int, batch_size: int
) -> PoolResults:
    pools = {workers: PoolProcess(pynox, workers, workdir) for workers in WORKER_COUNTS}
    try:
        subjects = {"cold": lambda: time_command([python, "-I", "-c", "pass"], workdir)}
        for workers, pool in pools.items():
            session = f"bench-{workers}"
            pool.run({"code": "steps = 0", "session": session})
            subjects[f"request-{workers}"] = lambda pool=pool: pool.time_request({"code": CODE})
            subjects[f"step-{workers}"] = lambda pool=pool, session=session: pool.time_request(
                {"code": STEP, "session": session}
            )
        samples = interleave(subjects, requests, warmup=5)
        rates: dict[int, list[float]] = {workers: [] for workers in pools}
        for _ in range(batches):
            for workers, pool in pools.items():
                rates[workers].append(_throughput(pool, batch_size))
                time.sleep(0.05)
    finally:
        for pool in pools.values():
            pool.close()
    rows = [
        PoolRow(
            workers,
            summarize(samples[f"request-{workers}"]),
            summarize(samples[f"step-{workers}"]),
            statistics.median(rates[workers]),
            paired_ratio(samples[f"request-{workers}"], samples["cold"]),
        )
        for workers in pools
    ]
    return PoolResults(summarize(samples["cold"]), rows, requests, batches, batch_size)
