"""The four ways the suite runs a workload: CPython, pynox, pynox --no-sandbox, the pool.

All four use one interpreter: the one running the suite, whose bin/ holds `pynox`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pool_process import PoolProcess
from timing import Measure, time_command
from workloads import Workload


@dataclass(frozen=True)
class Runner:
    key: str
    label: str


PYTHON = Runner("python", "CPython `python -I`")
PYNOX = Runner("pynox", "pynox")
NO_SANDBOX = Runner("no_sandbox", "pynox --no-sandbox")
POOL = Runner("pool", "pynox pool")
RUNNERS = (PYTHON, PYNOX, NO_SANDBOX, POOL)


def interpreter() -> tuple[str, str]:
    """This interpreter and the `pynox` command installed beside it."""
    python = sys.executable
    pynox = os.path.join(os.path.dirname(python), "pynox")
    if not os.access(pynox, os.X_OK):
        raise SystemExit(f"no pynox command beside {python}; install pynox into this environment")
    return python, pynox


class Invocations:
    """The command lines and the pool request that run one workload."""

    def __init__(self, workload: Workload, python: str, pynox: str, workdir: str) -> None:
        script = str(workload.script)
        # Output goes to a subdirectory: a write grant over the working directory itself
        # would cover where pynox looks for pynox.toml, and pynox refuses it.
        outdir = os.path.join(workdir, "out")
        os.makedirs(outdir, exist_ok=True)
        args = [os.path.join(outdir, f"{workload.key}.out")] if workload.writes_output else []
        grants = [f"--allow-read={workdir}", f"--allow-write={outdir}"]
        self.workdir = workdir
        self.output = args[0] if args else None
        self.commands = {
            PYTHON.key: [python, "-I", script, *args],
            PYNOX.key: [pynox, *(grants if args else []), script, *args],
            # CPython's command line, unchanged: -I as for python, so that neither
            # reads PYTHON* variables of the environment the suite runs in.
            NO_SANDBOX.key: [pynox, "--no-sandbox", "-I", script, *args],
        }
        self.request: dict[str, Any] = {"script": script, "args": args}
        if args:
            self.request.update(allow_read=[workdir], allow_write=[outdir])
        if workload.max_output is not None:
            self.request["max_output"] = workload.max_output

    def check_output(self, pool: PoolProcess) -> str:
        """Runs each way once; all must print what CPython prints. Returns that output."""
        outputs = {
            key: subprocess.run(
                command,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for key, command in self.commands.items()
        }
        outputs[POOL.key] = pool.run(self.request)["stdout"]
        expected = outputs[PYTHON.key]
        for key, output in outputs.items():
            if output != expected:
                raise SystemExit(f"{key} printed {output!r} where python printed {expected!r}")
        return expected

    def measures(self, pool: PoolProcess) -> dict[str, Measure]:
        measures: dict[str, Measure] = {
            key: (lambda command=command: time_command(command, self.workdir))
            for key, command in self.commands.items()
        }
        measures[POOL.key] = lambda: pool.time_request(self.request)
        return measures

    def output_size(self) -> int | None:
        return Path(self.output).stat().st_size if self.output else None
