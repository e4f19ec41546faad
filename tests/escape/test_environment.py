"""The environment: only allowed names, no name or value left in memory, loader variables
refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from support.commands import pynox
from support.pool_client import PoolClient, clean_env, descendants
from support.probes import MODES, PRELUDE, World, outcomes, run_probe

from pynox.engine.scratch import PREFIX as SCRATCH_PREFIX
from pynox.engine.scratch import VARIABLES as SCRATCH_VARIABLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def test_environment_holds_only_allowed_names(world: World) -> None:
    token = "tok-" + uuid.uuid4().hex
    proc = run_probe(
        world,
        """
        print("environ:", json.dumps(dict(os.environ), sort_keys=True))
        import posix
        print("posix-environ:", sorted(posix.environ))
        attempt("getenv-secret", os.getenv, "SECRET_TOKEN")
        LIBC.getenv.restype = ctypes.c_char_p
        attempt("libc-getenv", LIBC.getenv, b"SECRET_TOKEN")
        attempt("libc-getenv-allowed", LIBC.getenv, b"ALLOWED_VAR")
        attempt("proc-environ", lambda: open("/proc/self/environ", "rb").read())
    """,
        "--allow-env=ALLOWED_VAR",
        "--allow-env=UNSET_VAR",
        env={"SECRET_TOKEN": token, "ALLOWED_VAR": "visible", "PYTHONPATH": "/x"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    # Locale variables (LANG, LC_*, TZ) always pass through, so that text and
    # local time come out as under python; run() sets LANG=C.UTF-8.
    # And the run's scratch directory, where libraries look for a writable place.
    environ = json.loads(lines["environ"])
    scratch = {environ.pop(name) for name in SCRATCH_VARIABLES}
    assert len(scratch) == 1 and os.path.basename(scratch.pop()).startswith(SCRATCH_PREFIX)
    assert environ == {"ALLOWED_VAR": "visible", "LANG": "C.UTF-8"}
    names = sorted(["ALLOWED_VAR", "LANG", *SCRATCH_VARIABLES])
    assert lines["posix-environ"] == str([name.encode() for name in names])
    assert lines["getenv-secret"] == "ok None"
    assert lines["libc-getenv"] == "ok None"
    assert lines["libc-getenv-allowed"] == "ok b'visible'"
    assert lines["proc-environ"] == "PermissionError EACCES"
    assert token.encode() not in proc.stdout


# The kernel puts the environment strings at the top of the main stack, next to the
# auxiliary vector's AT_EXECFN string; reading one's own memory needs no permission, so
# a leftover copy there is as good as os.environ.
STACK_SCAN = """
LIBC.getauxval.restype = ctypes.c_ulong
top = LIBC.getauxval(31)  # AT_EXECFN, near the environment strings
found = []
if top:
    blob = ctypes.string_at(top - 16384, 16384)
    found = [s.decode(errors="replace") for s in blob.split(b"\\0") if b"SECRET" in s]
print("stack-scan:", json.dumps(found))
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_environment_values_are_not_left_in_memory(world: World, mode: str) -> None:
    """The values of variables not granted must be gone, not just unlisted."""
    token = "tok-" + uuid.uuid4().hex
    proc = run_probe(world, STACK_SCAN, command=MODES[mode], env={"SECRET_TOKEN": token})
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc)["stack-scan"] == "[]"
    assert token.encode() not in proc.stdout


def test_environment_values_are_not_left_in_a_pool_spare(world: World) -> None:
    """A pool's zygote empties its environment once, for every spare it forks: no request
    finds a value of it in os.environ or on its stack, whether its spare was forked
    before the first request or after."""
    token = "tok-" + uuid.uuid4().hex
    code = PRELUDE + STACK_SCAN + 'print("environ:", json.dumps(dict(os.environ)))\n'
    with PoolClient(workers=1, cwd=world.app, env=clean_env({"SECRET_TOKEN": token})) as client:
        results = [client.run({"id": n, "code": code}) for n in range(3)]
    for result in results:
        assert result["exit"] == 0, result["stderr"]
        lines = outcomes(subprocess.CompletedProcess([], 0, result["stdout"].encode()))
        assert lines["stack-scan"] == "[]"
        assert "SECRET_TOKEN" not in json.loads(lines["environ"])
        assert token not in result["stdout"]


def _copies_in_memory(pid: int, value: bytes) -> int:
    """How many times value is in the writable memory of process pid."""
    found = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as memory:
        for line in maps:
            span, mode = line.split()[:2]
            if not mode.startswith("rw"):
                continue
            start, end = (int(address, 16) for address in span.split("-"))
            try:
                memory.seek(start)
                found += memory.read(end - start).count(value)
            except OSError:
                continue  # a mapping the kernel will not read out (a guard page, say)
    return found


@pytest.mark.parametrize("part", ["value", "name"])
def test_environment_is_nowhere_in_the_memory_of_a_pools_zygote_or_spares(part: str) -> None:
    """Not on the stack, not in a dictionary of the pool server's that the zygote forked
    with: read from outside, while the spares wait, primed or not. Nor its names: the pool
    server's objects are made immortal before it forks the zygote, and a name the zygote
    dropped stayed in every spare's memory, where a request learned which secrets the host
    holds (AWS_SECRET_ACCESS_KEY, say)."""
    name, value = "SECRET_" + uuid.uuid4().hex.upper(), "tok-" + uuid.uuid4().hex
    sought = (value if part == "value" else name).encode()
    with PoolClient(workers=2, env=clean_env({name: value})) as client:
        assert client.run({"id": "first", "code": "1"})["exit"] == 0
        time.sleep(0.5)  # a new spare warms up, and one is primed
        pool_server = _copies_in_memory(client.pid, sought)
        children = descendants(client.pid, zombies=False)
        try:
            copies = {pid: _copies_in_memory(pid, sought) for pid in children}
        except PermissionError:
            pytest.skip("reading another process's memory needs ptrace rights here")
    assert pool_server > 0  # the scan finds what is there
    assert len(copies) >= 2  # the zygote and its spares
    assert copies == dict.fromkeys(children, 0)


# Variables pynox reads for itself (TERM: whether a hint may name it) whose values the
# program's process must not keep, besides any other.
UNKEPT = ["SECRET_TOKEN", "TERM"]


@pytest.mark.parametrize("variable", UNKEPT)
@pytest.mark.parametrize("json_result", [False, True], ids=["plain", "json"])
@pytest.mark.parametrize("mode", list(MODES))
def test_environment_values_are_nowhere_in_the_memory_of_a_running_program(
    world: World, mode: str, json_result: bool, variable: str
) -> None:
    """Read from outside while the program runs: no copy of a value that pynox decoded
    while it read its own variables (HOME, PYNOX_CONFIG and the like) before the sandbox.
    A program can read its whole memory, so a copy anywhere is a copy it can find."""
    token = "tok-" + uuid.uuid4().hex
    pid_file, go = world.rw / "pid", world.rw / "go"
    code = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    )
    flags = [f"--allow-write={world.rw}", *(["--json"] if json_result else [])]
    run = subprocess.Popen(
        [*MODES[mode], *flags, "-c", code],
        cwd=world.app,
        env={**os.environ, variable: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.01)
        copies = _copies_in_memory(int(pid_file.read_text()), token.encode())
    finally:
        go.touch()
        stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stderr.decode()
    assert copies == 0


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "GCONV_PATH"])
def test_loader_variables_are_refused_at_the_cli(world: World, name: str) -> None:
    marker = world.rw / "ran"
    script = world.app / "probe.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    # Refused by name, set or not (setting LD_PRELOAD here would act on pynox itself).
    proc = pynox(f"--allow-env={name}", f"--allow-write={world.rw}", str(script), cwd=world.app)
    assert proc.returncode == 125
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pynox: the environment variable {name} ")
    assert not marker.exists()


def test_a_run_started_with_an_empty_environment_runs(tmp_path: os.PathLike[str]) -> None:
    """Nothing to scrub is no reason to refuse: `env -i python -m pynox` runs as python does
    (the launcher always adds a variable of its own; python -m pynox adds none)."""
    import subprocess

    for mode in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "pynox", *mode, "-c", "print(6 * 7)"],
            env={},
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, (mode, proc.stderr.decode())
        stdout = json.loads(proc.stdout)["stdout"] if mode else proc.stdout.decode()
        assert stdout == "42\n", mode
