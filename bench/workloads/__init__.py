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


WORKLOADS = (
    Workload("tiny", "Tiny script", HERE / "tiny.py", rounds=80, quick_rounds=5),
    Workload(
        "json_pipeline",
        "JSON pipeline",
        HERE / "json_pipeline.py",
        rounds=25,
        quick_rounds=3,
        writes_output=True,
    ),
    Workload("import_heavy", "Import-heavy script", HERE / "import_heavy.py", 40, 3),
)
