"""The workloads the suite times: scripts run as files, the same file under every runner.

Each script here is a plain program (`python -I SCRIPT [OUTPUT]`); this module says how many
rounds each gets and whether it takes an output file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Workload:
    key: str
    title: str
    script: Path
    rounds: int
    quick_rounds: int
    writes_output: bool = False
    """The script takes an output path as its argument, in a directory it writes and reads."""
    max_output: str | None = None
    """The pool request's max_output, for a script that prints more than the default keeps."""


WORKLOADS = (
    Workload("tiny", "Tiny script", HERE / "tiny.py", rounds=100, quick_rounds=5),
    Workload(
        "json_pipeline",
        "JSON pipeline",
        HERE / "json_pipeline.py",
        rounds=40,
        quick_rounds=3,
        writes_output=True,
    ),
    Workload("import_heavy", "Import-heavy script", HERE / "import_heavy.py", 40, 3),
    # The hot paths agent code hits beyond those: reading data and printing a lot.
    Workload(
        "csv_round_trip",
        "CSV round trip, 120k rows",
        HERE / "csv_round_trip.py",
        rounds=15,
        quick_rounds=2,
        writes_output=True,
    ),
    Workload(
        "json_load",
        "JSON load, 25k records",
        HERE / "json_load.py",
        rounds=15,
        quick_rounds=2,
        writes_output=True,
    ),
    Workload(
        "print_large",
        "Printing 200k lines",
        HERE / "print_large.py",
        rounds=15,
        quick_rounds=2,
        max_output="16m",
    ),
)
