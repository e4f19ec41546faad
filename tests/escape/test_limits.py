"""Limits: memory, file size and time hold, with their hints, and cannot be raised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from support.commands import (
    PYNOX,
    PYTHON,
    limiting_address_space,
    limiting_file_size,
    limiting_memory,
    pynox,
    run,
    soft_limiting,
)
from support.probes import PRELUDE, PROBE_MODES, World, outcomes, run_grants_probe, run_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


RLIMIT_DATA = 2


def test_memory_limit_gives_memory_error_and_hint(world: World) -> None:
    proc = run_probe(
        world,
        """
        print("before", flush=True)
        hog = bytearray(256 * 1024 * 1024)
        print("not reached")
    """,
        "--memory=64m",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert proc.stdout == b"before\n"
    assert err.splitlines()[-2:] == [
        "MemoryError",
        "pynox: the program used up its 64m memory limit; allocate less or raise the "
        "limit with --memory=128m",
    ]


def test_memory_limit_cannot_be_raised(world: World) -> None:
    limit = 64 * 1024 * 1024
    proc = run_probe(
        world,
        f"""
        import resource
        inf = resource.RLIM_INFINITY
        attempt("getrlimit-data", resource.getrlimit, resource.RLIMIT_DATA)
        attempt("setrlimit-data-up", resource.setrlimit, resource.RLIMIT_DATA, (inf, inf))
        attempt("prlimit-data-up", resource.prlimit, 0, resource.RLIMIT_DATA, (inf, inf))
        new = (ctypes.c_uint64 * 2)(2**63 - 1, 2**63 - 1)
        sys_attempt("raw-prlimit64-data-up", "prlimit64", 0, {RLIMIT_DATA},
                    ctypes.addressof(new), None)
        attempt("setrlimit-as-up", resource.setrlimit, resource.RLIMIT_AS, (inf, inf))
        attempt("setrlimit-stack-up", resource.setrlimit, resource.RLIMIT_STACK, (inf, inf))
        attempt("setrlimit-nofile-up", resource.setrlimit, resource.RLIMIT_NOFILE,
                (resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                 resource.getrlimit(resource.RLIMIT_NOFILE)[1] + 1))
        attempt("setrlimit-fsize-up", resource.setrlimit, resource.RLIMIT_FSIZE, (inf, inf))
        attempt("setrlimit-core-up", resource.setrlimit, resource.RLIMIT_CORE, (1 << 20, 1 << 20))
        attempt("getrlimit-data-after", resource.getrlimit, resource.RLIMIT_DATA)
        attempt("lower-soft-is-fine", resource.setrlimit, resource.RLIMIT_DATA,
                ({limit // 2}, {limit}))
        attempt("big-allocation", bytearray, 128 * 1024 * 1024)
    """,
        "--memory=64m",
        "--max-file-size=1m",
    )
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    raised = "ValueError -"  # CPython's word for EPERM from setrlimit/prlimit
    assert lines == {
        "getrlimit-data": f"ok ({limit}, {limit})",
        "setrlimit-data-up": raised,
        "prlimit-data-up": "PermissionError EPERM",
        "raw-prlimit64-data-up": "errno EPERM",
        "setrlimit-as-up": raised,
        "setrlimit-stack-up": raised,
        "setrlimit-nofile-up": raised,
        "setrlimit-fsize-up": raised,
        "setrlimit-core-up": raised,
        "getrlimit-data-after": f"ok ({limit}, {limit})",
        "lower-soft-is-fine": "ok None",
        "big-allocation": "MemoryError -",
    }


# PR_GET_DUMPABLE and PR_SET_DUMPABLE.
UNDUMPABLE = """
resource = __import__("resource")
attempt("core-to-zero", resource.setrlimit, resource.RLIMIT_CORE, (0, 0))
sys_attempt("dumpable", "prctl", 3, 0, 0, 0, 0)
sys_attempt("make-dumpable", "prctl", 4, 1, 0, 0, 0)
sys_attempt("make-dumpable-high", "prctl", 4, (1 << 32) | 1, 0, 0, 0)
sys_attempt("dumpable-after", "prctl", 3, 0, 0, 0, 0)
"""


@pytest.mark.parametrize("mode", PROBE_MODES)
def test_no_core_dump_even_with_the_core_limit_lowered_to_zero(world: World, mode: str) -> None:
    """The core size limit of 1 byte keeps a kernel.core_pattern pipe (systemd-coredump,
    apport) from getting the program's memory, but a program may lower it to 0, which such
    a pipe takes as leave to dump, outside the sandbox. The process is not dumpable at all,
    and cannot make itself so again."""
    script = world.app / "undumpable.py"
    script.write_text(PRELUDE + UNDUMPABLE)
    proc = run_grants_probe(mode, world, script)
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc) == {
        "core-to-zero": "ok None",
        "dumpable": "ok 0",
        "make-dumpable": "errno EPERM",
        "make-dumpable-high": "errno EPERM",
        "dumpable-after": "ok 0",
    }


def _write_two_megabytes(
    world: World, *flags: str, command: list[str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Runs a program that writes a 2 MiB file in the world's writable directory, granted
    to it, under flags."""
    target = world.wo / "big.bin"
    program = f"""
        with open({str(target)!r}, "wb") as f:
            f.write(b"x" * (2 * 1024 * 1024))
    """
    return run_probe(world, program, *flags, f"--allow-write={world.wo}", command=command)


def test_file_size_limit_gives_efbig(world: World) -> None:
    target = world.wo / "big.bin"
    proc = _write_two_megabytes(world, "--max-file-size=1m")
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "OSError: [Errno 27] File too large" in err
    assert err.splitlines()[-1] == (
        "pynox: a file reached the 1m size limit; write less or raise it with --max-file-size=2m"
    )
    assert target.stat().st_size <= 1024 * 1024


@pytest.mark.parametrize("json_result", [False, True], ids=["line", "json"])
def test_a_lower_file_size_limit_pynox_was_started_with_is_named(
    world: World, json_result: bool
) -> None:
    """pynox keeps a hard limit lower than --max-file-size that it was started with (an
    unprivileged process cannot raise it): the hint names that limit, not a larger flag
    that would change nothing."""
    target = world.wo / "big.bin"
    proc = _write_two_megabytes(
        world,
        *(["--json"] if json_result else []),
        "--max-file-size=8m",
        command=[*limiting_file_size(1 << 20), PYNOX],
    )
    hint = (
        "a file reached the 1m size limit that pynox was started with (as ulimit -f sets "
        "it), below the 8m asked for, which pynox never raises; write less, "
        "or raise that limit where pynox starts"
    )
    _assert_failed_with_hint(proc, json_result, hint)
    assert target.stat().st_size <= 1024 * 1024


def _assert_failed_with_hint(
    proc: subprocess.CompletedProcess[bytes], json_result: bool, hint: str
) -> None:
    """The program failed (exit status 1) and its hint, in the result or as stderr's last
    line, is `hint`."""
    assert proc.returncode == 1, proc.stderr
    if json_result:
        assert json.loads(proc.stdout)["error"]["hint"] == hint
    else:
        assert proc.stderr.decode().splitlines()[-1] == f"pynox: {hint}"


@pytest.mark.parametrize("json_result", [False, True], ids=["line", "json"])
@pytest.mark.parametrize(
    "limiting", [limiting_memory, partial(soft_limiting, "RLIMIT_DATA")], ids=["hard", "soft"]
)
def test_a_lower_memory_limit_pynox_was_started_with_is_named(
    world: World, json_result: bool, limiting: Callable[[int], list[str]]
) -> None:
    """As for the file size: an RLIMIT_DATA lower than --memory stays, hard or only soft
    (as under python), and the hint names it rather than a larger --memory that would
    change nothing."""
    proc = run_probe(
        world,
        """
        hog = bytearray(300 * 1024 * 1024)
    """,
        *(["--json"] if json_result else []),
        "--memory=512m",
        command=[*limiting(256 << 20), PYNOX],
    )
    hint = (
        "the program used up the 256m memory limit that pynox was started with (as ulimit "
        "-d or ulimit -v sets it), below the 512m asked for, which pynox never raises; "
        "allocate less, or raise that limit where pynox starts"
    )
    _assert_failed_with_hint(proc, json_result, hint)


@pytest.mark.parametrize("json_result", [False, True], ids=["line", "json"])
def test_a_limit_pynox_was_started_with_is_named_as_memory_takes_it(
    world: World, json_result: bool
) -> None:
    """ulimit -v counts in kibibytes, so the limit it sets is rarely a whole number of
    mebibytes: the hint named ulimit -v 300000 as "the 307200000 memory limit", a number
    with no unit, where it now writes it as --memory takes it. Both ways out it names
    work: a run asking for that limit (--memory=300000k) under it allocates what fits,
    and one with the limit raised where pynox starts allocates what did not."""
    hog = "hog = bytearray(400 * 1024 * 1024)\nprint('allocated')\n"
    under = [*limiting_address_space(300000 << 10), PYNOX]
    proc = run_probe(world, hog, *(["--json"] if json_result else []), "--memory=1g", command=under)
    hint = (
        "the program used up the 300000k memory limit that pynox was started with (as "
        "ulimit -d or ulimit -v sets it), below the 1g asked for, which pynox never raises; "
        "allocate less, or raise that limit where pynox starts"
    )
    _assert_failed_with_hint(proc, json_result, hint)
    less = run_probe(
        world,
        "part = bytearray(100 * 1024 * 1024)\nprint('allocated')\n",
        "--memory=300000k",
        command=under,
    )
    assert (less.returncode, less.stdout) == (0, b"allocated\n"), less.stderr
    raised = run_probe(world, hog, "--memory=1g")
    assert (raised.returncode, raised.stdout) == (0, b"allocated\n"), raised.stderr


@pytest.mark.parametrize("json_result", [False, True], ids=["line", "json"])
def test_a_thread_stacks_hint_names_a_lower_limit_pynox_was_started_with(
    world: World, json_result: bool
) -> None:
    """As MemoryError's: a thread whose stack did not fit told the model to raise --memory,
    which changes nothing under that limit."""
    proc = run_probe(
        world,
        """
        import threading, time
        for _ in range(200):
            threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
    """,
        *(["--json"] if json_result else []),
        "--memory=512m",
        command=[*limiting_memory(256 << 20), PYNOX],
    )
    hint = (
        "a thread could not start: each thread's stack (8m here) counts against the "
        "256m memory limit that pynox was started with (as ulimit -d or ulimit -v sets "
        "it), below the 512m asked for, which pynox never raises; run fewer "
        "threads at once (concurrent.futures.ThreadPoolExecutor(max_workers=4)) or make "
        "their stacks smaller before starting them (threading.stack_size(1 << 20)), or raise "
        "that limit where pynox starts"
    )
    _assert_failed_with_hint(proc, json_result, hint)
    # Followed: the same threads, with the smaller stacks the hint names, all start.
    followed = run_probe(
        world,
        """
        import threading, time
        threading.stack_size(1 << 20)
        for _ in range(200):
            threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
        print("started")
    """,
        "--memory=512m",
        command=[*limiting_memory(256 << 20), PYNOX],
    )
    assert (followed.returncode, followed.stdout) == (0, b"started\n"), followed.stderr


TIMEOUT_PROBES = {
    "busy-loop": "while True:\n    pass\n",
    "ignores-sigterm-and-sigint": (
        "import signal\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "while True:\n    pass\n"
    ),
    "spawns-spinning-threads": (
        "import threading\n"
        "def spin():\n    while True:\n        pass\n"
        "while True:\n"
        "    try:\n        threading.Thread(target=spin, daemon=False).start()\n"
        "    except RuntimeError:\n        pass\n"
    ),
    "sleeps-in-c": "import time\ntime.sleep(3600)\n",
}


def test_a_lower_soft_limit_on_open_files_stays_as_under_python(tmp_path: Path) -> None:
    """`ulimit -S -n 64; pynox --memory=1g app.py`: the program gets the 64 open files
    python gets, not the 1024 that --memory allows, and fails alike, with no hint naming
    --memory, which would change nothing."""
    script = tmp_path / "app.py"
    script.write_text(
        "import resource\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
        "files = [open(__file__) for _ in range(100)]\n"
    )
    lowered = soft_limiting("RLIMIT_NOFILE", 64)
    under_python = run([*lowered, PYTHON, str(script)], cwd=tmp_path)
    under_pynox = run([*lowered, PYNOX, "--memory=1g", str(script)], cwd=tmp_path)
    assert under_python.stdout == b"64\n"
    assert (under_pynox.returncode, under_pynox.stdout) == (1, under_python.stdout)
    last_line = under_python.stderr.decode().splitlines()[-1]
    assert last_line.startswith("OSError: [Errno 24] Too many open files")
    assert under_pynox.stderr.decode().splitlines()[-1] == last_line


@pytest.mark.parametrize("kind", list(TIMEOUT_PROBES))
def test_timeout_stops_the_program(world: World, kind: str) -> None:
    pid_file = world.wo / "pid"
    script = world.app / "probe.py"
    script.write_text(
        f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" + TIMEOUT_PROBES[kind]
    )
    started = time.monotonic()
    proc = pynox(
        "--timeout=1s", f"--allow-write={world.wo}", str(script), cwd=world.app, timeout=30
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 124, proc.stderr
    assert 0.9 < elapsed < 10
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pynox: the program ran past its 1s time limit")
    assert "--timeout=2s" in lines[0]
    pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{pid}"), "the program outlived its timeout"
