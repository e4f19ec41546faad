"""bench/child_cpu.py: a pool child's sampled CPU time, by what the processor was doing.

The tally is checked on a trace written here in perf's own format; the tool end to end only
where perf may sample every processor (it says so, and the test skips, elsewhere).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.append(str(BENCH))  # last, so that no module of bench/ hides another
import child_cpu  # noqa: E402 - from bench/, which is no package
import perf_trace  # noqa: E402

SERVER, ZYGOTE, CHILD, OTHER_CHILD, HELPER = 100, 101, 102, 103, 104
LIBPYTHON = "/opt/python/lib/libpython3.13.so.1.0"
KERNEL = "[kernel.kallsyms]"

# Call chains, innermost first, as (symbol, object).
FAULT_IN_PYTHON = [
    ("clear_page_erms", KERNEL),
    ("do_wp_page", KERNEL),
    ("exc_page_fault", KERNEL),
    ("asm_exc_page_fault", KERNEL),
    ("_PyObject_Malloc", LIBPYTHON),
]
# A system call that touches the process's memory faults inside the call: a fault.
FAULT_IN_A_SYSTEM_CALL = [
    ("exc_page_fault", KERNEL),
    ("asm_exc_page_fault", KERNEL),
    ("_copy_to_user", KERNEL),
    ("__x64_sys_read", KERNEL),
    ("do_syscall_64", KERNEL),
    ("read", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
]
# The exit's teardown runs under exit_group: the exit, not the system call.
EXIT = [
    ("unmap_page_range", KERNEL),
    ("exit_mmap", KERNEL),
    ("do_exit", KERNEL),
    ("do_group_exit", KERNEL),
    ("__x64_sys_exit_group", KERNEL),
    ("do_syscall_64", KERNEL),
    ("_exit", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
]
LANDLOCK = [
    ("landlock_append_fs_rule", KERNEL),
    ("__do_sys_landlock_add_rule", KERNEL),
    ("__x64_sys_landlock_add_rule", KERNEL),
    ("do_syscall_64", KERNEL),
    ("syscall", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
]
INTERPRETER = [("_PyEval_EvalFrameDefault", LIBPYTHON), ("[unknown]", "[unknown]")]
TIMER = [("hrtimer_interrupt", KERNEL), ("sysvec_apic_timer_interrupt", KERNEL)]
JIT = [("[unknown]", "[unknown]")]


def _fork(parent: int, child: int) -> str:
    return (
        f"{parent:>6}          1 sched:sched_process_fork: comm=python3 pid={parent} "
        f"child_comm=python3 child_pid={child}\n"
        f"\tffffffff8135fb3a kernel_clone ({KERNEL})\n"
    )


def _sample(pid: int, period: int, chain: list[tuple[str, str]]) -> str:
    frames = "".join(
        f"\t{0x1000 + depth:16x} {symbol} ({owner})\n"
        for depth, (symbol, owner) in enumerate(chain)
    )
    return f"{pid:>6} {period:>10}                cpu-clock: \n{frames}"


TRACE = "\n".join(
    [
        _fork(SERVER, ZYGOTE),
        _fork(SERVER, HELPER),
        _fork(ZYGOTE, CHILD),
        _fork(ZYGOTE, OTHER_CHILD),
        _sample(CHILD, 200_000, FAULT_IN_PYTHON),
        _sample(CHILD, 200_000, FAULT_IN_A_SYSTEM_CALL),
        _sample(CHILD, 200_000, EXIT),
        _sample(CHILD, 200_000, INTERPRETER),
        _sample(CHILD, 200_000, LANDLOCK),
        _sample(OTHER_CHILD, 200_000, INTERPRETER),
        _sample(OTHER_CHILD, 200_000, TIMER),
        _sample(OTHER_CHILD, 200_000, JIT),
        # Neither the zygote nor the pool server's other child counts.
        _sample(ZYGOTE, 200_000, FAULT_IN_PYTHON),
        _sample(HELPER, 200_000, INTERPRETER),
        "a line of another shape, which is skipped",
    ]
)


def test_each_sample_goes_where_its_innermost_telling_frame_says() -> None:
    assert child_cpu.where(FAULT_IN_PYTHON) == child_cpu.PAGE_FAULTS
    assert child_cpu.where(FAULT_IN_A_SYSTEM_CALL) == child_cpu.PAGE_FAULTS
    assert child_cpu.where(EXIT) == child_cpu.EXIT
    assert child_cpu.where(LANDLOCK) == "system call landlock_add_rule"
    assert child_cpu.where(INTERPRETER) == "libpython3.13.so.1.0"
    assert child_cpu.where(TIMER) == child_cpu.OTHER_KERNEL
    assert child_cpu.where(JIT) == child_cpu.UNNAMED
    assert child_cpu.where([]) == child_cpu.UNNAMED
    # arm64 names its entries otherwise.
    assert child_cpu.where([("do_mem_abort", KERNEL), ("el0_da", KERNEL)]) == child_cpu.PAGE_FAULTS
    assert child_cpu.where([("__arm64_sys_openat", KERNEL)]) == "system call openat"


def test_the_zygotes_children_are_tallied_by_where_their_time_went() -> None:
    spent, parent = child_cpu.parse(TRACE)
    assert parent == {ZYGOTE: SERVER, HELPER: SERVER, CHILD: ZYGOTE, OTHER_CHILD: ZYGOTE}
    per_child, by_place = child_cpu.tally(spent, parent, ZYGOTE)
    assert per_child == [600_000, 1_000_000]
    assert by_place == {
        child_cpu.PAGE_FAULTS: 400_000,
        child_cpu.EXIT: 200_000,
        "libpython3.13.so.1.0": 400_000,
        "system call landlock_add_rule": 200_000,
        child_cpu.OTHER_KERNEL: 200_000,
        child_cpu.UNNAMED: 200_000,
    }


@pytest.mark.slow
def test_the_tool_samples_a_pool(tmp_path: Path) -> None:
    if not perf_trace.may_trace("cpu-clock", tmp_path):
        pytest.skip("perf is missing here, or may not sample every processor")
    completed = subprocess.run(
        [sys.executable, str(BENCH / "child_cpu.py"), "--requests=20", "--burst"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    shown = re.search(r"CPU time per child: median ([\d.]+) ms", completed.stdout)
    assert shown is not None and float(shown[1]) > 0, completed.stdout
    # Every forked child copies pages it shares with the zygote, and exits.
    for place in (child_cpu.PAGE_FAULTS, child_cpu.EXIT):
        assert re.search(rf"ms +\d+%  {re.escape(place)}$", completed.stdout, re.MULTILINE), (
            completed.stdout
        )
