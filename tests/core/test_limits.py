"""limits.c: hard limits that cannot be raised; memory and file size as set."""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from support.sandboxed_child import errno_of, needs_landlock, raw, read_file, sandboxed

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


@needs_landlock
def test_hard_limits_cannot_be_raised() -> None:
    class RLimit(ctypes.Structure):
        _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

    def body(_: Any) -> Any:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        raised = RLimit(hard + 1, hard + 1)
        core = resource.getrlimit(resource.RLIMIT_CORE)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (2, 2))
            set_core = "raised"
        except ValueError:  # Python's word for EPERM here
            set_core = "refused"
        return {
            "prlimit_nofile": -raw(
                "prlimit64", 0, resource.RLIMIT_NOFILE, ctypes.addressof(raised), None
            ),
            "core": list(core),
            "setrlimit_core": set_core,
            "lower_ok": errno_of(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, soft)),
        }

    assert sandboxed(body) == {
        "prlimit_nofile": errno.EPERM,
        # Exactly 1: the one value that also stops a dump piped to a helper (limits.c).
        "core": [1, 1],
        "setrlimit_core": "refused",
        "lower_ok": 0,
    }


def _vm_data() -> int:
    for line in read_file("/proc/self/status").splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmData")


@needs_landlock
def test_memory_limit_gives_memory_error() -> None:
    def body(limit: int) -> Any:
        small = bytearray(16 << 20)
        try:
            bytearray(1 << 30)
            big = "allocated"
        except MemoryError:
            big = "MemoryError"
        return [
            len(small),
            big,
            list(resource.getrlimit(resource.RLIMIT_DATA)),
            list(resource.getrlimit(resource.RLIMIT_AS)),
            limit,
        ]

    # The limit depends on the child's own data: 256 MiB above it.
    small, big, data, address_space, limit = sandboxed(
        body,
        setup=lambda: _vm_data() + (256 << 20),
        policy_from=lambda limit: {"memory_bytes": limit},
    )
    assert small == 16 << 20
    assert big == "MemoryError"
    # The limit is on memory (private writable mappings); the address space
    # is capped too, at four times as much, as a backstop for shared mappings.
    assert data == [limit, limit]
    assert address_space == [4 * limit, 4 * limit]


@needs_landlock
def test_file_size_limit_gives_efbig(tree: Path) -> None:
    target = tree / "rw" / "big.bin"

    def body(_: Any) -> Any:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        first = os.write(fd, b"x" * 4096)
        return [
            signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN,
            first,
            errno_of(os.write, fd, b"y"),
            list(resource.getrlimit(resource.RLIMIT_FSIZE)),
        ]

    result = sandboxed(body, write=[tree / "rw"], max_file_size=4096)
    assert result == [True, 4096, errno.EFBIG, [4096, 4096]]
    assert target.stat().st_size == 4096


@needs_landlock
def test_limits_lower_but_never_raise_what_the_process_had() -> None:
    """A soft limit lower than the policy's stays (the program gets no more than python
    would under the same ulimit), and the hard limit is the policy's: only lowered."""
    lowered = {
        "RLIMIT_NOFILE": 40,
        "RLIMIT_DATA": 3 << 30,
        "RLIMIT_AS": 5 << 30,
        "RLIMIT_FSIZE": 1 << 20,
    }

    def lower_soft_limits() -> None:
        for name, soft in lowered.items():
            which = getattr(resource, name)
            resource.setrlimit(which, (soft, resource.getrlimit(which)[1]))

    def body(_: Any) -> Any:
        return {name: list(resource.getrlimit(getattr(resource, name))) for name in lowered}

    memory, file_size = 4 << 30, 8 << 20
    asked = {"RLIMIT_NOFILE": 1024, "RLIMIT_DATA": memory, "RLIMIT_AS": 4 * memory}
    asked["RLIMIT_FSIZE"] = file_size
    limits = sandboxed(body, setup=lower_soft_limits, memory_bytes=memory, max_file_size=file_size)
    assert limits == {
        name: [soft, _lower(asked[name], resource.getrlimit(getattr(resource, name))[1])]
        for name, soft in lowered.items()
    }


def _lower(limit: int, other: int) -> int:
    return limit if other == resource.RLIM_INFINITY else min(limit, other)


@needs_landlock
@pytest.mark.parametrize("memory", [32 << 20, 200 << 20, 4 << 30])
def test_open_files_under_a_memory_limit_are_what_its_hints_say(memory: int) -> None:
    """limits.c sets the limit on open files from the memory limit; the hints state that
    rule again in Python (limit_hints.open_files_allowed), and the two must agree."""
    from pynox.engine.limit_hints import open_files_allowed

    def body(_: Any) -> Any:
        return resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    expected = _lower(open_files_allowed(memory), hard)
    assert sandboxed(body, memory_bytes=memory) == expected
