"""Start-up cost: a tiny script under python -I, pynox and pynox --no-sandbox.

All three use the same interpreter (this one, whose bin/ holds pynox), run
interleaved so that machine noise hits them alike. Prints medians, spreads and
ratios against python -I. Usage: python bench/startup.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TINY_SCRIPT = 'name = "Pynox"\nprint(f"Hello from {name}!")\n'


def _time_once(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def measure(commands: dict[str, list[str]], runs: int, cwd: str) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm the page cache once
        _time_once(command, cwd)
    for _ in range(runs):
        for name, command in commands.items():
            samples[name].append(_time_once(command, cwd))
    return samples


def summarize(samples: dict[str, list[float]], baseline: str) -> list[dict[str, object]]:
    base = statistics.median(samples[baseline])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        rows.append(
            {
                "command": name,
                "median_ms": round(median, 2),
                "p25_ms": round(quartiles[0], 2),
                "p75_ms": round(quartiles[2], 2),
                "ratio": round(median / base, 3),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    python = sys.executable
    pynox = os.path.join(os.path.dirname(python), "pynox")
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "tiny.py"), "w") as file:
            file.write(TINY_SCRIPT)
        commands = {
            "python -I tiny.py": [python, "-I", "tiny.py"],
            "pynox tiny.py": [pynox, "tiny.py"],
            "pynox --no-sandbox tiny.py": [pynox, "--no-sandbox", "tiny.py"],
        }
        rows = summarize(measure(commands, options.runs, work), "python -I tiny.py")
    if options.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"tiny script, {options.runs} interleaved runs each, CPython {sys.version.split()[0]}")
    print(f"{'command':<30} {'median ms':>10} {'p25':>8} {'p75':>8} {'ratio':>7}")
    for row in rows:
        print(
            f"{row['command']:<30} {row['median_ms']:>10} {row['p25_ms']:>8} "
            f"{row['p75_ms']:>8} {row['ratio']:>6}x"
        )


if __name__ == "__main__":
    main()
