"""Hints after denials that packages beyond the standard library meet, and following each
hint makes the program work.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import follow

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An agent's working directory: data/ to read, out/ for results."""
    (tmp_path / "out").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.csv").write_text("region,amount\nnorth,70\nsouth,80\nnorth,50\n")
    return tmp_path


def _follow_hints(project: Path, code: str, grants: list[str], steps: int = 4) -> list[str]:
    """Runs code, adding each hint's grants until it succeeds: the hints, in order."""
    proc, hints = follow(
        lambda flags: pynox(*flags, "-c", code, cwd=project, timeout=120), grants, steps
    )
    assert proc.stdout.decode().endswith("done\n"), proc.stdout
    return hints


def test_the_programs_own_proc_entry_is_named_by_proc_self(project: Path) -> None:
    """psutil reads /proc/PID/statm: a grant of that PID would not name the next run's
    process, /proc/self does."""
    code = "import os\nopen(f'/proc/{os.getpid()}/statm').read()\nprint('done')\n"
    hints = _follow_hints(project, code, [])
    assert hints == [
        "pynox: reading /proc/self/statm is not allowed; grant it with "
        "--allow-read=/proc/self/statm"
    ]
