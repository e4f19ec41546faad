"""bench/request_path.py: a request cut at the moments a trace of the scheduler shows.

The cutting is checked on a trace written here, in perf's own format; the tool end to end
only where perf may trace the scheduler (it says so, and the test skips, elsewhere).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.append(str(BENCH))  # last, so that no module of bench/ hides another
import perf_trace  # noqa: E402 - from bench/, which is no package
import request_path  # noqa: E402

SERVER, ZYGOTE, CHILD, OTHER_CHILD, THREAD, CLIENT = 100, 101, 102, 104, 103, 99
THIRD_CHILD = 105


def _line(tid: int, cpu: int, ns: int, event: str, fields: str) -> str:
    return f"{tid:>7} [{cpu:03d}] {ns // 10**9}.{ns % 10**9:09d}:  {event}: {fields}"


def _wakeup(waker: int, cpu: int, ns: int, woken: int, target: int, comm: str = "python3") -> str:
    fields = f"comm={comm} pid={woken} prio=120 target_cpu={target:03d}"
    return _line(waker, cpu, ns, "sched:sched_wakeup", fields)


def _switch(cpu: int, ns: int, previous: int, following: int) -> str:
    fields = (
        f"prev_comm=python3 prev_pid={previous} prev_prio=120 prev_state=S ==> "
        f"next_comm=python3 next_pid={following} next_prio=120"
    )
    return _line(previous, cpu, ns, "sched:sched_switch", fields)


def _fork(parent: int, ns: int, child: int) -> str:
    fields = f"comm=python3 pid={parent} child_comm=python3 child_pid={child}"
    return _line(parent, 0, ns, "sched:sched_process_fork", fields)


def _write(tid: int, cpu: int, ns: int, fd: int) -> str:
    fields = f"fd: {fd:#010x}, buf: 0x55ba6996d3d0, count: 0x00000040"
    return _line(tid, cpu, ns, "syscalls:sys_enter_write", fields)


TRACE = "\n".join(
    [
        _fork(SERVER, 10, ZYGOTE),
        _fork(SERVER, 20, THREAD),  # the server's own thread: no request's child
        _fork(ZYGOTE, 30, CHILD),
        _fork(ZYGOTE, 40, OTHER_CHILD),
        _fork(ZYGOTE, 50, THIRD_CHILD),
        # First request, 1,000 to 6,000 ns. The child, a spare still, gets a CPU only to
        # tell the server it is ready, before the request reaches it.
        _switch(1, 1_050, 0, CHILD),
        _wakeup(CHILD, 1, 1_060, SERVER, 0),
        _switch(1, 1_080, CHILD, 0),
        # The server wakes its own thread, then the child, onto the server's CPU, where
        # the child waits 300 ns; the child writes its output, then its frame.
        _write(CLIENT, 1, 1_090, 5),  # the request line
        _wakeup(CLIENT, 1, 1_100, SERVER, 0),
        _wakeup(SERVER, 0, 1_200, THREAD, 1),
        _write(SERVER, 0, 1_400, 9),  # the start frame
        _wakeup(SERVER, 0, 1_500, CHILD, 0, comm="a name with pid=7 prio=1 in it"),
        _switch(1, 1_600, 0, ZYGOTE),  # the zygote forks a new spare meanwhile
        _switch(0, 1_800, SERVER, CHILD),
        _wakeup(ZYGOTE, 1, 2_000, SERVER, 1),  # its word of the new spare
        _wakeup(CHILD, 0, 2_500, 7, 0, comm="kworker/0:1"),  # a kernel worker, say
        _write(CHILD, 0, 2_800, 1),
        _write(CHILD, 0, 2_950, 6),
        _wakeup(CHILD, 0, 3_000, SERVER, 0),
        _switch(0, 3_100, CHILD, SERVER),
        _write(SERVER, 0, 3_300, 1),  # the result, to the client
        # Second, 10,000 to 15,000 ns: the child is woken onto the other CPU, and its frame
        # comes while the server is awake, which no wake-up shows, but the write does.
        _write(CLIENT, 0, 10_100, 5),
        _wakeup(SERVER, 0, 10_400, OTHER_CHILD, 1),
        _switch(1, 10_450, 0, OTHER_CHILD),
        _write(OTHER_CHILD, 1, 11_000, 6),
        _write(SERVER, 0, 11_200, 1),
        # Third, 20,000 to 25,000 ns: the child was awake already when its request came;
        # no wake-up shows when it had it, so the request is left out.
        _write(CLIENT, 0, 20_100, 5),
        _write(THIRD_CHILD, 1, 20_500, 6),
        _write(SERVER, 0, 20_700, 1),
        "a line of another shape, which is skipped",
    ]
)


def test_a_request_is_cut_at_the_moments_the_trace_shows() -> None:
    events = request_path.parse(TRACE)
    assert [event.time_ns for event in events] == sorted(event.time_ns for event in events)
    windows = [(1_000, 6_000), (10_000, 15_000), (20_000, 25_000)]
    rows, on_server_cpu = request_path.split(events, SERVER, CLIENT, windows)
    # The client until it wrote the request, the server until it woke the child (not its
    # own thread), the child's wait for a CPU, the child until it wrote its frame, the
    # server until it wrote the result, and the client until it read it.
    assert rows == [(90, 410, 300, 1_150, 350, 2_700), (100, 300, 50, 550, 200, 3_800)]
    assert on_server_cpu == 1


@pytest.mark.parametrize(
    "window",
    [
        (1_600, 6_000),  # the request went out, and woke the child, before it began
        (1_000, 1_700),  # the child had not run by its end
        (1_000, 3_200),  # the result had not been written by its end
    ],
)
def test_a_request_with_a_moment_outside_its_window_is_left_out(
    window: tuple[int, int],
) -> None:
    rows, _ = request_path.split(request_path.parse(TRACE), SERVER, CLIENT, [window])
    assert rows == []


@pytest.mark.slow
def test_the_tool_traces_a_pool(tmp_path: Path) -> None:
    if not perf_trace.may_trace("sched:sched_switch", tmp_path):
        pytest.skip("perf is missing here, or may not trace the scheduler")
    # Only a few requests in a hundred show every moment of their path on some machines
    # (a child woken before its request's window, say): enough of them that one does.
    completed = subprocess.run(
        [sys.executable, str(BENCH / "request_path.py"), "--requests=100", "--pause=0.01"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    traced = re.search(r"^(\d+) of 100 requests traced whole", completed.stdout, re.MULTILINE)
    assert traced is not None and int(traced[1]) > 0, completed.stdout
    figures = {}
    for name in (*request_path.STRETCHES, "the whole request", "the whole request, untraced"):
        shown = re.search(rf"^  {re.escape(name)}\s+([\d.]+) us$", completed.stdout, re.MULTILINE)
        assert shown is not None, f"no line for {name!r} in:\n{completed.stdout}"
        figures[name] = float(shown[1])
    assert all(figure >= 0 for figure in figures.values())
    assert 0 < figures["the whole request"] < 1_000_000  # under a second each
