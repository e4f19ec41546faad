"""The terminal: a program cannot push input into the terminal pynox runs in, nor take
it over."""

from __future__ import annotations

import contextlib
import os
import pty
import subprocess
import sys
import termios
import textwrap
import tty

import pytest
from support.probes import MODES, PRELUDE, World, outcomes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


@pytest.mark.parametrize("mode", list(MODES))
def test_terminal_injection_is_denied(world: World, mode: str) -> None:
    """The pty is pynox's controlling terminal, as a user's terminal is."""
    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        script = world.app / "probe.py"
        script.write_text(
            PRELUDE
            + textwrap.dedent("""
            import fcntl, struct, termios
            attempt("stdin-isatty", os.isatty, 0)
            for fd in (0, 1):
                attempt(f"tiocsti-fd{fd}", fcntl.ioctl, fd, termios.TIOCSTI, b"X")
            attempt("tiocsti-loop", lambda: [fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
                                             for c in b"id\\n"])
            attempt("tiocspgrp", fcntl.ioctl, 0, termios.TIOCSPGRP, struct.pack("i", os.getpid()))
            attempt("tioccons", fcntl.ioctl, 0, termios.TIOCCONS)
            attempt("tiocsctty", fcntl.ioctl, 0, termios.TIOCSCTTY, 1)
        """)
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}

        def make_controlling_terminal() -> None:
            import fcntl

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.run(
            [*MODES[mode], str(script)],
            stdin=slave,
            capture_output=True,
            cwd=world.app,
            env=env,
            timeout=60,
            start_new_session=True,
            preexec_fn=make_controlling_terminal,
        )
        os.set_blocking(slave, False)
        os.set_blocking(master, False)
        injected = b""
        for fd in (slave, master):
            with contextlib.suppress(OSError):  # BlockingIOError: nothing there
                injected += os.read(fd, 100)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, proc.stderr
    denied = "PermissionError EPERM"
    assert outcomes(proc) == {
        "stdin-isatty": "ok True",
        "tiocsti-fd0": denied,
        "tiocsti-fd1": denied,  # a pipe, but the filter answers first
        "tiocsti-loop": denied,
        "tiocspgrp": denied,
        "tioccons": denied,
        "tiocsctty": denied,
    }
    assert injected == b""


# A shell with job control: the first command in the foreground (it reads nothing), the
# rest, pynox, in the background, each in a process group of its own.
JOB_CONTROL = """
import os, signal, subprocess, sys
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
foreground = subprocess.Popen(["sleep", "60"], preexec_fn=os.setpgrp)
os.tcsetpgrp(0, foreground.pid)
try:
    sys.exit(subprocess.run(sys.argv[1:], preexec_fn=os.setpgrp).returncode)
finally:
    foreground.kill()
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_a_background_run_cannot_read_what_is_typed_for_the_foreground(
    world: World, mode: str
) -> None:
    """Joining the terminal's foreground process group would let the program read the
    terminal's input (a password typed to the foreground program, say)."""
    master, slave = pty.openpty()
    try:
        os.write(master, b"typed-for-the-foreground\n")  # waits in the terminal's queue
        script = world.app / "probe.py"
        script.write_text(
            PRELUDE
            + textwrap.dedent("""
            joined = []
            def join_foreground():
                os.setpgid(0, os.tcgetpgrp(0))
                joined.append(True)
            attempt("join-foreground", join_foreground)
            if joined:  # in the foreground now: the read would not stop it
                attempt("read-terminal", os.read, 0, 100)
        """)
        )

        def make_controlling_terminal() -> None:
            import fcntl

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.run(
            [sys.executable, "-c", JOB_CONTROL, *MODES[mode], str(script)],
            stdin=slave,
            capture_output=True,
            cwd=world.app,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            timeout=60,
            start_new_session=True,
            preexec_fn=make_controlling_terminal,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, proc.stderr
    # The supervised child is in a session of its own, where the terminal is not its own.
    refused = "OSError ENOTTY" if mode == "supervised" else "PermissionError EPERM"
    assert outcomes(proc) == {"join-foreground": refused}
