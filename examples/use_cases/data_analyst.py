"""A data analyst with notebook-style state: the report lands in out/, the .env stays shut.

The project keeps its permissions in pynox.toml: the `analysis` profile reads data/ and
writes out/. The tool is a session, so the rows loaded by the first call are still there
in the next ones, like a notebook. When the model tries to read the project's .env, the
sandbox refuses and the model reads why; the analysis carries on.

    python examples/use_cases/data_analyst.py

The example builds a throwaway project (the CSV beside this file, a pynox.toml and a fake
.env) in a temporary directory and removes it at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from transcript import show_call

import pynox

DATA = Path(__file__).resolve().parent / "data"

PYNOX_TOML = """\
[profiles.analysis]
allow_read = ["data"]
allow_write = ["out"]
timeout = "10s"
memory = "512m"
"""

# A stand-in for the secrets a real project keeps beside its code.
DOTENV = "DATABASE_URL=postgres://analyst:not-a-real-password@db.internal/sales\n"

# What a model asked for "revenue by region, as a report in out/" might send, in order.
MODEL_CALLS = [
    (
        "load the sales data",
        """\
import csv
with open("data/sales.csv", newline="") as file:
    sales = list(csv.DictReader(file))
print(len(sales), "rows:", ", ".join(sales[0]))
""",
    ),
    (
        "look for database settings in the project's .env",
        """\
print(open(".env").read())
""",
    ),
    (
        "total the revenue by region, with the rows loaded earlier",
        """\
revenue = {}
for row in sales:
    amount = int(row["units"]) * float(row["unit_price"])
    revenue[row["region"]] = revenue.get(row["region"], 0.0) + amount
ranking = sorted(revenue.items(), key=lambda item: item[1], reverse=True)
for region, total in ranking:
    print(f"{region}: {total:.2f}")
""",
    ),
    (
        "write the report to out/",
        """\
lines = ["# Revenue by region, March 2024", ""]
lines += [f"- {region}: {total:.2f}" for region, total in ranking]
with open("out/report.md", "w") as report:
    report.write("\\n".join(lines) + "\\n")
print("wrote out/report.md:", len(ranking), "regions")
""",
    ),
]


@contextmanager
def analyst_project() -> Iterator[tuple[Path, Callable[[str], str]]]:
    """A temporary project (data/, out/, pynox.toml, .env) and its notebook tool.

    The current directory is the project while the tool lives, so the model's code can
    use the relative paths a user would.
    """
    previous = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="pynox-analyst-") as tmp:
        project = Path(tmp)
        shutil.copytree(DATA, project / "data")
        (project / "out").mkdir()
        (project / "pynox.toml").write_text(PYNOX_TOML)
        (project / ".env").write_text(DOTENV)
        os.chdir(project)
        try:
            with pynox.Pool(config=project / "pynox.toml") as pool:
                yield project, pool.tool(profile="analysis", session=True)
        finally:
            os.chdir(previous)


def main() -> None:
    with analyst_project() as (project, run_python):
        replies = []
        for intent, code in MODEL_CALLS:
            replies.append(run_python(code))
            show_call(intent, replies[-1], code)
        report = (project / "out" / "report.md").read_text()
        print("out/report.md, as the user finds it:")
        print(report)
    leaked = any("not-a-real-password" in reply for reply in replies)
    print(
        "denied: reading .env;",
        "its secret LEAKED" if leaked else "its secret never reached the model",
    )
    print(f"done:   out/report.md with {report.count('- ')} regions")


if __name__ == "__main__":
    main()
