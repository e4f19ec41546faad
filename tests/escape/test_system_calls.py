"""Raw system calls through ctypes: one probe, one line per call, in every mode
(processes, namespaces, mounts, the kernel's attack surface, other processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.probes import (
    MODES,
    PRELUDE,
    PROBE_MODES,
    World,
    make_world,
    outcomes,
    run_grants_probe,
    run_in_sh,
)
from support.syscalls import MACHINE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


RAW_SKIP = pytest.mark.skipif(
    MACHINE not in ("x86_64", "aarch64"),
    reason=f"raw system-call numbers are only tabled for x86_64 and aarch64, not {MACHINE}",
)

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
# The mount table from the root down (struct mnt_id_req, LSMT_ROOT): room for 64 ids.
sys_attempt("listmount", "listmount",
            __import__("struct").pack("IIQQ", 24, 0, 2**64 - 1, 0), bytes(512), 64, 0)
sys_attempt("bpf", "bpf", 9999, None, 0)
sys_attempt("perf-event-open", "perf_event_open", None, 0, -1, -1, 0xFFFF)
sys_attempt("keyctl", "keyctl", 9999, 0, 0, 0, 0)
sys_attempt("add-key", "add_key", b"user", b"pynox", b"x", 1, -4)
sys_attempt("userfaultfd", "userfaultfd", 1)
sys_attempt("io-uring-setup", "io_uring_setup", 0, None)
sys_attempt("io-setup", "io_setup", 1, None)
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
    ("listmount", E),
    ("bpf", E),
    ("perf-event-open", E),
    ("keyctl", E),
    ("add-key", E),
    ("userfaultfd", E),
    ("io-uring-setup", E),
    ("io-setup", E),
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
