"""A program that closes the descriptors it finds open, as daemons and process helpers do
(os.closerange), runs on as under python: pynox's own are not the program's to lose."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from support.commands import pynox, python

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

CLOSES_THEN_WRITES = (
    "import os, tempfile, time\n"
    "os.closerange(3, 1024)\n"
    "time.sleep(0.3)\n"  # what removed the directory once did so meanwhile
    "with tempfile.NamedTemporaryFile('w+') as named:\n"
    "    named.write('still here'); named.flush(); named.seek(0)\n"
    "    print(named.read(), tempfile.gettempdir())\n"
)


def test_a_program_that_closes_its_descriptors_keeps_its_scratch_directory(
    tmp_path: Path,
) -> None:
    """`python -m pynox`: the helper that removes the directory is pynox's own."""
    proc = python("-m", "pynox", "-c", CLOSES_THEN_WRITES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    output = proc.stdout.decode()
    _kept_then_removed(output)


@pytest.mark.parametrize(
    "mode", [[], ["--timeout=10s"], ["--json"]], ids=["plain", "timeout", "json"]
)
def test_a_program_that_closes_its_descriptors_keeps_the_launchers_scratch_directory(
    tmp_path: Path, mode: list[str]
) -> None:
    """`pynox`: the launcher's helper (runtime/launcher_scratch.c) waits for the run's
    process to end, not only for the pipe the program just closed."""
    proc = pynox(*mode, "-c", CLOSES_THEN_WRITES, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    output = json.loads(proc.stdout)["stdout"] if mode == ["--json"] else proc.stdout.decode()
    _kept_then_removed(output)


def _kept_then_removed(output: str) -> None:
    """The program found its scratch directory there to the end (its output says so and
    names it), and the directory still goes once the run has ended."""
    assert output.startswith("still here "), output
    directory = output.split()[-1]
    deadline = time.monotonic() + 10
    while os.path.lexists(directory) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.lexists(directory)
