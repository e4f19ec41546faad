"""bench/child_faults.py: a pool child's page faults, by what they hit and who wrote.

The tally is checked on a trace and a map written here, in perf's and the kernel's own
formats; the tool end to end only where perf may trace page faults (it says so, and the
test skips, elsewhere).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.append(str(BENCH))  # last, so that no module of bench/ hides another
import child_faults  # noqa: E402 - from bench/, which is no package
import perf_trace  # noqa: E402

SERVER, ZYGOTE, CHILD, OTHER_CHILD, HELPER = 100, 101, 102, 103, 104

MAPS = """\
55e61f77a000-55e61f77b000 r--p 00000000 fe:00 95595    /opt/python/bin/python3.13
7f0000000000-7f0000100000 r-xp 00000000 fe:00 95600    /opt/python/lib/libpython3.13.so.1.0
7f0000100000-7f0000110000 rw-p 00100000 fe:00 95600    /opt/python/lib/libpython3.13.so.1.0
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0        [stack]
"""


def _fork(parent: int, child: int) -> str:
    return (
        f"{parent:>6} sched:sched_process_fork: comm=python3 pid={parent} "
        f"child_comm=python3 child_pid={child}\n"
        "\tffffffff8135fb3a kernel_clone ([kernel.kallsyms])\n"
        "\t           d4353 _Fork (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    )


def _fault(pid: int, address: int, error_code: int, writer: str) -> str:
    return (
        f"{pid:>6} exceptions:page_fault_user: address={address:#x} ip=0x7f0000001234 "
        f"error_code={error_code:#x}\n"
        "\tffffffff82241370 exc_page_fault ([kernel.kallsyms])\n"
        "\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])\n"
        f"\t          183dd0 {writer} (/opt/python/lib/libpython3.13.so.1.0)\n"
        "\t          17f8e0 PyType_Modified (/opt/python/lib/libpython3.13.so.1.0)\n"
    )


TRACE = "\n".join(
    [
        _fork(SERVER, ZYGOTE),
        _fork(SERVER, HELPER),
        _fork(ZYGOTE, CHILD),
        _fork(ZYGOTE, OTHER_CHILD),
        # The child copies a page of the interpreter's data and two of anonymous memory,
        # writes a new page of its stack and reads a page of code in.
        _fault(CHILD, 0x7F0000100040, 0x7, "_PyType_LookupRef"),
        _fault(CHILD, 0x7F0000200010, 0x7, "_PyObject_Malloc"),
        _fault(CHILD, 0x7F0000250010, 0x7, "_PyObject_Malloc"),
        _fault(CHILD, 0x7FFD00001000, 0x6, "_PyEval_EvalFrameDefault"),
        _fault(CHILD, 0x7F0000000100, 0x14, "_PyEval_EvalFrameDefault"),
        # The other child copies a page of memory mapped after the zygote forked it.
        _fault(OTHER_CHILD, 0x7E0000000000, 0x7, "_int_malloc"),
        # Neither the zygote nor the pool server's other child counts.
        _fault(ZYGOTE, 0x7F0000200010, 0x7, "_PyObject_Free"),
        _fault(HELPER, 0x7F0000200010, 0x7, "_PyObject_Free"),
        "a line of another shape, which is skipped",
    ]
)


def test_faults_are_tallied_by_mapping_kind_and_writer() -> None:
    faults, parent = child_faults.parse(TRACE)
    assert parent == {ZYGOTE: SERVER, HELPER: SERVER, CHILD: ZYGOTE, OTHER_CHILD: ZYGOTE}
    assert len(faults) == 8
    children, by_region, by_writer, counts = child_faults.tally(
        faults, parent, ZYGOTE, child_faults.parse_maps(MAPS)
    )
    assert children == 2
    assert counts == [1, 5]
    assert by_region == {
        "libpython3.13.so.1.0 rw-p, copied on write": 1,
        "anonymous memory rw-p, copied on write": 2,
        "[stack] rw-p, written first": 1,
        "libpython3.13.so.1.0 r-xp, read in": 1,
        "memory mapped after the fork, copied on write": 1,
    }
    # Only copies are put by writer: the first user frame, not the kernel's or its callers.
    assert by_writer == {
        "_PyType_LookupRef (libpython3.13.so.1.0)": 1,
        "_PyObject_Malloc (libpython3.13.so.1.0)": 2,
        "_int_malloc (libpython3.13.so.1.0)": 1,
    }


def test_a_fault_without_a_user_frame_has_an_unknown_writer() -> None:
    trace = (
        f"{CHILD} exceptions:page_fault_user: address=0x7f0000200010 ip=0x1 error_code=0x7\n"
        "\tffffffff82241370 exc_page_fault ([kernel.kallsyms])\n"
    )
    faults, _ = child_faults.parse(trace)
    assert [fault.writer for fault in faults] == ["[unknown]"]


@pytest.mark.slow
def test_the_tool_traces_a_pool(tmp_path: Path) -> None:
    if not perf_trace.may_trace("exceptions:page_fault_user", tmp_path):
        pytest.skip("perf is missing here, or may not trace page faults")
    completed = subprocess.run(
        [sys.executable, str(BENCH / "child_faults.py"), "--requests=20", "--burst"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    shown = re.search(r"faults per child: median ([\d.]+)", completed.stdout)
    assert shown is not None and float(shown[1]) > 0, completed.stdout
    # A forked child copies at least some page it shares with the zygote.
    assert re.search(r"^\s+[\d.]+  .*, copied on write$", completed.stdout, re.MULTILINE)
