"""A batch of small programs, as code-evaluation harnesses run them: each a function and
its asserts, some of which fail. Through the pool (written at once, results read as they
come) against a fresh `python -I -c` per program, in turn; both must give every program
the same verdict."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from pool_process import PoolProcess
from timing import Summary, paired_ratio, summarize

PROGRAMS = 200
POOL_WORKERS = 2


@dataclass(frozen=True)
class BatchResult:
    programs: int
    pool: Summary
    python: Summary
    paired: float
    """The median of the per-round ratios of the pool's wall time to python's."""
    failing: int
    """How many programs fail their asserts, under both alike."""


def programs(count: int = PROGRAMS) -> list[str]:
    """Small programs: a function and asserts on it; every tenth has a wrong assert."""
    made = []
    for index in range(count):
        factor = index % 7 + 1
        expected = 3 * factor + (1 if index % 10 == 9 else 0)
        made.append(
            f"def scale(x):\n    return x * {factor}\n\n"
            f"assert scale(3) == {expected}, 'scale(3)'\n"
            f"assert [scale(n) for n in range(4)] == {[n * factor for n in range(4)]}\n"
        )
    return made


def _python_round(python: str, sources: list[str], cwd: str) -> tuple[int, list[bool]]:
    started = time.perf_counter_ns()
    verdicts = []
    for source in sources:
        done = subprocess.run(
            [python, "-I", "-c", source], cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        verdicts.append(done.returncode == 0)
    return time.perf_counter_ns() - started, verdicts


def _pool_round(pool: PoolProcess, sources: list[str]) -> tuple[int, list[bool]]:
    started = time.perf_counter_ns()
    first = pool.next_id + 1
    for source in sources:
        pool.send({"code": source})
    by_id = {}
    for _ in sources:
        result = pool.receive(check=False)
        by_id[result["id"]] = result["exit"] == 0
    elapsed = time.perf_counter_ns() - started
    return elapsed, [by_id[first + index] for index in range(len(sources))]


def measure_batch(python: str, pynox: str, workdir: str, rounds: int) -> BatchResult:
    sources = programs()
    pool_ns: list[int] = []
    python_ns: list[int] = []
    with PoolProcess(pynox, POOL_WORKERS, workdir) as pool:
        _pool_round(pool, sources[:10])  # warm: the spares are forked
        for _ in range(rounds):
            spent, pooled = _pool_round(pool, sources)
            pool_ns.append(spent)
            spent, fresh = _python_round(python, sources, workdir)
            python_ns.append(spent)
            if pooled != fresh:
                differ = [i for i, (a, b) in enumerate(zip(pooled, fresh, strict=True)) if a != b]
                raise RuntimeError(f"the pool and python disagree on programs {differ[:10]}")
    return BatchResult(
        len(sources), summarize(pool_ns), summarize(python_ns),
        paired_ratio(pool_ns, python_ns), fresh.count(False),
    )  # fmt: skip
