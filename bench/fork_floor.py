"""What forking costs a process the size of a pool's zygote, before a request runs at all.

Every pool request runs in a process of its own, forked from the zygote, that ends when the
request does. A Python process that imported what a pool server imports forks children
that exit at once: the CPU time of both sides and the child's page faults are the part of a
request's cost that no work on the request's own path can remove.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

_SCRIPT = """
import gc, json, os, resource, sys
import pynox.pool.server  # what a pool's server, and so its zygote, holds
gc.freeze()

def used(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt

forks = int(sys.argv[1])
parent_before, child_before = used(resource.RUSAGE_SELF), used(resource.RUSAGE_CHILDREN)
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
parent_after, child_after = used(resource.RUSAGE_SELF), used(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "parent_ms": (parent_after[0] - parent_before[0]) * 1000 / forks,
    "child_ms": (child_after[0] - child_before[0]) * 1000 / forks,
    "child_faults": (child_after[1] - child_before[1]) / forks,
}))
"""


@dataclass(frozen=True)
class ForkFloor:
    forks: int
    parent_ms: float
    """CPU per fork in the forking process."""
    child_ms: float
    """CPU per child, from its fork to its end."""
    child_faults: float


def measure_fork_floor(python: str, forks: int) -> ForkFloor | None:
    """forks children of a process that imported the pool server's modules, each exiting at
    once; None where that process could not run."""
    completed = subprocess.run(
        [python, "-I", "-c", _SCRIPT, str(forks)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        return None
    figures = json.loads(completed.stdout)
    return ForkFloor(forks, figures["parent_ms"], figures["child_ms"], figures["child_faults"])
