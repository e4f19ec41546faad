"""Every CPU kept from idling, by busy loops at the lowest priority.

A virtual machine's CPU that idles is halted, and waking it costs the first process that
runs on it next; a CPU's caches also go cold while it sleeps. With a busy loop of the
lowest priority on every CPU, none idles: any other process takes the CPU from the loop at
once. Timing the same work with and without them tells what the machine's sleep costs from
what the work costs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import TracebackType

# nice 19, the lowest priority a process can give itself; then one byte says it loops.
_LOOP = "import os\nos.nice(19)\nos.write(1, b'.')\nwhile True:\n    pass\n"


class BusyCpus:
    """A context: one busy loop per CPU this process may run on, for as long as it lasts."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        self.loops: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyCpus:
        for _ in range(len(os.sched_getaffinity(0))):
            loop = subprocess.Popen([self.python, "-I", "-c", _LOOP], stdout=subprocess.PIPE)
            self.loops.append(loop)
        for loop in self.loops:
            assert loop.stdout is not None
            loop.stdout.read(1)  # at its lowest priority now, before anything is timed
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for loop in self.loops:
            loop.kill()
        for loop in self.loops:
            loop.wait()
            if loop.stdout is not None:
                loop.stdout.close()
