"""probe.c: what the kernel offers, asked without changing the calling process."""

from __future__ import annotations

import errno
import sys

import pytest
from pynox._core import ffi, lib
from support.sandboxed_child import LIBC, PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


def test_probe_reports_this_kernel_without_changing_the_process() -> None:
    before = (LIBC.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0))
    probe = ffi.new("struct pynox_probe *")
    lib.pynox_probe_kernel(probe)
    after = (LIBC.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0))
    assert before == after
    assert probe.landlock_abi >= 1 or probe.landlock_abi in (-errno.ENOSYS, -errno.EOPNOTSUPP)
    assert probe.seccomp_filter == 1
    assert probe.no_new_privs == 1
    assert probe.pidfd == 1
