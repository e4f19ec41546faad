"""Escape attempts from inside `pynox`, end to end through the command.

Each probe is a small program written into the script directory of a fresh
world (tmp dirs: the script's own dir, a home-like dir with a secret, an
outside dir with a victim file, and dirs granted read-only, write-only or both).
A probe makes many attempts and prints one line per attempt,
`name: <outcome>`, where the outcome is `ok <value>` or `<ExceptionType> <ERRNO>`
(`errno <NAME>` for raw system calls). The tests assert each line, the
`pynox:` hint line where the CLI prints one, and from this process that
nothing outside changed. A probe that runs once serves a whole parametrized
table through a module-scoped fixture, so the file stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import pty
import signal
import socket
import stat
import subprocess
import sys
import termios
import textwrap
import threading
import time
import tty
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.commands import PYNOX, pynox, python, run
from support.pool_client import PoolClient

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

MACHINE = platform.machine()
RAW_SKIP = pytest.mark.skipif(
    MACHINE not in ("x86_64", "aarch64"),
    reason=f"raw system-call numbers are only tabled for x86_64 and aarch64, not {MACHINE}",
)

# System-call numbers: (x86_64, aarch64); None where the call does not exist.
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "getpid": (39, 172),
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, None),
    "vfork": (58, None),
    "unshare": (272, 97),
    "setns": (308, 268),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "personality": (135, 92),
    "kexec_load": (246, 104),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "open_by_handle_at": (304, 265),
    "shmget": (29, 194),
    "mq_open": (240, 180),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438),
    "prlimit64": (302, 261),
    "syslog": (103, 116),
    "memfd_create": (319, 279),
    "execveat": (322, 281),
    "iopl": (172, None),
    "setpriority": (141, 140),
}
NR: dict[str, int | None] = {
    name: pair[0 if MACHINE == "x86_64" else 1] if MACHINE in ("x86_64", "aarch64") else None
    for name, pair in _NUMBERS.items()
}

# The start of every probe: attempt() prints one line per attempt; raw() makes
# a system call through ctypes and returns its result or -errno.
PRELUDE = """\
import ctypes, errno, json, os, sys
W = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
NR = W.get("nr", {})
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def _errname(number):
    return errno.errorcode.get(number, str(number))


def attempt(name, fn, *args, **kwargs):
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        number = getattr(exc, "errno", None)
        print(f"{name}: {type(exc).__name__} {_errname(number) if number else '-'}", flush=True)
    else:
        print(f"{name}: ok {value!r}"[:300], flush=True)


def raw(name, *args):
    nr = NR[name] if isinstance(name, str) else name
    cargs = []
    for arg in args:
        if arg is None:
            cargs.append(ctypes.c_void_p(None))
        elif isinstance(arg, bytes):
            cargs.append(ctypes.c_char_p(arg))
        else:
            cargs.append(ctypes.c_long(arg))
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(nr), *cargs)
    return result if result >= 0 else -ctypes.get_errno()


def sys_attempt(name, nr_name, *args, forks=False):
    nr = NR.get(nr_name) if isinstance(nr_name, str) else nr_name
    if nr is None:
        print(f"{name}: n/a", flush=True)
        return
    result = raw(nr, *args)
    if forks and result == 0:
        os._exit(0)  # a new process: it must never get here
    outcome = f"errno {_errname(-result)}" if result < 0 else f"ok {result}"
    print(f"{name}: {outcome}", flush=True)

"""


@dataclass
class World:
    root: Path
    app: Path  # the script's directory: implicitly readable
    home: Path  # home-like, never granted
    secret: Path
    outside: Path  # never granted
    victim: Path
    ro: Path  # --allow-read
    ro_file: Path
    wo: Path  # --allow-write
    wo_file: Path
    rw: Path  # --allow-read and --allow-write
    tag: str  # unique, for the few names outside the world

    def grants(self) -> list[str]:
        return [
            f"--allow-read={self.ro}",
            f"--allow-write={self.wo}",
            f"--allow-read={self.rw}",
            f"--allow-write={self.rw}",
        ]

    def paths(self) -> dict[str, object]:
        out: dict[str, object] = {k: str(v) for k, v in vars(self).items()}
        out["nr"] = NR
        return out


def make_world(root: Path) -> World:
    w = World(
        root,
        root / "app",
        root / "home",
        root / "home" / ".secret-token",
        root / "outside",
        root / "outside" / "victim.txt",
        root / "ro",
        root / "ro" / "readable.txt",
        root / "wo",
        root / "wo" / "existing.txt",
        root / "rw",
        uuid.uuid4().hex,
    )
    for d in (w.app, w.home, w.outside, w.ro, w.wo, w.rw):
        d.mkdir(parents=True)
    w.secret.write_text("TOP-SECRET\n")
    w.victim.write_text("victim contents\n")
    w.ro_file.write_text("read-only contents\n")
    w.wo_file.write_text("write-only contents\n")
    return w


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def run_probe(
    w: World, code: str, *flags: str, name: str = "probe.py", **kwargs: object
) -> subprocess.CompletedProcess[bytes]:
    script = w.app / name
    script.write_text(PRELUDE + textwrap.dedent(code))
    return pynox(*flags, str(script), json.dumps(w.paths()), cwd=w.app, **kwargs)  # type: ignore[arg-type]


# How pynox runs a program: a plain run has nothing to supervise and runs in
# the pynox process itself; a timeout (or --json) makes pynox fork a child and
# supervise it. Probes that matter in both run in both.
MODES = {"in-process": [], "supervised": ["--timeout=120s"]}


# A pool child confines itself in two halves (what no policy changes while it
# waits as a spare, the rest when its request comes): the big probes run there too.
PROBE_MODES = [*MODES, "pool"]


def run_in_pool(
    w: World, script: Path, reads: list[Path], writes: list[Path], network: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """Runs a probe script as a pool request; its result as a finished process."""
    request = {
        "id": "probe",
        "script": str(script),
        "args": [json.dumps(w.paths())],
        "allow_read": [str(p) for p in reads],
        "allow_write": [str(p) for p in writes],
        "allow_network": network,
        "timeout": "120s",
        "max_output": "1m",
    }
    with PoolClient(workers=1, cwd=w.app) as client:
        client.send(request)
        while True:
            result = client.read(timeout=150)
            if result.get("id") == "probe" and "event" not in result:
                break
    return subprocess.CompletedProcess(
        [PYNOX, "pool"],
        result["exit"],
        result["stdout"].encode(),
        result["stderr"].encode(),
    )


def run_grants_probe(mode: str, w: World, script: Path) -> subprocess.CompletedProcess[bytes]:
    """The probe under World's grants, in one of PROBE_MODES."""
    if mode == "pool":
        return run_in_pool(w, script, [w.ro, w.rw], [w.wo, w.rw])
    return pynox(*MODES[mode], *w.grants(), str(script), json.dumps(w.paths()), cwd=w.app)


def run_in_sh(*command: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    """Runs pynox under a throwaway shell, so that "the parent" of an in-process
    run is that shell and not this test process (`; exit` keeps sh from exec'ing)."""
    return run(["sh", "-c", '"$@"; exit $?', "sh", PYNOX, *command], **kwargs)  # type: ignore[arg-type]


def outcomes(proc: subprocess.CompletedProcess[bytes]) -> dict[str, str]:
    lines = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        name, sep, rest = line.partition(": ")
        if sep:
            lines[name] = rest
    return lines


def hints(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [
        ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.startswith("pynox:")
    ]


def snapshot(path: Path) -> tuple[int, int, int, bytes]:
    st = path.lstat()
    return (st.st_mode, st.st_uid, st.st_mtime_ns, path.read_bytes())


# --------------------------------------------------------------------------
# The file system: one probe, many attempts


FS_PROBE = """
import os, shutil
j = os.path.join
attempt("read-etc-passwd", lambda: open("/etc/passwd").read())
attempt("read-etc-shadow", lambda: open("/etc/shadow").read())
attempt("read-home-secret", lambda: open(W["secret"]).read())
attempt("list-home", os.listdir, W["home"])
attempt("read-via-symlink-in-script-dir", lambda: open(j(W["app"], "link-to-secret")).read())
attempt("list-via-symlink-in-script-dir", os.listdir, j(W["app"], "link-to-home"))
attempt("read-via-dotdot", lambda: open(j(W["app"], "..", "home", ".secret-token")).read())
attempt("read-via-chdir", lambda: (os.chdir(W["home"]), open(".secret-token").read()))
os.chdir(W["app"])
attempt("read-via-dirfd", lambda: os.read(os.open(".secret-token", os.O_RDONLY,
        dir_fd=os.open(W["home"], os.O_PATH)), 100))
attempt("hardlink-into-script-dir", os.link, W["secret"], j(W["app"], "hardlink"))
attempt("hardlink-secret-into-rw", os.link, W["secret"], j(W["rw"], "hardlink"))
attempt("hardlink-ro-file-into-rw", os.link, W["ro_file"], j(W["rw"], "ro-link"))
attempt("create-outside", lambda: open(j(W["outside"], "created.txt"), "x").write("x"))
attempt("create-in-script-dir", lambda: open(j(W["app"], "created.txt"), "w").write("x"))
attempt("truncate-outside", os.truncate, W["victim"], 0)
attempt("open-trunc-outside", lambda: open(W["victim"], "w"))
attempt("os-open-trunc-outside", os.open, W["victim"], os.O_WRONLY | os.O_TRUNC)
attempt("append-outside", lambda: open(W["victim"], "a").write("appended"))
attempt("readwrite-outside", lambda: open(W["victim"], "r+").write("over"))
attempt("unlink-outside", os.unlink, W["victim"])
attempt("rename-outside-away", os.rename, W["victim"], j(W["outside"], "renamed.txt"))
attempt("rename-outside-into-rw", os.rename, W["victim"], j(W["rw"], "stolen.txt"))
attempt("rename-ro-into-rw", os.rename, W["ro_file"], j(W["rw"], "stolen-ro.txt"))
attempt("mkdir-outside", os.mkdir, j(W["outside"], "newdir"))
attempt("rmdir-ro", os.rmdir, W["ro"])
attempt("symlink-outside", os.symlink, "/etc/passwd", j(W["outside"], "symlink"))
attempt("symlink-in-script-dir", os.symlink, W["secret"], j(W["app"], "new-symlink"))
attempt("mkfifo-outside", os.mkfifo, j(W["outside"], "fifo"))
attempt("write-new-in-ro", lambda: open(j(W["ro"], "new.txt"), "w").write("x"))
attempt("append-ro-file", lambda: open(W["ro_file"], "a").write("x"))
attempt("truncate-ro-file", os.truncate, W["ro_file"], 0)
attempt("unlink-ro-file", os.unlink, W["ro_file"])
attempt("read-ro-file", lambda: open(W["ro_file"]).read())
attempt("read-wo-file", lambda: open(W["wo_file"]).read())
attempt("list-wo", os.listdir, W["wo"])
attempt("write-wo", lambda: open(j(W["wo"], "written.txt"), "w").write("written by the probe"))
attempt("read-back-wo", lambda: open(j(W["wo"], "written.txt")).read())
attempt("overwrite-wo-file", lambda: open(W["wo_file"], "w").write("replaced"))
attempt("symlink-in-rw-to-secret", os.symlink, W["secret"], j(W["rw"], "to-secret"))
attempt("read-via-own-symlink", lambda: open(j(W["rw"], "to-secret")).read())
attempt("write-via-hardlink-attempt", lambda: open(j(W["rw"], "ro-link"), "a").write("x"))
attempt("mknod-char-device-in-rw", os.mknod, j(W["rw"], "null"), 0o20666, os.makedev(1, 3))
for target, label in ((W["ro_file"], "ro-file"), (__file__, "script")):
    attempt(f"chmod-{label}", os.chmod, target, 0o777)
    attempt(f"chown-{label}", os.chown, target, 65534, 65534)
    attempt(f"utime-{label}", os.utime, target, (0, 0))
    attempt(f"utime-now-{label}", os.utime, target)
    attempt(f"setxattr-{label}", os.setxattr, target, "user.pynox", b"1")
    attempt(f"removexattr-{label}", os.removexattr, target, "user.pynox")
attempt("chmod-wo-file", os.chmod, W["wo_file"], 0o777)
attempt("shutil-copy-metadata", shutil.copystat, W["ro_file"], W["wo_file"])
attempt("read-proc-self-mem", lambda: open("/proc/self/mem", "rb").read(1))
attempt("read-proc-1-environ", lambda: open("/proc/1/environ", "rb").read())
attempt("read-proc-self-environ", lambda: open("/proc/self/environ", "rb").read())
attempt("read-parent-cmdline", lambda: open(f"/proc/{os.getppid()}/cmdline", "rb").read())
attempt("open-dev-tty", lambda: open("/dev/tty", "rb"))
def host_devices():
    opened = []
    for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/vda", "/dev/sda",
                "/dev/nvme0n1", "/dev/kvm", "/dev/console", "/dev/tty0", "/dev/ptmx",
                "/dev/full", "/dev/fuse", "/dev/loop-control", "/dev/userfaultfd",
                "/dev/vsock", "/dev/net/tun", "/dev/hwrng"):
        for flags in (os.O_RDONLY, os.O_WRONLY):
            try:
                os.close(os.open(dev, flags | os.O_NONBLOCK | os.O_NOCTTY))
            except FileNotFoundError:
                break
            except OSError:
                continue
            opened.append((dev, flags))
    return opened
attempt("open-host-devices", host_devices)
attempt("write-tmp", lambda: open(f"/tmp/pynox-escape-{W['tag']}", "w"))
attempt("write-dev-shm", lambda: open(f"/dev/shm/pynox-escape-{W['tag']}", "w"))
print("done: ok")
"""

DENIED = "PermissionError EACCES"
NOT_PERMITTED = "PermissionError EPERM"
CROSS_DEVICE = "OSError EXDEV"  # Landlock's answer to a link that would gain rights

# (attempt, expected outcome)
FS_EXPECTED: list[tuple[str, str]] = [
    ("read-etc-passwd", DENIED),
    ("read-etc-shadow", DENIED),
    ("read-home-secret", DENIED),
    ("list-home", DENIED),
    ("read-via-symlink-in-script-dir", DENIED),
    ("list-via-symlink-in-script-dir", DENIED),
    ("read-via-dotdot", DENIED),
    ("read-via-chdir", DENIED),
    ("read-via-dirfd", DENIED),
    ("hardlink-into-script-dir", DENIED),
    ("hardlink-secret-into-rw", CROSS_DEVICE),
    ("hardlink-ro-file-into-rw", CROSS_DEVICE),
    ("create-outside", DENIED),
    ("create-in-script-dir", DENIED),
    ("truncate-outside", DENIED),
    ("open-trunc-outside", DENIED),
    ("os-open-trunc-outside", DENIED),
    ("append-outside", DENIED),
    ("readwrite-outside", DENIED),
    ("unlink-outside", DENIED),
    ("rename-outside-away", DENIED),
    ("rename-outside-into-rw", DENIED),
    ("rename-ro-into-rw", DENIED),
    ("mkdir-outside", DENIED),
    ("rmdir-ro", DENIED),
    ("symlink-outside", DENIED),
    ("symlink-in-script-dir", DENIED),
    ("mkfifo-outside", DENIED),
    ("write-new-in-ro", DENIED),
    ("append-ro-file", DENIED),
    ("truncate-ro-file", DENIED),
    ("unlink-ro-file", DENIED),
    ("read-ro-file", "ok 'read-only contents\\n'"),
    ("read-wo-file", DENIED),
    ("list-wo", DENIED),
    ("write-wo", "ok 20"),
    ("read-back-wo", DENIED),
    ("overwrite-wo-file", "ok 8"),
    ("symlink-in-rw-to-secret", "ok None"),
    ("read-via-own-symlink", DENIED),
    ("write-via-hardlink-attempt", "ok 1"),  # a new file: the link was never made
    ("mknod-char-device-in-rw", DENIED),
    ("chmod-ro-file", NOT_PERMITTED),
    ("chown-ro-file", NOT_PERMITTED),
    ("utime-ro-file", NOT_PERMITTED),
    ("utime-now-ro-file", NOT_PERMITTED),
    ("setxattr-ro-file", NOT_PERMITTED),
    ("removexattr-ro-file", NOT_PERMITTED),
    ("chmod-script", NOT_PERMITTED),
    ("chown-script", NOT_PERMITTED),
    ("utime-script", NOT_PERMITTED),
    ("utime-now-script", NOT_PERMITTED),
    ("setxattr-script", NOT_PERMITTED),
    ("removexattr-script", NOT_PERMITTED),
    ("chmod-wo-file", NOT_PERMITTED),
    ("shutil-copy-metadata", NOT_PERMITTED),
    ("read-proc-self-mem", DENIED),
    ("read-proc-1-environ", DENIED),
    ("read-proc-self-environ", DENIED),
    ("read-parent-cmdline", DENIED),
    ("open-dev-tty", DENIED),
    ("open-host-devices", "ok []"),
    ("write-tmp", DENIED),
    ("write-dev-shm", DENIED),
]


@dataclass
class FsRun:
    world: World
    proc: subprocess.CompletedProcess[bytes]
    lines: dict[str, str]
    before: dict[str, tuple[int, int, int, bytes]]
    listing: dict[str, list[str]]


def _listing(w: World) -> dict[str, list[str]]:
    return {d.name: sorted(os.listdir(d)) for d in (w.home, w.outside, w.ro, w.app)}


@pytest.fixture(scope="module", params=PROBE_MODES)
def fs_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FsRun:
    w = make_world(tmp_path_factory.mktemp("fs"))
    (w.app / "link-to-secret").symlink_to(w.secret)
    (w.app / "link-to-home").symlink_to(w.home)
    w.app.joinpath("probe.py").write_text(PRELUDE + FS_PROBE)
    before = {p.name: snapshot(p) for p in (w.secret, w.victim, w.ro_file, w.app / "probe.py")}
    listing = _listing(w)
    proc = run_grants_probe(request.param, w, w.app / "probe.py")
    return FsRun(w, proc, outcomes(proc), before, listing)


def test_fs_probe_ran_to_the_end(fs_run: FsRun) -> None:
    assert fs_run.proc.returncode == 0, fs_run.proc.stderr.decode(errors="replace")
    assert fs_run.lines.get("done") == "ok"
    assert set(fs_run.lines) == {name for name, _ in FS_EXPECTED} | {"done"}


@pytest.mark.parametrize(("attempt", "expected"), FS_EXPECTED, ids=[a for a, _ in FS_EXPECTED])
def test_fs_attempt(fs_run: FsRun, attempt: str, expected: str) -> None:
    assert fs_run.lines.get(attempt) == expected


def test_fs_nothing_outside_changed(fs_run: FsRun) -> None:
    w = fs_run.world
    for path in (w.secret, w.victim, w.ro_file, w.app / "probe.py"):
        assert snapshot(path) == fs_run.before[path.name], path
    assert _listing(w) == fs_run.listing
    leftovers = [f"/tmp/pynox-escape-{w.tag}", f"/dev/shm/pynox-escape-{w.tag}"]
    created = [path for path in leftovers if os.path.lexists(path)]
    for path in created:
        os.unlink(path)
    assert created == []


def test_fs_writes_in_granted_dirs_landed(fs_run: FsRun) -> None:
    w = fs_run.world
    assert (w.wo / "written.txt").read_text() == "written by the probe"
    assert w.wo_file.read_text() == "replaced"
    assert sorted(os.listdir(w.rw)) == ["ro-link", "to-secret"]
    # ro-link is a new, ordinary file: no hard link to the read-only file exists.
    assert (w.rw / "ro-link").read_text() == "x"
    assert w.ro_file.stat().st_nlink == 1
    assert w.secret.stat().st_nlink == 1
    assert stat.S_IMODE(w.wo_file.stat().st_mode) != 0o777


# One uncaught attempt per run: python's traceback, then pynox's hint line.
HINTED = [
    (
        "read-etc-passwd",
        "open('/etc/passwd').read()",
        "PermissionError",
        "reading /etc/passwd is not allowed; grant it with --allow-read=/etc/passwd",
    ),
    (
        "read-home-secret",
        "open(W['secret']).read()",
        "PermissionError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
    (
        "create-outside",
        "open(W['outside'] + '/new.txt', 'w')",
        "PermissionError",
        "changing the entries of {outside} is not allowed; grant it with --allow-write={outside}",
    ),
    (
        "unlink-outside",
        "os.unlink(W['victim'])",
        "PermissionError",
        "changing the entries of {outside} is not allowed; grant it with --allow-write={outside}",
    ),
    (
        "append-outside",
        "open(W['victim'], 'a')",
        "PermissionError",
        "writing {victim} is not allowed; grant it with --allow-write={victim}",
    ),
    (
        "truncate-outside",
        "os.truncate(W['victim'], 0)",
        "PermissionError",
        "writing {victim} is not allowed; grant it with --allow-write={victim}",
    ),
    (
        "write-into-read-only-dir",
        "open(W['ro'] + '/new.txt', 'w')",
        "PermissionError",
        "changing the entries of {ro} is not allowed; grant it with --allow-write={ro}",
    ),
    (
        "read-from-write-only-dir",
        "open(W['wo_file']).read()",
        "PermissionError",
        "reading {wo_file} is not allowed; grant it with --allow-read={wo_file}",
    ),
    (
        "chmod-script",
        "os.chmod(__file__, 0o777)",
        "PermissionError",
        "changing file modes, owners, times or extended attributes is never allowed in the "
        "sandbox; write the file's contents instead (shutil.copyfile rather than shutil.copy)",
    ),
    ("os-fork", "os.fork()", "PermissionError", "PROCESS"),
    ("os-system", "os.system('true')", "PermissionError", "PROCESS"),
    ("subprocess-run", "import subprocess; subprocess.run(['true'])", "PermissionError", "PROCESS"),
    ("posix-spawn", "os.posix_spawn('/bin/true', ['true'], {})", "PermissionError", "PROCESS"),
    ("os-execv", "os.execv('/bin/true', ['true'])", "PermissionError", "PROCESS"),
    ("os-forkpty", "os.forkpty()", "PermissionError", "PROCESS"),
    (
        "socket-inet",
        "import socket; socket.socket()",
        "PermissionError",
        "the network is off; grant it with --allow-network",
    ),
    (
        "socket-unix",
        "import socket; socket.socket(socket.AF_UNIX)",
        "PermissionError",
        "Unix sockets of the host are never allowed in the sandbox",
    ),
    (
        "socket-netlink",
        "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
        "PermissionError",
        "only IPv4 and IPv6 sockets can be allowed in the sandbox",
    ),
    # The denial behind another exception: urllib's, SQLite's, the program's own.
    (
        "urllib-without-network",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/')",
        "urllib.error.URLError",
        "the network is off; grant it with --allow-network",
    ),
    (
        "sqlite-outside",
        "import sqlite3; sqlite3.connect(W['secret']).execute('select 1')",
        "sqlite3.OperationalError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
    (
        "sqlite-create-outside",
        "import sqlite3; sqlite3.connect(W['outside'] + '/new.db').execute('select 1')",
        "sqlite3.OperationalError",
        "changing the entries of {outside} is not allowed; grant it with --allow-write={outside}",
    ),
    (
        "denial-as-cause",
        "try:\n    open(W['secret']).read()\n"
        "except PermissionError as exc:\n    raise RuntimeError('no settings') from exc",
        "RuntimeError",
        "reading {secret} is not allowed; grant it with --allow-read={secret}",
    ),
]
PROCESS_HINT = (
    "starting processes (subprocess, os.system, os.fork, os.exec*) is never "
    "allowed in the sandbox; do the work in Python inside this program"
)


@pytest.mark.parametrize(
    ("code", "exc", "hint"), [h[1:] for h in HINTED], ids=[h[0] for h in HINTED]
)
def test_uncaught_denial_prints_the_hint(world: World, code: str, exc: str, hint: str) -> None:
    before = {p: snapshot(p) for p in (world.victim, world.secret, world.ro_file)}
    listing = _listing(world)
    proc = run_probe(world, code + "\nprint('not reached')\n", *world.grants())
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 1, err
    assert proc.stdout == b""
    assert err.startswith("Traceback (most recent call last):\n"), err
    last_python_line = [ln for ln in err.splitlines() if not ln.startswith("pynox:")][-1]
    assert last_python_line.startswith(exc + ":"), err
    expected = PROCESS_HINT if hint == "PROCESS" else hint.format(**world.paths())
    assert hints(proc) == ["pynox: " + expected]
    assert err.endswith("pynox: " + expected + "\n")
    assert {p: snapshot(p) for p in before} == before
    listing["app"] = sorted(set(listing["app"]) | {"probe.py"})
    assert _listing(world) == listing


def test_pty_fork_starts_nothing(world: World) -> None:
    # pty.fork() falls back to BSD pty names when os.forkpty() is refused, so
    # CPython's own module turns the PermissionError into OSError: no child either way.
    marker = world.rw / "child-ran"
    proc = run_probe(
        world,
        f"""
        import pty
        def go():
            pid, fd = pty.fork()
            if pid == 0:
                open({str(marker)!r}, "w").close()
                os._exit(0)
            return pid
        attempt("pty-fork", go)
    """,
        *world.grants(),
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc)["pty-fork"].split()[0] in ("PermissionError", "OSError")
    assert not marker.exists()


def test_reading_the_cwd_with_c_code_is_denied(world: World) -> None:
    (world.app / "local.txt").write_text("in the working directory")
    code = "open('local.txt').read()"
    proc = pynox("-c", code, cwd=world.app)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[-2:] == [
        "PermissionError: [Errno 13] Permission denied: 'local.txt'",
        f"pynox: reading {world.app}/local.txt is not allowed; grant it with "
        f"--allow-read={world.app}/local.txt",
    ]


# --------------------------------------------------------------------------
# Processes, from Python


def test_starting_processes_is_denied(world: World) -> None:
    markers = world.rw
    proc = run_probe(
        world,
        """
        import pty, subprocess
        m = lambda name: os.path.join(W["rw"], "ran-" + name)
        attempt("os-system", os.system, f"touch {m('system')}")
        attempt("os-popen", lambda: os.popen(f"touch {m('popen')}").close())
        attempt("subprocess-run", subprocess.run, ["/bin/sh", "-c", f"touch {m('subprocess')}"])
        attempt("subprocess-shell", subprocess.check_call, f"touch {m('shell')}", shell=True)
        def fork():
            pid = os.fork()
            if pid == 0:
                open(m("fork"), "w").close()
                os._exit(0)
            return os.waitpid(pid, 0)
        attempt("os-fork", fork)
        sh = lambda name: ["sh", "-c", f"touch {m(name)}"]
        attempt("os-posix-spawn", os.posix_spawn, "/bin/sh", sh("spawn"), {})
        attempt("os-posix-spawnp", os.posix_spawnp, "touch", ["touch", m("spawnp")], {})
        attempt("os-spawnv", os.spawnv, os.P_WAIT, "/bin/sh", ["sh", "-c", f"touch {m('spawnv')}"])
        attempt("os-execv", os.execv, "/bin/sh", ["sh", "-c", f"touch {m('execv')}"])
        attempt("os-execve-python", os.execve, sys.executable, [sys.executable, "-c", "1"], {})
        attempt("os-forkpty", os.forkpty)
        print("done: ok")
    """,
        *world.grants(),
    )
    lines = outcomes(proc)
    assert proc.returncode == 0, proc.stderr
    assert lines.pop("done") == "ok"
    assert sorted(os.listdir(markers)) == []  # nothing ran
    # os.system() is checked last: glibc's system() reports a failed spawn as
    # "exit status 127" (32512), which a program cannot tell from a shell's own
    # failure; pynox must turn the refusal into PermissionError like the others.
    system = lines.pop("os-system")
    assert lines == {
        "os-popen": "PermissionError EPERM",
        "subprocess-run": "PermissionError EPERM",
        "subprocess-shell": "PermissionError EPERM",
        "os-fork": "PermissionError EPERM",
        "os-posix-spawn": "PermissionError EPERM",
        "os-posix-spawnp": "PermissionError EPERM",
        "os-spawnv": "PermissionError EPERM",
        "os-execv": "PermissionError EPERM",
        "os-execve-python": "PermissionError EPERM",
        "os-forkpty": "PermissionError EACCES",
    }
    assert system == "PermissionError EPERM"


# --------------------------------------------------------------------------
# Raw system calls through ctypes: one probe, one line per call

CLONE_VM = 0x100
CLONE_SIGHAND = 0x800
CLONE_VFORK = 0x4000
CLONE_THREAD = 0x10000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x20000
CLONE_NEWNET = 0x40000000
ADDR_NO_RANDOMIZE = 0x0040000
PTRACE_ATTACH = 16
PTRACE_SEIZE = 0x4206
RLIMIT_AS = 9
RLIMIT_NOFILE = 7

RAW_PROBE = f"""
import signal
ppid = os.getppid()
SIGCHLD = int(signal.SIGCHLD)
sys_attempt("clone-fork", "clone", SIGCHLD, 0, 0, 0, 0, forks=True)
sys_attempt("clone-vfork-flags", "clone", {CLONE_VM | CLONE_VFORK} | SIGCHLD, 0, 0, 0, 0,
            forks=True)
sys_attempt("clone-newuser", "clone", {CLONE_NEWUSER} | SIGCHLD, 0, 0, 0, 0, forks=True)
sys_attempt("clone-newns-newnet", "clone", {CLONE_NEWNS | CLONE_NEWNET} | SIGCHLD, 0, 0, 0, 0,
            forks=True)
sys_attempt("clone-thread-newuser", "clone",
            {CLONE_THREAD | CLONE_SIGHAND | CLONE_VM | CLONE_NEWUSER}, 0, 0, 0, 0)
sys_attempt("clone3", "clone3", None, 0)
sys_attempt("fork", "fork", forks=True)
sys_attempt("vfork", "vfork", forks=True)
sys_attempt("unshare-newuser", "unshare", {CLONE_NEWUSER})
sys_attempt("unshare-newns", "unshare", {CLONE_NEWNS})
sys_attempt("setns", "setns", -1, 0)
sys_attempt("ptrace-attach-parent", "ptrace", {PTRACE_ATTACH}, ppid, 0, 0)
sys_attempt("ptrace-seize-parent", "ptrace", {PTRACE_SEIZE}, ppid, 0, 0)
sys_attempt("ptrace-traceme", "ptrace", 0, 0, 0, 0)
raw("ptrace", 17, ppid, 0, 0)  # PTRACE_DETACH, in case an attach got through
sys_attempt("process-vm-readv-parent", "process_vm_readv", ppid, None, 0, None, 0, 0)
sys_attempt("process-vm-writev-parent", "process_vm_writev", ppid, None, 0, None, 0, 0)
# An unknown file-system type: were the call let through, nothing would be mounted.
sys_attempt("mount", "mount", b"none", W["rw"].encode(), b"pynox-no-such-fs", 0, None)
sys_attempt("umount2", "umount2", b"/", 0xFFFF)
sys_attempt("pivot-root", "pivot_root", b"/", b"/")
sys_attempt("chroot", "chroot", W["rw"].encode())
sys_attempt("bpf", "bpf", 9999, None, 0)
sys_attempt("perf-event-open", "perf_event_open", None, 0, -1, -1, 0xFFFF)
sys_attempt("keyctl", "keyctl", 9999, 0, 0, 0, 0)
sys_attempt("add-key", "add_key", b"user", b"pynox", b"x", 1, -4)
sys_attempt("userfaultfd", "userfaultfd", 1)
sys_attempt("io-uring-setup", "io_uring_setup", 0, None)
sys_attempt("personality-no-aslr", "personality", {ADDR_NO_RANDOMIZE})
sys_attempt("kexec-load", "kexec_load", 0, 0, None, 0xFFFFFFFF)
sys_attempt("init-module", "init_module", None, 0, None)
sys_attempt("finit-module", "finit_module", -1, None, 0xFFFF)
sys_attempt("open-by-handle-at", "open_by_handle_at", -1, None, 0)
sys_attempt("shmget", "shmget", 0x70796E6F, 0, 0)
sys_attempt("mq-open", "mq_open", b"pynox-escape", 0, 0, None)
sys_attempt("syslog-read-all", "syslog", 3, None, 0)
sys_attempt("iopl", "iopl", 3)
# The niceness each already has: were the call let through, nothing would change.
sys_attempt("setpriority-all-of-user", "setpriority", 2, 0, os.getpriority(os.PRIO_USER, 0))
sys_attempt("setpriority-parent", "setpriority", 0, ppid, os.getpriority(os.PRIO_PROCESS, ppid))
if NR.get("getpid") is not None and {MACHINE == "x86_64"}:
    sys_attempt("x32-getpid", NR["getpid"] | 0x40000000)
    sys_attempt("x32-kill-parent", NR["kill"] | 0x40000000, ppid, 9)
else:
    print("x32-getpid: n/a")
    print("x32-kill-parent: n/a")
sys_attempt("kill-parent-sigkill", "kill", ppid, 9)
sys_attempt("kill-parent-0", "kill", ppid, 0)
sys_attempt("kill-init-0", "kill", 1, 0)
sys_attempt("kill-everyone-0", "kill", -1, 0)
sys_attempt("tkill-parent", "tkill", ppid, 0)
sys_attempt("tgkill-parent", "tgkill", ppid, ppid, 0)
pidfd = raw("pidfd_open", ppid, 0)
print(f"pidfd-open-parent: {{'ok' if pidfd >= 0 else 'errno'}}")
sys_attempt("pidfd-send-signal-parent", "pidfd_send_signal", pidfd, 9, None, 0)
sys_attempt("pidfd-getfd-parent", "pidfd_getfd", pidfd, 0, 0)
sys_attempt("prlimit-parent", "prlimit64", ppid, {RLIMIT_NOFILE}, None,
            ctypes.addressof(ctypes.create_string_buffer(16)))
memfd = raw("memfd_create", b"payload", 0)
print(f"memfd-create: {{'ok' if memfd >= 0 else 'errno ' + errno.errorcode[-memfd]}}")
if memfd >= 0:
    os.write(memfd, b"#!/bin/sh\\ntouch " + W["rw"].encode() + b"/ran-memfd\\n")
sys_attempt("execveat-memfd", "execveat", memfd, b"", None, None, 0x1000)
attempt("os-kill-parent-0", os.kill, ppid, 0)
attempt("os-kill-parent-sigkill", os.kill, ppid, signal.SIGKILL)
attempt("os-kill-parent-sigterm", os.kill, ppid, signal.SIGTERM)
attempt("os-killpg-parent-group", os.killpg, os.getpgid(ppid), 0)
attempt("os-kill-init", os.kill, 1, 0)
attempt("signal-pidfd-parent", signal.pidfd_send_signal, pidfd, signal.SIGKILL)
attempt("os-kill-self-0", os.kill, os.getpid(), 0)
print("done: ok")
"""

E = "errno EPERM"
RAW_EXPECTED: list[tuple[str, str]] = [
    ("clone-fork", E),
    ("clone-vfork-flags", E),
    ("clone-newuser", E),
    ("clone-newns-newnet", E),
    ("clone-thread-newuser", E),
    ("clone3", "errno ENOSYS"),
    ("fork", E),
    ("vfork", E),
    ("unshare-newuser", E),
    ("unshare-newns", E),
    ("setns", E),
    ("ptrace-attach-parent", E),
    ("ptrace-seize-parent", E),
    ("ptrace-traceme", E),
    ("process-vm-readv-parent", E),
    ("process-vm-writev-parent", E),
    ("mount", E),
    ("umount2", E),
    ("pivot-root", E),
    ("chroot", E),
    ("bpf", E),
    ("perf-event-open", E),
    ("keyctl", E),
    ("add-key", E),
    ("userfaultfd", E),
    ("io-uring-setup", E),
    ("personality-no-aslr", E),
    ("kexec-load", E),
    ("init-module", E),
    ("finit-module", E),
    ("open-by-handle-at", E),
    ("shmget", E),
    ("mq-open", E),
    ("syslog-read-all", E),
    ("iopl", E),
    ("setpriority-all-of-user", E),
    ("setpriority-parent", E),
    ("x32-getpid", E),
    ("x32-kill-parent", E),
    ("kill-parent-sigkill", E),
    ("kill-parent-0", E),
    ("kill-init-0", E),
    ("kill-everyone-0", E),
    ("tkill-parent", E),
    ("tgkill-parent", E),
    ("pidfd-send-signal-parent", E),
    ("pidfd-getfd-parent", E),
    ("prlimit-parent", E),
    ("memfd-create", E),
    ("execveat-memfd", E),
    ("os-kill-parent-0", "PermissionError EPERM"),
    ("os-kill-parent-sigkill", "PermissionError EPERM"),
    ("os-kill-parent-sigterm", "PermissionError EPERM"),
    ("os-killpg-parent-group", "PermissionError EPERM"),
    ("os-kill-init", "PermissionError EPERM"),
    ("signal-pidfd-parent", "PermissionError EPERM"),
    ("os-kill-self-0", "ok None"),
]
_NOT_ON_AARCH64 = {"fork", "vfork", "iopl", "x32-getpid", "x32-kill-parent"}


@pytest.fixture(scope="module", params=PROBE_MODES)
def raw_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[World, subprocess.CompletedProcess[bytes]]:
    w = make_world(tmp_path_factory.mktemp("raw"))
    script = w.app / "probe.py"
    script.write_text(PRELUDE + RAW_PROBE)
    if request.param == "pool":
        return w, run_grants_probe("pool", w, script)
    # In process, the parent every kill below aims at is a throwaway shell.
    return w, run_in_sh(
        *MODES[request.param], *w.grants(), str(script), json.dumps(w.paths()), cwd=w.app
    )


@RAW_SKIP
def test_raw_probe_ran_and_the_parent_survived(raw_run) -> None:  # type: ignore[no-untyped-def]
    w, proc = raw_run
    # The parent every kill aimed at (pynox's supervisor, or the shell around an
    # in-process run) ended normally with the probe's status.
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = outcomes(proc)
    assert lines.get("done") == "ok"
    assert lines.get("pidfd-open-parent") == "ok"
    assert sorted(os.listdir(w.rw)) == []  # no memfd script ran


@RAW_SKIP
@pytest.mark.parametrize(("attempt", "expected"), RAW_EXPECTED, ids=[a for a, _ in RAW_EXPECTED])
def test_raw_attempt(raw_run, attempt: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    if attempt in _NOT_ON_AARCH64 and MACHINE != "x86_64":
        pytest.skip(f"{attempt} does not exist on {MACHINE}")
    assert outcomes(raw_run[1]).get(attempt) == expected


# --------------------------------------------------------------------------
# Sockets and the network


def _tcp_server() -> tuple[socket.socket, list[bytes], threading.Thread, threading.Event]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    seen: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = conn.recv(100)
                seen.append(data)
                conn.sendall(b"pong:" + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, seen, thread, stop


TCP_PROBE = """
import socket
port = int(W["port"])
def talk():
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"ping")
        return s.recv(100)
attempt("tcp-loopback", talk)
attempt("udp-socket", socket.socket, socket.AF_INET, socket.SOCK_DGRAM)
attempt("inet6-socket", socket.socket, socket.AF_INET6, socket.SOCK_STREAM)
attempt("raw-inet-socket", socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
attempt("packet-socket", socket.socket, socket.AF_PACKET, socket.SOCK_RAW)
attempt("netlink-socket", socket.socket, socket.AF_NETLINK, socket.SOCK_RAW)
attempt("unix-socket", socket.socket, socket.AF_UNIX, socket.SOCK_STREAM)
attempt("alg-socket", socket.socket, socket.AF_ALG, socket.SOCK_SEQPACKET)
attempt("vsock-socket", socket.socket, socket.AF_VSOCK, socket.SOCK_STREAM)
"""


@pytest.mark.parametrize("mode", ["command", "pool"])
@pytest.mark.parametrize("network", [True, False], ids=["with-allow-network", "without"])
def test_loopback_tcp_needs_allow_network(world: World, network: bool, mode: str) -> None:
    server, seen, thread, stop = _tcp_server()
    with server:
        port = server.getsockname()[1]
        flags = ["--allow-network"] if network else []
        script = world.app / "probe.py"
        script.write_text(PRELUDE + TCP_PROBE)
        paths = dict(world.paths(), port=port)
        if mode == "pool":
            world.paths = lambda: paths  # type: ignore[method-assign]
            proc = run_in_pool(world, script, [], [], network=network)
        else:
            proc = pynox(*flags, str(script), json.dumps(paths), cwd=world.app)
        time.sleep(0.1)
        stop.set()
        thread.join(10)
    lines = outcomes(proc)
    assert proc.returncode == 0, proc.stderr
    never = "PermissionError EPERM"
    off = "PermissionError EACCES"
    expected = {
        "tcp-loopback": "ok b'pong:ping'" if network else off,
        "udp-socket": lines["udp-socket"] if network else off,
        "inet6-socket": lines["inet6-socket"] if network else off,
        # No CAP_NET_RAW even with the network granted.
        "raw-inet-socket": never if network else off,
        "packet-socket": never,
        "netlink-socket": never,
        "unix-socket": never,
        "alg-socket": never,
        "vsock-socket": never,
    }
    assert lines == expected
    if network:
        assert lines["udp-socket"].startswith("ok <socket.socket")
        assert seen == [b"ping"]
    else:
        assert seen == []


RESOLVE_PROBE = """
import socket
try:
    print(sorted({info[4][0] for info in socket.getaddrinfo("localhost", 80, socket.AF_INET)}))
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize("network", [True, False], ids=["with-allow-network", "without"])
def test_name_resolution_comes_with_the_network(world: World, network: bool) -> None:
    """--allow-network alone resolves names (the resolver's files come with it)."""
    if not Path("/etc/hosts").exists():
        pytest.skip("this machine has no /etc/hosts")
    script = world.app / "resolve.py"
    script.write_text(RESOLVE_PROBE)
    flags = ["--allow-network"] if network else []
    proc = pynox(*flags, str(script), cwd=world.app)
    assert proc.returncode == 0, proc.stderr
    expected = subprocess.run(
        [sys.executable, "-I", str(script)], capture_output=True, text=True, check=True
    ).stdout
    output = proc.stdout.decode()
    if network:
        assert output == expected
        assert "127.0.0.1" in output
    else:
        # /etc/hosts is not readable: no address comes back.
        assert output == "gaierror\n"


@pytest.fixture
def unix_listeners(world: World) -> Iterator[tuple[Path, Path, Callable[[], list[bytes]]]]:
    """A stream listener and a datagram receiver of the host, outside every grant."""
    stream_path = world.outside / "service.sock"
    dgram_path = world.outside / "dgram.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(stream_path))
    listener.listen(5)
    listener.setblocking(False)
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(dgram_path))
    receiver.setblocking(False)

    def reached() -> list[bytes]:
        """Everything that arrived: accepted connections' data and datagrams."""
        time.sleep(0.1)
        got = []
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                break
            with conn:
                conn.settimeout(1)
                got.append(b"connection: " + conn.recv(100))
        while True:
            try:
                got.append(receiver.recv(100))
            except BlockingIOError:
                break
        return got

    with listener, receiver:
        yield stream_path, dgram_path, reached


def test_unix_sockets_cannot_be_created(world: World, unix_listeners) -> None:  # type: ignore[no-untyped-def]
    stream_path, dgram_path, reached = unix_listeners
    proc = run_probe(
        world,
        f"""
        import socket
        def connect(kind, path):
            s = socket.socket(socket.AF_UNIX, kind)
            s.connect(path)
            s.sendall(b"from the sandbox")
        attempt("connect-stream", connect, socket.SOCK_STREAM, {str(stream_path)!r})
        attempt("connect-dgram", connect, socket.SOCK_DGRAM, {str(dgram_path)!r})
        attempt("abstract-socket", socket.socket, socket.AF_UNIX, socket.SOCK_DGRAM)
        a, b = socket.socketpair()
        attempt("socketpair-works", lambda: (a.sendall(b"x"), b.recv(1))[1])
    """,
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc) == {
        "connect-stream": "PermissionError EPERM",
        "connect-dgram": "PermissionError EPERM",
        "abstract-socket": "PermissionError EPERM",
        "socketpair-works": "ok b'x'",
    }
    assert reached() == []


def test_socketpair_ends_cannot_reach_host_unix_sockets(world: World, unix_listeners) -> None:  # type: ignore[no-untyped-def]
    """socketpair() stays allowed for asyncio; its ends must not become a way out.

    A datagram socket may name any destination in sendto() and may connect()
    again, so an AF_UNIX SOCK_DGRAM pair would reach every datagram socket of
    the host by path (/dev/log, the journal, sd_notify sockets...): such pairs
    are refused outright, and connected pairs cannot connect elsewhere.
    """
    stream_path, dgram_path, reached = unix_listeners
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract_name = "\0pynox-escape-" + uuid.uuid4().hex
    abstract.bind(abstract_name)
    abstract.setblocking(False)
    proc = run_probe(
        world,
        f"""
        import socket
        stream, dgram = {str(stream_path)!r}, {str(dgram_path)!r}
        a, b = socket.socketpair()
        attempt("stream-pair-connect", a.connect, stream)
        e, f = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        attempt("seqpacket-pair-connect", e.connect, stream)
        attempt("dgram-pair", socket.socketpair, socket.AF_UNIX, socket.SOCK_DGRAM)
        attempt("dgram-pair-nonblocking", socket.socketpair, socket.AF_UNIX,
                socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        def sendto(data, address):
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            return a.sendto(data, address)
        attempt("dgram-pair-sendto", sendto, b"sendto from the sandbox", dgram)
        attempt("dgram-pair-sendto-abstract", sendto, b"to an abstract name", {abstract_name!r})
        def stream_sendto():
            return a.sendto(b"sendto on a stream pair", dgram)
        attempt("stream-pair-sendto", stream_sendto)
    """,
    )
    with abstract:
        try:
            abstract_got = [abstract.recv(100)]
        except BlockingIOError:
            abstract_got = []
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    assert set(lines) == {
        "stream-pair-connect",
        "seqpacket-pair-connect",
        "dgram-pair",
        "dgram-pair-nonblocking",
        "dgram-pair-sendto",
        "dgram-pair-sendto-abstract",
        "stream-pair-sendto",
    }
    for name in ("dgram-pair", "dgram-pair-nonblocking", "dgram-pair-sendto"):
        assert lines[name] == "PermissionError EPERM", lines
    assert abstract_got == []
    assert reached() == [], f"a host Unix socket was reached: {lines}"
    assert [k for k, v in lines.items() if v.startswith("ok")] == []


@pytest.mark.parametrize("mode", list(MODES))
def test_terminal_injection_is_denied(world: World, mode: str) -> None:
    """The pty is pynox's controlling terminal, as a user's terminal is."""
    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        script = world.app / "probe.py"
        script.write_text(
            PRELUDE
            + textwrap.dedent("""
            import fcntl, struct, termios
            attempt("stdin-isatty", os.isatty, 0)
            for fd in (0, 1):
                attempt(f"tiocsti-fd{fd}", fcntl.ioctl, fd, termios.TIOCSTI, b"X")
            attempt("tiocsti-loop", lambda: [fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
                                             for c in b"id\\n"])
            attempt("tiocspgrp", fcntl.ioctl, 0, termios.TIOCSPGRP, struct.pack("i", os.getpid()))
            attempt("tioccons", fcntl.ioctl, 0, termios.TIOCCONS)
            attempt("tiocsctty", fcntl.ioctl, 0, termios.TIOCSCTTY, 1)
        """)
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}

        def make_controlling_terminal() -> None:
            import fcntl

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.run(
            [PYNOX, *MODES[mode], str(script)],
            stdin=slave,
            capture_output=True,
            cwd=world.app,
            env=env,
            timeout=60,
            start_new_session=True,
            preexec_fn=make_controlling_terminal,
        )
        os.set_blocking(slave, False)
        os.set_blocking(master, False)
        injected = b""
        for fd in (slave, master):
            with contextlib.suppress(OSError):  # BlockingIOError: nothing there
                injected += os.read(fd, 100)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, proc.stderr
    denied = "PermissionError EPERM"
    assert outcomes(proc) == {
        "stdin-isatty": "ok True",
        "tiocsti-fd0": denied,
        "tiocsti-fd1": denied,  # a pipe, but the filter answers first
        "tiocsti-loop": denied,
        "tiocspgrp": denied,
        "tioccons": denied,
        "tiocsctty": denied,
    }
    assert injected == b""


def test_sigio_cannot_signal_other_processes(world: World) -> None:
    """F_SETOWN + F_SETSIG aims the kernel's I/O signal at any pid or process group."""
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        script = world.app / "probe.py"
        script.write_text(
            PRELUDE
            + textwrap.dedent(f"""
            import fcntl, signal, socket, time
            F_SETSIG = 10
            def arm(owner):
                a, b = socket.socketpair()
                fcntl.fcntl(a.fileno(), fcntl.F_SETOWN, owner)
                fcntl.fcntl(a.fileno(), F_SETSIG, int(signal.SIGKILL))
                flags = fcntl.fcntl(a.fileno(), fcntl.F_GETFL)
                fcntl.fcntl(a.fileno(), fcntl.F_SETFL, flags | os.O_ASYNC)
                b.send(b"wake")
                time.sleep(0.2)
                return "armed"
            attempt("sigio-victim-pid", arm, {victim.pid})
            attempt("sigio-victim-group", arm, -{victim.pid})
            attempt("sigio-parent", arm, os.getppid())
            attempt("kill-victim", os.kill, {victim.pid}, signal.SIGKILL)
            print("done: ok")
        """)
        )
        # In process, the parent aimed at is a throwaway shell, not this test.
        proc = run_in_sh(str(script), json.dumps(world.paths()), cwd=world.app)
        time.sleep(0.1)
        alive = victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
    # The parent (the shell around pynox) ended normally: no SIGKILL arrived there either.
    assert proc.returncode == 0, proc
    lines = outcomes(proc)
    assert lines["done"] == "ok"
    assert lines["kill-victim"] == "PermissionError EPERM"
    assert alive, "a SIGIO signal from the sandbox killed a process outside it"


def _state(pid: int) -> str:
    """The process state letter from /proc (Z: dead, waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.parametrize("mode", list(MODES))
def test_signals_to_its_process_group_spare_the_other_members(world: World, mode: str) -> None:
    """pynox leads a process group that holds another process too (a shell job):
    signalling the group must reach nobody else."""
    script = world.app / "probe.py"
    script.write_text(
        PRELUDE
        + textwrap.dedent("""
        import signal
        other = int(sys.argv[2])
        print(f"other: {other}")
        print(f"same-group: ok {os.getpgid(other) == os.getpgid(0)}")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        attempt("kill-own-group", os.kill, -os.getpgid(0), signal.SIGTERM)
        attempt("killpg-own-group", os.killpg, os.getpgid(0), signal.SIGTERM)
        attempt("kill-0", os.kill, 0, signal.SIGTERM)
        attempt("kill-other", os.kill, other, signal.SIGTERM)
    """)
    )
    out = world.root / "out.txt"
    # sh starts the other member, then becomes pynox (same pid, so pynox leads the group).
    shell = (
        f'sleep 60 </dev/null >/dev/null 2>&1 & exec "$0" {" ".join(MODES[mode])} "$1" "$2" "$!"'
    )
    with out.open("wb") as f:
        proc = subprocess.run(
            ["sh", "-c", shell, PYNOX, str(script), json.dumps(world.paths())],
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=world.app,
            timeout=60,
        )
    text = out.read_bytes()
    lines = outcomes(subprocess.CompletedProcess([], 0, text, b""))
    other = int(lines["other"])
    try:
        time.sleep(0.1)
        state = _state(other)
    finally:
        os.kill(other, signal.SIGKILL)  # our own sleep, by its pid
    assert proc.returncode == 0, text
    # In process, pynox leads the group; a supervised child has a session of its own.
    assert lines["same-group"] == f"ok {mode == 'in-process'}"
    assert lines["kill-other"] == "PermissionError EPERM"
    assert state not in ("Z", "gone"), "a signal to the group reached a process outside"


def test_inotify_reveals_nothing_outside_the_grants(world: World) -> None:
    """Watching a directory that may not be listed would reveal its entries' names."""
    done = threading.Event()

    def churn() -> None:
        for i in range(40):
            if done.is_set():
                return
            name = world.home / f"created-by-the-user-{i}"
            name.write_text("x")
            name.read_text()
            time.sleep(0.05)

    script = world.app / "probe.py"
    script.write_text(
        PRELUDE
        + textwrap.dedent("""
        import select, struct
        fd = LIBC.inotify_init1(0)
        wd = LIBC.inotify_add_watch(fd, W["home"].encode(), 0xFFF)
        print(f"watch: {'errno ' + _errname(ctypes.get_errno()) if wd < 0 else 'ok'}", flush=True)
        names = []
        if wd >= 0:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if poller.poll(3000):
                data = os.read(fd, 65536)
                while data:
                    _, _, _, size = struct.unpack_from("iIII", data)
                    names.append(data[16:16 + size].rstrip(b"\\0").decode())
                    data = data[16 + size:]
        print("names:", json.dumps(sorted(set(names))))
    """)
    )
    thread = threading.Thread(target=churn)
    thread.start()
    try:
        proc = pynox(str(script), json.dumps(world.paths()), cwd=world.app)
    finally:
        done.set()
        thread.join()
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    assert lines["names"] == "[]", f"the sandbox saw names in {world.home}: {lines['names']}"
    assert lines["watch"] in ("errno EACCES", "errno EPERM")


# --------------------------------------------------------------------------
# The environment


def test_environment_holds_only_allowed_names(world: World) -> None:
    token = "tok-" + uuid.uuid4().hex
    proc = run_probe(
        world,
        """
        print("environ:", json.dumps(dict(os.environ), sort_keys=True))
        import posix
        print("posix-environ:", sorted(posix.environ))
        attempt("getenv-secret", os.getenv, "SECRET_TOKEN")
        LIBC.getenv.restype = ctypes.c_char_p
        attempt("libc-getenv", LIBC.getenv, b"SECRET_TOKEN")
        attempt("libc-getenv-allowed", LIBC.getenv, b"ALLOWED_VAR")
        attempt("proc-environ", lambda: open("/proc/self/environ", "rb").read())
    """,
        "--allow-env=ALLOWED_VAR",
        "--allow-env=UNSET_VAR",
        env={"SECRET_TOKEN": token, "ALLOWED_VAR": "visible", "PYTHONPATH": "/x"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    # Locale variables (LANG, LC_*, TZ) always pass through, so that text and
    # local time come out as under python; run() sets LANG=C.UTF-8.
    assert json.loads(lines["environ"]) == {"ALLOWED_VAR": "visible", "LANG": "C.UTF-8"}
    assert lines["posix-environ"] == "[b'ALLOWED_VAR', b'LANG']"
    assert lines["getenv-secret"] == "ok None"
    assert lines["libc-getenv"] == "ok None"
    assert lines["libc-getenv-allowed"] == "ok b'visible'"
    assert lines["proc-environ"] == "PermissionError EACCES"
    assert token.encode() not in proc.stdout


@pytest.mark.parametrize("mode", list(MODES))
def test_environment_values_are_not_left_in_memory(world: World, mode: str) -> None:
    """The values of variables not granted must be gone, not just unlisted.

    The kernel puts the environment strings at the top of the main stack, next
    to the auxiliary vector's AT_EXECFN string; reading one's own memory needs
    no permission, so a leftover copy there is as good as os.environ.
    """
    token = "tok-" + uuid.uuid4().hex
    proc = run_probe(
        world,
        """
        LIBC.getauxval.restype = ctypes.c_ulong
        top = LIBC.getauxval(31)  # AT_EXECFN, near the environment strings
        found = []
        if top:
            blob = ctypes.string_at(top - 16384, 16384)
            found = [s.decode(errors="replace") for s in blob.split(b"\\0") if b"SECRET" in s]
        print("stack-scan:", json.dumps(found))
    """,
        *MODES[mode],
        env={"SECRET_TOKEN": token},
    )
    assert proc.returncode == 0, proc.stderr
    assert outcomes(proc)["stack-scan"] == "[]"
    assert token.encode() not in proc.stdout


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "GCONV_PATH"])
def test_loader_variables_are_refused_at_the_cli(world: World, name: str) -> None:
    marker = world.rw / "ran"
    script = world.app / "probe.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    # Refused by name, set or not (setting LD_PRELOAD here would act on pynox itself).
    proc = pynox(f"--allow-env={name}", f"--allow-write={world.rw}", str(script), cwd=world.app)
    assert proc.returncode == 125
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pynox: the environment variable {name} ")
    assert not marker.exists()


# --------------------------------------------------------------------------
# Limits


def test_memory_limit_gives_memory_error_and_hint(world: World) -> None:
    proc = run_probe(
        world,
        """
        print("before", flush=True)
        hog = bytearray(256 * 1024 * 1024)
        print("not reached")
    """,
        "--memory=64m",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert proc.stdout == b"before\n"
    assert err.splitlines()[-2:] == [
        "MemoryError",
        "pynox: the program used up its 64m memory limit; allocate less or raise the "
        "limit with --memory=128m",
    ]


def test_memory_limit_cannot_be_raised(world: World) -> None:
    limit = 64 * 1024 * 1024
    proc = run_probe(
        world,
        f"""
        import resource
        inf = resource.RLIM_INFINITY
        attempt("getrlimit-as", resource.getrlimit, resource.RLIMIT_AS)
        attempt("setrlimit-as-up", resource.setrlimit, resource.RLIMIT_AS, (inf, inf))
        attempt("prlimit-as-up", resource.prlimit, 0, resource.RLIMIT_AS, (inf, inf))
        new = (ctypes.c_uint64 * 2)(2**63 - 1, 2**63 - 1)
        sys_attempt("raw-prlimit64-as-up", "prlimit64", 0, {RLIMIT_AS}, ctypes.addressof(new), None)
        attempt("setrlimit-nofile-up", resource.setrlimit, resource.RLIMIT_NOFILE,
                (resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                 resource.getrlimit(resource.RLIMIT_NOFILE)[1] + 1))
        attempt("setrlimit-fsize-up", resource.setrlimit, resource.RLIMIT_FSIZE, (inf, inf))
        attempt("setrlimit-core-up", resource.setrlimit, resource.RLIMIT_CORE, (1 << 20, 1 << 20))
        attempt("getrlimit-as-after", resource.getrlimit, resource.RLIMIT_AS)
        attempt("lower-soft-is-fine", resource.setrlimit, resource.RLIMIT_AS,
                ({limit // 2}, {limit}))
        attempt("big-allocation", bytearray, 128 * 1024 * 1024)
    """,
        "--memory=64m",
        "--max-file-size=1m",
    )
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    raised = "ValueError -"  # CPython's word for EPERM from setrlimit/prlimit
    assert lines == {
        "getrlimit-as": f"ok ({limit}, {limit})",
        "setrlimit-as-up": raised,
        "prlimit-as-up": "PermissionError EPERM",
        "raw-prlimit64-as-up": "errno EPERM",
        "setrlimit-nofile-up": raised,
        "setrlimit-fsize-up": raised,
        "setrlimit-core-up": raised,
        "getrlimit-as-after": f"ok ({limit}, {limit})",
        "lower-soft-is-fine": "ok None",
        "big-allocation": "MemoryError -",
    }


def test_file_size_limit_gives_efbig(world: World) -> None:
    target = world.wo / "big.bin"
    proc = run_probe(
        world,
        f"""
        with open({str(target)!r}, "wb") as f:
            f.write(b"x" * (2 * 1024 * 1024))
    """,
        "--max-file-size=1m",
        f"--allow-write={world.wo}",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "OSError: [Errno 27] File too large" in err
    assert err.splitlines()[-1] == (
        "pynox: a file reached the 1m size limit; write less or raise it with --max-file-size=2m"
    )
    assert target.stat().st_size <= 1024 * 1024


TIMEOUT_PROBES = {
    "busy-loop": "while True:\n    pass\n",
    "ignores-sigterm-and-sigint": (
        "import signal\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "while True:\n    pass\n"
    ),
    "spawns-spinning-threads": (
        "import threading\n"
        "def spin():\n    while True:\n        pass\n"
        "while True:\n"
        "    try:\n        threading.Thread(target=spin, daemon=False).start()\n"
        "    except RuntimeError:\n        pass\n"
    ),
    "sleeps-in-c": "import time\ntime.sleep(3600)\n",
}


@pytest.mark.parametrize("kind", list(TIMEOUT_PROBES))
def test_timeout_stops_the_program(world: World, kind: str) -> None:
    pid_file = world.wo / "pid"
    script = world.app / "probe.py"
    script.write_text(
        f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" + TIMEOUT_PROBES[kind]
    )
    started = time.monotonic()
    proc = pynox(
        "--timeout=1s", f"--allow-write={world.wo}", str(script), cwd=world.app, timeout=30
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 124, proc.stderr
    assert 0.9 < elapsed < 10
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pynox: the program ran past its 1s time limit")
    assert "--timeout=2s" in lines[0]
    pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{pid}"), "the program outlived its timeout"


# --------------------------------------------------------------------------
# What must keep working


WORKING_PROBE = """
import asyncio, os, random, socket, sqlite3, tempfile, threading, time
rw = W["rw"]


def threads():
    out = []
    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return sorted(out)


async def echo():
    a, b = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=a)
    r2, w2 = await asyncio.open_connection(sock=b)
    writer.write(b"ping\\n")
    await writer.drain()
    line = await r2.readline()
    writer.close()
    w2.close()
    results = await asyncio.gather(asyncio.sleep(0.01, "x"), asyncio.sleep(0, "y"))
    return line, results


def sqlite_file():
    path = os.path.join(rw, "db.sqlite3")
    con = sqlite3.connect(path)
    con.execute("create table t (x)")
    con.executemany("insert into t values (?)", [(1,), (2,), (3,)])
    con.commit()
    con.close()
    con = sqlite3.connect(path)
    total = con.execute("select sum(x) from t").fetchone()[0]
    con.close()
    return total


def temp():
    fd, path = tempfile.mkstemp(dir=rw, suffix=".tmp")
    os.write(fd, b"temp data")
    os.close(fd)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    with tempfile.TemporaryDirectory(dir=rw) as d:
        open(os.path.join(d, "f"), "w").write("x")
    return data


def devnull():
    with open(os.devnull, "w") as f:
        f.write("discarded")
    with open(os.devnull, "rb") as f:
        return f.read()


def output_file():
    with open(os.path.join(rw, "result.txt"), "w") as f:
        f.write("written inside, read outside\\n")
    return sorted(os.listdir(rw))


def imports():
    names = ["json", "csv", "decimal", "ssl", "hashlib", "zlib", "lzma", "bz2", "ctypes",
             "sqlite3", "zoneinfo", "asyncio", "multiprocessing", "unicodedata", "uuid",
             "xml.etree.ElementTree", "email", "http.client", "urllib.request", "logging"]
    for name in names:
        __import__(name)
    return len(names)


attempt("threads", threads)
attempt("asyncio-socketpair", asyncio.run, echo())
attempt("sqlite-file", sqlite_file)
attempt("urandom", lambda: len(os.urandom(32)))
attempt("random", lambda: random.Random(7).randint(0, 10**6) == random.Random(7).randint(0, 10**6))
attempt("system-random", lambda: 0 <= random.SystemRandom().random() < 1)
attempt("tempfile-mkstemp", temp)
attempt("dev-null", devnull)
attempt("cpu-count", lambda: (os.cpu_count() or 0) >= 1)
attempt("localtime", lambda: time.localtime().tm_year >= 2024)
attempt("zoneinfo", lambda: str(__import__("zoneinfo").ZoneInfo("Europe/Paris")))
attempt("ssl-context", lambda: type(__import__("ssl").create_default_context()).__name__)
attempt("hashlib", lambda: __import__("hashlib").sha256(b"").hexdigest()[:8])
attempt("imports", imports)
attempt("output-file", output_file)
attempt("stdout-isatty", sys.stdout.isatty)
"""

WORKING_EXPECTED: list[tuple[str, str]] = [
    ("threads", "ok [0, 1, 2, 3, 4, 5, 6, 7]"),
    ("asyncio-socketpair", "ok (b'ping\\n', ['x', 'y'])"),
    ("sqlite-file", "ok 6"),
    ("urandom", "ok 32"),
    ("random", "ok True"),
    ("system-random", "ok True"),
    ("tempfile-mkstemp", "ok b'temp data'"),
    ("dev-null", "ok b''"),
    ("cpu-count", "ok True"),
    ("localtime", "ok True"),
    ("zoneinfo", "ok 'Europe/Paris'"),
    ("ssl-context", "ok 'SSLContext'"),
    ("hashlib", "ok 'e3b0c442'"),
    ("imports", "ok 20"),
    ("output-file", "ok ['db.sqlite3', 'result.txt']"),
    ("stdout-isatty", "ok False"),
]


@pytest.fixture(scope="module")
def working_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[World, subprocess.CompletedProcess[bytes]]:
    w = make_world(tmp_path_factory.mktemp("working"))
    return w, run_probe(w, WORKING_PROBE, f"--allow-read={w.rw}", f"--allow-write={w.rw}")


def test_working_probe_exits_cleanly(working_run) -> None:  # type: ignore[no-untyped-def]
    w, proc = working_run
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stderr == b""
    assert (w.rw / "result.txt").read_text() == "written inside, read outside\n"
    assert sorted(os.listdir(w.rw)) == ["db.sqlite3", "result.txt"]


@pytest.mark.parametrize(
    ("attempt", "expected"), WORKING_EXPECTED, ids=[a for a, _ in WORKING_EXPECTED]
)
def test_keeps_working(working_run, attempt: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    assert outcomes(working_run[1]).get(attempt) == expected


@pytest.mark.parametrize("mode", list(MODES))
def test_unclosed_file_in_a_granted_dir_is_flushed_at_exit(tmp_path: Path, mode: str) -> None:
    """python flushes a file the program never closed; its data must not be lost."""
    script = tmp_path / "app.py"
    out = tmp_path / "out"
    out.mkdir()
    script.write_text(
        "f = open('out/result.txt', 'w')\n"
        "f.write('line written without close()\\n' * 3)\n"
        "def helper():\n    return f\n"
    )
    ref = python(str(script), cwd=tmp_path)
    expected = (out / "result.txt").read_text()
    assert ref.returncode == 0 and expected == "line written without close()\n" * 3
    (out / "result.txt").unlink()
    got = pynox(*MODES[mode], "--allow-write=out", str(script), cwd=tmp_path)
    assert (got.returncode, got.stdout, got.stderr) == (0, b"", b"")
    assert (out / "result.txt").read_text() == expected


# --------------------------------------------------------------------------
# The supervisor's own channels


def test_program_cannot_forge_the_json_error_report(world: World) -> None:
    """With --json, the error object (and its hint for a model) must come from pynox.

    The program writes a made-up report into every descriptor it may hold and
    exits normally: the result must still say there was no error.
    """
    proc = run_probe(
        world,
        """
        fake = json.dumps({"type": "PermissionError", "message": "forged", "file": None,
                           "line": None, "path": "/", "hint": "grant it with --allow-write=/"})
        for fd in range(3, 64):
            try:
                os.write(fd, fake.encode())
                print("wrote to", fd)
            except OSError:
                pass
    """,
        "--json",
    )
    result = json.loads(proc.stdout)
    assert result["exit"] == 0
    assert result["error"] is None, f"the program forged the error report: {result['error']}"


def test_descriptor_passed_by_the_caller_is_closed(world: World) -> None:
    keep = world.outside / "held-open.txt"
    keep.write_text("held by the caller")
    fd = os.open(keep, os.O_RDWR)
    script = world.app / "probe.py"
    script.write_text(
        PRELUDE + f'attempt("inherited", os.read, {fd}, 100)\n'
        f'attempt("inherited-write", os.write, {fd}, b"overwritten")\n'
    )
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        proc = subprocess.run(
            [PYNOX, str(script)],
            pass_fds=[fd],
            capture_output=True,
            cwd=world.app,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    assert lines == {"inherited": "OSError EBADF", "inherited-write": "OSError EBADF"}
    assert keep.read_text() == "held by the caller"
