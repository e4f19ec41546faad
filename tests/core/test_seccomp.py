"""seccomp.c, installed: metadata changes, new processes, the calls denied outright,
other ABIs, socket families and terminal ioctls fail with EPERM (where the kernel
alone would answer otherwise), and the filter installs through prctl where seccomp()
is missing."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import signal
import socket
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.sandboxed_child import (
    LIBC,
    PR_GET_SECCOMP,
    PY_READ,
    errno_of,
    fake_errno,
    needs_landlock,
    raw,
    sandboxed,
)
from support.syscalls import MACHINE, NR

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


CLONE_VM = 0x100
CLONE_FS = 0x200
CLONE_SIGHAND = 0x800
CLONE_THREAD = 0x10000
CLONE_NEWNS = 0x20000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
ADDR_NO_RANDOMIZE = 0x0040000

AF_NETLINK = 16
AF_PACKET = 17
TIOCLINUX = 0x541C
X32_SYSCALL_BIT = 0x40000000


@needs_landlock
def test_seccomp_falls_back_to_prctl_without_seccomp_syscall() -> None:
    def body(_: Any) -> Any:
        return [LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0), -raw("bpf", 9999, None, 0)]

    assert sandboxed(body, setup=lambda: fake_errno({"seccomp": errno.ENOSYS})) == [
        2,
        errno.EPERM,
    ]


@needs_landlock
def test_metadata_changes_are_denied(tree: Path) -> None:
    target = tree / "ro" / "f.txt"
    mode = target.stat().st_mode

    def body(_: Any) -> Any:
        fd = os.open(target, os.O_RDONLY)
        return {
            "chmod": errno_of(os.chmod, target, 0o777),
            "fchmod": errno_of(os.fchmod, fd, 0o777),
            "fchmodat": -raw("fchmodat", -100, os.fsencode(target), 0o777),
            "fchmodat2": -raw("fchmodat2", -100, os.fsencode(target), 0o777, 0),
            "chown": errno_of(os.chown, target, -1, -1),
            "fchown": errno_of(os.fchown, fd, -1, -1),
            "fchownat": -raw("fchownat", -100, os.fsencode(target), -1, -1, 0),
            "setxattr": errno_of(os.setxattr, target, "user.pynox", b"1"),
            "fsetxattr": errno_of(os.setxattr, fd, "user.pynox", b"1"),
            "removexattr": errno_of(os.removexattr, target, "user.pynox"),
            "setxattrat": -raw("setxattrat", -100, os.fsencode(target), 0, b"user.x", None, 0),
            "removexattrat": -raw("removexattrat", -100, os.fsencode(target), 0, b"user.x"),
            "utime": errno_of(os.utime, target, (0, 0)),
            "utime_now": errno_of(os.utime, target),
        }

    result = sandboxed(body, read=[tree / "ro"])
    assert result == dict.fromkeys(result, errno.EPERM)
    assert target.stat().st_mode == mode
    assert target.stat().st_mtime > 0


@needs_landlock
def test_times_are_refused_through_descriptors_too(tree: Path) -> None:
    """A file's owner may set its times through any descriptor of it, one opened for
    reading included: futimens is refused as utime is."""
    targets = {"read": tree / "ro" / "f.txt", "write": tree / "rw" / "f.txt"}
    before = {name: path.stat().st_mtime_ns for name, path in targets.items()}

    def body(_: Any) -> Any:
        descriptors = {
            "read": os.open(targets["read"], os.O_RDONLY),
            "write": os.open(targets["write"], os.O_WRONLY),
        }
        return {
            f"{how}-{name}": change(fd)
            for name, fd in descriptors.items()
            for how, change in (
                ("times", lambda fd: errno_of(os.utime, fd, (1000, 1000))),
                ("now", lambda fd: -raw("utimensat", fd, None, None, 0)),
            )
        }

    result = sandboxed(body, read=[tree / "ro", tree / "rw"], write=[tree / "rw"])
    assert result == dict.fromkeys(result, errno.EPERM)
    assert {name: path.stat().st_mtime_ns for name, path in targets.items()} == before


@needs_landlock
def test_leases_are_refused(tree: Path) -> None:
    """A read lease on a granted file would make its writers, outside too, wait for the
    program (fs.lease-break-time, 45 s by default)."""
    target = tree / "ro" / "f.txt"

    def body(_: Any) -> Any:
        fd = os.open(target, os.O_RDONLY)
        return [
            errno_of(fcntl.fcntl, fd, fcntl.F_SETLEASE, fcntl.F_RDLCK),
            fcntl.fcntl(fd, fcntl.F_GETLEASE),
        ]

    assert sandboxed(body, read=[tree / "ro"]) == [errno.EPERM, fcntl.F_UNLCK]


@needs_landlock
def test_execve_is_denied() -> None:
    def body(_: Any) -> Any:
        return [
            errno_of(os.execv, sys.executable, [sys.executable, "-c", "pass"]),
            -raw("execveat", -100, os.fsencode(sys.executable), None, None, 0),
        ]

    # Landlock alone would say EACCES (no EXECUTE right): EPERM is seccomp.
    assert sandboxed(body, read=PY_READ) == [errno.EPERM, errno.EPERM]


@needs_landlock
def test_fork_is_denied() -> None:
    def body(_: Any) -> Any:
        try:
            pid = os.fork()
        except OSError as exc:
            return exc.errno
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return 0

    assert sandboxed(body) == errno.EPERM


@pytest.mark.skipif(NR["fork"] is None, reason="no fork system call on this architecture")
@needs_landlock
def test_raw_fork_is_denied() -> None:
    def body(_: Any) -> Any:
        result = raw("fork")
        if result == 0:
            os._exit(0)
        return -result if result < 0 else 0

    assert sandboxed(body) == errno.EPERM


@needs_landlock
def test_subprocess_and_posix_spawn_are_denied() -> None:
    def body(_: Any) -> Any:
        return [
            errno_of(subprocess.run, [sys.executable, "-c", "pass"]),
            errno_of(os.posix_spawn, sys.executable, [sys.executable, "-c", "pass"], {}),
        ]

    assert sandboxed(body, read=PY_READ) == [errno.EPERM, errno.EPERM]


@needs_landlock
def test_clone_with_namespace_flags_is_denied() -> None:
    # Each flag set is also invalid for the kernel (EINVAL), so nothing can
    # start even if the filter let it through.
    def body(_: Any) -> Any:
        return [
            -raw("clone", CLONE_NEWUSER | CLONE_THREAD, 0, 0, 0, 0),
            -raw("clone", CLONE_NEWUSER | CLONE_FS | signal.SIGCHLD, 0, 0, 0, 0),
            -raw("clone", CLONE_NEWNET | CLONE_THREAD, 0, 0, 0, 0),
            -raw("clone", CLONE_NEWNS | CLONE_FS | CLONE_THREAD, 0, 0, 0, 0),
        ]

    assert sandboxed(body) == [errno.EPERM] * 4


@needs_landlock
def test_clone3_says_enosys() -> None:
    assert sandboxed(lambda _: -raw("clone3", None, 0)) == errno.ENOSYS


@needs_landlock
def test_threads_work() -> None:
    def body(_: Any) -> Any:
        results: list[int] = []
        threads = [threading.Thread(target=lambda i=i: results.append(i * i)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(results)

    assert sandboxed(body) == [0, 1, 4, 9]


# Denied outright: (name, arguments). Where it can be arranged, the arguments
# make the unfiltered kernel answer something other than EPERM (EINVAL,
# EBADF, EFAULT, ENOENT, or success), so only the filter explains EPERM. For
# pivot_root, move_mount, fsopen, fsmount, fspick, reboot, swapon, swapoff,
# sethostname, setdomainname, syslog and acct the kernel checks a capability first,
# so without capabilities it says EPERM too: there the test covers both layers.
MISSING = b"/nonexistent-pynox-path"  # ENOENT for the kernel
DENIED_RAW = [
    ("unshare", (0,)),
    ("setns", (-1, 0)),
    ("ptrace", (0, 0, 0, 0)),  # PTRACE_TRACEME
    ("process_vm_readv", ("self", 0, 0, 0, 0, 0)),
    ("process_vm_writev", ("self", 0, 0, 0, 0, 0)),
    ("kcmp", ("self", "self", 0, 0, 0)),
    ("pidfd_getfd", (-1, 0, 0)),
    ("pidfd_send_signal", (-1, 0, None, 0)),
    ("process_madvise", (-1, None, 0, 0, 0)),
    ("mount", (b"none", b"/", 1, 0, None)),
    ("umount2", (b"/", 0xFFFF)),
    ("pivot_root", (None, None)),
    ("chroot", (None,)),
    ("move_mount", (-1, None, -1, None, 0xFFFF)),
    ("open_tree", (-1, None, 0xFFFF)),
    ("fsopen", (None, 0xFFFF)),
    ("fsconfig", (-1, 0, None, None, 0)),
    ("fsmount", (-1, 0, 0)),
    ("fspick", (-1, None, 0xFFFF)),
    ("mount_setattr", (-1, None, 0xFFFF, None, 0)),
    ("statmount", (None, None, 0, 0)),
    ("listmount", (None, None, 0, 0)),
    ("bpf", (9999, None, 0)),
    ("perf_event_open", (None, 0, -1, -1, 0xFFFF)),
    ("keyctl", (9999, 0, 0, 0, 0)),
    ("add_key", (None, None, None, 0, 0)),
    ("request_key", (None, None, None, 0)),
    ("userfaultfd", (1,)),  # UFFD_USER_MODE_ONLY
    ("io_uring_setup", (0, None)),
    ("io_uring_enter", (-1, 0, 0, 0, None, 0)),
    ("io_uring_register", (-1, 0, None, 0)),
    ("io_setup", (1, None)),  # allowed, EFAULT: no place to put the context
    ("kexec_load", (0, 0, None, 0xFFFFFFFF)),
    ("kexec_file_load", (-1, -1, 0, None, 0xFFFFFFFF)),
    ("open_by_handle_at", (-1, None, 0)),
    ("name_to_handle_at", (-1, None, None, None, 0xFFFF)),
    ("init_module", (None, 0, None)),
    ("finit_module", (-1, None, 0xFFFF)),
    ("delete_module", (None, 0)),
    ("reboot", (0, 0, 0, None)),  # bad magic: EINVAL even with CAP_SYS_BOOT
    ("swapon", (None, 0)),
    ("swapoff", (None,)),
    ("quotactl", (0, None, 0, None)),
    ("quotactl_fd", (-1, 0, 0, None)),
    ("iopl", (0,)),
    ("ioperm", (0, 0, 0)),
    ("settimeofday", (1, None)),  # unreadable pointer: EFAULT
    ("clock_settime", (9999, None)),
    ("clock_adjtime", (9999, None)),
    ("adjtimex", (None,)),
    ("sethostname", (None, 100000)),
    ("setdomainname", (None, 100000)),
    ("fanotify_init", (0x200, 0)),  # FAN_REPORT_FID: allowed unprivileged
    ("syslog", (9999, None, 0)),
    ("tkill", ("self", 0)),
    ("shmget", (0x70796E6F, 0, 0)),  # no IPC_CREAT: ENOENT
    ("msgget", (0x70796E6F, 0)),
    ("semget", (0x70796E6F, 0, 0)),
    ("mq_open", (None, 0, 0, None)),
    ("mq_unlink", (None,)),
    ("personality", (ADDR_NO_RANDOMIZE,)),
    ("acct", (None,)),
    ("lookup_dcookie", (0, None, 0)),
    ("uselib", (None,)),
    ("modify_ldt", (0, None, 0)),  # reading the table: allowed by the kernel
    ("shmat", (-1, None, 0)),
    ("shmdt", (None,)),
    ("shmctl", (-1, 0, None)),
    ("msgsnd", (-1, None, 0, 0)),
    ("msgrcv", (-1, None, 0, 0, 0)),
    ("msgctl", (-1, 0, None)),
    ("semop", (-1, None, 0)),
    ("semctl", (-1, 0, 0, 0)),
    ("semtimedop", (-1, None, 0, None)),
    ("mq_timedsend", (-1, None, 0, 0, None)),
    ("mq_timedreceive", (-1, None, 0, None, None)),
    ("mq_notify", (-1, None)),
    ("mq_getsetattr", (-1, None, None)),
    ("chmod", (MISSING, 0o755)),
    ("chown", (MISSING, -1, -1)),
    ("lchown", (MISSING, -1, -1)),
    ("fchmod", (-1, 0o755)),
    ("fchown", (-1, -1, -1)),
    ("utime", (MISSING, None)),
    ("utimes", (MISSING, None)),
    ("futimesat", (-100, MISSING, None)),
    ("lsetxattr", (MISSING, b"user.x", None, 0, 0)),
    ("fsetxattr", (-1, b"user.x", None, 0, 0)),
    ("getxattr", (MISSING, b"user.x", None, 0)),
    ("lgetxattr", (MISSING, b"user.x", None, 0)),
    ("listxattr", (MISSING, None, 0)),
    ("llistxattr", (MISSING, None, 0)),
    ("getxattrat", (-100, MISSING, 0, b"user.x", None, 0)),
    ("listxattrat", (-100, MISSING, 0, None, 0)),
    ("lremovexattr", (MISSING, b"user.x")),
    ("fremovexattr", (-1, b"user.x")),
    ("open_tree_attr", (-1, None, 0xFFFF, None, 0)),
    ("file_setattr", (-1, None, None, 0, 0)),
]


@needs_landlock
@pytest.mark.parametrize(("name", "args"), DENIED_RAW, ids=[d[0] for d in DENIED_RAW])
def test_raw_syscall_is_denied(name: str, args: tuple[Any, ...]) -> None:
    if NR[name] is None:
        pytest.skip(f"{name} does not exist on {MACHINE}")

    def body(_: Any) -> Any:
        real = [os.getpid() if a == "self" else a for a in args]
        return -raw(name, *real)

    assert sandboxed(body) == errno.EPERM


@needs_landlock
def test_personality_query_is_allowed() -> None:
    def body(_: Any) -> Any:
        current = raw("personality", 0xFFFFFFFF)
        return [current >= 0, -raw("personality", current)]

    assert sandboxed(body) == [True, errno.EPERM]


@pytest.mark.skipif(MACHINE != "x86_64", reason="x32 and i386 exist only on x86_64")
@needs_landlock
def test_x32_and_i386_calls_are_denied() -> None:
    def body(_: Any) -> Any:
        return -raw(NR["getpid"] | X32_SYSCALL_BIT)

    assert sandboxed(body) == errno.EPERM


def _int80_getpid() -> Callable[[], int]:
    # mov eax, 20 (i386 getpid); int 0x80; ret
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(address)
    fn.page = page  # type: ignore[attr-defined]  # keep the mapping alive
    return fn


@pytest.mark.skipif(MACHINE != "x86_64", reason="int 0x80 exists only on x86_64")
@needs_landlock
def test_i386_int80_is_denied() -> None:
    # Only where the kernel runs i386 code at all: try it unsandboxed first.
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if _int80_getpid()() == os.getpid() else 1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        pytest.skip("this kernel does not run i386 system calls")
    assert sandboxed(lambda _: _int80_getpid()()) == -errno.EPERM


@needs_landlock
def test_sockets_without_network() -> None:
    def body(_: Any) -> Any:
        pair = socket.socketpair()
        pair[0].sendall(b"ping")
        echoed = pair[1].recv(4).decode()
        return {
            "socketpair": echoed,
            "unix": errno_of(socket.socket, socket.AF_UNIX, socket.SOCK_STREAM),
            "unix_dgram": errno_of(socket.socket, socket.AF_UNIX, socket.SOCK_DGRAM),
            "netlink": errno_of(socket.socket, AF_NETLINK, socket.SOCK_RAW, 0),
            "packet": errno_of(socket.socket, AF_PACKET, socket.SOCK_RAW, 0),
            # An invalid type: EINVAL for the kernel, EPERM only from the filter.
            "packet_bad_type": errno_of(socket.socket, AF_PACKET, 9999, 0),
            "inet": errno_of(socket.socket, socket.AF_INET, socket.SOCK_STREAM),
            "inet_udp": errno_of(socket.socket, socket.AF_INET, socket.SOCK_DGRAM),
            "inet6": errno_of(socket.socket, socket.AF_INET6, socket.SOCK_STREAM),
            # The kernel makes a TCP socket before it says EOPNOTSUPP: another family's
            # code runs (vsock's, TIPC's) unless the filter stops the call first.
            "inet_pair": errno_of(socket.socketpair, socket.AF_INET, socket.SOCK_STREAM),
        }

    assert sandboxed(body) == {
        "socketpair": "ping",
        "unix": errno.EPERM,
        "unix_dgram": errno.EPERM,
        "netlink": errno.EPERM,
        "packet": errno.EPERM,
        "packet_bad_type": errno.EPERM,
        "inet": errno.EACCES,
        "inet_udp": errno.EACCES,
        "inet6": errno.EACCES,
        "inet_pair": errno.EPERM,
    }


@needs_landlock
def test_inet_with_network() -> None:
    def body(_: Any) -> Any:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.connect(server.getsockname())
        conn, _ = server.accept()
        client.sendall(b"hello")
        return [
            conn.recv(5).decode(),
            errno_of(socket.socket, socket.AF_UNIX),
            errno_of(socket.socketpair, socket.AF_INET, socket.SOCK_STREAM),
        ]

    assert sandboxed(body, allow_network=1) == ["hello", errno.EPERM, errno.EPERM]


def _take_pty_as_controlling_terminal() -> dict[str, int]:
    # Before the sandbox: a new session whose controlling terminal is a pty,
    # so that TIOCSTI would work for the kernel (legacy_tiocsti) or say EIO.
    master, slave = os.openpty()
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    return {"master": master, "slave": slave}


@needs_landlock
def test_terminal_injection_ioctls_are_denied() -> None:
    def body(ctx: dict[str, int]) -> Any:
        slave = ctx["slave"]
        return {
            "TIOCSTI": errno_of(fcntl.ioctl, slave, termios.TIOCSTI, b"x"),
            "TIOCSCTTY": errno_of(fcntl.ioctl, slave, termios.TIOCSCTTY, 0),
            "TIOCLINUX": errno_of(fcntl.ioctl, slave, TIOCLINUX, b"\x00" * 8),
            # Ordinary terminal ioctls still work on the already-open pty.
            "tcgetattr": errno_of(termios.tcgetattr, slave),
        }

    result = sandboxed(
        body,
        setup=_take_pty_as_controlling_terminal,
        policy_from=lambda ctx: {"keep": [ctx["master"], ctx["slave"]]},
    )
    assert result == {
        "TIOCSTI": errno.EPERM,
        "TIOCSCTTY": errno.EPERM,
        "TIOCLINUX": errno.EPERM,
        "tcgetattr": 0,
    }


FIGETBSZ = 2  # _IO(0, 2): the file system's block size
SIOCGIFCONF = 0x8912  # the host's network interfaces and their addresses
IFCONF_SIZE = 16  # struct ifconf: a length, then a pointer (NULL: "how much room?")
FS_IOC_GETFLAGS = 0x80086601


def _ioctls_programs_use(ctx: dict[str, int]) -> dict[str, int]:
    """The ioctls Python and common packages make on a terminal, a pipe, a socket and a
    file: 0 for each that worked."""
    slave, pipe_r, pipe_w, file_fd = ctx["slave"], ctx["pipe_r"], ctx["pipe_w"], ctx["file"]
    attributes = termios.tcgetattr(slave)
    left, _ = socket.socketpair()
    return {
        "isatty": 0 if os.isatty(slave) else -1,
        "tcgetattr": errno_of(termios.tcgetattr, slave),
        "tcsetattr-now": errno_of(termios.tcsetattr, slave, termios.TCSANOW, attributes),
        "tcsetattr-drain": errno_of(termios.tcsetattr, slave, termios.TCSADRAIN, attributes),
        "tcsetattr-flush": errno_of(termios.tcsetattr, slave, termios.TCSAFLUSH, attributes),
        "tcdrain": errno_of(termios.tcdrain, slave),
        "tcflush": errno_of(termios.tcflush, slave, termios.TCIFLUSH),
        "tcgetpgrp": errno_of(os.tcgetpgrp, slave),
        "terminal-size": errno_of(os.get_terminal_size, slave),
        "outq": errno_of(fcntl.ioctl, slave, termios.TIOCOUTQ, bytes(4)),
        "fionread-pipe": errno_of(fcntl.ioctl, pipe_r, termios.FIONREAD, bytes(4)),
        "set-inheritable": errno_of(os.set_inheritable, pipe_w, True),
        "socket-nonblocking": errno_of(left.setblocking, False),
        "getflags": errno_of(fcntl.ioctl, file_fd, FS_IOC_GETFLAGS, bytes(8)),
    }


def _terminal_pipe_and_file(path: Path) -> dict[str, int]:
    """Before the sandbox: a pty that is the process's controlling terminal, a pipe with
    bytes waiting and a granted file, opened."""
    ctx = _take_pty_as_controlling_terminal()
    pipe_r, pipe_w = os.pipe()
    os.write(pipe_w, b"waiting")
    return {**ctx, "pipe_r": pipe_r, "pipe_w": pipe_w, "file": os.open(path, os.O_RDONLY)}


@needs_landlock
def test_the_ioctls_programs_make_still_work(tree: Path) -> None:
    """ioctl is an allowlist: what the interpreter and its packages ask of a terminal, a
    pipe, a socket or a file passes it."""
    target = tree / "ro" / "f.txt"
    result = sandboxed(
        _ioctls_programs_use,
        setup=lambda: _terminal_pipe_and_file(target),
        policy_from=lambda ctx: {"keep": list(ctx.values())},
        read=[tree / "ro"],
    )
    assert result == dict.fromkeys(result, 0)


def _other_ioctls(path: Path) -> dict[str, int]:
    left, _ = socket.socketpair()
    fd = os.open(path, os.O_RDONLY)
    try:
        return {
            "block-size": errno_of(fcntl.ioctl, fd, FIGETBSZ, bytes(4)),
            "interfaces": errno_of(fcntl.ioctl, left.fileno(), SIOCGIFCONF, bytes(IFCONF_SIZE)),
        }
    finally:
        os.close(fd)


@needs_landlock
def test_ioctls_outside_the_allowlist_fail_as_unsupported(tree: Path) -> None:
    """Requests the kernel alone answers (the block size of a granted file; the host's
    network interfaces, through a Unix socket) fail with ENOTTY under the filter."""
    target = tree / "ro" / "f.txt"
    assert _other_ioctls(target) == {"block-size": 0, "interfaces": 0}
    result = sandboxed(lambda _: _other_ioctls(target), read=[tree / "ro"])
    assert result == {"block-size": errno.ENOTTY, "interfaces": errno.ENOTTY}
