"""Pool latency and throughput, beside a cold `python -I -c pass` in the same run.

For 1 and 2 workers: request-to-result latency of `print(sum(range(10)))`
(p50, p90; one request in flight), throughput with requests pipelined, and the
latency of a session step. Cold starts of the same interpreter are measured
interleaved with the latency samples. Usage: python bench/pool.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CODE = "print(sum(range(10)))"


class PoolProcess:
    def __init__(self, pynox: str, workers: int) -> None:
        self.process = subprocess.Popen(
            [pynox, "pool", f"--workers={workers}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        ready = json.loads(self.process.stdout.readline())
        assert ready.get("event") == "ready", ready
        self.next_id = 0

    def send(self, request: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.next_id += 1
        request.setdefault("id", self.next_id)
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()

    def receive(self) -> dict[str, object]:
        assert self.process.stdout is not None
        result: dict[str, object] = json.loads(self.process.stdout.readline())
        if result.get("exit") != 0:
            raise SystemExit(f"a benchmark request failed: {result}")
        return result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def cold_start(python: str) -> float:
    started = time.perf_counter()
    subprocess.run([python, "-I", "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1000


def measure(pynox: str, python: str, workers: int, runs: int) -> dict[str, float]:
    pool = PoolProcess(pynox, workers)
    latencies, colds = [], []
    for _ in range(5):  # warm up both
        pool.send({"code": CODE})
        pool.receive()
        cold_start(python)
    for _ in range(runs):
        started = time.perf_counter()
        pool.send({"code": CODE})
        pool.receive()
        latencies.append((time.perf_counter() - started) * 1000)
        colds.append(cold_start(python))
    batch = runs * 4
    started = time.perf_counter()
    for _ in range(batch):
        pool.send({"code": CODE})
    for _ in range(batch):
        pool.receive()
    throughput = batch / (time.perf_counter() - started)
    steps = []
    pool.send({"code": "x = 0", "session": "bench"})
    pool.receive()
    for _ in range(runs):
        started = time.perf_counter()
        pool.send({"code": "x += 1\nprint(x)", "session": "bench"})
        pool.receive()
        steps.append((time.perf_counter() - started) * 1000)
    pool.close()
    cold = statistics.median(colds)
    p50 = statistics.median(latencies)
    return {
        "workers": workers,
        "cold_python_ms": round(cold, 2),
        "p50_ms": round(p50, 2),
        "p90_ms": round(statistics.quantiles(latencies, n=10)[8], 2),
        "ratio_p50_to_cold": round(p50 / cold, 3),
        "throughput_per_s": round(throughput, 1),
        "session_step_p50_ms": round(statistics.median(steps), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    python = sys.executable
    pynox = os.path.join(os.path.dirname(python), "pynox")
    rows = [measure(pynox, python, workers, options.runs) for workers in (1, 2)]
    if options.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"pool, {options.runs} requests per measure, CPython {sys.version.split()[0]}")
    header = ("workers", "cold python -I", "p50", "p90", "p50/cold", "req/s", "session step")
    print("{:>7} {:>15} {:>8} {:>8} {:>9} {:>8} {:>13}".format(*header))
    for row in rows:
        print(
            f"{row['workers']:>7} {row['cold_python_ms']:>12} ms {row['p50_ms']:>5} ms "
            f"{row['p90_ms']:>5} ms {row['ratio_p50_to_cold']:>8}x {row['throughput_per_s']:>8} "
            f"{row['session_step_p50_ms']:>10} ms"
        )


if __name__ == "__main__":
    main()
