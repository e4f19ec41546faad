"""The benchmark suite: workloads under CPython, pynox, pynox --no-sandbox and the pool.

Everything runs on the interpreter running this file, whose bin/ holds `pynox`, interleaved
in one run; every ratio is against CPython measured in that same run. Prints a Markdown
report and, for a full run, writes it to bench/results.md.

    python bench/suite.py                  # the full suite (make bench), a few minutes
    python bench/suite.py --quick          # a smoke run; writes nothing unless --output
    python bench/suite.py --workloads tiny --no-pool
    python bench/suite.py --workloads= --no-modes --no-batch --no-memory --no-pool  # Ray only
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

from batch_bench import measure_batch
from heavy_bench import measure_heavy
from machine import describe
from memory_bench import measure_memory
from modes_bench import measure_modes
from pool_bench import measure_pool
from ray_bench import measure_ray, ray_available
from report import Method, render
from runners import interpreter
from targets import evaluate
from timing import SETTLE_SECONDS
from workload_bench import POOL_WORKERS, measure_workloads
from workloads import WORKLOADS

RESULTS = Path(__file__).resolve().parent / "results.md"
FULL = {"requests": 200, "batches": 5, "batch_size": 100}
QUICK = {"requests": 20, "batches": 1, "batch_size": 20}
MODE_ROUNDS = 60
BATCH_ROUNDS = 3
MEMORY_REQUESTS = 10_000
HEAVY_ROUNDS = 30
RAY_ROUNDS = 3
# The sections besides the workloads and the pool rows: the shortcuts that time those
# alone (startup.py, pool.py) skip them.
OTHER_SECTIONS = ("--no-modes", "--no-batch", "--no-ray", "--no-memory")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    keys = [workload.key for workload in WORKLOADS]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("--rounds", type=int, help="timed rounds for every workload")
    parser.add_argument("--requests", type=int, help="timed rounds of the pool's requests")
    parser.add_argument("--batches", type=int, help="throughput batches per pool")
    parser.add_argument("--batch-size", type=int, help="requests per throughput batch")
    parser.add_argument(
        "--workloads",
        default=",".join(keys),
        help=f"comma-separated, from {', '.join(keys)} (empty: none)",
    )
    parser.add_argument("--no-pool", action="store_true", help="skip the pool latency rows")
    parser.add_argument(
        "--no-modes", action="store_true", help="skip the command-line modes (tiny script)"
    )
    parser.add_argument(
        "--no-batch", action="store_true", help="skip the batch of 200 small programs"
    )
    parser.add_argument(
        "--no-ray",
        action="store_true",
        help="skip the batch of 1,000 programs through RayPool (skipped anyway without Ray)",
    )
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the pool's memory after many requests"
    )
    parser.add_argument(
        "--packages",
        type=Path,
        help="a directory with numpy, pandas and matplotlib installed (pip install --target): "
        "times the pool with them preloaded; make bench installs one",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help=f"write the report here (default: {RESULTS.name} beside this file for a full "
        "run of everything at the default counts; else nothing)",
    )
    options = parser.parse_args(argv)
    chosen = [key for key in options.workloads.split(",") if key]
    unknown = sorted(set(chosen) - set(keys))
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(keys)}")
    options.chosen = chosen
    for name in ("rounds", "requests", "batches", "batch_size"):
        value = getattr(options, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_arguments(argv)
    # python -I ignores PYTHON* variables, and pynox takes two of them as python does
    # (PYTHONUNBUFFERED as -u, PYTHONDONTWRITEBYTECODE as -B): so that every runner runs
    # alike, none sees any.
    for name in [name for name in os.environ if name.startswith("PYTHON")]:
        del os.environ[name]
    python, pynox = interpreter()
    overrides = [options.rounds, options.requests, options.batches, options.batch_size]
    pool_counts = QUICK if options.quick else FULL
    for name in pool_counts:
        if getattr(options, name) is None:
            setattr(options, name, pool_counts[name])
    plan = [
        (workload, options.rounds or (workload.quick_rounds if options.quick else workload.rounds))
        for workload in WORKLOADS
        if workload.key in options.chosen
    ]
    machine = describe(f"{platform.python_implementation()} {platform.python_version()}", pynox)
    with tempfile.TemporaryDirectory(prefix="pynox-bench-") as workdir:
        workloads = measure_workloads(plan, python, pynox, workdir)
        mode_rounds = options.rounds or (5 if options.quick else MODE_ROUNDS)
        modes = [] if options.no_modes else measure_modes(python, pynox, workdir, mode_rounds)
        batch_rounds = 1 if options.quick else BATCH_ROUNDS
        batch = None if options.no_batch else measure_batch(python, pynox, workdir, batch_rounds)
        ray = None
        if not options.no_ray and ray_available():
            ray = measure_ray(python, workdir, 1 if options.quick else RAY_ROUNDS)
        elif not options.no_ray:
            print("the Ray row is skipped: Ray is not installed", file=sys.stderr)
        memory_requests = 200 if options.quick else MEMORY_REQUESTS
        memory = None if options.no_memory else measure_memory(pynox, workdir, memory_requests)
        heavy = []
        if options.packages is not None:
            heavy_rounds = 3 if options.quick else HEAVY_ROUNDS
            packages = str(options.packages.resolve())
            heavy = measure_heavy(python, pynox, workdir, packages, heavy_rounds)
        pool = None
        if not options.no_pool:
            pool = measure_pool(
                python, pynox, workdir, options.requests, options.batches, options.batch_size
            )
    method = Method(warmup_rounds=1, settle_ms=SETTLE_SECONDS * 1000, pool_workers=POOL_WORKERS)
    targets = evaluate(workloads, modes, pool, batch, memory, heavy)
    text = render(machine, method, workloads, modes, pool, batch, memory, heavy, targets, ray)
    sys.stdout.write(text)
    output = options.output
    overridden = any(argv_value is not None for argv_value in overrides)
    measured = (pool, batch, memory)
    everything = len(plan) == len(WORKLOADS) and None not in measured and bool(modes and heavy)
    if output is None and everything and not options.quick and not overridden:
        output = RESULTS
    if output is not None:
        output.write_text(text, encoding="utf-8")
        print(f"\nwrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
