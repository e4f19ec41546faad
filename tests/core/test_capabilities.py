"""capabilities.c: no capability remains, in any set; without CAP_SETPCAP, a process
that still holds one is refused."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import pytest
from support.sandboxed_child import (
    LIBC,
    PR_GET_NO_NEW_PRIVS,
    PR_GET_SECCOMP,
    needs_landlock,
    run_sandboxed,
    sandboxed,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def capabilities() -> list[int]:
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    assert LIBC.capget(ctypes.byref(header), data) == 0
    return [value for d in data for value in (d.effective, d.permitted, d.inheritable)]


PR_CAPBSET_READ = 23
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_IS_SET = 1


CAP_SETPCAP = 8


def bounding_set() -> list[int]:
    return [cap for cap in range(64) if LIBC.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1]


def holds_setpcap() -> bool:
    with open("/proc/self/status") as status:
        effective = next(line for line in status if line.startswith("CapEff:"))
    return bool(int(effective.split()[1], 16) & (1 << CAP_SETPCAP))


@needs_landlock
def test_no_capabilities_remain() -> None:
    """As root, every set ends empty. Any other user holds nothing to drop and may not
    change the bounding set (that takes CAP_SETPCAP): it stays as it was, which grants
    nothing, since no_new_privs keeps execve from raising capabilities to it."""
    expected_bounding = [] if holds_setpcap() else bounding_set()

    def body(_: Any) -> Any:
        ambient = [
            LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) for cap in range(64)
        ]
        return {
            "sets": capabilities(),
            "bounding": bounding_set(),
            "ambient": [cap for cap, v in enumerate(ambient) if v == 1],
            "no_new_privs": LIBC.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
            "seccomp_mode": LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0),
        }

    assert sandboxed(body) == {
        "sets": [0] * 6,
        "bounding": expected_bounding,
        "ambient": [],
        "no_new_privs": 1,
        "seccomp_mode": 2,
    }


def _set_capabilities(effective_permitted: int) -> None:
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)(_CapData(effective_permitted, effective_permitted, 0), _CapData(0, 0, 0))
    if LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to shape capabilities")


@needs_root
@needs_landlock
def test_unprivileged_process_keeps_its_bounding_set_and_applies() -> None:
    # setuid() to nobody empties the permitted set but leaves the bounding
    # set, which then cannot be changed (no CAP_SETPCAP): that is acceptable.
    def setup() -> None:
        os.setgid(65534)
        os.setuid(65534)

    def body(_: Any) -> Any:
        return [capabilities(), LIBC.prctl(PR_CAPBSET_READ, 0, 0, 0, 0)]

    assert sandboxed(body, setup=setup) == [[0] * 6, 1]


@needs_root
@needs_landlock
def test_capabilities_without_setpcap_fail() -> None:
    cap_net_bind_service = 10

    report = run_sandboxed(
        lambda _: None, setup=lambda: _set_capabilities(1 << cap_net_bind_service)
    )
    assert report["rc"] == -1
    assert "not CAP_SETPCAP" in report["error"]
