"""Building and running escape probes (tests/escape/).

A probe is a small program written into the script directory of a fresh World
(tmp dirs: the script's own dir, a home-like dir with a secret, an outside dir with
a victim file, and dirs granted read-only, write-only or both). It starts with
PRELUDE and prints one line per attempt, `name: <outcome>`, which `outcomes` reads
back. It runs through the command (in process or supervised: MODES) or as a pool
request (PROBE_MODES adds "pool").
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

from support.commands import PYNOX, PYTHON, run
from support.pool_client import PoolClient
from support.syscalls import NR

# The system-call numbers every probe gets (W["nr"]): those of the calls the probes make.
PROBE_NR = {
    name: NR[name]
    for name in (
        *("getpid", "clone", "clone3", "fork", "vfork", "unshare", "setns", "ptrace"),
        *("process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root"),
        *("chroot", "bpf", "perf_event_open", "keyctl", "add_key", "userfaultfd"),
        *("io_uring_setup", "io_setup", "personality", "kexec_load", "init_module", "finit_module"),
        *("open_by_handle_at", "shmget", "mq_open", "kill", "tkill", "tgkill", "pidfd_open"),
        *("pidfd_send_signal", "pidfd_getfd", "prlimit64", "syslog", "memfd_create"),
        *("execveat", "iopl", "setpriority", "listmount", "prctl"),
    )
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
        out["nr"] = PROBE_NR
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


def run_probe(
    w: World,
    code: str,
    *flags: str,
    name: str = "probe.py",
    command: list[str] | None = None,
    **kwargs: object,
) -> subprocess.CompletedProcess[bytes]:
    """The probe under pynox with flags; command: another way to run pynox (MODES)."""
    script = w.app / name
    script.write_text(PRELUDE + textwrap.dedent(code))
    argv = [*(command or [PYNOX]), *flags, str(script), json.dumps(w.paths())]
    return run(argv, cwd=w.app, **kwargs)  # type: ignore[arg-type]


# How a run can be shaped, as the command that runs it: in the interpreter the launcher
# started (with or without the launcher keeping its clock), or in a child that pynox's
# own supervisor forks, as it does for a limited run without the launcher (python -m
# pynox; 64g of memory leaves every probe its memory). Probes that matter in each run in
# each.
MODES = {
    "in-process": [PYNOX],
    "launcher-clock": [PYNOX, "--timeout=120s"],
    "supervised": [PYTHON, "-I", "-m", "pynox", "--memory=64g"],
}


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
    return run([*MODES[mode], *w.grants(), str(script), json.dumps(w.paths())], cwd=w.app)


def run_in_sh(*command: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    """Runs a command under a throwaway shell, so that "the parent" of an in-process
    run is that shell and not this test process (`; exit` keeps sh from exec'ing)."""
    return run(["sh", "-c", '"$@"; exit $?', "sh", *command], **kwargs)  # type: ignore[arg-type]


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


def listings(w: World) -> dict[str, list[str]]:
    return {d.name: sorted(os.listdir(d)) for d in (w.home, w.outside, w.ro, w.app)}
