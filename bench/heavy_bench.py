"""Warm heavy imports: a request that uses numpy (statistics of 100,000 values), pandas (a
1,000-row group-by) or matplotlib (a chart rendered to PNG), in a pool that preloaded them
from a package directory, then in one that also warms them up with the same code
(`--warmup`), against a cold `python -I` doing the same. Beside them, the same code run
again and again in one python process that ran it before: the work's own cost, with no
process started or ended, which no request can undercut. Measured only when a directory
with the packages is given (`make bench` installs requirements/agent-tasks.txt
into one)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from pool_process import PoolProcess
from timing import Summary, interleave, paired_ratio, summarize, time_command

NUMPY = (
    "import numpy as np\n"
    "values = np.arange(100_000, dtype=np.float64) % 97\n"
    "print(float(values.mean()), float(values.std()), float(np.median(values)))\n"
)
PANDAS = (
    "import pandas as pd\n"
    "frame = pd.DataFrame({'key': [i % 10 for i in range(1000)], 'value': range(1000)})\n"
    "print(int(frame.groupby('key')['value'].sum().iloc[0]))\n"
)
CHART = (
    "import io\n"
    "import matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "figure, axes = plt.subplots()\n"
    "axes.bar(['north', 'south'], [120, 80])\n"
    "buffer = io.BytesIO()\n"
    "figure.savefig(buffer, format='png')\n"
    # Closed once saved, as a script does: a figure still open at the end, the pool would
    # render again to send back as an image (docs/pool-protocol.md), which python does not.
    "plt.close(figure)\n"
    "print(buffer.getvalue()[:4] == b'\\x89PNG')\n"
)


# Runs the code of its second argument each time a line comes on stdin, in a fresh
# namespace, and answers with the nanoseconds it took: the imports stay loaded and
# whatever the packages cache stays cached, as in a warmed-up pool's template.
_RUNS_AGAIN = """\
import sys, time
sys.path.insert(0, sys.argv[1])
code = compile(sys.argv[2], "<request>", "exec")
for _ in sys.stdin:
    started = time.perf_counter_ns()
    exec(code, {"__name__": "__main__"})
    print(f"{ELAPSED}{time.perf_counter_ns() - started}", flush=True)
"""
ELAPSED = "elapsed ns: "  # marks the answer among the lines the code printed


class WarmPython:
    """A python process that runs the request's code once per call and answers with the
    time it took, after what the code printed."""

    def __init__(self, python: str, packages: str, code: str, workdir: str) -> None:
        self.process = subprocess.Popen(
            [python, "-I", "-c", f"ELAPSED = {ELAPSED!r}\n" + _RUNS_AGAIN, packages, code],
            cwd=workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def time_run(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        line = ""
        while not line.startswith(ELAPSED):
            line = self.process.stdout.readline()
            if not line:
                sys.exit("the warm python running the request ended")
        return int(line[len(ELAPSED) :])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


@dataclass(frozen=True)
class HeavyRow:
    key: str
    label: str
    pool: Summary
    python: Summary
    paired: float
    in_process: Summary  # the same code again in a python that ran it before


def _cold_command(python: str, packages: str, code: str) -> list[str]:
    return [python, "-I", "-c", f"import sys; sys.path.insert(0, {packages!r})\n" + code]


def _cold(python: str, packages: str, code: str, workdir: str):  # noqa: ANN202 - a Measure
    command = _cold_command(python, packages, code)
    return lambda: time_command(command, workdir)


def _check_same_work(
    pool: PoolProcess, python: str, packages: str, code: str, workdir: str
) -> None:
    """Runs the request once each way: the pool must print what python prints, and send
    back nothing python does not make (a figure left open comes back as an image)."""
    expected = subprocess.run(
        _cold_command(python, packages, code),
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = pool.run({"code": code})
    extra = [name for name in ("value", "images", "files") if result.get(name)]
    if result["stdout"] != expected or extra:
        raise SystemExit(
            f"the pool's result {result['stdout']!r} (with {extra or 'nothing else'}) is not "
            f"what python printed, {expected!r}"
        )


def measure_heavy(
    python: str, pynox: str, workdir: str, packages: str, rounds: int
) -> list[HeavyRow]:
    rows = []
    for key, label, preload, code in (
        ("numpy", "numpy statistics, 100,000 values", ["numpy"], NUMPY),
        ("numpy-warmed", "numpy statistics, warmed up", ["numpy"], NUMPY),
        ("pandas", "pandas group-by, 1,000 rows", ["pandas"], PANDAS),
        ("pandas-warmed", "pandas group-by, warmed up", ["pandas"], PANDAS),
        ("chart", "matplotlib chart to PNG", ["matplotlib", "matplotlib.pyplot"], CHART),
        ("chart-warmed", "matplotlib chart, warmed up", ["matplotlib", "matplotlib.pyplot"], CHART),
    ):
        extra = [f"--preload={m}" for m in preload] + [f"--package-dir={packages}"]
        if key.endswith("-warmed"):
            extra.append(f"--warmup={code}")
        warm = WarmPython(python, packages, code, workdir)
        try:
            with PoolProcess(pynox, 2, workdir, extra) as pool:
                _check_same_work(pool, python, packages, code, workdir)
                subjects = {
                    "pool": lambda pool=pool, code=code: pool.time_request({"code": code}),
                    "python": _cold(python, packages, code, workdir),
                    "in process": warm.time_run,
                }
                samples = interleave(subjects, rounds, warmup=2)
        finally:
            warm.close()
        rows.append(
            HeavyRow(
                key, label, summarize(samples["pool"]), summarize(samples["python"]),
                paired_ratio(samples["pool"], samples["python"]),
                summarize(samples["in process"]),
            )
        )  # fmt: skip
    return rows
