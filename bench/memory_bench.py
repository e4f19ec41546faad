"""A pool's memory: the proportional set size (PSS) of the pool server, its zygote and its
spare children, idle, and again after many requests (Linux's /proc/PID/smaps_rollup)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pool_process import PoolProcess

POOL_WORKERS = 2
SETTLE_SECONDS = 1.0
BATCH = 100


@dataclass(frozen=True)
class MemoryResult:
    workers: int
    idle_kib: int
    after_kib: int
    requests: int
    processes: int


def _parents() -> dict[int, int]:
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            found[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def _tree(pid: int) -> list[int]:
    parents = _parents()
    tree, todo = [pid], [pid]
    while todo:
        current = todo.pop()
        children = [child for child, parent in parents.items() if parent == current]
        tree += children
        todo += children
    return tree


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _total(pool: PoolProcess) -> tuple[int, int]:
    time.sleep(SETTLE_SECONDS)  # spares replaced, finished children reaped
    tree = _tree(pool.process.pid)
    return sum(_pss_kib(pid) for pid in tree), len(tree)


def measure_memory(pynox: str, workdir: str, requests: int) -> MemoryResult:
    with PoolProcess(pynox, POOL_WORKERS, workdir) as pool:
        pool.run({"code": "pass"})  # every spare ready once
        idle, processes = _total(pool)
        done = 0
        while done < requests:
            count = min(BATCH, requests - done)
            for _ in range(count):
                pool.send({"code": "print(1)"})
            for _ in range(count):
                pool.receive()
            done += count
        after, _ = _total(pool)
    return MemoryResult(POOL_WORKERS, idle, after, requests, processes)
