"""Where a pool's CPU time goes: its server, its zygote, and the children it forks.

Read from /proc/PID/stat before and after a stretch of requests. The server's own figures
count its threads; the zygote's own, the forking; what the zygote's reaped children used
(the spares, each of which ran one request) arrives in the zygote's figures for waited-for
children once it reaps them. A child still running at either reading is counted in the
next one, so over a few hundred requests the error is a spare or two.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Fields of /proc/PID/stat after the command's closing parenthesis, counted from 0
# (proc(5) numbers them from 1 with the pid and the command first: these are 10-17).
_MINOR_FAULTS = 7
_CHILDREN_MINOR_FAULTS = 8
_USER = 11
_SYSTEM = 12
_CHILDREN_USER = 13
_CHILDREN_SYSTEM = 14


@dataclass(frozen=True)
class Usage:
    """CPU time in clock ticks and minor page faults (a page first touched, or copied
    after a fork)."""

    user: int
    system: int
    minor_faults: int

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.user - other.user,
            self.system - other.system,
            self.minor_faults - other.minor_faults,
        )


@dataclass(frozen=True)
class Reading:
    server: Usage
    zygote: Usage
    children: Usage


@dataclass(frozen=True)
class Share:
    """Per request: CPU milliseconds, of them in the kernel, and minor page faults."""

    cpu_ms: float
    system_ms: float
    minor_faults: float


@dataclass(frozen=True)
class PoolCosts:
    requests: int
    server: Share
    zygote: Share
    children: Share


def _fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rpartition(")")[2].split()


def _own(fields: list[str]) -> Usage:
    return Usage(int(fields[_USER]), int(fields[_SYSTEM]), int(fields[_MINOR_FAULTS]))


def _waited_for(fields: list[str]) -> Usage:
    return Usage(
        int(fields[_CHILDREN_USER]),
        int(fields[_CHILDREN_SYSTEM]),
        int(fields[_CHILDREN_MINOR_FAULTS]),
    )


def zygote_of(server: int) -> int | None:
    """The pool server's zygote: its child that runs the server's own executable; None
    where /proc does not show it."""
    try:
        executable = os.readlink(f"/proc/{server}/exe")
        tasks = os.listdir(f"/proc/{server}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{server}/task/{task}/children", encoding="ascii") as children:
                listed = children.read().split()
        except OSError:
            continue  # a thread that ended since it was listed
        for child in listed:
            try:
                if os.readlink(f"/proc/{child}/exe") == executable:
                    return int(child)
            except OSError:
                continue  # gone since it was listed
    return None


def read(server: int, zygote: int) -> Reading | None:
    """Both processes' figures now; None where /proc cannot give them."""
    try:
        zygote_fields = _fields(zygote)
        return Reading(_own(_fields(server)), _own(zygote_fields), _waited_for(zygote_fields))
    except (OSError, IndexError, ValueError):
        return None


def per_request(before: Reading, after: Reading, requests: int) -> PoolCosts:
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")

    def share(used: Usage) -> Share:
        return Share(
            (used.user + used.system) * tick_ms / requests,
            used.system * tick_ms / requests,
            used.minor_faults / requests,
        )

    return PoolCosts(
        requests,
        share(after.server - before.server),
        share(after.zygote - before.zygote),
        share(after.children - before.children),
    )


def cpu_ns(pid: int) -> int | None:
    """The CPU time of process pid, all its threads, in nanoseconds (the first field of
    /proc/PID/task/TID/schedstat: time on a CPU, user and kernel); None where /proc
    cannot tell. Finer than /proc/PID/stat's clock ticks, for stretches of milliseconds."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as schedstat:
                total += int(schedstat.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return total


def parent_of(pid: int) -> int | None:
    try:
        return int(_fields(pid)[1])
    except (OSError, IndexError, ValueError):
        return None
