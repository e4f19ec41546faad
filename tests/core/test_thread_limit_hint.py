"""A thread that cannot start under a memory limit: for want of memory, the thread stacks
hint; with room for its stack, a limit on processes (ulimit -u counts threads), whose
hint does not send the program to raise a memory limit that changes nothing."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.commands import PYNOX

from pynox.engine.hint_style import Style
from pynox.engine.hint_text import format_hint
from pynox.engine.hints import classify
from pynox.policy.resolve import Policy

MIB = 1 << 20
THREADS = """
    import threading, time
    threads = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(40)]
    for thread in threads:
        thread.start()
    print(len(threads), "threads")
"""
FEWER = """
    import time
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=4) as executor:
        print(len(list(executor.map(time.sleep, [0.01] * 40))), "threads")
"""


def _under_memory(memory: int) -> Policy:
    policy = Policy()
    policy.memory = memory
    return policy


def _ulimit_u() -> str:
    """The process limit as the hint names it: none for root, whom the kernel holds to
    none."""
    limit = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return "" if limit == resource.RLIM_INFINITY or os.getuid() == 0 else str(limit)


@pytest.mark.unit
def test_a_thread_refused_with_room_for_its_stack_is_a_process_limit() -> None:
    refused = RuntimeError("can't start new thread")
    kind, value, _ = classify(refused, None, _under_memory(512 * MIB))
    assert (kind, value) == ("thread_processes", _ulimit_u())
    hint = format_hint("thread_processes", "20", Style(False), 512 * MIB, None)
    assert hint == (
        "a thread could not start, though its stack fits under the 512m memory limit: the "
        "limit on processes pynox was started with (ulimit -u 20), which counts each thread, "
        "was reached; run fewer threads at once "
        "(concurrent.futures.ThreadPoolExecutor(max_workers=4)), or raise that limit where "
        "pynox starts"
    )
    unlimited = format_hint("thread_processes", "", Style(True), 512 * MIB, None)
    assert unlimited is not None
    assert "a limit on processes or threads was reached (a container's, or the system's)" in (
        unlimited
    )
    # No memory limit: python's traceback alone, as before.
    assert classify(refused, None, Policy())[0] == "thread_stacks"


@pytest.mark.unit
def test_a_thread_refused_without_room_for_its_stack_keeps_the_thread_stacks_hint() -> None:
    """With no room left under the memory limit, the stack is what did not fit."""
    probe = textwrap.dedent(
        """
        import resource, sys
        from pynox.engine.hints import classify
        from pynox.policy.resolve import Policy
        hog = []
        resource.setrlimit(resource.RLIMIT_DATA, (256 << 20, 256 << 20))
        try:
            while True:
                hog.append(bytearray(1 << 20))
        except MemoryError:
            pass
        policy = Policy()
        policy.memory = 256 << 20
        print(classify(RuntimeError("can't start new thread"), None, policy)[0])
        """
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False, cwd="/")
    assert ran.stdout == b"thread_stacks\n", ran.stderr.decode()


def _processes_of_this_user() -> int:
    count = 0
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == os.getuid():
                count += 1
        except OSError:
            continue
    return count


@pytest.mark.skipif(
    os.geteuid() == 0, reason="the kernel holds root to no limit on processes (ulimit -u)"
)
def test_threads_past_the_process_limit_get_its_hint_and_fewer_threads_start(
    tmp_path: Path,
) -> None:
    """Forty threads under ulimit -u with room for about ten more processes of this user,
    and memory for all forty: the hint names the process limit, and its way out works."""
    limit = _processes_of_this_user() + 12

    def run(code: str) -> subprocess.CompletedProcess[bytes]:
        script = tmp_path / "threads.py"
        script.write_text(textwrap.dedent(code))
        return subprocess.run(
            [PYNOX, "--memory=1g", str(script)],
            capture_output=True,
            check=False,
            cwd=tmp_path,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit)),
        )

    failed = run(THREADS)
    err = failed.stderr.decode()
    assert "RuntimeError: can't start new thread" in err, err
    assert err.splitlines()[-1].startswith(
        f"pynox: a thread could not start, though its stack fits under the 1g memory limit: "
        f"the limit on processes pynox was started with (ulimit -u {limit})"
    ), err
    fewer = run(FEWER)
    assert fewer.stdout == b"40 threads\n", fewer.stderr.decode()
