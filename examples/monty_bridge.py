"""Monty runs an agent's glue code; Pynox runs the heavy Python the glue hands off.

Monty (PyPI `pydantic-monty`) interprets a subset of Python, with a part of the standard
library and none of the host's files, network or environment: a good home for the short
orchestration code a model writes. Work that needs files, modules Monty lacks (such as
`statistics` or `sqlite3`) or installed packages goes to an external function,
`python(code)`, which runs the code in a Pynox sandbox: full CPython, with read access to
the example's data/ only.

Each side refuses what it was not given. The glue's own `open()` fails inside Monty; the
heavy code's read of /etc/passwd fails inside Pynox and comes back to the glue as an
exception it can handle.

    pip install pydantic-monty        # then, with pynox installed:
    python examples/monty_bridge.py
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic_monty import Monty, MontyRuntimeError

import pynox

SALES = Path(__file__).resolve().parent / "use_cases" / "data" / "sales.csv"

# The glue a model might write: a loop, some bookkeeping, and the work sent to python().
GLUE = '''
totals = {}
for region in ["North", "South", "West"]:
    totals[region] = float(python(f"""
import csv, statistics
with open({sales!r}, newline="") as file:
    rows = [row for row in csv.DictReader(file) if row["region"] == {region!r}]
print(statistics.fsum(int(row["units"]) * float(row["unit_price"]) for row in rows))
"""))
    print(f"{region}: {totals[region]:.2f}")

try:
    python("print(open('/etc/passwd').read())")
except RuntimeError as error:
    print("python() refused:", error)

best = max(totals, key=lambda region: totals[region])
{"best": best, "revenue": totals[best]}
'''

# Glue that reaches for a file itself: Monty has no file system to give it.
GLUE_OPENS_A_FILE = "open('/etc/passwd').read()"


def heavy_python(pool: pynox.Pool, refusals: list[str]) -> Callable[[str], str]:
    """The external function Monty calls: runs `code` in Pynox, returns what it printed."""

    def python(code: str) -> str:
        result = pool.run(code, allow_read=[SALES.parent], timeout="10s")
        first_line = code.strip().splitlines()[0]
        print(f"  pynox ran: {first_line} ... -> exit {result.exit}, {result.duration_ms} ms")
        if not result.ok:
            refusals.append(result.text)
            # Raised in the glue as RuntimeError, with the text a model would read.
            raise RuntimeError(result.text)
        return result.stdout

    return python


def monty_print(stream: str, text: str) -> None:
    for line in text.splitlines():
        print(f"  monty> {line}")


def main() -> None:
    print("glue code run by Monty:")
    print("\n".join(f"  | {line}" for line in GLUE.strip().splitlines()))
    print()
    with pynox.Pool() as pool, Monty() as monty, monty.checkout() as session:
        pynox_refusals: list[str] = []
        functions = {"python": heavy_python(pool, pynox_refusals)}
        answer = session.feed_run(
            GLUE,
            inputs={"sales": str(SALES)},
            external_lookup=functions,
            print_callback=monty_print,
        )
        print(f"  monty returned: {answer}")
        print()
        print(f"glue code opening a file itself: {GLUE_OPENS_A_FILE}")
        try:
            session.feed_run(GLUE_OPENS_A_FILE, print_callback=monty_print)
            monty_refusal = ""
        except MontyRuntimeError as error:
            monty_refusal = str(error).splitlines()[-1]
        print(f"  monty refused: {monty_refusal or 'nothing'}")
    print()
    denied_by_pynox = any("Permission denied: '/etc/passwd'" in text for text in pynox_refusals)
    print(
        "denied: /etc/passwd,",
        f"to the glue (Monty): {'yes' if monty_refusal else 'NO'},",
        f"to the heavy code (Pynox): {'yes' if denied_by_pynox else 'NO'}",
    )
    print(f"done:   best region {answer['best']}, revenue {answer['revenue']:.2f}")


if __name__ == "__main__":
    main()
