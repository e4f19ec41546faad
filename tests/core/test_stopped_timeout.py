"""A program that a stop signal paused runs no further however long it is given: its
timeout hint says so, and what it says to do instead works, under the command, with
--json and in the pool."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from support.commands import pynox, python

import pynox as api
from pynox.engine.time_limit import STOPPED_HINT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

PAUSED = "import os, signal\nprint('paused', flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)\n"
WAITED = "import time\nprint('paused', flush=True)\ntime.sleep(0.2)\nprint('went on')\n"
MESSAGE = "the program ran past its 1s time limit and was stopped"


@pytest.mark.parametrize(
    "command", [pynox, partial(python, "-m", "pynox")], ids=["launcher", "python -m pynox"]
)
def test_the_command_says_a_longer_limit_would_not_help(
    command: Callable[..., CompletedProcess[bytes]], tmp_path: Path
) -> None:
    # python -m pynox supervises the run itself, in Python, where the launcher does in C;
    # it runs outside the source tree, whose pynox has no compiled module.
    command = partial(command, cwd=tmp_path)
    paused = command("--timeout=1s", "-c", PAUSED)
    assert (paused.returncode, paused.stdout) == (124, b"paused\n")
    assert paused.stderr.decode().splitlines()[-1] == f"pynox: {MESSAGE}; {STOPPED_HINT}"
    result = json.loads(command("--json", "--timeout=1s", "-c", PAUSED).stdout)
    assert result["error"]["hint"] == STOPPED_HINT
    followed = command("--timeout=1s", "-c", WAITED)
    assert (followed.returncode, followed.stdout) == (0, b"paused\nwent on\n"), followed.stderr


@pytest.mark.parametrize("session", [False, True], ids=["request", "session"])
def test_the_pool_says_a_longer_limit_would_not_help(session: bool) -> None:
    with api.Pool() as pool:
        runs = pool.session(timeout="1s").run if session else partial(pool.run, timeout="1s")
        paused = runs(PAUSED)
        assert paused.exit == 124 and paused.error is not None
        assert (paused.error["message"], paused.error["hint"]) == (MESSAGE, STOPPED_HINT)
        followed = runs(WAITED)
        assert (followed.exit, followed.stdout) == (0, "paused\nwent on\n"), followed.text


def test_a_program_that_runs_on_is_still_told_to_raise_the_limit() -> None:
    busy = pynox("--timeout=1s", "-c", "while True: pass")
    assert busy.stderr.decode().splitlines()[-1] == (
        f"pynox: {MESSAGE}; make it faster or raise the limit with --timeout=2s"
    )
