"""Pool latency, throughput and session steps, beside a cold `python -I -c pass`.

Two pools run at once, one with 1 worker and one with 2. One round times, in rotating
order: a cold `python -I -c pass`, a request to each pool (one in flight, from sending the
line to reading its result), and a session step in each pool. Throughput is timed after
that: batches of requests written all at once, each pool in turn, the result lines read
back as they come. A third pool of 2 workers, whose TMPDIR is a tmpfs, takes its turn in
those batches too: each request's scratch directory is made and removed there instead.
Over its batches, the table's pool of 2 workers is read for where its CPU time goes
(pool_costs).

Beside them, for what a pause costs: the same rounds time four pipe hops between Python
processes that do nothing else (hop_chain), and after the rounds the pool of 2 workers
runs session steps back to back, with nothing between them, then session steps and
requests each after an idle pause, with nothing else running: the rounds' pauses without
the other subjects, which tells what the machine's sleep costs from what they cost. The
steps after a pause are timed once more with every CPU kept from idling (busy_cpus), and
the back-to-back steps are read for the CPU time the pool server and the session's
process each spend on a step.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from busy_cpus import BusyCpus
from fork_floor import ForkFloor, measure_fork_floor
from hop_chain import HopChain
from machine import file_system, scratch_base, scratch_place
from pool_costs import PoolCosts, cpu_ns, parent_of, per_request, read, zygote_of
from pool_process import PoolProcess
from timing import Summary, interleave, paired_ratio, summarize, time_command

CODE = "print(sum(range(10)))"
STEP = "steps += 1\nprint(steps)"
WORKER_COUNTS = (1, 2)
# Where the third pool makes its scratch directories: memory, not the disk.
TMPFS = "/dev/shm"
# The pool whose costs are read over its throughput batches: the judged one.
COSTS_WORKERS = 2
# The pool whose session steps are also timed back to back, and how many; the same pool's
# steps and requests are then timed after IDLE_SECONDS with nothing running, as many.
BACK_TO_BACK_WORKERS = 2
BACK_TO_BACK_STEPS = 100
IDLE_SECONDS = 0.02
# Forks timed for what forking alone costs a process of the zygote's size (fork_floor).
FORK_FLOOR_FORKS = 500


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
class ScratchComparison:
    """Throughput of 2 workers by where the pool makes its scratch directories."""

    default_place: str
    """The directory and its file system, as the table's pools have it."""
    default_throughput: float
    tmpfs_throughput: float


@dataclass(frozen=True)
class StepCosts:
    """CPU milliseconds per session step, over the steps timed back to back."""

    server_ms: float
    """The pool server, with its threads."""
    session_ms: float
    """The session's own process."""


@dataclass(frozen=True)
class PoolResults:
    cold_python: Summary
    rows: list[PoolRow]
    requests: int
    batches: int
    batch_size: int
    scratch: ScratchComparison | None
    """None where there is no tmpfs at TMPFS, or the table's pools use one already."""
    costs: PoolCosts | None
    """The pool of 2 workers over its throughput batches; None where /proc cannot tell."""
    hops: Summary
    """Four pipe hops between idle Python processes, timed in the same rounds."""
    steps_back_to_back: Summary
    """Session steps of the pool of BACK_TO_BACK_WORKERS, one right after the other."""
    steps_after_idle: Summary
    """The same pool's session steps, each after IDLE_SECONDS with nothing running."""
    requests_after_idle: Summary
    """The same pool's requests, each after IDLE_SECONDS with nothing running."""
    steps_kept_busy: Summary
    """The same pool's session steps, each after IDLE_SECONDS, with every CPU kept busy by
    loops of the lowest priority (busy_cpus)."""
    step_costs: StepCosts | None
    """Over the back-to-back steps; None where /proc cannot tell."""
    fork_floor: ForkFloor | None
    """What forking a process the size of the zygote costs, with no request run."""


def _throughput(pool: PoolProcess, batch_size: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(batch_size):
        pool.send({"code": CODE})
    for _ in range(batch_size):
        pool.receive()
    return batch_size / ((time.perf_counter_ns() - started) / 1e9)


def _after_idle(measure: Callable[[], int]) -> list[int]:
    """BACK_TO_BACK_STEPS timings of measure, each after IDLE_SECONDS of nothing."""
    samples = []
    for _ in range(BACK_TO_BACK_STEPS):
        time.sleep(IDLE_SECONDS)
        samples.append(measure())
    return samples


def _session(workers: int) -> str:
    """The name of the session the rounds keep in the pool of this many workers."""
    return f"bench-{workers}"


def _session_process(pool: PoolProcess, session: str) -> int | None:
    """The pid of the session's process, as it tells it, if the pool's zygote forked it."""
    told = pool.run({"code": "import os\nprint(os.getpid())", "session": session})["stdout"]
    pid = int(told) if told.strip().isdigit() else None
    zygote = zygote_of(pool.process.pid)
    return pid if pid is not None and zygote is not None and parent_of(pid) == zygote else None


def _cpu_of(server: int, session_process: int | None) -> tuple[int, int] | None:
    """The CPU nanoseconds of the pool server and of the session's process so far."""
    if session_process is None:
        return None
    server_ns, session_ns = cpu_ns(server), cpu_ns(session_process)
    return None if server_ns is None or session_ns is None else (server_ns, session_ns)


def _step_costs(
    pool: PoolProcess, session: str, step: Callable[[], int]
) -> tuple[list[int], StepCosts | None]:
    """BACK_TO_BACK_STEPS session steps one right after the other, and what they cost."""
    server, session_process = pool.process.pid, _session_process(pool, session)
    before = _cpu_of(server, session_process)
    samples = [step() for _ in range(BACK_TO_BACK_STEPS)]
    after = _cpu_of(server, session_process)
    if before is None or after is None:
        return samples, None
    per_step = [
        (now - then) / 1e6 / BACK_TO_BACK_STEPS for now, then in zip(after, before, strict=True)
    ]
    return samples, StepCosts(*per_step)


def _tmpfs_pool(pynox: str, workdir: str) -> PoolProcess | None:
    """A pool of 2 whose scratch directories go to a tmpfs, if the table's do not already."""
    if file_system(TMPFS) != "tmpfs" or file_system(scratch_base(pynox)) == "tmpfs":
        return None
    return PoolProcess(pynox, 2, workdir, env={**os.environ, "TMPDIR": TMPFS})


def measure_pool(
    python: str, pynox: str, workdir: str, requests: int, batches: int, batch_size: int
) -> PoolResults:
    pools = {workers: PoolProcess(pynox, workers, workdir) for workers in WORKER_COUNTS}
    tmpfs_pool = _tmpfs_pool(pynox, workdir)
    hops = HopChain(python)
    try:
        subjects = {
            "cold": lambda: time_command([python, "-I", "-c", "pass"], workdir),
            "hops": hops.time_hops,
        }
        for workers, pool in pools.items():
            session = _session(workers)
            pool.run({"code": "steps = 0", "session": session})
            subjects[f"request-{workers}"] = lambda pool=pool: pool.time_request({"code": CODE})
            subjects[f"step-{workers}"] = lambda pool=pool, session=session: pool.time_request(
                {"code": STEP, "session": session}
            )
        samples = interleave(subjects, requests, warmup=5)
        step = subjects[f"step-{BACK_TO_BACK_WORKERS}"]
        back_to_back, step_costs = _step_costs(
            pools[BACK_TO_BACK_WORKERS], _session(BACK_TO_BACK_WORKERS), step
        )
        steps_after_idle = _after_idle(step)
        requests_after_idle = _after_idle(subjects[f"request-{BACK_TO_BACK_WORKERS}"])
        with BusyCpus(python):
            steps_kept_busy = _after_idle(step)
        rates: dict[int, list[float]] = {workers: [] for workers in pools}
        tmpfs_rates: list[float] = []
        watched = pools[COSTS_WORKERS].process.pid
        zygote = zygote_of(watched)
        before = None if zygote is None else read(watched, zygote)
        for _ in range(batches):
            for workers, pool in pools.items():
                rates[workers].append(_throughput(pool, batch_size))
                time.sleep(0.05)  # its children end, and are reaped, before the next reading
            if tmpfs_pool is not None:
                tmpfs_rates.append(_throughput(tmpfs_pool, batch_size))
                time.sleep(0.05)
        after = None if zygote is None else read(watched, zygote)
        costs = None
        if before is not None and after is not None:
            costs = per_request(before, after, batches * batch_size)
    finally:
        for pool in pools.values():
            pool.close()
        if tmpfs_pool is not None:
            tmpfs_pool.close()
        hops.close()
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
    scratch = None
    if tmpfs_rates:
        scratch = ScratchComparison(
            scratch_place(pynox), statistics.median(rates[2]), statistics.median(tmpfs_rates)
        )
    return PoolResults(
        summarize(samples["cold"]),
        rows,
        requests,
        batches,
        batch_size,
        scratch,
        costs,
        summarize(samples["hops"]),
        summarize(back_to_back),
        summarize(steps_after_idle),
        summarize(requests_after_idle),
        summarize(steps_kept_busy),
        step_costs,
        measure_fork_floor(python, FORK_FLOOR_FORKS),
    )
