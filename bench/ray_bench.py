"""A batch across Ray: 1,000 small programs (batch_bench's kind) through `RayPool.map` with
two actors of one worker each, against a local `pynox.Pool` of two workers and a fresh
`python -I -c` per program, in turn, on a local Ray instance (ray.init(num_cpus=2)). All
three must give every program the same verdict. Then the overhead of Ray per request: one
request at a time, `RayPool.run` against `Pool.run`, the difference of the medians.

Needs Ray (`make bench` installs it into the environment); without it the row is skipped.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from batch_bench import _python_round, programs
from timing import Summary, summarize

PROGRAMS = 1000
ACTORS = 2
WORKERS_PER_ACTOR = 1
LOCAL_WORKERS = 2
# As many requests in flight as the batch through the local pool keeps, and through Ray.
IN_FLIGHT = 8
LATENCY_REQUESTS = 100


@dataclass(frozen=True)
class RayBatchResult:
    programs: int
    ray: Summary
    pool: Summary
    python: Summary
    ray_request: Summary
    pool_request: Summary
    failing: int

    @property
    def overhead_ms(self) -> float:
        """What Ray adds to one request: the medians of one request at a time, apart."""
        return self.ray_request.median - self.pool_request.median

    def throughput(self, summary: Summary) -> float:
        return self.programs / (summary.median / 1000)


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _timed(run: object, sources: list[str]) -> tuple[int, list[bool]]:
    started = time.perf_counter_ns()
    verdicts = [result.exit == 0 for result in run(sources)]  # type: ignore[operator]
    return time.perf_counter_ns() - started, verdicts


def _latencies(run: object, count: int) -> list[int]:
    samples = []
    for _ in range(count):
        started = time.perf_counter_ns()
        result = run("print(1)")  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - started)
        if not result.ok:
            raise RuntimeError(f"a latency request failed: {result.text}")
    return samples


def measure_ray(python: str, workdir: str, rounds: int) -> RayBatchResult:
    import ray

    import pynox
    from pynox.ray import RayPool

    sources = programs(PROGRAMS)
    ray_ns: list[int] = []
    pool_ns: list[int] = []
    python_ns: list[int] = []
    # Ray's sessions (logs, sockets) in the suite's directory, removed with it.
    temp_dir = os.path.join(workdir, "ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _temp_dir=temp_dir,
    )
    try:
        options = {"num_cpus": 1}
        with (
            RayPool(ACTORS, WORKERS_PER_ACTOR, actor_options=options) as remote,
            pynox.Pool(LOCAL_WORKERS) as local,
            ThreadPoolExecutor(IN_FLIGHT) as threads,
        ):

            def through_ray(batch: list[str]) -> object:
                return remote.map(batch, max_in_flight=IN_FLIGHT)

            def through_pool(batch: list[str]) -> object:
                return threads.map(local.run, batch)

            _timed(through_ray, sources[:20])  # warm: actors' spares forked, workers leased
            _timed(through_pool, sources[:20])
            for _ in range(rounds):
                spent, by_ray = _timed(through_ray, sources)
                ray_ns.append(spent)
                spent, by_pool = _timed(through_pool, sources)
                pool_ns.append(spent)
                spent, fresh = _python_round(python, sources, workdir)
                python_ns.append(spent)
                if not by_ray == by_pool == fresh:
                    raise RuntimeError("RayPool, the local pool and python disagree on a verdict")
            ray_request = _latencies(remote.run, LATENCY_REQUESTS)
            pool_request = _latencies(local.run, LATENCY_REQUESTS)
    finally:
        ray.shutdown()
    return RayBatchResult(
        len(sources), summarize(ray_ns), summarize(pool_ns), summarize(python_ns),
        summarize(ray_request), summarize(pool_request), fresh.count(False),
    )  # fmt: skip


def ray_table(result: RayBatchResult) -> list[str]:
    header = ["Through", "Batch wall time", "Programs per second"]
    rows = [
        [label, f"{summary.median:.0f} ms", f"{result.throughput(summary):.0f}"]
        for label, summary in (
            (f"`RayPool.map`, {ACTORS} actors of {WORKERS_PER_ACTOR} worker", result.ray),
            (f"local `Pool`, {LOCAL_WORKERS} workers", result.pool),
            ("`python -I -c` each", result.python),
        )
    ]
    return [
        f"**Ray.** {result.programs} small programs (a function and its asserts, made as for "
        f"the batch; {result.failing} fail), through `RayPool.map` ({IN_FLIGHT} in flight) on "
        f"a local Ray instance of 2 CPUs, through a local `Pool` from {IN_FLIGHT} threads, and "
        "a fresh `python -I -c` each in turn, with Ray running throughout; median of "
        f"{result.ray.runs} round(s). All three gave every program the same verdict. Ray's "
        f"overhead per request: {result.overhead_ms:.2f} ms (one "
        f"`print(1)` at a time, {LATENCY_REQUESTS} each: `RayPool.run` p50 "
        f"{result.ray_request.median:.2f} ms, `Pool.run` p50 {result.pool_request.median:.2f} "
        "ms).",
        "",
        *["| " + " | ".join(row) + " |" for row in [header, ["---", "---:", "---:"], *rows]],
    ]
