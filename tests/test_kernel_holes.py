"""Holes the kernel's Landlock version does not close: each is closed by seccomp or
by the limits on every kernel Pynox supports (Linux 6.2 and newer).

Each test asserts what a program under pynox sees (the command, in process and
supervised, and the pool, where they differ), and fails without its defence.
Where a newer Landlock ABI would hide the hole on this machine, a forked child
confines itself through pynox.engine.sandbox with the ABI limited below that version
(pynox._native.limit_landlock_abi: the limit of pynox._core's own copy of the core
would not reach the copy that confines), as on the older kernels Pynox supports.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import platform
import pty
import signal
import socket
import stat
import struct
import subprocess
import sys
import termios
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.commands import PYNOX, pynox
from support.pool_client import PoolClient
from support.probes import outcomes
from support.sandboxed_child import report_from_child

import pynox._native as _native
from pynox.engine import prepared_sandbox, sandbox
from pynox.policy.resolve import Policy

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

MACHINE = platform.machine()
if MACHINE not in ("x86_64", "aarch64"):
    pytest.skip(f"no system-call table for {MACHINE}", allow_module_level=True)

# System-call numbers: (x86_64, aarch64); None where the call does not exist.
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "open": (2, None),
    "creat": (85, None),
    "openat": (257, 56),
    "openat2": (437, 437),
    "mkdir": (83, None),
    "mkdirat": (258, 34),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "bind": (49, 200),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "vmsplice": (278, 75),
}
NR = {name: pair[0 if MACHINE == "x86_64" else 1] for name, pair in _NUMBERS.items()}

KERNEL_ABI = sandbox.probe()["landlock_abi"]
needs_landlock = pytest.mark.skipif(
    KERNEL_ABI < 3, reason="the sandbox needs Landlock ABI 3 (Linux 6.2)"
)

# The start of every probe run under pynox: attempt() prints one line per
# attempt; raw() makes a system call through ctypes and returns its result or -errno.
PRELUDE = """\
import ctypes, errno, json, os, sys
NR = json.loads(sys.argv[1])
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def attempt(name, fn, *args):
    try:
        value = fn(*args)
    except BaseException as exc:
        number = getattr(exc, "errno", None)
        named = errno.errorcode.get(number, str(number)) if number else "-"
        print(f"{name}: {type(exc).__name__} {named}", flush=True)
    else:
        print(f"{name}: ok {value!r}"[:300], flush=True)


def raw(name, *args):
    cargs = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(NR[name]), *cargs)
    return result if result >= 0 else -ctypes.get_errno()


def sys_attempt(name, nr_name, *args):
    if NR.get(nr_name) is None:
        print(f"{name}: n/a", flush=True)
        return
    result = raw(nr_name, *args)
    named = errno.errorcode.get(-result, str(-result))
    print(f"{name}: {f'errno {named}' if result < 0 else f'ok {result}'}", flush=True)

"""

# How pynox runs a program: in its own process, as a supervised child (a
# timeout makes pynox supervise), or as a pool request (a spare confines
# itself in two halves, the second filter refusing the network).
MODES = ["in-process", "supervised", "pool"]


def run_program(
    mode: str,
    directory: Path,
    code: str,
    *,
    network: bool = False,
    memory: str | None = None,
    max_file_size: str | None = None,
    writes: tuple[Path, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """Runs PRELUDE + code under pynox in one of MODES; the outcome as a finished process."""
    script = directory / f"probe-{uuid.uuid4().hex[:8]}.py"
    script.write_text(PRELUDE + textwrap.dedent(code))
    args = [json.dumps(NR)]
    if mode == "pool":
        request: dict[str, Any] = {
            "id": "probe",
            "script": str(script),
            "args": args,
            "allow_write": [str(p) for p in writes],
            "allow_network": network,
            "timeout": f"{int(timeout)}s",
            "max_output": "1m",
        }
        if memory is not None:
            request["memory"] = memory
        if max_file_size is not None:
            request["max_file_size"] = max_file_size
        with PoolClient(workers=1, cwd=directory) as client:
            result = client.run(request, timeout=timeout + 30)
        return subprocess.CompletedProcess(
            [PYNOX, "pool"], result["exit"], result["stdout"].encode(), result["stderr"].encode()
        )
    flags = [f"--allow-write={p}" for p in writes]
    if network:
        flags.append("--allow-network")
    if memory is not None:
        flags.append(f"--memory={memory}")
    if max_file_size is not None:
        flags.append(f"--max-file-size={max_file_size}")
    if mode == "supervised":
        flags.append(f"--timeout={int(timeout)}s")
    return pynox(*flags, str(script), *args, cwd=directory, timeout=timeout + 30)


def confined_child(
    body: Callable[[], Any],
    *,
    abi: int,
    two_steps: bool = False,
    network: bool = False,
    writes: tuple[Path, ...] = (),
    keep_fds: tuple[int, ...] = (),
    timeout: float = 60,
) -> Any:
    """Forks a child that limits Landlock to `abi`, confines itself to a policy
    with pynox.engine.sandbox (in one call as the command does, or in the pool's two
    halves), runs body() and sends back what it returns (JSON)."""

    def child(w: int) -> dict[str, Any]:
        in_effect = _native.limit_landlock_abi(abi)
        policy = Policy()
        policy.allow_network = network
        policy.allow_write = [str(p) for p in writes]
        policy.implicit_read = [str(p) for p in writes]
        if two_steps:
            base = prepared_sandbox.base_policy([], 0)
            prepared_sandbox.prepare(base, [w, *keep_fds]).finish(policy)
        else:
            sandbox.confine_policy(policy, [], [w, *keep_fds], 0)
        return {"abi": in_effect, "value": body()}

    report = report_from_child(child, timeout)
    assert report["abi"] == min(abi, KERNEL_ABI), report
    return report["value"]


@needs_landlock
@pytest.mark.parametrize("two_steps", [False, True], ids=["one-call", "two-steps"])
def test_the_limited_abi_is_the_one_that_confines(two_steps: bool) -> None:
    """Below ABI 5 Landlock does not handle device ioctls: /dev/null answers TCGETS
    itself (ENOTTY) instead of Landlock refusing it (EACCES)."""

    def body() -> int:
        fd = os.open("/dev/null", os.O_RDWR)
        try:
            fcntl.ioctl(fd, termios.TCGETS, bytes(64))
        except OSError as exc:
            return int(exc.errno or 0)
        return 0

    got = confined_child(body, abi=3, two_steps=two_steps, writes=(Path("/dev/null"),))
    assert errno.errorcode[got] == "ENOTTY"


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the same user outside the sandbox, in a session of its own."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _still_alive(proc: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.1)
    return proc.poll() is None


# --------------------------------------------------------------------------
# 13. A file's I/O signal aimed at another process (F_SETOWN and friends)

F_SETSIG = 10
F_SETOWN_EX = 15
F_OWNER_PID = 1
FIOSETOWN = 0x8901
SIOCSPGRP = 0x8902


def _aim_sigio(victim_pid: int) -> dict[str, str]:
    """Every way to make a socket's I/O signal go to victim_pid, then I/O on it.

    Without a defence the victim dies of SIGIO (its default action ends it)."""

    def owner_ex(fd: int) -> None:
        fcntl.fcntl(fd, F_SETOWN_EX, struct.pack("ii", F_OWNER_PID, victim_pid))

    ways: dict[str, Callable[[int], object]] = {
        "f_setown-pid": lambda fd: fcntl.fcntl(fd, fcntl.F_SETOWN, victim_pid),
        "f_setown-group": lambda fd: fcntl.fcntl(fd, fcntl.F_SETOWN, -victim_pid),
        "f_setown_ex": owner_ex,
        "f_setsig": lambda fd: fcntl.fcntl(fd, F_SETSIG, int(signal.SIGKILL)),
        "fiosetown": lambda fd: fcntl.ioctl(fd, FIOSETOWN, struct.pack("i", victim_pid)),
        "siocspgrp": lambda fd: fcntl.ioctl(fd, SIOCSPGRP, struct.pack("i", victim_pid)),
    }
    out = {}
    for name, aim in ways.items():
        a, b = socket.socketpair()
        with a, b:
            try:
                aim(a.fileno())
            except OSError as exc:
                out[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            else:
                out[name] = "ok"
            flags = fcntl.fcntl(a.fileno(), fcntl.F_GETFL)
            with contextlib.suppress(PermissionError):  # refused too: a second wall
                fcntl.fcntl(a.fileno(), fcntl.F_SETFL, flags | os.O_ASYNC)
            b.send(b"wake")
            time.sleep(0.05)
    time.sleep(0.1)
    return out


SIGIO_WAYS = ("f_setown-pid", "f_setown-group", "f_setown_ex", "f_setsig", "fiosetown", "siocspgrp")
SIGIO_REFUSED = dict.fromkeys(SIGIO_WAYS, "EPERM")


@needs_landlock
@pytest.mark.parametrize("two_steps", [False, True], ids=["one-call", "two-steps"])
def test_sigio_owner_is_refused_below_landlock_abi_6(
    victim: subprocess.Popen[bytes], two_steps: bool
) -> None:
    """On Linux 6.2 to 6.11 Landlock does not scope signals: seccomp must refuse the owner."""
    got = confined_child(lambda: _aim_sigio(victim.pid), abi=5, two_steps=two_steps)
    assert _still_alive(victim), f"a SIGIO from the sandbox killed a process outside it: {got}"
    assert got == SIGIO_REFUSED


@needs_landlock
@pytest.mark.parametrize("two_steps", [False, True], ids=["one-call", "two-steps"])
def test_terminal_sigio_is_refused_below_landlock_abi_6(two_steps: bool) -> None:
    """O_ASYNC on a terminal makes the kernel aim SIGIO at the terminal's foreground
    process group: on Linux 6.2 to 6.11 a line typed there ended whatever ran in the
    foreground (the rest of a pipeline, or the job a background run shares a terminal
    with)."""
    master, slave = pty.openpty()

    def make_controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    foreground = subprocess.Popen(
        ["sleep", "60"],
        stdin=slave,
        start_new_session=True,
        preexec_fn=make_controlling_terminal,
    )

    def body() -> str:
        try:
            flags = fcntl.fcntl(slave, fcntl.F_GETFL)
            fcntl.fcntl(slave, fcntl.F_SETFL, flags | os.O_ASYNC)
        except OSError as exc:
            outcome = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        else:
            outcome = "ok"
        os.write(master, b"typed\n")  # a line for the foreground: the signal goes
        time.sleep(0.2)
        return outcome

    try:
        got = confined_child(body, abi=5, two_steps=two_steps, keep_fds=(master, slave))
        assert _still_alive(foreground), f"SIGIO from the sandbox ended the foreground: {got}"
        assert got == "EPERM"
    finally:
        foreground.kill()
        foreground.wait()
        os.close(master)
        os.close(slave)


@needs_landlock
@pytest.mark.parametrize("mode", MODES)
def test_sigio_owner_is_refused(tmp_path: Path, victim: subprocess.Popen[bytes], mode: str) -> None:
    """What a program sees on any kernel: setting a file's signal owner is refused."""
    proc = run_program(
        mode,
        tmp_path,
        f"""
        import fcntl, signal, socket, struct
        a, b = socket.socketpair()
        attempt("f_setown-victim", fcntl.fcntl, a.fileno(), fcntl.F_SETOWN, {victim.pid})
        attempt("f_setown-self", fcntl.fcntl, a.fileno(), fcntl.F_SETOWN, os.getpid())
        attempt("f_setown_ex", fcntl.fcntl, a.fileno(), {F_SETOWN_EX},
                struct.pack("ii", {F_OWNER_PID}, {victim.pid}))
        attempt("f_setsig", fcntl.fcntl, a.fileno(), {F_SETSIG}, int(signal.SIGKILL))
        attempt("fiosetown", fcntl.ioctl, a.fileno(), {FIOSETOWN}, struct.pack("i", {victim.pid}))
        attempt("siocspgrp", fcntl.ioctl, a.fileno(), {SIOCSPGRP}, struct.pack("i", {victim.pid}))
        attempt("f_getown", fcntl.fcntl, a.fileno(), fcntl.F_GETOWN)
        attempt("set-o-async", fcntl.fcntl, a.fileno(), fcntl.F_SETFL, os.O_ASYNC)
        b.send(b"wake")
        attempt("nonblocking-still-works", os.set_blocking, a.fileno(), False)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    denied = "PermissionError EPERM"
    assert outcomes(proc) == {
        "f_setown-victim": denied,
        "f_setown-self": denied,
        "f_setown_ex": denied,
        "f_setsig": denied,
        "fiosetown": denied,
        "siocspgrp": denied,
        "f_getown": "ok 0",
        "set-o-async": denied,
        "nonblocking-still-works": "ok None",
    }
    assert _still_alive(victim)


# --------------------------------------------------------------------------
# 16. Set-user-ID and set-group-ID files made in a write grant

SET_ID_PROBE = """
import stat
d = sys.argv[2]
os.umask(0)
def path(name):
    return os.path.join(d, name).encode()
def make(name, flags, mode):
    os.close(os.open(os.path.join(d, name), flags, mode))
W = os.O_WRONLY | os.O_CREAT
attempt("open-6777", make, "suid-both", W, 0o6777)
attempt("open-4755", make, "suid", W | os.O_EXCL, 0o4755)
attempt("open-2755", make, "sgid", W | os.O_TRUNC, 0o2755)
attempt("tmpfile-6777", lambda: os.close(os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o6777)))
attempt("mkdir-6777", os.mkdir, os.path.join(d, "suid-dir"), 0o6777)
attempt("mkdir-2775", os.mkdir, os.path.join(d, "sgid-dir"), 0o2775)
attempt("mkfifo-6666", os.mkfifo, os.path.join(d, "suid-fifo"), 0o6666)
attempt("mknod-4644", os.mknod, os.path.join(d, "suid-node"), stat.S_IFREG | 0o4644)
AT_FDCWD = -100
sys_attempt("raw-open", "open", path("raw-open"), W, 0o4755)
sys_attempt("raw-creat", "creat", path("raw-creat"), 0o2755)
sys_attempt("raw-openat", "openat", AT_FDCWD, path("raw-openat"), W, 0o6755)
sys_attempt("raw-mkdir", "mkdir", path("raw-mkdir"), 0o4755)
sys_attempt("raw-mkdirat", "mkdirat", AT_FDCWD, path("raw-mkdirat"), 0o2755)
sys_attempt("raw-mknod", "mknod", path("raw-mknod"), stat.S_IFIFO | 0o4644, 0)
sys_attempt("raw-mknodat", "mknodat", AT_FDCWD, path("raw-mknodat"), stat.S_IFIFO | 0o2644, 0)
sys_attempt("raw-openat2", "openat2", AT_FDCWD, path("raw-openat2"), 0, 0)
# What stays: plain modes, and a mode that only matters when creating.
attempt("open-755", make, "plain", W, 0o755)
attempt("mkdir-755", os.mkdir, os.path.join(d, "plain-dir"), 0o755)
attempt("mkfifo-600", os.mkfifo, os.path.join(d, "plain-fifo"), 0o600)
attempt("tmpfile-600", lambda: os.close(os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)))
attempt("open-existing-ignores-mode", make, "plain", os.O_WRONLY, 0o6777)
attempt("tempfile", lambda: __import__("tempfile").mkstemp(dir=d) and "made")
"""


@needs_landlock
@pytest.mark.parametrize("mode", MODES)
def test_set_id_files_are_never_created(tmp_path: Path, mode: str) -> None:
    grant = tmp_path / "grant"
    grant.mkdir()
    grant.chmod(0o755)  # not set-group-ID itself: nothing is inherited
    proc = run_program(
        mode, tmp_path, SET_ID_PROBE.replace("sys.argv[2]", repr(str(grant))), writes=(grant,)
    )
    assert proc.returncode == 0, proc.stderr
    made = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in grant.iterdir()}
    set_id = {name: oct(m) for name, m in made.items() if m & (stat.S_ISUID | stat.S_ISGID)}
    assert set_id == {}, f"the program made set-ID entries: {set_id}"
    denied = "PermissionError EPERM"
    on_x86 = MACHINE == "x86_64"
    lines = outcomes(proc)
    assert lines == {
        "open-6777": denied,
        "open-4755": denied,
        "open-2755": denied,
        "tmpfile-6777": denied,
        "mkdir-6777": denied,
        "mkdir-2775": denied,
        "mkfifo-6666": denied,
        "mknod-4644": denied,
        "raw-open": "errno EPERM" if on_x86 else "n/a",
        "raw-creat": "errno EPERM" if on_x86 else "n/a",
        "raw-openat": "errno EPERM",
        "raw-mkdir": "errno EPERM" if on_x86 else "n/a",
        "raw-mkdirat": "errno EPERM",
        "raw-mknod": "errno EPERM" if on_x86 else "n/a",
        "raw-mknodat": "errno EPERM",
        "raw-openat2": "errno ENOSYS",
        "open-755": "ok None",
        "mkdir-755": "ok None",
        "mkfifo-600": "ok None",
        "tmpfile-600": "ok None",
        "open-existing-ignores-mode": "ok None",
        "tempfile": "ok 'made'",
    }
    assert made["plain"] == 0o755 and made["plain-dir"] == 0o755


# --------------------------------------------------------------------------
# 15. An abstract Unix socket name taken from the host by bind()

BIND_PROBE = """
import socket, struct
name = sys.argv[2]
a, b = socket.socketpair()
attempt("bind-abstract", a.bind, "\\0" + name)
attempt("bind-autobind", b.bind, "")
c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
attempt("bind-abstract-13", c.bind, "\\0" + name[:13])
attempt("listen-pair", d.listen, 1)
attempt("pair-still-works", lambda: (a.sendall(b"x"), b.recv(1))[1])
def inet(family, host):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    s.listen(1)
    s.close()
    return "listening"
attempt("tcp4-listen", inet, socket.AF_INET, "127.0.0.1")
if W_IPV6:
    attempt("tcp6-listen", inet, socket.AF_INET6, "::1")
# A length that is neither an IPv4 nor an IPv6 address: a sockaddr_storage.
address = struct.pack("=H", socket.AF_INET) + bytes(126)
sys_attempt("raw-bind-storage", "bind", a.fileno(), address, len(address))
"""


def _host_has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


HOST_IPV6 = _host_has_ipv6()


def _bind_probe(name: str) -> str:
    return BIND_PROBE.replace("sys.argv[2]", repr(name)).replace("W_IPV6", repr(HOST_IPV6))


@needs_landlock
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
@pytest.mark.parametrize("mode", MODES)
def test_socketpair_ends_cannot_take_abstract_names(
    tmp_path: Path, mode: str, network: bool
) -> None:
    name = "pynox-squat-" + uuid.uuid4().hex
    proc = run_program(mode, tmp_path, _bind_probe(name), network=network)
    assert proc.returncode == 0, proc.stderr
    denied = "PermissionError EPERM"
    expected = {
        "bind-abstract": denied,
        "bind-autobind": denied,
        "bind-abstract-13": denied,
        "listen-pair": denied if not network else "OSError EINVAL",
        "pair-still-works": "ok b'x'",
        "tcp4-listen": "ok 'listening'" if network else "PermissionError EACCES",
        "raw-bind-storage": "errno EPERM",
    }
    if HOST_IPV6:
        expected["tcp6-listen"] = "ok 'listening'" if network else "PermissionError EACCES"
    if network:
        # The one name a bind() with the network may still take: as long as an
        # IPv4 address (see docs/security.md).
        assert outcomes(proc)["bind-abstract-13"] == "ok None"
        expected["bind-abstract-13"] = "ok None"
    assert outcomes(proc) == expected


@needs_landlock
def test_host_keeps_its_abstract_name_while_the_program_runs(tmp_path: Path) -> None:
    """The program tries to take a name, then waits; meanwhile the host binds it."""
    name = "\0pynox-squat-" + uuid.uuid4().hex
    grant = tmp_path / "grant"
    grant.mkdir()
    script = tmp_path / "squat.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, socket, time
        a, b = socket.socketpair()
        try:
            a.bind({name!r})
            print("bound", flush=True)
        except OSError as exc:
            print(type(exc).__name__, flush=True)
        for _ in range(200):
            if os.path.exists({str(grant / "done")!r}):
                break
            time.sleep(0.05)
        """)
    )
    with subprocess.Popen(
        [PYNOX, f"--allow-read={grant}", f"--allow-write={grant}", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    ) as proc:
        assert proc.stdout is not None
        said = proc.stdout.readline().decode().strip()
        host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            host.bind(name)
            host_got = "bound"
        except OSError as exc:
            host_got = errno.errorcode.get(exc.errno or 0, str(exc))
        finally:
            host.close()
            (grant / "done").write_text("")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert (said, host_got) == ("PermissionError", "bound")


# --------------------------------------------------------------------------
# 14. Memory held where RLIMIT_AS does not count it

MIB = 1 << 20

HOLD_PROBE = """
import fcntl, resource, socket
F_SETPIPE_SZ = 1031
attempt("nofile", resource.getrlimit, resource.RLIMIT_NOFILE)
attempt("memfd_create", os.memfd_create, "hold")
sys_attempt("memfd_secret", "memfd_secret", 0)
r, w = os.pipe()
attempt("f_setpipe_sz", fcntl.fcntl, w, F_SETPIPE_SZ, 1 << 20)
page = ctypes.create_string_buffer(4096)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(page), 4096)
sys_attempt("vmsplice", "vmsplice", w, ctypes.addressof(iov), 1, 0)
a, b = socket.socketpair()
attempt("so_sndbuf", a.setsockopt, socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
attempt("so_rcvbuf", a.setsockopt, socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
attempt("so_keepalive", a.setsockopt, socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
if NETWORK:
    t = socket.socket()
    attempt("tcp-so_rcvbuf", t.setsockopt, socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

# Then hold what it can: memfds, filled pipes and socketpairs while descriptors
# last, and as many again sent into a socket's queue (SCM_RIGHTS) and closed here.
held = 0
chunk = b"x" * 65536
def fill(fd):
    global held
    os.set_blocking(fd, False)
    while held < BUDGET:
        try:
            held += os.write(fd, chunk)
        except BlockingIOError:
            return
def hold():
    global held
    try:
        while held < BUDGET:
            fd = os.memfd_create("hold")
            for _ in range(64):
                held += os.write(fd, chunk)
    except OSError:
        pass
    holders, kept = [], []
    try:
        while held < BUDGET:
            for make in (os.pipe, socket.socketpair):
                pair = make()
                fds = [p if isinstance(p, int) else p.detach() for p in pair]
                for fd in fds[1:] if make is os.pipe else fds:
                    fill(fd)
                try:
                    if not holders:
                        raise BlockingIOError
                    socket.send_fds(holders[-1], [b"x"], fds)
                except BlockingIOError:
                    holder, peer = socket.socketpair()
                    holder.setblocking(False)
                    holders += [peer, holder]
                    socket.send_fds(holder, [b"x"], fds)
                except OSError:  # ETOOMANYREFS: no more in flight
                    kept.append(fds)
                    continue
                for fd in fds:
                    os.close(fd)
    except OSError:  # EMFILE: no descriptor left
        pass
    return held // (1 << 20)
print(f"held-mib: {hold()}")
"""


def _default_socket_buffers() -> bool:
    """The descriptor limit assumes the kernel's default socket send buffer."""
    return int(Path("/proc/sys/net/core/wmem_default").read_text()) <= 212992


@needs_landlock
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
@pytest.mark.parametrize("mode", MODES)
def test_memory_cannot_be_held_outside_the_limit(tmp_path: Path, mode: str, network: bool) -> None:
    """Under --memory=128m: no memfd, no pages left in pipes, no bigger buffers,
    and descriptors capped, so that what a program holds unmapped stays below it."""
    code = HOLD_PROBE.replace("BUDGET", str(512 * MIB)).replace("NETWORK", repr(network))
    proc = run_program(mode, tmp_path, code, memory="128m", network=network)
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    held = int(lines.pop("held-mib"))
    if _default_socket_buffers():
        # Measured: about 31 MiB here (256 pipes and sockets, half of them in
        # flight); sockets alone, about 56 MiB.
        assert held < 128, f"the program held {held} MiB outside its 128m limit: {lines}"
    denied = "PermissionError EPERM"
    expected = {
        "nofile": "ok (128, 128)",
        "memfd_create": denied,
        "memfd_secret": "errno EPERM",
        "f_setpipe_sz": denied,
        "vmsplice": "errno EPERM",
        "so_sndbuf": denied if not network else "ok None",
        "so_rcvbuf": denied if not network else "ok None",
        "so_keepalive": "ok None",
    }
    if network:
        expected["tcp-so_rcvbuf"] = "ok None"
    assert lines == expected


@pytest.mark.parametrize(
    ("memory", "descriptors"), [("32m", 64), ("128m", 128), ("512m", 512), ("4g", 1024)]
)
def test_memory_limit_caps_descriptors(tmp_path: Path, memory: str, descriptors: int) -> None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    expected = min(descriptors, hard) if hard != resource.RLIM_INFINITY else descriptors
    proc = run_program(
        "in-process",
        tmp_path,
        "import resource\nprint('nofile:', resource.getrlimit(resource.RLIMIT_NOFILE))\n",
        memory=memory,
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc) == {"nofile": f"({expected}, {expected})"}


def test_descriptors_are_left_alone_without_a_memory_limit(tmp_path: Path) -> None:
    import resource

    proc = run_program(
        "in-process",
        tmp_path,
        "import resource\nprint('nofile:', resource.getrlimit(resource.RLIMIT_NOFILE))\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc) == {"nofile": str(resource.getrlimit(resource.RLIMIT_NOFILE))}
