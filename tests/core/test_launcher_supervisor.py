"""The launcher keeps a run's wall-clock limit itself: no second interpreter.

`pynox --timeout=...` (or a pynox.toml limit) runs the program in the interpreter the
launcher started, which the launcher, staying behind as its parent, watches: it kills
the run at the deadline and prints the line, passes on the signals sent to it, and
ends as the run ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import PYNOX, pynox, python
from support.pool_client import alive, descendants, status_field

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# Short sleeps, not one long one: CPython notices a SIGINT that lands after its last check
# and before the sleep's system call only once that call returns, so a run told to stop
# just after "ready" could sleep on for the whole 30 s (tests/test_cli.py says the same).
SLEEPS = "import time\nprint('ready', flush=True)\nfor _ in range(600):\n    time.sleep(0.05)"


def _start(tmp_path: Path, *flags: str, code: str = SLEEPS) -> subprocess.Popen[bytes]:
    run = subprocess.Popen(
        [PYNOX, *flags, "-c", code], cwd=tmp_path, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert run.stdout is not None and run.stdout.readline() == b"ready\n"
    return run


def _finish(run: subprocess.Popen[bytes]) -> bytes:
    _, stderr = run.communicate(timeout=30)
    return stderr


def _start_captured(tmp_path: Path, *flags: str) -> subprocess.Popen[bytes]:
    """A run whose output goes into its --json result: it says it is ready with a file."""
    out = tmp_path / "out"
    out.mkdir()
    ready = out / "ready"
    code = f"import time; open({str(ready)!r}, 'w').close(); time.sleep(30)"
    run = subprocess.Popen(
        [PYNOX, *flags, f"--allow-write={out}", "-c", code], cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.01)
    return run


@pytest.mark.parametrize(
    ("flags", "configured"),
    [
        (["--timeout=30s"], ""),
        # A memory limit too: the launcher says what a supervisor of pynox's would when
        # native code ends the program (tests/core/test_memory_limit.py).
        (["--memory=1g"], ""),
        (["--memory=1g", "--timeout=30s"], ""),
        ([], 'memory = "1g"'),
        (["--json", "--memory=1g"], ""),
    ],
    ids=["timeout", "memory", "memory-and-timeout", "configured-memory", "json-memory"],
)
def test_a_limited_run_has_one_interpreter_under_the_launcher(
    tmp_path: Path, flags: list[str], configured: str
) -> None:
    if configured:
        (tmp_path / "pynox.toml").write_text(f"[permissions]\n{configured}\n")
    run = _start_captured(tmp_path, *flags) if "--json" in flags else _start(tmp_path, *flags)
    try:
        # pynox's process is the launcher itself, not an interpreter...
        launcher = os.path.realpath(PYNOX)
        assert os.readlink(f"/proc/{run.pid}/exe") == launcher
        # ...and below it one interpreter, running the program itself (beside the
        # helper that removes the scratch directory, a copy of the launcher).
        below = {pid: os.readlink(f"/proc/{pid}/exe") for pid in descendants(run.pid)}
        interpreters = [pid for pid, exe in below.items() if exe != launcher]
        assert len(interpreters) == 1, below
        assert "python" in os.path.basename(below[interpreters[0]])
    finally:
        run.kill()
        _finish(run)


def test_the_deadline_kills_the_run_and_prints_the_line(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = pynox("--timeout=300ms", "-c", "import time; time.sleep(30)", cwd=tmp_path)
    assert proc.returncode == 124
    assert proc.stderr.decode().endswith(
        "pynox: the program ran past its 300ms time limit and was stopped; make it faster "
        "or raise the limit with --timeout=1s\n"
    )
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("stop", ["SIGSTOP", "SIGTSTP"])
def test_a_program_that_stops_itself_still_meets_its_deadline(tmp_path: Path, stop: str) -> None:
    """The launcher stops with the program only when the job was stopped: a program that
    stops itself cannot freeze the clock that ends it. Run as a shell runs a job, in a
    process group of its own in this session, where the kernel does stop it."""
    code = f"import os, signal; os.kill(os.getpid(), signal.{stop}); print('continued')"
    started = time.monotonic()
    run = subprocess.Popen(
        [PYNOX, "--timeout=1s", "-c", code], cwd=tmp_path, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=os.setpgrp,  # noqa: PLW1509 - one call, before exec
    )  # fmt: skip
    try:
        out, err = run.communicate(timeout=15)
    finally:
        run.kill()
        run.wait()
    assert (run.returncode, out) == (124, b"")
    assert b"ran past its 1s time limit" in err
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("captured", [False, True], ids=["plain", "json"])
def test_a_program_that_ended_before_the_deadline_did_not_time_out(
    tmp_path: Path, captured: bool
) -> None:
    """The launcher may come to the deadline late (stopped, or slow to get a processor):
    a program that had ended by then ends the run as it ended, and the launcher, which
    reaps it, sends nothing to its pid afterwards. Here the launcher is stopped while the
    program ends, and continued past the deadline."""
    out = tmp_path / "out"
    out.mkdir()
    ready, go = out / "ready", out / "go"
    # It ends when told, once the launcher is stopped: a program that ended after a sleep
    # could end before, on a busy machine, and leave no interpreter to find.
    code = (
        f"import os, time\nopen({str(ready)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\nprint('done')"
    )
    flags = ["--json"] if captured else []
    run = subprocess.Popen(
        [PYNOX, *flags, "--timeout=1s", f"--allow-write={out}", "-c", code], cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.01)
        started = time.monotonic()
        time.sleep(0.1)  # the launcher has read its deadline: the program runs already
        os.kill(run.pid, signal.SIGSTOP)
        # The interpreter, not the launcher's helper that removes the scratch directory.
        (program,) = (pid for pid in descendants(run.pid) if status_field(pid, "Name") != "pynox")
        go.touch()
        while status_field(program, "State") != "Z":  # ended, not reaped: the launcher waits
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(max(0.0, started + 1.3 - time.monotonic()))  # past the 1s deadline
        os.kill(run.pid, signal.SIGCONT)
        out_bytes, err = run.communicate(timeout=30)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 0, err
    if captured:
        result = json.loads(out_bytes)
        assert (result["exit"], result["error"], result["stdout"]) == (0, None, "done\n")
    else:
        assert (out_bytes, err) == (b"done\n", b"")


@pytest.mark.parametrize("captured", [False, True], ids=["plain", "json"])
def test_a_job_continued_after_its_deadline_gets_the_ordinary_timeout_hint(
    tmp_path: Path, captured: bool
) -> None:
    """A job stopped (kill -TSTP -- -PGID, as Ctrl-Z stops it) and continued after its
    deadline is killed there as a run that was too slow: "raise the limit" is the hint,
    not the one for a program that stopped itself, which says a longer limit would not
    help. With --json (and with no terminal) the program has a process group of its own
    and gets the SIGCONT from the launcher. Run as a shell runs a job, in a process group
    of its own in this session, where the kernel does stop it."""
    run = subprocess.Popen(
        [PYNOX, *(["--json"] if captured else []), "--timeout=1s", "-c", SLEEPS],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=os.setpgrp,  # noqa: PLW1509 - one call, before exec
    )  # fmt: skip
    try:
        if not captured:
            assert run.stdout is not None and run.stdout.readline() == b"ready\n"
        else:
            time.sleep(0.5)  # the launcher has read its deadline: the program runs
        os.killpg(run.pid, signal.SIGTSTP)
        _, status = os.waitpid(run.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        time.sleep(1.5)  # past the deadline
        os.killpg(run.pid, signal.SIGCONT)
        out, err = run.communicate(timeout=30)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 124, err
    hint = json.loads(out)["error"]["hint"] if captured else err.decode().rpartition("; ")[2]
    assert hint.startswith("make it faster or raise the limit with --timeout="), hint


def test_a_limit_from_pynox_toml_is_kept_too(tmp_path: Path) -> None:
    (tmp_path / "pynox.toml").write_text('[permissions]\ntimeout = "300ms"\n')
    proc = pynox("-c", "import time; time.sleep(30)", cwd=tmp_path)
    assert proc.returncode == 124


@pytest.mark.parametrize("flags", [[], ["--timeout=30s"]], ids=["plain", "limited"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_sent_to_pynox_reach_the_program(
    tmp_path: Path, flags: list[str], signum: int
) -> None:
    run = _start(tmp_path, *flags)
    run.send_signal(signum)
    stderr = _finish(run)
    assert run.returncode == -signum, stderr
    if signum == signal.SIGINT:
        assert b"KeyboardInterrupt" in stderr  # the program's own handler ran


def test_killing_pynox_ends_the_run(tmp_path: Path) -> None:
    run = _start(tmp_path, "--timeout=30s")
    interpreter = descendants(run.pid, zombies=False)
    run.kill()
    _finish(run)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in interpreter) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in interpreter)


def test_a_variable_the_caller_sets_is_not_taken_for_the_launcher(tmp_path: Path) -> None:
    """Without the launcher, pynox supervises a limited run itself, whatever the
    environment says; a forged variable names no pipe of pynox's parent."""
    code = "import time; time.sleep(30)"
    env = {"PYNOX_SUPERVISOR": f"1,2:{os.getpid()}"}
    proc = python("-m", "pynox", "--timeout=300ms", "-c", code, cwd=tmp_path, env=env)
    assert proc.returncode == 124
    assert b"time limit" in proc.stderr


# What the program finds of its standard streams, written to a file: a caller may have
# closed the very streams it could print on.
_STANDARD_STREAMS = """\
import os, stat, sys
def seen(fd, stream):
    try:
        kind = "pipe" if stat.S_ISFIFO(os.fstat(fd).st_mode) else "open"
    except OSError:
        kind = "closed"
    return f"{fd}: {kind}, sys: {stream is not None}"
lines = [seen(fd, s) for fd, s in enumerate((sys.stdin, sys.stdout, sys.stderr))]
with open(os.path.join(sys.argv[1], "streams"), "w") as out:
    out.write("\\n".join(lines))
"""


def _closing(redirections: str) -> list[str]:
    """A prefix for a command line: what follows it starts with those streams closed."""
    return ["sh", "-c", f'exec "$@" {redirections}', "sh"]


def _streams_seen(tmp_path: Path, closed: str, command: list[str]) -> str:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    proc = subprocess.run(
        [*_closing(closed), *command, "-c", _STANDARD_STREAMS, str(out)],
        cwd=tmp_path, capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc
    seen = (out / "streams").read_text()
    (out / "streams").unlink()
    return seen


@pytest.mark.parametrize("closed", ["<&- 2>&-", "<&- >&-", ">&- 2>&-", "<&- >&- 2>&-"])
@pytest.mark.parametrize(
    "flags", [[], ["--timeout=30s", "--memory=1g"]], ids=["plain", "limited"]
)  # fmt: skip
def test_closed_standard_streams_stay_closed_as_under_python(
    tmp_path: Path, closed: str, flags: list[str]
) -> None:
    """The launcher's own pipes never take a standard descriptor the caller closed: the
    program finds it closed (sys.stderr None, say), as python's program does, and not one
    of the launcher's pipes in its place."""
    python_saw = _streams_seen(tmp_path, closed, [sys.executable, "-I"])
    assert python_saw.count("closed") == closed.count("&-"), python_saw
    grant = f"--allow-write={tmp_path / 'out'}"
    assert _streams_seen(tmp_path, closed, [PYNOX, *flags, grant]) == python_saw


@pytest.mark.parametrize("closed", ["<&- 2>&-", "2>&-"])  # with stdout: the result goes there
def test_closed_standard_streams_in_a_captured_run_are_as_without_the_launcher(
    tmp_path: Path, closed: str
) -> None:
    """Under --json the program writes into pynox's capture pipes; which of its streams
    Python set up is still what the caller left open, with the launcher as without it."""
    grant = f"--allow-write={tmp_path / 'out'}"
    without = _streams_seen(tmp_path, closed, [sys.executable, "-m", "pynox", "--json", grant])
    assert _streams_seen(tmp_path, closed, [PYNOX, "--json", grant]) == without


def test_the_launcher_keeps_nothing_a_program_writes_with_its_streams_closed(
    tmp_path: Path,
) -> None:
    """Writing 64 MiB on descriptor 2, closed by the caller, fails as under python: it
    does not land in a pipe of the launcher, which would hold it all, outside --memory."""
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import os, time\n"
        "written = 0\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        written += os.write(2, b'e' * (1 << 20))\n"
        "    except OSError:\n"
        "        pass\n"
        f"open({str(out / 'written')!r}, 'w').write(str(written))\n"
        "time.sleep(30)\n"
    )
    run = subprocess.Popen(
        [*_closing("<&- 2>&-"), PYNOX, "--memory=64m", f"--allow-write={out}", "-c", code],
        cwd=tmp_path, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (out / "written").exists() or not (out / "written").read_text():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.01)
        status = Path(f"/proc/{run.pid}/status").read_text()  # the launcher: sh exec'd it
        rss_kib = int(status.split("VmRSS:")[1].split()[0])
        assert (out / "written").read_text() == "0"
        assert rss_kib < 8 * 1024, status
    finally:
        run.kill()
        run.communicate()


# Waits for SIGUSR1 in short sleeps (a signal landing just before a long sleep would only
# be noticed once it ends), then says so.
_HANDLES_USR1 = (
    "import signal, time\n"
    "got = []\n"
    "signal.signal(signal.SIGUSR1, lambda *_: got.append(1))\n"
    "print('ready', flush=True)\n"
    "for _ in range(600):\n"
    "    if got:\n"
    "        break\n"
    "    time.sleep(0.05)\n"
    "print('got SIGUSR1' if got else 'no signal')\n"
)


@pytest.mark.parametrize(
    "command",
    [[PYNOX, "--timeout=30s"], [sys.executable, "-m", "pynox", "--timeout=30s"]],
    ids=["launcher", "python -m"],
)
def test_a_signal_the_program_handles_reaches_it(tmp_path: Path, command: list[str]) -> None:
    """As with python: SIGUSR1 sent to pynox runs the program's handler, not kill pynox."""
    run = subprocess.Popen(
        [*command, "-c", _HANDLES_USR1], cwd=tmp_path, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert run.stdout is not None and run.stdout.readline() == b"ready\n"
    run.send_signal(signal.SIGUSR1)
    out, err = run.communicate(timeout=30)
    assert (run.returncode, out) == (0, b"got SIGUSR1\n"), err
