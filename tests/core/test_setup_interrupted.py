"""Ctrl-C while a child sets up its sandbox: the run ends by SIGINT, as python ends on a
Ctrl-C, with nothing reported as a sandbox failure (pynox.engine.child._setup_failed)."""

from __future__ import annotations

import os
import signal
import warnings

from pynox.engine import child
from pynox.engine.child_setup import ChildSetup
from pynox.errors import EXIT_SETUP_FAILURE


def _status_and_stderr(exc: BaseException) -> tuple[int, bytes]:
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child ends in _setup_failed
        os.dup2(write, 2)
        try:
            child._setup_failed(exc, ChildSetup())
        finally:
            os._exit(99)
    os.close(write)
    with os.fdopen(read, "rb") as stderr:
        said = stderr.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), said


def test_ctrl_c_during_set_up_ends_the_run_by_sigint() -> None:
    assert _status_and_stderr(KeyboardInterrupt()) == (-signal.SIGINT, b"")


def test_a_failure_during_set_up_is_still_one_line_and_125() -> None:
    status, said = _status_and_stderr(OSError(1, "Operation not permitted"))
    assert status == EXIT_SETUP_FAILURE
    assert (
        said == b"pynox: cannot set up the sandbox: PermissionError(1, 'Operation not permitted')\n"
    )
