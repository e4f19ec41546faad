"""process.c and the own-process rules: tied to its parent (refused when the parent is
gone, killed when it goes), its own session when asked, and signals, limits and
scheduling that reach this process only."""

from __future__ import annotations

import errno
import os
import resource
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.sandboxed_child import (
    apply,
    errno_of,
    make_policy,
    needs_landlock,
    raw,
    run_sandboxed,
    sandboxed,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


def test_dead_parent_fails() -> None:
    if os.getpid() == 1:
        pytest.skip("pid 1 cannot have parent 1")
    report = run_sandboxed(lambda _: None, parent_pid=1)
    assert not report["applied"]
    assert "parent process 1 has already exited" in report["error"]


@needs_landlock
def test_parent_death_kills_the_sandboxed_child(tree: Path) -> None:
    # middle forks the sandboxed grandchild, which holds the pipe's only write
    # end; when middle exits, PDEATHSIG kills the grandchild and the pipe closes.
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            parent = os.getpid()
            grandchild = os.fork()
            if grandchild == 0:
                policy, refs = make_policy(keep=[w], parent_pid=parent)
                rc, _ = apply(policy)
                os.write(w, b"ready" if rc == 0 else b"failed")
                time.sleep(60)
                os._exit(0)
            os.close(w)
            time.sleep(0.5)
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 10
    data = b""
    while time.monotonic() < deadline and select.select([r], [], [], 1)[0]:
        chunk = os.read(r, 100)
        if not chunk:
            break
        data += chunk
    else:
        os.close(r)
        raise AssertionError("the grandchild outlived its parent")
    os.close(r)
    assert data == b"ready"


@needs_landlock
def test_signals_reach_only_this_process() -> None:
    def body(_: Any) -> Any:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGUSR1)
        signal.raise_signal(signal.SIGUSR1)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        return {
            "parent": errno_of(os.kill, os.getppid(), 0),
            "everyone": errno_of(os.kill, -1, 0),
            "own_group_without_setsid": errno_of(os.kill, 0, 0),
            "parent_group": errno_of(os.killpg, os.getpgid(os.getppid()), 0),
            "tgkill_parent": -raw("tgkill", os.getppid(), os.getppid(), 0),
            "pidfd_send_signal": -raw("pidfd_send_signal", 0, 0, None, 0),
        }

    result = sandboxed(body)
    assert result == dict.fromkeys(result, errno.EPERM)


@needs_landlock
def test_new_session_and_own_group_signals() -> None:
    def body(_: Any) -> Any:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        return [
            os.getsid(0) == os.getpid(),
            os.getpgrp() == os.getpid(),
            errno_of(os.kill, 0, signal.SIGUSR1),
            errno_of(os.killpg, os.getpid(), signal.SIGUSR1),
            errno_of(os.kill, os.getppid(), 0),
        ]

    assert sandboxed(body, new_session=1) == [True, True, 0, 0, errno.EPERM]


@needs_landlock
def test_a_group_of_its_own_made_before_the_sandbox_may_be_signalled() -> None:
    def body(_: Any) -> Any:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        return [errno_of(os.kill, 0, signal.SIGUSR1), errno_of(os.kill, os.getppid(), 0)]

    # The command's run without a terminal: pynox.engine.job_group made the group.
    assert sandboxed(body, setup=os.setpgrp, own_group=1) == [0, errno.EPERM]


@needs_landlock
def test_a_group_it_does_not_lead_stays_out_of_reach_whatever_the_flag() -> None:
    def body(_: Any) -> Any:
        return errno_of(os.kill, 0, 0)

    # Still in the test runner's group, which holds processes outside the sandbox.
    assert sandboxed(body, own_group=1) == errno.EPERM


@needs_landlock
def test_only_a_process_group_of_its_own() -> None:
    def body(_: Any) -> Any:
        parent_group = os.getpgid(os.getppid())
        return {
            # The kernel lets a process join any group of its session: the terminal's
            # foreground group, say, whose input it could then read.
            "join_parent_group": errno_of(os.setpgid, 0, parent_group),
            "join_by_own_pid": errno_of(os.setpgid, os.getpid(), parent_group),
            "own_group": errno_of(os.setpgrp),
            "own_group_by_pid": errno_of(os.setpgid, os.getpid(), os.getpid()),
            "leads_it": os.getpgrp() == os.getpid(),
        }

    assert sandboxed(body) == {
        "join_parent_group": errno.EPERM,
        "join_by_own_pid": errno.EPERM,
        "own_group": 0,
        "own_group_by_pid": 0,
        "leads_it": True,
    }


@needs_landlock
def test_limits_and_scheduling_of_other_processes_are_denied() -> None:
    def body(_: Any) -> Any:
        parent = os.getppid()
        own_prio = os.getpriority(os.PRIO_PROCESS, 0)
        return {
            "prlimit_parent": errno_of(resource.prlimit, parent, resource.RLIMIT_NOFILE),
            "prlimit_self": errno_of(resource.prlimit, 0, resource.RLIMIT_NOFILE),
            "prlimit_own_pid": errno_of(resource.prlimit, os.getpid(), resource.RLIMIT_NOFILE),
            "setpriority_parent": errno_of(os.setpriority, os.PRIO_PROCESS, parent, 10),
            "setpriority_group": errno_of(os.setpriority, os.PRIO_PGRP, 0, 10),
            "setpriority_self": errno_of(os.setpriority, os.PRIO_PROCESS, 0, own_prio + 1),
            "affinity_parent": errno_of(os.sched_setaffinity, parent, os.sched_getaffinity(0)),
            "affinity_self": errno_of(os.sched_setaffinity, 0, os.sched_getaffinity(0)),
            "sched_param_parent": errno_of(
                os.sched_setscheduler, parent, os.SCHED_OTHER, os.sched_param(0)
            ),
            "sched_param_self": errno_of(
                os.sched_setscheduler, 0, os.SCHED_OTHER, os.sched_param(0)
            ),
        }

    assert sandboxed(body) == {
        "prlimit_parent": errno.EPERM,
        "prlimit_self": 0,
        "prlimit_own_pid": 0,
        "setpriority_parent": errno.EPERM,
        "setpriority_group": errno.EPERM,
        "setpriority_self": 0,
        "affinity_parent": errno.EPERM,
        "affinity_self": 0,
        "sched_param_parent": errno.EPERM,
        "sched_param_self": 0,
    }
