"""--memory limits the memory a program uses, not the address space it reserves.

The kernel enforces it (RLIMIT_DATA, with the address space capped at four
times the limit as a backstop for shared mappings, which RLIMIT_DATA leaves
out), no way of allocating gets far past it, and a program that fails under it
gets the memory hint, whether Python raised MemoryError or native code died.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest
from support.commands import PYNOX, PYTHON, limiting_memory, pynox, python, run
from support.pool_client import PoolClient

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

MIB = 1 << 20
PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES")
needs_packages = pytest.mark.skipif(
    not PACKAGES, reason="PYNOX_TEST_PACKAGES (a directory with numpy and pandas) is not set"
)
# OpenBLAS starts a thread per core, each with a 32 MiB buffer and an 8 MiB
# stack, all of it memory the limit counts: pin it to two, as on a two-core
# machine, so that what fits does not depend on the machine's size.
BLAS_ENV = {"OPENBLAS_NUM_THREADS": "2"}
BLAS_FLAGS = ("--allow-env=OPENBLAS_NUM_THREADS",)

NUMPY_PANDAS = """
    import sys
    import numpy, pandas
    frame = pandas.DataFrame({"a": range(1000), "b": [str(i) for i in range(1000)]})
    print(frame.describe().shape, int(numpy.dot(numpy.ones((50, 50)), numpy.ones(50))[0]))
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print("data", int(status["VmData"].split()[0]) * 1024, file=sys.stderr)
    print("address-space", int(status["VmSize"].split()[0]) * 1024, file=sys.stderr)
"""


def _script(tmp_path: Path, code: str, name: str = "app.py") -> Path:
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    return script


def _sizes(stderr: bytes) -> dict[str, int]:
    pairs = (line.split() for line in stderr.decode().splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[0] in ("data", "address-space")}


def _memory_hint(memory: str, raised: str) -> str:
    return (
        f"pynox: the program used up its {memory} memory limit; allocate less or raise the "
        f"limit with --memory={raised}"
    )


# --- what the limit means --------------------------------------------------------------


@needs_packages
def test_numpy_and_pandas_run_under_256m(tmp_path: Path) -> None:
    script = _script(tmp_path, NUMPY_PANDAS)
    flags = ("--memory=256m", f"--package-dir={PACKAGES}", "--allow-read=/proc", *BLAS_FLAGS)
    proc = pynox(*flags, str(script), cwd=tmp_path, env=BLAS_ENV)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"(8, 1) 50\n"


@needs_packages
def test_the_limit_counts_memory_not_address_space(tmp_path: Path) -> None:
    """A limit above the data numpy and pandas hold, but below the address space they
    reserve (libraries' code, malloc arenas' reservations), is enough."""
    script = _script(tmp_path, NUMPY_PANDAS)
    flags = (f"--package-dir={PACKAGES}", "--allow-read=/proc", *BLAS_FLAGS)
    free = pynox(*flags, str(script), cwd=tmp_path, env=BLAS_ENV)
    assert free.returncode == 0, free.stderr.decode()
    sizes = _sizes(free.stderr)
    limit = sizes["data"] + 32 * MIB
    assert limit < sizes["address-space"], sizes  # what RLIMIT_AS alone would refuse
    proc = pynox(f"--memory={limit}", *flags, str(script), cwd=tmp_path, env=BLAS_ENV)
    assert proc.returncode == 0, (sizes, proc.stderr.decode())


def test_big_allocation_fails_with_memory_error_and_hint(tmp_path: Path) -> None:
    script = _script(tmp_path, "print('before', flush=True)\nhog = bytearray(1 << 30)\n")
    proc = pynox("--memory=256m", str(script), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert proc.stdout == b"before\n"
    assert err.splitlines()[-2:] == ["MemoryError", _memory_hint("256m", "512m")]
    result = json.loads(pynox("--json", "--memory=256m", str(script), cwd=tmp_path).stdout)
    assert result["error"]["type"] == "MemoryError"
    assert result["error"]["hint"] == _memory_hint("256m", "512m")[len("pynox: ") :]
    # Following the hint: twice the limit is not enough for 1 GiB, eight times is.
    assert pynox("--memory=2g", str(script), cwd=tmp_path).returncode == 0


# Fills the memory to the last byte, in ever smaller pieces, each chained to the last
# (a growing list would stop at the first copy of its items that finds no room): none
# is left when the program raises.
FILL = """
    hog = None
    for size in (1 << 16, 4096, 256, 16):
        try:
            while True:
                hog = (hog, bytearray(size))
        except MemoryError:
            pass
    raise MemoryError("full")
"""
# Its hint, as --json and the pool give it.
FILL_HINT = _memory_hint("64m", "128m")[len("pynox: ") :]
POOL_FILL_HINT = FILL_HINT.replace("--memory=128m", '"memory": "128m"')


@pytest.mark.parametrize("mode", ["launcher", "json", "supervised"])
def test_a_program_that_fills_its_memory_still_gets_its_hint(tmp_path: Path, mode: str) -> None:
    """Memory used up to the last byte would leave none for pynox to report with: a
    reserve, set aside out of the limit while the program runs, is given back first."""
    script = _script(tmp_path, FILL)
    if mode == "supervised":  # pynox's Python supervisor forks the program's process
        proc = python("-I", "-m", "pynox", "--memory=64m", str(script), cwd=tmp_path)
    else:
        flags = ["--json"] if mode == "json" else []
        proc = pynox(*flags, "--memory=64m", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr.decode()
    if mode == "json":
        error = json.loads(proc.stdout)["error"]
        assert (error["type"], error["hint"]) == ("MemoryError", FILL_HINT)
        return
    err = proc.stderr.decode()
    assert "pynox/" not in err, err  # no traceback of pynox's own
    assert "MemoryError" in err
    assert err.splitlines()[-1] == _memory_hint("64m", "128m")


def test_a_pool_program_that_fills_its_memory_still_gets_its_hint(tmp_path: Path) -> None:
    with PoolClient(workers=1, cwd=tmp_path) as client:
        result = client.run({"id": "f", "code": textwrap.dedent(FILL), "memory": "64m"})
    assert result["exit"] == 1, result
    assert (result["error"]["type"], result["error"]["hint"]) == ("MemoryError", POOL_FILL_HINT)


def test_a_session_step_that_fills_its_memory_gets_its_hint_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """The reserve is set aside again as each step starts, where the memory the session
    holds leaves room for it; what the program lets go of stays with its allocator."""
    session = {"memory": "64m", "session": "s"}
    with PoolClient(workers=1, cwd=tmp_path) as client:
        filled = client.run({"id": 1, "code": textwrap.dedent(FILL), **session})
        freed = client.run({"id": 2, "code": "del hog\nprint('freed')", **session})
    assert filled["exit"] == 1, filled
    # A session's memory limit is its first step's: raising it takes a new session.
    in_session = (
        POOL_FILL_HINT + "; a session keeps the grants and limits it started with: close it "
        "(session.close() in Python, close_session in the protocol) and start a new one with "
        "that change"
    )
    assert (filled["error"]["type"], filled["error"]["hint"]) == ("MemoryError", in_session)
    assert "pynox/" not in filled["stderr"]
    assert (freed["exit"], freed["stdout"], freed["session"]["step"]) == (0, "freed\n", 2)


# --- no way around it -------------------------------------------------------------------

# Each method allocates in 8 MiB steps, touching every page, until refused, and
# prints how much it held (MiB).
ALLOCATORS = """
    import ctypes, mmap, os, sys
    STEP = 8 << 20
    LIMIT = 1 << 30
    LIBC = ctypes.CDLL(None, use_errno=True)
    LIBC.sbrk.restype = ctypes.c_void_p
    LIBC.sbrk.argtypes = [ctypes.c_long]
    SCRATCH = sys.argv[1]

    def touch(m, start, end):
        for i in range(start, end, 4096):
            m[i] = 1

    def grow(method):
        held, keep = 0, []
        try:
            if method == "bytearray":
                while held < LIMIT:
                    keep.append(bytearray(b"x" * STEP)); held += STEP
            elif method in ("private-anonymous", "shared-anonymous"):
                flags = mmap.MAP_PRIVATE if method.startswith("private") else mmap.MAP_SHARED
                while held < LIMIT:
                    m = mmap.mmap(-1, STEP, flags=flags); touch(m, 0, STEP)
                    keep.append(m); held += STEP
            elif method in ("private-file", "shared-file"):
                flags = mmap.MAP_PRIVATE if method.startswith("private") else mmap.MAP_SHARED
                fd = os.open(os.path.join(SCRATCH, method), os.O_RDWR | os.O_CREAT, 0o600)
                os.ftruncate(fd, LIMIT)
                while held < LIMIT:
                    m = mmap.mmap(fd, STEP, flags=flags, offset=held); touch(m, 0, STEP)
                    keep.append(m); held += STEP
            elif method == "mremap":
                m = mmap.mmap(-1, STEP, flags=mmap.MAP_PRIVATE); touch(m, 0, STEP); held = STEP
                while held < LIMIT:
                    m.resize(held + STEP); touch(m, held, held + STEP); held += STEP
            elif method == "brk":
                while held < LIMIT:
                    start = LIBC.sbrk(STEP)
                    if start is None or start == 2**64 - 1:
                        raise MemoryError
                    ctypes.memset(start, 1, STEP); held += STEP
            elif method == "memfd":
                fd = os.memfd_create("hold")
                while held < LIMIT:
                    os.write(fd, b"x" * STEP); held += STEP
        except (MemoryError, OSError) as exc:
            print(method, "refused", type(exc).__name__, held >> 20)
            return
        print(method, "held", held >> 20)

    grow(sys.argv[2])
"""

PRIVATE = ["bytearray", "private-anonymous", "private-file", "mremap", "brk"]
SHARED = ["shared-anonymous", "shared-file"]


@pytest.mark.parametrize("method", PRIVATE + SHARED + ["memfd"])
def test_no_allocation_gets_far_past_the_limit(tmp_path: Path, method: str) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    script = _script(tmp_path, ALLOCATORS)
    proc = pynox(
        "--memory=64m", f"--allow-write={scratch}", str(script), str(scratch), method, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr.decode()
    name, outcome, *rest = proc.stdout.decode().split()
    assert (name, outcome) == (method, "refused"), proc.stdout
    held = int(rest[-1])
    if method == "memfd":
        assert rest[0] == "PermissionError" and held == 0  # seccomp refuses memfd_create
    elif method in PRIVATE:
        assert held <= 64, f"{method} held {held} MiB under --memory=64m"
    else:
        # Shared mappings are counted by the address-space backstop only.
        assert held <= 4 * 64, f"{method} held {held} MiB under --memory=64m"


def _unlimited_stack() -> None:
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))


def test_the_stack_cannot_grow_past_the_limit(tmp_path: Path) -> None:
    """The main thread's stack is not data; under a memory limit it is capped too, even
    when the host leaves it unlimited."""
    import subprocess

    from support.commands import PYNOX

    if resource.getrlimit(resource.RLIMIT_STACK)[1] != resource.RLIM_INFINITY:
        pytest.skip("the hard stack limit here is not unlimited")
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_STACK))\n"
    proc = subprocess.run(
        [PYNOX, "--memory=64m", "-c", code],
        capture_output=True,
        preexec_fn=_unlimited_stack,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"]},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    soft, hard = eval(proc.stdout)  # noqa: S307 - a tuple of two ints we printed
    assert soft == hard and 0 < hard <= 64 * MIB  # RLIM_INFINITY reads as -1


# --- native code that dies of it -------------------------------------------------------

# Native code that allocates 200 MiB and, like many libraries, aborts or crashes
# when malloc() returns NULL.
NATIVE = """
    import ctypes, os, sys
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    size = 200 << 20
    block = libc.malloc(ctypes.c_size_t(size))
    if not block:
        if sys.argv[1] == "abort":
            os.abort()
        ctypes.memset(0, 1, size)  # SIGSEGV, as code that does not check does
    ctypes.memset(block, 1, size)
    print("allocated")
"""

NATIVE_HINT = (
    "native code ended the program, as it often does when an allocation fails under the "
    "128m memory limit; raise the limit with --memory=256m"
)


@pytest.mark.parametrize(("how", "signum"), [("abort", signal.SIGABRT), ("crash", signal.SIGSEGV)])
def test_native_death_under_a_limit_gets_the_memory_hint(
    tmp_path: Path, how: str, signum: int
) -> None:
    script = _script(tmp_path, NATIVE)
    name = signal.Signals(signum).name
    proc = pynox("--memory=128m", str(script), how, cwd=tmp_path)
    assert proc.returncode == -signum, proc.stderr.decode()
    line = proc.stderr.decode().splitlines()[-1]
    assert line == f"pynox: the program was killed by {name}; {NATIVE_HINT}"
    result = json.loads(pynox("--json", "--memory=128m", str(script), how, cwd=tmp_path).stdout)
    assert result["exit"] == 128 + signum
    assert result["error"]["type"] == "Signal"
    assert result["error"]["hint"] == NATIVE_HINT
    # Following the hint works.
    raised = pynox("--memory=256m", str(script), how, cwd=tmp_path)
    assert (raised.returncode, raised.stdout) == (0, b"allocated\n"), raised.stderr.decode()


def test_native_death_without_a_limit_gets_no_memory_hint(tmp_path: Path) -> None:
    script = _script(tmp_path, "import os\nos.abort()\n")
    proc = pynox(str(script), cwd=tmp_path)
    assert proc.returncode == -signal.SIGABRT
    assert b"pynox:" not in proc.stderr
    result = json.loads(pynox("--json", str(script), cwd=tmp_path).stdout)
    assert result["error"]["type"] == "Signal" and result["error"]["hint"] is None


def test_native_death_in_the_pool_gets_the_memory_hint(tmp_path: Path) -> None:
    code = textwrap.dedent(NATIVE).replace("sys.argv[1]", '"abort"')
    with PoolClient(workers=1, cwd=tmp_path) as client:
        result = client.run({"id": "n", "code": code, "memory": "128m"})
    assert result["exit"] == 128 + signal.SIGABRT
    assert result["error"]["hint"] == NATIVE_HINT.replace("--memory=256m", '"memory": "256m"')


NATIVE_MACHINE_HINT = (
    "native code ended the program, as it often does when an allocation fails under the "
    "1048576t memory limit, which is more than this machine has: a larger limit would not "
    "help; allocate less"
)


@pytest.mark.parametrize("mode", ["launcher", "json", "supervised", "pool"])
def test_native_death_under_a_limit_beyond_the_machine_is_not_told_to_grow(
    tmp_path: Path, mode: str
) -> None:
    """The hint named twice the limit, --memory=2097152t, which pynox refuses; and under a
    limit larger than the machine, it is the machine that ran out."""
    flag, code = "--memory=1048576t", "import os\nos.abort()\n"
    if mode == "pool":
        with PoolClient(workers=1, cwd=tmp_path) as client:
            result = client.run({"id": "n", "code": code, "memory": flag.partition("=")[2]})
        assert result["error"]["hint"] == NATIVE_MACHINE_HINT
        return
    if mode == "supervised":
        proc = python("-I", "-m", "pynox", flag, "-c", code, cwd=tmp_path)
    else:
        proc = pynox(*(["--json"] if mode == "json" else []), flag, "-c", code, cwd=tmp_path)
    if mode == "json":
        assert json.loads(proc.stdout)["error"]["hint"] == NATIVE_MACHINE_HINT
        return
    assert proc.stderr.decode().splitlines()[-1] == (
        f"pynox: the program was killed by SIGABRT; {NATIVE_MACHINE_HINT}"
    )


# Under a hard limit of 256m that pynox was started with, --memory=512m keeps 256m: the
# 300 MiB that NATIVE_UNDER_INHERITED allocates fails, whatever --memory says.
NATIVE_UNDER_INHERITED = NATIVE.replace("200 << 20", "300 << 20")
INHERITED_HINT = (
    "under the 256m memory limit that pynox was started with (as ulimit -d or ulimit -v "
    "sets it), below the 512m asked for, which pynox never raises; allocate "
    "less, or raise that limit where pynox starts"
)
NATIVE_INHERITED_HINT = (
    "native code ended the program, as it often does when an allocation fails " + INHERITED_HINT
)


@pytest.mark.parametrize("launched", ["launcher", "python -m pynox"])
def test_native_death_under_a_lower_limit_pynox_was_started_with_names_it(
    tmp_path: Path, launched: str
) -> None:
    """A larger --memory changes nothing under a lower hard limit pynox was started with:
    the hint named one all the same, from the launcher's --json result too."""
    script = _script(tmp_path, NATIVE_UNDER_INHERITED)
    pynox_command = [PYNOX] if launched == "launcher" else [PYTHON, "-m", "pynox"]
    limited = [*limiting_memory(256 << 20), *pynox_command]
    line = run([*limited, "--memory=512m", str(script), "abort"], cwd=tmp_path)
    assert line.returncode == -signal.SIGABRT, line.stderr.decode()
    assert line.stderr.decode().splitlines()[-1] == (
        f"pynox: the program was killed by SIGABRT; {NATIVE_INHERITED_HINT}"
    )
    result = json.loads(
        run([*limited, "--json", "--memory=512m", str(script), "abort"], cwd=tmp_path).stdout
    )
    assert result["error"]["hint"] == NATIVE_INHERITED_HINT
    # Followed: with that limit raised where pynox starts, the same run allocates.
    raised = run(
        [*limiting_memory(1 << 30), *pynox_command, "--memory=512m", str(script), "abort"],
        cwd=tmp_path,
    )
    assert (raised.returncode, raised.stdout) == (0, b"allocated\n"), raised.stderr.decode()


def test_native_exit_under_a_lower_limit_pynox_was_started_with_names_it(
    tmp_path: Path,
) -> None:
    limited = [*limiting_memory(256 << 20), PYNOX, "--memory=512m"]
    plain = run([*limited, "-c", NATIVE_EXIT], cwd=tmp_path)
    assert plain.returncode == 3
    hint = (
        "native code ended the program before Python finished it, as libraries such as "
        "OpenBLAS do when an allocation fails " + INHERITED_HINT
    )
    assert plain.stderr.decode().splitlines()[-1] == f"pynox: {hint}"
    result = json.loads(run([*limited, "--json", "-c", NATIVE_EXIT], cwd=tmp_path).stdout)
    assert result["error"]["hint"] == hint


def test_native_death_in_a_pool_started_under_a_lower_limit_names_it(tmp_path: Path) -> None:
    code = textwrap.dedent(NATIVE_UNDER_INHERITED).replace("sys.argv[1]", '"abort"')
    with PoolClient(workers=1, cwd=tmp_path, launched_by=limiting_memory(256 << 20)) as client:
        result = client.run({"id": "n", "code": code, "memory": "512m"})
    assert result["exit"] == 128 + signal.SIGABRT
    assert result["error"]["hint"] == NATIVE_INHERITED_HINT


# --- open files ------------------------------------------------------------------------

OPEN_FILES = """
    files = [open("/dev/null") for _ in range(100)]
    print(len(files))
"""
# The files stay open as the error is reported: none is left to import the report with.
OPEN_FILES_KEPT = """
    files = []
    for _ in range(100):
        files.append(open("/dev/null"))
    print(len(files))
"""


@pytest.mark.parametrize("program", [OPEN_FILES, OPEN_FILES_KEPT], ids=["freed", "kept"])
def test_too_many_open_files_under_a_limit_gets_a_hint(tmp_path: Path, program: str) -> None:
    script = _script(tmp_path, program)
    proc = pynox("--memory=64m", str(script), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Too many open files" in err
    hint = (
        "the 64m memory limit allows one open file per MiB (at least 64); close files the "
        "program no longer needs or raise the limit with --memory=128m"
    )
    assert err.splitlines()[-1] == f"pynox: {hint}"
    result = json.loads(pynox("--json", "--memory=64m", str(script), cwd=tmp_path).stdout)
    assert result["error"]["hint"] == hint
    raised = pynox("--memory=128m", str(script), cwd=tmp_path)
    assert (raised.returncode, raised.stdout) == (0, b"100\n"), raised.stderr.decode()
    with PoolClient(workers=1, cwd=tmp_path) as client:
        in_pool = client.run({"id": "f", "script": str(script), "memory": "64m"})
    assert in_pool["error"]["hint"] == hint.replace("--memory=128m", '"memory": "128m"')


# --- native code that exits behind Python's back -----------------------------------------

# OpenBLAS prints "giving up" and calls exit(1) when it cannot allocate its buffers.
NATIVE_EXIT = "import ctypes; ctypes.CDLL(None).exit(3)"
NATIVE_EXIT_HINT = (
    "native code ended the program before Python finished it, as libraries such as "
    "OpenBLAS do when an allocation fails under the 64m memory limit; raise the limit "
    "with --memory=128m"
)


def test_native_exit_under_a_limit_gets_the_memory_hint(tmp_path: Path) -> None:
    plain = pynox("--memory=64m", "-c", NATIVE_EXIT, cwd=tmp_path)
    assert plain.returncode == 3
    assert plain.stderr.decode().splitlines()[-1] == f"pynox: {NATIVE_EXIT_HINT}"
    result = json.loads(pynox("--memory=64m", "--json", "-c", NATIVE_EXIT, cwd=tmp_path).stdout)
    assert result["exit"] == 3
    assert result["error"]["type"] == "NativeExit"
    assert result["error"]["hint"] == NATIVE_EXIT_HINT


@pytest.mark.parametrize(
    "code", [NATIVE_EXIT, "import os; os.abort()", "import sys; sys.exit(3)", "1/0"]
)
def test_the_launcher_and_pynox_as_supervisors_end_a_limited_run_alike(
    tmp_path: Path, code: str
) -> None:
    """A run with a memory limit is the launcher's to watch (one interpreter); without the
    launcher (python -m pynox), pynox forks the program and watches it itself. Native
    code's end gets the same line, status, output and --json result either way."""
    launched = pynox("--memory=64m", "-c", code, cwd=tmp_path)
    supervised = python("-m", "pynox", "--memory=64m", "-c", code, cwd=tmp_path)
    assert launched.returncode == supervised.returncode
    assert launched.stdout == supervised.stdout
    assert launched.stderr.splitlines()[-1:] == supervised.stderr.splitlines()[-1:]
    results = [
        json.loads(run("--json", "--memory=64m", "-c", code, cwd=tmp_path).stdout)
        for run in (pynox, partial(python, "-m", "pynox"))
    ]
    for result in results:  # what differs from run to run
        del result["duration_ms"], result["policy"]["scratch"]
    assert results[0] == results[1]


def test_python_exits_get_no_native_exit_hint(tmp_path: Path) -> None:
    for code in ("import sys; sys.exit(3)", "raise SystemExit(3)", "1/0"):
        proc = pynox("--memory=64m", "-c", code, cwd=tmp_path)
        assert proc.returncode in (1, 3)
        assert b"native code" not in proc.stderr, code
    proc = pynox("--memory=64m", "-c", NATIVE_EXIT.replace("exit(3)", "exit(0)"), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == b""


def test_native_exit_in_the_pool_gets_the_memory_hint(tmp_path: Path) -> None:
    with PoolClient(workers=1, cwd=tmp_path) as client:
        native = client.run({"id": "n", "code": NATIVE_EXIT, "memory": "64m"})
        python = client.run({"id": "p", "code": "import sys; sys.exit(3)", "memory": "64m"})
    assert native["exit"] == 3
    assert native["error"]["hint"] == NATIVE_EXIT_HINT.replace("--memory=128m", '"memory": "128m"')
    assert python["exit"] == 3 and python["error"] is None


@needs_packages
def test_numpy_that_gives_up_under_a_small_limit_works_after_its_hints(tmp_path: Path) -> None:
    from support.hints import follow

    assert PACKAGES is not None
    code = "import numpy; print(int(numpy.ones(10).sum()))"
    grants = [f"--package-dir={PACKAGES}", *BLAS_FLAGS, "--memory=64m"]
    proc, hints = follow(
        lambda flags: pynox(*flags, "-c", code, cwd=tmp_path, env=BLAS_ENV), grants
    )
    assert hints and all("--memory=" in hint for hint in hints)
    assert proc.stdout == b"10\n"


# The largest limit pynox takes, more memory than any machine has, and an allocation past
# what any machine's kernel grants (it is beyond the address space of a process, too).
BEYOND_MACHINE = ("--memory=1048576t", "hog = bytearray(1 << 55)")
MACHINE_HINT = (
    "the program ran out of memory under its 1048576t memory limit, which is more than this "
    "machine has: a larger limit would not help; allocate less, or work through the data in "
    "parts"
)


@pytest.mark.parametrize("mode", ["launcher", "json", "supervised", "pool"])
def test_a_limit_beyond_the_machine_is_not_told_to_grow(tmp_path: Path, mode: str) -> None:
    """A MemoryError under a limit larger than the machine's memory is the machine's: the
    hint said the program used up its limit and named twice it (--memory=2097152t, which
    pynox refuses); it says that a larger limit would not help."""
    flag, code = BEYOND_MACHINE
    if mode == "pool":
        with PoolClient(workers=1, cwd=tmp_path) as client:
            result = client.run({"id": "m", "code": code, "memory": flag.partition("=")[2]})
        assert (result["error"]["type"], result["error"]["hint"]) == ("MemoryError", MACHINE_HINT)
        return
    if mode == "supervised":
        proc = python("-I", "-m", "pynox", flag, "-c", code, cwd=tmp_path)
    else:
        proc = pynox(*(["--json"] if mode == "json" else []), flag, "-c", code, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr.decode()
    if mode == "json":
        error = json.loads(proc.stdout)["error"]
        assert (error["type"], error["hint"]) == ("MemoryError", MACHINE_HINT)
        return
    assert proc.stderr.decode().splitlines()[-2:] == ["MemoryError", f"pynox: {MACHINE_HINT}"]


@pytest.mark.parametrize("mode", ["launcher", "supervised"])
def test_a_memory_error_with_no_limit_set_gets_no_hint(tmp_path: Path, mode: str) -> None:
    """No limit of pynox's was hit: python prints the traceback alone, and so does pynox
    (tests/parity/exc_memory_error.py); --json and the pool give no hint either."""
    code = "raise MemoryError('the program said so')"
    if mode == "supervised":
        proc = python("-I", "-m", "pynox", "--json", "-c", code, cwd=tmp_path)
    else:
        proc = pynox("--json", "-c", code, cwd=tmp_path)
    error = json.loads(proc.stdout)["error"]
    assert (error["type"], error["hint"]) == ("MemoryError", None)
    with PoolClient(workers=1, cwd=tmp_path) as client:
        result = client.run({"id": "m", "code": code})
    assert (result["error"]["type"], result["error"]["hint"]) == ("MemoryError", None)
    assert "pynox" not in result["stderr"]


# Forty threads at once: with 8 MiB stacks, 320 MiB, past a 128 MiB limit.
# The threads wait until every one has started: a thread that ended before the hint was
# made would have given its stack back, and the hint would rightly find memory to spare.
# Daemons, so that a program whose start failed ends without setting them going.
THREADS = """
    import threading
    {setup}
    go = threading.Event()
    threads = [threading.Thread(target=go.wait, daemon=True) for _ in range(40)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join()
    print(len(threads), "threads")
"""
THREAD_POOL = """
    import time
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=4) as executor:
        print(len(list(executor.map(time.sleep, [0.01] * 40))), "threads")
"""
THREAD_STACKS_HINT = (
    "a thread could not start: each thread's stack ({stack} here) counts against the "
    "{memory} memory limit; run fewer threads at once "
    "(concurrent.futures.ThreadPoolExecutor(max_workers=4)), make their stacks smaller before "
    "starting them (threading.stack_size(1 << 20)), or raise the limit with {flag} by {stack} "
    "for each thread that runs at once"
)
eight_mib_stacks = pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_STACK)[0] != 8 * MIB,
    reason="thread stacks are 8 MiB only where the stack limit is (ulimit -s 8192)",
)


@eight_mib_stacks
def test_threads_past_the_limit_get_the_thread_stacks_hint_and_each_way_out_works(
    tmp_path: Path,
) -> None:
    """Each thread's stack counts against --memory: forty threads do not start under
    128m. The hint says so, and each of its ways out works: a larger limit, fewer threads
    at once, smaller stacks."""
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent(THREADS.format(setup="")))
    failed = pynox("--memory=128m", str(script), cwd=tmp_path)
    err = failed.stderr.decode()
    assert failed.returncode == 1
    assert "RuntimeError: can't start new thread" in err
    hint = THREAD_STACKS_HINT.format(flag="--memory", stack="8m", memory="128m")
    assert err.splitlines()[-1] == "pynox: " + hint
    result = json.loads(pynox("--json", "--memory=128m", str(script), cwd=tmp_path).stdout)
    assert result["error"]["hint"] == hint
    # 128 MiB and 8 MiB for each of the forty threads.
    raised = pynox(f"--memory={128 + 40 * 8}m", str(script), cwd=tmp_path)
    assert raised.stdout == b"40 threads\n", raised.stderr.decode()
    smaller = tmp_path / "smaller.py"
    smaller.write_text(textwrap.dedent(THREADS.format(setup="threading.stack_size(1 << 20)")))
    ran = pynox("--memory=128m", str(smaller), cwd=tmp_path)
    assert ran.stdout == b"40 threads\n", ran.stderr.decode()
    fewer = tmp_path / "fewer.py"
    fewer.write_text(textwrap.dedent(THREAD_POOL))
    ran = pynox("--memory=128m", str(fewer), cwd=tmp_path)
    assert ran.stdout == b"40 threads\n", ran.stderr.decode()


def test_a_thread_with_a_larger_stack_gets_a_hint_of_its_size_and_following_it_works(
    tmp_path: Path,
) -> None:
    """A program that set larger stacks (threading.stack_size(64 << 20), as the stack
    limit's hint says) is told their size: a limit raised by the default's 8m would still
    not fit one."""
    script = tmp_path / "deep.py"
    script.write_text(
        "import threading\nthreading.stack_size(64 << 20)\n"
        "worker = threading.Thread(target=print, args=('started',))\n"
        "worker.start()\nworker.join()\n"
    )
    failed = pynox("--memory=64m", str(script), cwd=tmp_path)
    assert failed.stderr.decode().splitlines()[-1] == "pynox: " + THREAD_STACKS_HINT.format(
        flag="--memory", stack="64m", memory="64m"
    )
    result = json.loads(pynox("--json", "--memory=64m", str(script), cwd=tmp_path).stdout)
    assert result["error"]["hint"] == THREAD_STACKS_HINT.format(
        flag="--memory", stack="64m", memory="64m"
    )
    # Raised by 64m for the one thread.
    raised = pynox("--memory=128m", str(script), cwd=tmp_path)
    assert raised.stdout == b"started\n", raised.stderr.decode()


@eight_mib_stacks
def test_the_thread_stacks_hint_in_the_api() -> None:
    import pynox as api

    code = textwrap.dedent(THREADS.format(setup=""))
    first = api.run(code, memory="128m")
    assert first.exit == 1 and first.error is not None
    hint = THREAD_STACKS_HINT.format(flag="memory", stack="8m", memory="128m")
    assert first.error["hint"] == hint
    second = api.run(code, memory=f"{128 + 40 * 8}m")
    assert second.exit == 0, second.text
    assert second.stdout == "40 threads\n"
