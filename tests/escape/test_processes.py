"""Processes and signals, from Python: nothing starts, and no signal reaches a process
outside the sandbox (its parent, a bystander, the rest of its process group)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.commands import PYNOX
from support.probes import MODES, PRELUDE, World, outcomes, run_in_sh, run_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def test_pty_fork_starts_nothing(world: World) -> None:
    # pty.fork() falls back to BSD pty names when os.forkpty() is refused, so
    # CPython's own module turns the PermissionError into OSError: no child either way.
    marker = world.rw / "child-ran"
    proc = run_probe(
        world,
        f"""
        import pty
        def go():
            pid, fd = pty.fork()
            if pid == 0:
                open({str(marker)!r}, "w").close()
                os._exit(0)
            return pid
        attempt("pty-fork", go)
    """,
        *world.grants(),
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc)["pty-fork"].split()[0] in ("PermissionError", "OSError")
    assert not marker.exists()


def test_starting_processes_is_denied(world: World) -> None:
    markers = world.rw
    proc = run_probe(
        world,
        """
        import pty, subprocess
        m = lambda name: os.path.join(W["rw"], "ran-" + name)
        attempt("os-system", os.system, f"touch {m('system')}")
        attempt("os-popen", lambda: os.popen(f"touch {m('popen')}").close())
        attempt("subprocess-run", subprocess.run, ["/bin/sh", "-c", f"touch {m('subprocess')}"])
        attempt("subprocess-shell", subprocess.check_call, f"touch {m('shell')}", shell=True)
        def fork():
            pid = os.fork()
            if pid == 0:
                open(m("fork"), "w").close()
                os._exit(0)
            return os.waitpid(pid, 0)
        attempt("os-fork", fork)
        sh = lambda name: ["sh", "-c", f"touch {m(name)}"]
        attempt("os-posix-spawn", os.posix_spawn, "/bin/sh", sh("spawn"), {})
        attempt("os-posix-spawnp", os.posix_spawnp, "touch", ["touch", m("spawnp")], {})
        attempt("os-spawnv", os.spawnv, os.P_WAIT, "/bin/sh", ["sh", "-c", f"touch {m('spawnv')}"])
        attempt("os-execv", os.execv, "/bin/sh", ["sh", "-c", f"touch {m('execv')}"])
        attempt("os-execve-python", os.execve, sys.executable, [sys.executable, "-c", "1"], {})
        attempt("os-forkpty", os.forkpty)
        print("done: ok")
    """,
        *world.grants(),
    )
    lines = outcomes(proc)
    assert proc.returncode == 0, proc.stderr
    assert lines.pop("done") == "ok"
    assert sorted(os.listdir(markers)) == []  # nothing ran
    # os.system() is checked last: glibc's system() reports a failed spawn as
    # "exit status 127" (32512), which a program cannot tell from a shell's own
    # failure; pynox must turn the refusal into PermissionError like the others.
    system = lines.pop("os-system")
    assert lines == {
        "os-popen": "PermissionError EPERM",
        "subprocess-run": "PermissionError EPERM",
        "subprocess-shell": "PermissionError EPERM",
        "os-fork": "PermissionError EPERM",
        "os-posix-spawn": "PermissionError EPERM",
        "os-posix-spawnp": "PermissionError EPERM",
        "os-spawnv": "PermissionError EPERM",
        "os-execv": "PermissionError EPERM",
        "os-execve-python": "PermissionError EPERM",
        "os-forkpty": "PermissionError EACCES",
    }
    assert system == "PermissionError EPERM"


def test_sigio_cannot_signal_other_processes(world: World) -> None:
    """F_SETOWN + F_SETSIG aims the kernel's I/O signal at any pid or process group."""
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        script = world.app / "probe.py"
        script.write_text(
            PRELUDE
            + textwrap.dedent(f"""
            import fcntl, signal, socket, time
            F_SETSIG = 10
            def arm(owner):
                a, b = socket.socketpair()
                fcntl.fcntl(a.fileno(), fcntl.F_SETOWN, owner)
                fcntl.fcntl(a.fileno(), F_SETSIG, int(signal.SIGKILL))
                flags = fcntl.fcntl(a.fileno(), fcntl.F_GETFL)
                fcntl.fcntl(a.fileno(), fcntl.F_SETFL, flags | os.O_ASYNC)
                b.send(b"wake")
                time.sleep(0.2)
                return "armed"
            attempt("sigio-victim-pid", arm, {victim.pid})
            attempt("sigio-victim-group", arm, -{victim.pid})
            attempt("sigio-parent", arm, os.getppid())
            attempt("kill-victim", os.kill, {victim.pid}, signal.SIGKILL)
            print("done: ok")
        """)
        )
        # In process, the parent aimed at is a throwaway shell, not this test.
        proc = run_in_sh(PYNOX, str(script), json.dumps(world.paths()), cwd=world.app)
        time.sleep(0.1)
        alive = victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
    # The parent (the shell around pynox) ended normally: no SIGKILL arrived there either.
    assert proc.returncode == 0, proc
    lines = outcomes(proc)
    assert lines["done"] == "ok"
    assert lines["kill-victim"] == "PermissionError EPERM"
    assert alive, "a SIGIO signal from the sandbox killed a process outside it"


def _state(pid: int) -> str:
    """The process state letter from /proc (Z: dead, waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.parametrize("mode", list(MODES))
def test_signals_to_its_process_group_spare_the_other_members(world: World, mode: str) -> None:
    """pynox leads a process group that holds another process too (a shell job):
    signalling the group must reach nobody else."""
    script = world.app / "probe.py"
    script.write_text(
        PRELUDE
        + textwrap.dedent("""
        import signal
        other = int(sys.argv[2])
        print(f"other: {other}")
        print(f"same-group: ok {os.getpgid(other) == os.getpgid(0)}")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        attempt("kill-own-group", os.kill, -os.getpgid(0), signal.SIGTERM)
        attempt("killpg-own-group", os.killpg, os.getpgid(0), signal.SIGTERM)
        attempt("kill-0", os.kill, 0, signal.SIGTERM)
        attempt("kill-other", os.kill, other, signal.SIGTERM)
    """)
    )
    out = world.root / "out.txt"
    # sh starts the other member, then becomes pynox (same pid, so pynox leads the group).
    shell = 'sleep 60 </dev/null >/dev/null 2>&1 & exec "$@" "$!"'
    with out.open("wb") as f:
        proc = subprocess.run(
            ["sh", "-c", shell, "sh", *MODES[mode], str(script), json.dumps(world.paths())],
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=world.app,
            timeout=60,
        )
    text = out.read_bytes()
    lines = outcomes(subprocess.CompletedProcess([], 0, text, b""))
    other = int(lines["other"])
    try:
        time.sleep(0.1)
        state = _state(other)
    finally:
        os.kill(other, signal.SIGKILL)  # our own sleep, by its pid
    assert proc.returncode == 0, text
    # With no terminal, the program leaves the group pynox leads for one of its own
    # (pynox.engine.job_group), as a supervised child has a session of its own.
    assert lines["same-group"] == "ok False"
    assert lines["kill-other"] == "PermissionError EPERM"
    assert state not in ("Z", "gone"), "a signal to the group reached a process outside"
