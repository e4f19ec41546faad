"""Tests of the sandbox core through its cffi binding (pynox._core).

Every test forks a child that applies a policy with pynox_sandbox_apply() and
then tries something; the child sends a JSON report back over a pipe and the
parent asserts on it. Attempts are chosen so that, where possible, the kernel
would answer differently without the layer under test (for example bpf() with
an unknown command gives EINVAL unfiltered and EPERM filtered), so each test
can fail.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import fcntl
import json
import mmap
import os
import platform
import resource
import select
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import sysconfig
import termios
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pynox._core import ffi, lib

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

# System-call numbers of the two supported targets (x86_64: asm/unistd_64.h;
# aarch64: the generic table). None: the call does not exist there.
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "getpid": (39, 172),
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, None),
    "execveat": (322, 281),
    "unshare": (272, 97),
    "setns": (308, 268),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "process_madvise": (440, 440),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "iopl": (172, None),
    "ioperm": (173, None),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "fanotify_init": (300, 262),
    "syslog": (103, 116),
    "tkill": (200, 130),
    "shmget": (29, 194),
    "msgget": (68, 186),
    "semget": (64, 190),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    "personality": (135, 92),
    "kill": (62, 129),
    "tgkill": (234, 131),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "fchownat": (260, 54),
    "setxattr": (188, 5),
    "removexattr": (197, 14),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
    "utimensat": (280, 88),
    "seccomp": (317, 277),
    "close_range": (436, 436),
    "landlock_create_ruleset": (444, 444),
    "acct": (163, 89),
    "lookup_dcookie": (212, 18),
    "uselib": (134, None),
    "shmat": (30, 196),
    "shmdt": (67, 197),
    "shmctl": (31, 195),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184),
    "mq_getsetattr": (245, 185),
    "chmod": (90, None),
    "chown": (92, None),
    "lchown": (94, None),
    "fchmod": (91, 52),
    "fchown": (93, 55),
    "utime": (132, None),
    "utimes": (235, None),
    "futimesat": (261, None),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "open_tree_attr": (467, 467),
    "file_setattr": (469, 469),
}
_MACHINE = platform.machine()
if _MACHINE not in ("x86_64", "aarch64"):
    pytest.skip(f"no syscall table for {_MACHINE}", allow_module_level=True)
NR = {name: pair[0 if _MACHINE == "x86_64" else 1] for name, pair in _NUMBERS.items()}

CLONE_VM = 0x100
CLONE_FS = 0x200
CLONE_SIGHAND = 0x800
CLONE_THREAD = 0x10000
CLONE_NEWNS = 0x20000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
ADDR_NO_RANDOMIZE = 0x0040000
PR_GET_SECCOMP = 21
PR_GET_NO_NEW_PRIVS = 39
AF_NETLINK = 16
AF_PACKET = 17
TIOCLINUX = 0x541C
X32_SYSCALL_BIT = 0x40000000

# The interpreter's own library directories, for children that import lazily.
PY_READ = sorted(
    {
        os.path.dirname(os.__file__),
        sysconfig.get_paths()["platstdlib"],
        sysconfig.get_config_var("DESTSHARED") or os.path.dirname(os.__file__),
    }
)


def landlock_abi() -> int:
    probe = ffi.new("struct pynox_probe *")
    lib.pynox_probe_kernel(probe)
    return int(probe.landlock_abi)


def raw(name: str | int, *args: int | bytes | None) -> int:
    """A raw system call: its result, or -errno."""
    nr = NR[name] if isinstance(name, str) else name
    if nr is None:  # callers skip such tests in the parent
        raise ValueError(f"{name} does not exist on {_MACHINE}")
    cargs: list[Any] = []
    for arg in args:
        if arg is None:
            cargs.append(ctypes.c_void_p(None))
        elif isinstance(arg, bytes):
            cargs.append(ctypes.c_char_p(arg))
        else:
            cargs.append(ctypes.c_long(arg))
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(nr), *cargs)
    return int(result) if result >= 0 else -ctypes.get_errno()


def errno_of(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """0 when fn succeeds, else the errno of the OSError it raised."""
    try:
        fn(*args, **kwargs)
    except OSError as exc:
        return int(exc.errno or -1)
    except termios.error as exc:  # not an OSError subclass
        return int(exc.args[0])
    return 0


def read_file(path: str | Path) -> str:
    with open(path) as f:
        return f.read()


def write_file(path: str | Path, text: str = "x") -> None:
    with open(path, "w") as f:
        f.write(text)


def make_policy(
    read: Iterable[str | Path] = (),
    write: Iterable[str | Path] = (),
    keep: Iterable[int] = (),
    allow_network: int = 0,
    memory_bytes: int = 0,
    max_file_size: int = 0,
    new_session: int = 0,
    parent_pid: int = 0,
) -> tuple[Any, list[Any]]:
    """A policy and the cffi buffers it points into (keep both alive)."""
    refs: list[Any] = []

    def paths(items: Iterable[str | Path]) -> tuple[Any, int]:
        bufs = [ffi.new("char[]", os.fsencode(str(p))) for p in items]
        if not bufs:
            return ffi.NULL, 0
        array = ffi.new("const char *[]", bufs)
        refs.extend(bufs)
        refs.append(array)
        return array, len(bufs)

    policy = ffi.new("struct pynox_policy *")
    refs.append(policy)
    policy.read_paths, policy.read_count = paths(read)
    policy.write_paths, policy.write_count = paths(write)
    fds = list(keep)
    if fds:
        keep_array = ffi.new("int[]", fds)
        refs.append(keep_array)
        policy.keep_fds, policy.keep_fd_count = keep_array, len(fds)
    policy.allow_network = allow_network
    policy.memory_bytes = memory_bytes
    policy.max_file_size = max_file_size
    policy.new_session = new_session
    policy.parent_pid = parent_pid
    return policy, refs


# How the child confines itself: in one call, as the command does, or in the two
# halves a pool's spare uses (pynox_sandbox_prepare while it waits, then
# pynox_sandbox_finish). Every test runs both ways (see `confinement`).
TWO_STEPS = False


def apply(policy: Any) -> tuple[int, str]:
    err = ffi.new("char[]", 512)
    # The reads, the descriptors and the process settings in one half (what the
    # interpreter needs); the writes, the network and the limits in the other.
    base = ffi.new("struct pynox_policy *")
    base.read_paths, base.read_count = policy.read_paths, policy.read_count
    base.keep_fds, base.keep_fd_count = policy.keep_fds, policy.keep_fd_count
    base.new_session, base.parent_pid = policy.new_session, policy.parent_pid
    own = ffi.new("struct pynox_policy *")
    own.write_paths, own.write_count = policy.write_paths, policy.write_count
    own.allow_network = policy.allow_network
    own.memory_bytes, own.max_file_size = policy.memory_bytes, policy.max_file_size
    if not TWO_STEPS:
        rc = lib.pynox_sandbox_apply(base, own, err, len(err))
        return int(rc), ffi.string(err).decode()
    prepared = ffi.new("struct pynox_prepared *")
    rc = lib.pynox_sandbox_prepare(base, prepared, err, len(err))
    if rc == 0:
        rc = lib.pynox_sandbox_finish(prepared, base, own, err, len(err))
    return int(rc), ffi.string(err).decode()


@pytest.fixture(autouse=True, params=["one-call", "two-steps"])
def confinement(request: pytest.FixtureRequest) -> Iterator[str]:
    global TWO_STEPS
    TWO_STEPS = request.param == "two-steps"
    yield request.param
    TWO_STEPS = False


def run_sandboxed(
    body: Callable[[Any], Any],
    *,
    setup: Callable[[], Any] | None = None,
    policy_from: Callable[[Any], dict[str, Any]] | None = None,
    keep: Iterable[int] = (),
    timeout: float = 60.0,
    **policy_kwargs: Any,
) -> dict[str, Any]:
    """Forks; the child runs ctx = setup(), applies the policy (policy_kwargs,
    updated with policy_from(ctx)), runs body(ctx) and reports {"applied",
    "rc", "error", "value"} as JSON. Fails the test on a crash."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        report: dict[str, Any]
        try:
            os.close(r)
            ctx = setup() if setup is not None else None
            kwargs = dict(policy_kwargs, keep=[w, *keep])
            if policy_from is not None:
                extra = policy_from(ctx)
                kwargs["keep"] += list(extra.pop("keep", ()))
                kwargs.update(extra)
            policy, refs = make_policy(**kwargs)
            rc, message = apply(policy)
            del refs
            report = {"applied": rc == 0, "rc": rc, "error": message}
            if rc == 0:
                report["value"] = body(ctx)
        except BaseException:  # report everything, even SystemExit
            report = {"crash": traceback.format_exc()}
        try:
            os.write(w, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError("the sandboxed child timed out")
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    assert chunks, f"the child died without a report (wait status {status:#x})"
    report = json.loads(b"".join(chunks))
    assert "crash" not in report, report["crash"]
    return report


def in_child(body: Callable[[int], str]) -> str:
    """Runs body(write_fd) in a forked child; what it returns comes back as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, body(w).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


def sandboxed(body: Callable[[Any], Any], **kwargs: Any) -> Any:
    """Like run_sandboxed, but the policy must apply; returns body's value."""
    report = run_sandboxed(body, **kwargs)
    assert report["applied"], report["error"]
    return report["value"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/{ro,rw,wo,other}/ each with a file f.txt."""
    for name in ("ro", "rw", "wo", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text(name)
    return tmp_path


# --------------------------------------------------------------------------
# The probe


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


needs_landlock = pytest.mark.skipif(
    landlock_abi() < 3, reason="the sandbox needs Landlock ABI 3 (Linux 6.2)"
)


def test_old_or_missing_landlock_fails_with_a_reason() -> None:
    if landlock_abi() >= 3:
        pytest.skip("this kernel's Landlock is new enough")
    report = run_sandboxed(lambda _: None)
    assert not report["applied"]
    assert "Landlock" in report["error"] and "--no-sandbox" in report["error"]


def fake_errno(answers: dict[str, int]) -> None:
    """Makes this process's system calls in `answers` fail with that errno, to
    play an older kernel: a seccomp filter installed before the sandbox."""

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    ld_nr, jeq, ret = 0x20, 0x15, 0x06
    insns = [SockFilter(ld_nr, 0, 0, 0)]
    for name, err in answers.items():
        insns.append(SockFilter(jeq, 0, 1, NR[name]))
        insns.append(SockFilter(ret, 0, 0, 0x00050000 | err))
    insns.append(SockFilter(ret, 0, 0, 0x7FFF0000))
    array = (SockFilter * len(insns))(*insns)
    prog = SockFprog(len(insns), array)
    assert LIBC.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert LIBC.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (errno.ENOSYS, "this kernel has no Landlock"),
        (errno.EOPNOTSUPP, "Landlock is disabled in this kernel"),
    ],
)
def test_kernel_without_landlock_fails_with_a_reason(answer: int, words: str) -> None:
    report = run_sandboxed(
        lambda _: None, setup=lambda: fake_errno({"landlock_create_ruleset": answer})
    )
    assert report["rc"] == -1
    assert report["error"].startswith(words)
    assert "Linux 6.2 or newer with Landlock enabled" in report["error"]
    assert report["error"].endswith("--no-sandbox runs without it")


@needs_landlock
def test_seccomp_falls_back_to_prctl_without_seccomp_syscall() -> None:
    def body(_: Any) -> Any:
        return [LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0), -raw("bpf", 9999, None, 0)]

    assert sandboxed(body, setup=lambda: fake_errno({"seccomp": errno.ENOSYS})) == [
        2,
        errno.EPERM,
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


# --------------------------------------------------------------------------
# Failing closed


@needs_landlock
def test_nonexistent_path_fails_and_nothing_is_confined(tree: Path) -> None:
    missing = tree / "missing"

    def body(_: Any) -> Any:  # never runs
        return None

    report = run_sandboxed(body, read=[tree / "ro", missing])
    assert report["rc"] == -1 and not report["applied"]
    assert str(missing) in report["error"]
    assert "No such file or directory" in report["error"]


@needs_landlock
def test_failed_apply_installs_neither_landlock_nor_seccomp(tree: Path, confinement: str) -> None:
    if confinement == "two-steps":
        pytest.skip("the first half installs seccomp by design; the pool then refuses the run")

    def child(w: int) -> str:
        policy, refs = make_policy(read=[tree / "missing"], keep=[w])
        rc, message = apply(policy)
        return json.dumps(
            {
                "rc": rc,
                "message": message,
                "seccomp": LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0),
                "read_other": read_file(tree / "other" / "f.txt"),
            }
        )

    data = in_child(child)
    result = json.loads(data)
    assert result["rc"] == -1 and "missing" in result["message"]
    # The caller must refuse to run; the layers that make it safe were not applied.
    assert result["seccomp"] == 0
    assert result["read_other"] == "other"


@needs_landlock
def test_null_path_fails(tree: Path) -> None:
    def child() -> None:
        policy, refs = make_policy(read=[tree / "ro"])
        policy.read_paths[0] = ffi.NULL
        rc, message = apply(policy)
        os._exit(0 if rc == -1 and "NULL" in message else 1)

    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


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


# --------------------------------------------------------------------------
# Landlock: files


@needs_landlock
def test_granted_reads_work(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [read_file(tree / "ro" / "f.txt"), sorted(os.listdir(tree / "ro"))]

    assert sandboxed(body, read=[tree / "ro"]) == ["ro", ["f.txt"]]


@needs_landlock
def test_granted_single_file_read(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [
            read_file(tree / "ro" / "f.txt"),
            errno_of(os.listdir, tree / "ro"),
            errno_of(write_file, tree / "ro" / "f.txt"),
        ]

    assert sandboxed(body, read=[tree / "ro" / "f.txt"]) == ["ro", errno.EACCES, errno.EACCES]


@needs_landlock
def test_ungranted_read_is_denied(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [errno_of(read_file, tree / "other" / "f.txt"), errno_of(os.listdir, tree / "other")]

    assert sandboxed(body, read=[tree / "ro"]) == [errno.EACCES, errno.EACCES]


@needs_landlock
def test_read_only_dir_cannot_be_written(tree: Path) -> None:
    ro = tree / "ro"

    def body(_: Any) -> Any:
        return {
            "create": errno_of(write_file, ro / "new.txt"),
            "overwrite": errno_of(write_file, ro / "f.txt"),
            "append": errno_of(lambda: open(ro / "f.txt", "a").close()),
            "truncate": errno_of(os.truncate, ro / "f.txt", 0),
            "unlink": errno_of(os.unlink, ro / "f.txt"),
            "mkdir": errno_of(os.mkdir, ro / "d"),
            "symlink": errno_of(os.symlink, "f.txt", ro / "l"),
        }

    result = sandboxed(body, read=[ro])
    assert result == dict.fromkeys(result, errno.EACCES)
    assert (ro / "f.txt").read_text() == "ro"


@needs_landlock
def test_write_only_dir_cannot_be_read(tree: Path) -> None:
    wo = tree / "wo"

    def body(_: Any) -> Any:
        write_file(wo / "new.txt", "written")
        return {
            "read": errno_of(read_file, wo / "f.txt"),
            "list": errno_of(os.listdir, wo),
            "read_own": errno_of(read_file, wo / "new.txt"),
        }

    assert sandboxed(body, write=[wo]) == dict.fromkeys(("read", "list", "read_own"), errno.EACCES)
    assert (wo / "new.txt").read_text() == "written"


@needs_landlock
def test_granted_dir_is_fully_writable(tree: Path) -> None:
    rw = tree / "rw"

    def body(_: Any) -> Any:
        write_file(rw / "a.txt", "a")
        os.rename(rw / "a.txt", rw / "b.txt")
        os.mkdir(rw / "sub")
        os.rename(rw / "b.txt", rw / "sub" / "b.txt")  # REFER within the grant
        os.symlink("b.txt", rw / "sub" / "link")
        os.mkfifo(rw / "fifo")
        os.truncate(rw / "f.txt", 1)
        with open(rw / "f.txt", "r+") as f:
            f.write("z")
        text = read_file(rw / "sub" / "link")
        os.unlink(rw / "fifo")
        os.unlink(rw / "sub" / "link")
        os.unlink(rw / "sub" / "b.txt")
        os.rmdir(rw / "sub")
        return [text, read_file(rw / "f.txt"), sorted(os.listdir(rw))]

    assert sandboxed(body, read=[rw], write=[rw]) == ["a", "z", ["f.txt"]]


@needs_landlock
def test_write_dir_grants_no_devices_or_sockets(tree: Path) -> None:
    rw = tree / "rw"

    def body(_: Any) -> Any:
        return [
            errno_of(os.mknod, rw / "null", 0o600 | 0o020000, os.makedev(1, 3)),
            # AF_UNIX is refused by seccomp before Landlock's MAKE_SOCK matters.
            errno_of(socket.socket, socket.AF_UNIX),
        ]

    assert sandboxed(body, read=[rw], write=[rw]) == [errno.EACCES, errno.EPERM]


@needs_landlock
def test_creating_outside_the_grants_is_denied(tree: Path) -> None:
    outside = tree.parent / f"{tree.name}-outside.txt"

    def body(_: Any) -> Any:
        return [
            errno_of(write_file, tree / "other" / "new.txt"),
            errno_of(os.mkdir, tree / "other" / "d"),
            errno_of(write_file, outside),
        ]

    assert sandboxed(body, write=[tree / "rw"]) == [errno.EACCES] * 3
    assert not outside.exists()


@needs_landlock
def test_rename_into_an_ungranted_dir_is_denied(tree: Path) -> None:
    def body(_: Any) -> Any:
        return [
            errno_of(os.rename, tree / "rw" / "f.txt", tree / "ro" / "moved.txt"),
            errno_of(os.rename, tree / "rw" / "f.txt", tree / "other" / "moved.txt"),
            errno_of(os.link, tree / "rw" / "f.txt", tree / "other" / "linked.txt"),
        ]

    result = sandboxed(body, read=[tree / "ro", tree / "rw"], write=[tree / "rw"])
    assert result == [errno.EACCES] * 3
    assert (tree / "rw" / "f.txt").exists()


@needs_landlock
def test_truncate_needs_a_write_grant(tree: Path) -> None:
    target = tree / "ro" / "f.txt"

    def body(_: Any) -> Any:
        return [
            errno_of(os.truncate, target, 0),
            errno_of(os.open, target, os.O_RDONLY | os.O_TRUNC),
        ]

    assert sandboxed(body, read=[tree / "ro"]) == [errno.EACCES, errno.EACCES]
    assert target.read_text() == "ro"


@needs_landlock
def test_write_grant_on_a_file(tree: Path) -> None:
    target = tree / "wo" / "f.txt"

    def body(_: Any) -> Any:
        with open(target, "a") as f:
            f.write("+")
        return [errno_of(read_file, target), errno_of(os.truncate, target, 1)]

    assert sandboxed(body, write=[target]) == [errno.EACCES, 0]
    assert target.read_text() == "w"


@needs_landlock
def test_dev_null_when_granted_read_and_write() -> None:
    def body(_: Any) -> Any:
        with open("/dev/null", "wb") as f:
            f.write(b"discarded")
        with open("/dev/null", "rb") as f:
            data = f.read()
        with open("/dev/null", "r+b") as f:
            f.write(b"x")
        return data.decode()

    assert sandboxed(body, read=["/dev/null"], write=["/dev/null"]) == ""


@needs_landlock
def test_dev_null_when_not_granted() -> None:
    assert sandboxed(lambda _: errno_of(read_file, "/dev/null")) == errno.EACCES


@needs_landlock
def test_device_ioctls_are_not_granted() -> None:
    if landlock_abi() < 5:
        pytest.skip("LANDLOCK_ACCESS_FS_IOCTL_DEV needs ABI 5")
    master, slave = os.openpty()
    path = os.ttyname(slave)

    def body(_: Any) -> Any:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        return [errno_of(termios.tcgetattr, fd), os.write(fd, b"ok")]

    try:
        assert sandboxed(body, read=[path], write=[path]) == [errno.EACCES, 2]
    finally:
        os.close(master)
        os.close(slave)


@needs_landlock
def test_stdlib_imports_work_when_granted() -> None:
    def body(_: Any) -> Any:
        import importlib

        sys.modules.pop("colorsys", None)
        return importlib.import_module("colorsys").rgb_to_hsv(1.0, 0.0, 0.0)[2]

    assert sandboxed(body, read=PY_READ) == 1.0


# --------------------------------------------------------------------------
# Metadata: Landlock does not cover it, seccomp does


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
def test_futimens_on_an_open_descriptor_stays_allowed(tree: Path) -> None:
    target = tree / "rw" / "f.txt"

    def body(_: Any) -> Any:
        fd = os.open(target, os.O_WRONLY)
        return [errno_of(os.utime, fd, (1000, 1000)), -raw("utimensat", fd, None, None, 0)]

    assert sandboxed(body, write=[tree / "rw"]) == [0, 0]


# --------------------------------------------------------------------------
# Processes


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
    ("bpf", (9999, None, 0)),
    ("perf_event_open", (None, 0, -1, -1, 0xFFFF)),
    ("keyctl", (9999, 0, 0, 0, 0)),
    ("add_key", (None, None, None, 0, 0)),
    ("request_key", (None, None, None, 0)),
    ("userfaultfd", (1,)),  # UFFD_USER_MODE_ONLY
    ("io_uring_setup", (0, None)),
    ("io_uring_enter", (-1, 0, 0, 0, None, 0)),
    ("io_uring_register", (-1, 0, None, 0)),
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
    ("lremovexattr", (MISSING, b"user.x")),
    ("fremovexattr", (-1, b"user.x")),
    ("open_tree_attr", (-1, None, 0xFFFF, None, 0)),
    ("file_setattr", (-1, None, None, 0, 0)),
]


@needs_landlock
@pytest.mark.parametrize(("name", "args"), DENIED_RAW, ids=[d[0] for d in DENIED_RAW])
def test_raw_syscall_is_denied(name: str, args: tuple[Any, ...]) -> None:
    if NR[name] is None:
        pytest.skip(f"{name} does not exist on {_MACHINE}")

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


@pytest.mark.skipif(_MACHINE != "x86_64", reason="x32 and i386 exist only on x86_64")
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


@pytest.mark.skipif(_MACHINE != "x86_64", reason="int 0x80 exists only on x86_64")
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


# --------------------------------------------------------------------------
# Sockets


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
        return [conn.recv(5).decode(), errno_of(socket.socket, socket.AF_UNIX)]

    assert sandboxed(body, allow_network=1) == ["hello", errno.EPERM]


# --------------------------------------------------------------------------
# Terminals


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


# --------------------------------------------------------------------------
# Signals and other processes


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


# --------------------------------------------------------------------------
# Privileges and limits


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


@needs_landlock
def test_no_capabilities_remain() -> None:
    def body(_: Any) -> Any:
        bounding = [LIBC.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) for cap in range(64)]
        ambient = [
            LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) for cap in range(64)
        ]
        return {
            "sets": capabilities(),
            "bounding": [cap for cap, v in enumerate(bounding) if v == 1],
            "ambient": [cap for cap, v in enumerate(ambient) if v == 1],
            "no_new_privs": LIBC.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
            "seccomp_mode": LIBC.prctl(PR_GET_SECCOMP, 0, 0, 0, 0),
        }

    assert sandboxed(body) == {
        "sets": [0] * 6,
        "bounding": [],
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


@needs_landlock
def test_hard_limits_cannot_be_raised() -> None:
    class RLimit(ctypes.Structure):
        _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

    def body(_: Any) -> Any:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        raised = RLimit(hard + 1, hard + 1)
        core = resource.getrlimit(resource.RLIMIT_CORE)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (1, 1))
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
        "core": [0, 0],
        "setrlimit_core": "refused",
        "lower_ok": 0,
    }


def _vm_size() -> int:
    for line in read_file("/proc/self/status").splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@needs_landlock
def test_memory_limit_gives_memory_error() -> None:
    def body(limit: int) -> Any:
        small = bytearray(16 << 20)
        try:
            bytearray(1 << 30)
            big = "allocated"
        except MemoryError:
            big = "MemoryError"
        return [len(small), big, list(resource.getrlimit(resource.RLIMIT_AS)), limit]

    # The limit depends on the child's own size: 256 MiB above it.
    small, big, rlimit, limit = sandboxed(
        body,
        setup=lambda: _vm_size() + (256 << 20),
        policy_from=lambda limit: {"memory_bytes": limit},
    )
    assert small == 16 << 20
    assert big == "MemoryError"
    assert rlimit == [limit, limit]


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


# --------------------------------------------------------------------------
# Descriptors


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


# --------------------------------------------------------------------------
# What ordinary programs need


@needs_landlock
def test_everyday_python_keeps_working() -> None:
    def body(_: Any) -> Any:
        async def main() -> int:
            loop = asyncio.get_running_loop()
            await asyncio.sleep(0.01)
            in_thread = await loop.run_in_executor(None, lambda: 6 * 7)
            reader, writer = await asyncio.open_connection(sock=socket.socketpair()[0])
            writer.close()
            return in_thread

        db = sqlite3.connect(":memory:")
        db.execute("create table t (x)")
        db.executemany("insert into t values (?)", [(1,), (2,), (3,)])
        total = db.execute("select sum(x) from t").fetchone()[0]
        return {
            "asyncio": asyncio.run(main()),
            "sqlite": total,
            "urandom": len(os.urandom(32)),
            "struct": struct.pack("<I", 1).hex(),
        }

    assert sandboxed(body, read=PY_READ) == {
        "asyncio": 42,
        "sqlite": 6,
        "urandom": 32,
        "struct": "01000000",
    }


@needs_landlock
def test_finish_needs_a_prepared_process_and_goes_once() -> None:
    def body(_: Any) -> list[object]:
        base, base_refs = make_policy()
        own, own_refs = make_policy()
        err = ffi.new("char[]", 512)
        unprepared = ffi.new("struct pynox_prepared *")
        first = lib.pynox_sandbox_finish(unprepared, base, own, err, len(err))
        del base_refs, own_refs  # the buffers lived through the call
        return [first, ffi.string(err).decode()]

    # The child confines itself first (in one call or two), then tries a stray finish().
    assert sandboxed(body) == [-1, "the sandbox was not prepared"]


def test_python_halves_refuse_a_missing_grant(tmp_path: Path) -> None:
    """pynox.engine.sandbox.finish raises SandboxError; the pool's child then refuses the run."""
    from pynox.engine import sandbox
    from pynox.policy import system_paths
    from pynox.policy.resolve import Policy

    def child(w: int) -> str:
        prepared = sandbox.prepare(system_paths.interpreter_reads(), [w], os.getppid())
        policy = Policy()
        policy.allow_read = [str(tmp_path / "gone")]
        try:
            sandbox.finish(prepared, policy)
        except sandbox.SandboxError as exc:
            return str(exc)
        return "finished"

    outcome = in_child(child)
    assert outcome.startswith("cannot apply the sandbox: cannot open the read path ")
    assert "gone" in outcome
