"""descriptors.c: every descriptor not kept is closed, with or without close_range()."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from support.sandboxed_child import errno_of, fake_errno, needs_landlock, raw, sandboxed

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


@needs_landlock
def test_descriptors_close_without_close_range(tree: Path) -> None:
    def setup() -> dict[str, Any]:
        fds = [os.open(tree / "ro" / "f.txt", os.O_RDONLY) for _ in range(3)]
        os.dup2(fds[0], 300)
        fake_errno({"close_range": errno.ENOSYS})
        return {"dropped": [*fds[:2], 300], "kept": fds[2]}

    def body(ctx: dict[str, Any]) -> Any:
        return [
            [errno_of(os.fstat, fd) for fd in ctx["dropped"]],
            -raw("close_range", 3, 3, 0),
            os.pread(ctx["kept"], 2, 0).decode(),
        ]

    result = sandboxed(body, setup=setup, policy_from=lambda ctx: {"keep": [ctx["kept"]]})
    assert result == [[errno.EBADF] * 3, errno.ENOSYS, "ro"]


@needs_landlock
def test_descriptors_not_kept_are_closed(tree: Path) -> None:
    def setup() -> dict[str, Any]:
        fds = [os.open(tree / "ro" / "f.txt", os.O_RDONLY) for _ in range(4)]
        return {"dropped": fds[:2] + fds[3:], "kept": fds[2]}

    def body(ctx: dict[str, Any]) -> Any:
        return [
            [errno_of(os.fstat, fd) for fd in ctx["dropped"]],
            os.pread(ctx["kept"], 2, 0).decode(),
        ]

    # Landlock does not apply to descriptors opened before it: the kept one
    # still reads a file the policy does not grant.
    result = sandboxed(body, setup=setup, policy_from=lambda ctx: {"keep": [ctx["kept"], 1000]})
    assert result == [[errno.EBADF] * 3, "ro"]


@needs_landlock
def test_kept_descriptors_survive_in_any_order(tree: Path) -> None:
    def setup() -> list[int]:
        # High numbers, clear of the descriptors the harness itself opens.
        wanted = [210, 211, 212, 240, 241]
        fd = os.open(tree / "ro" / "f.txt", os.O_RDONLY)
        for n in wanted:
            if n != fd:
                os.dup2(fd, n)
        if fd not in wanted:
            os.close(fd)
        return wanted

    def body(fds: list[int]) -> Any:
        return [errno_of(os.fstat, fd) for fd in fds]

    # Kept out of order, with a duplicate, a stdio number and a negative one.
    assert sandboxed(body, setup=setup, keep=[241, 211, 211, 2, -5, 212]) == [
        errno.EBADF,
        0,
        0,
        errno.EBADF,
        0,
    ]
