"""Descriptors the pool server opens for its children (pynox.pool.server)."""

import contextlib
import fcntl
import os
import socket


def report_socket() -> "tuple[int, int]":
    """The server's and the child's ends of a child's report: a socket, not a pipe. A
    program may open /proc/self/fd/N for any descriptor it holds, and the kernel gives it
    a new end of a pipe, read end included (Landlock governs no pipe): it read its
    confinement marker back out of a report pipe before the server had, then reported a
    failed sandbox of its own making. What is written to a socket is gone from the
    writer's reach, and a socket cannot be opened that way."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.shutdown(socket.SHUT_WR)
    theirs.shutdown(socket.SHUT_RD)
    return ours.detach(), theirs.detach()


def resize_pipe(fd: int, size: int) -> None:
    """Asks for a pipe of `size` bytes; where the kernel refuses, it stays as it is."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)


def duplicate(fd: "int | None") -> "int | None":
    """A descriptor of its own for the same file; None if there is none or no room for it."""
    if fd is None:
        return None
    try:
        return os.dup(fd)
    except OSError:
        return None


def close_all(fds: list[int]) -> None:
    """Closes every descriptor of fds, and empties it."""
    while fds:
        os.close(fds.pop())


def passing_refused() -> bool:
    """Whether the kernel refuses to pass a descriptor over a Unix socket now
    (ETOOMANYREFS): this user's descriptors in flight are past its bound, the limit on
    open files, where any process of the user may keep them. The zygote then cannot
    pass the server a new child's pidfd, nor the server pass it a child's pipes."""
    import array
    import errno

    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return False
    with ours, theirs:
        # ours in theirs's queue: closing theirs takes it out again (no cycle to collect).
        passed = array.array("i", [ours.fileno()])
        try:
            ours.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, passed)])
        except OSError as exc:
            return exc.errno == errno.ETOOMANYREFS
    return False
