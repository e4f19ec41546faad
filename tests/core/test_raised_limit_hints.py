"""A program that raises a limit pynox set, or changes its priority: python's error, then a
hint that names the flag that raises the limit, or says that nothing does and what works
instead. Each hint that names something to do is followed here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.commands import pynox

from pynox.units import parse_size

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

SET = "import resource\nresource.setrlimit(resource.{}, ({}, {}))\nprint('raised')\n"
KEEP_HARD = (
    "import resource\nhard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))\nprint('raised')\n"
)


def _hint(*args: str) -> list[str]:
    done = pynox(*args)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    return [line[len("pynox: ") :] for line in err.splitlines() if line.startswith("pynox: ")]


def _raised(*args: str) -> None:
    done = pynox(*args)
    assert done.returncode == 0 and done.stdout == b"raised\n", done.stderr.decode()


PRLIMIT = (
    "import resource\nresource.prlimit(0, resource.RLIMIT_NOFILE, (512, 512))\nprint('raised')\n"
)


@pytest.mark.parametrize("code", [SET.format("RLIMIT_NOFILE", 512, 512), KEEP_HARD, PRLIMIT])
def test_open_files_past_the_memory_limits_share(code: str) -> None:
    assert _hint("--memory=256m", "-c", code) == [
        "the program may not raise its limit on open files above 256, what the 256m memory "
        "limit allows (one per MiB, from 64 to 1024); raise that limit with --memory=512m"
    ]
    _raised("--memory=512m", "-c", code)
    many = SET.format("RLIMIT_NOFILE", 4096, 4096)
    assert _hint("--memory=2g", "-c", many) == [
        "the program may not raise its limit on open files above 1024, what the 2g memory "
        "limit allows (one per MiB, from 64 to 1024); keep fewer files open at once"
    ]


def test_address_space_past_the_memory_limit() -> None:
    code = SET.format("RLIMIT_AS", "2 << 30", "2 << 30")
    assert _hint("--memory=256m", "-c", code) == [
        "the program may not raise its memory limits (RLIMIT_DATA, RLIMIT_AS, RLIMIT_STACK) "
        "above what pynox set for the 256m memory limit; raise the limit with --memory=512m"
    ]
    _raised("--memory=512m", "-c", code)


def test_file_size_past_max_file_size() -> None:
    code = SET.format("RLIMIT_FSIZE", "2 << 20", "2 << 20")
    assert _hint("--max-file-size=1m", "-c", code) == [
        "the program may not raise its file size limit above the 1m pynox set; raise it with "
        "--max-file-size=2m"
    ]
    _raised("--max-file-size=2m", "-c", code)


@pytest.mark.parametrize(("memory", "raised"), [("512m", "576m"), ("64m", "128m")])
def test_the_stack_limit_has_a_thread_instead(memory: str, raised: str) -> None:
    """Both of what the hint names, taken together: under 64m a thread with the larger
    stack alone does not even start."""
    code = SET.format("RLIMIT_STACK", "256 << 20", "256 << 20")
    assert _hint(f"--memory={memory}", "-c", code) == [
        "the program may not raise its stack limit: under the memory limit the main thread's "
        "stack keeps the limit it started with, which no grant raises; run deep recursion in a "
        "thread with a larger stack instead (threading.stack_size(64 << 20) before starting "
        f"it), and raise the limit by as much with --memory={raised}, since the stack counts "
        "against it"
    ]
    deep = (
        "import sys, threading\nsys.setrecursionlimit(100_000)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "threading.stack_size(64 << 20)\nfound = []\n"
        "worker = threading.Thread(target=lambda: found.append(depth(50_000)))\n"
        "worker.start()\nworker.join()\nprint(found)\n"
    )
    done = pynox(f"--memory={raised}", "-c", deep)
    assert done.returncode == 0 and done.stdout == b"[50000]\n", done.stderr.decode()


def test_the_stack_limit_hint_under_a_pool_s_ceiling() -> None:
    """A pool's [pool.limits] may stop the raise the thread's stack needs short of it, or
    allow none: the hint says which, never a limit by as much that the pool refuses."""
    from pynox.engine.hint_style import Style
    from pynox.engine.limit_hints import limit_hint_of

    def hint(ceiling: str) -> str:
        style = Style(True, ceilings={"memory": parse_size(ceiling, "memory")})
        return limit_hint_of("stack_limit", None, style, 64 << 20, None) or ""

    assert hint("1g").endswith(
        "and raise the limit by as much with memory='128m', since the stack counts against it"
    )
    assert hint("96m").endswith(
        "and raise the limit with memory='96m', the most [pool.limits] allows, since the "
        "stack counts against it"
    )
    assert hint("64m").endswith(
        "which counts against the 64m memory limit, the most [pool.limits] allows"
    )


def test_core_dumps_stay_off() -> None:
    code = SET.format("RLIMIT_CORE", "resource.RLIM_INFINITY", "resource.RLIM_INFINITY")
    assert _hint("-c", code) == [
        "core dumps are never allowed in the sandbox: its core size limit stays at 1 byte, and "
        "there is nothing to grant; leave the limit as it is"
    ]


def test_a_limit_the_host_set_or_a_soft_limit_above_its_own_hard_gets_no_hint() -> None:
    """What python would refuse the same way: no pynox line."""
    assert _hint("-c", SET.format("RLIMIT_NOFILE", "1 << 40", "1 << 40")) == []
    assert _hint("--memory=256m", "-c", SET.format("RLIMIT_NOFILE", 2048, 1024)) == []


SCHEDULING_HINT = (
    "scheduling calls (os.nice, os.setpriority, os.sched_setscheduler, os.sched_setaffinity) "
    "may change only the program's own process in the sandbox, and never raise its priority, "
    "which takes a privilege the sandbox never has; there is nothing to grant: leave the "
    "priority as it is, or lower it (os.nice(5))"
)


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.nice(-1)",
        "import os\nos.setpriority(os.PRIO_PROCESS, os.getppid(), 5)",
        "import os\nos.sched_setaffinity(os.getppid(), {0})",
        "import os\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))",
    ],
)
def test_scheduling_another_process_or_a_higher_priority(code: str, tmp_path: Path) -> None:
    # A file: these calls raise no audit event, and are told by their source, which
    # python keeps for -c only from 3.13.
    program = tmp_path / "schedule.py"
    program.write_text(code + "\n")
    assert _hint(str(program)) == [SCHEDULING_HINT]


def test_code_given_with_dash_c_is_told_by_its_source_too() -> None:
    # Before 3.13 python keeps no lines of -c code: pynox lends them to the hint alone,
    # and the traceback still shows none, as python's.
    done = pynox("-c", "import os\nos.nice(-1)")
    assert _hint("-c", "import os\nos.nice(-1)") == [SCHEDULING_HINT]
    shown = sys.version_info >= (3, 13)
    assert ("os.nice(-1)" in done.stderr.decode().split("pynox:")[0]) is shown


def test_lowering_the_priority_works() -> None:
    done = pynox("-c", "import os\nprint(os.nice(5) >= 5)")
    assert done.returncode == 0 and done.stdout == b"True\n", done.stderr.decode()
