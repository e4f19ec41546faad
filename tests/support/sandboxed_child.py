"""A child that confines itself through the sandbox core (pynox._core), for tests/core/.

`run_sandboxed` forks; the child applies a policy with pynox_sandbox_apply() (or, by
CONFINEMENT, in the two halves a pool's spare uses), runs a body and sends a JSON report
back over a pipe. `raw` makes a system call by number; `fake_errno` plays an older
kernel. Importing this module skips the importing test module on a machine without a
system-call table.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import sysconfig
import termios
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from pynox._core import ffi, lib

from support.syscalls import MACHINE, NR, TABLED

if not TABLED:
    pytest.skip(f"no syscall table for {MACHINE}", allow_module_level=True)


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

PR_GET_SECCOMP = 21
PR_GET_NO_NEW_PRIVS = 39

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


needs_landlock = pytest.mark.skipif(
    landlock_abi() < 3, reason="the sandbox needs Landlock ABI 3 (Linux 6.2)"
)


def raw(name: str | int, *args: int | bytes | None) -> int:
    """A raw system call: its result, or -errno."""
    nr = NR[name] if isinstance(name, str) else name
    if nr is None:  # callers skip such tests in the parent
        raise ValueError(f"{name} does not exist on {MACHINE}")
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
    own_group: int = 0,
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
    policy.own_group = own_group
    policy.parent_pid = parent_pid
    return policy, refs


# How the child confines itself (see `confinement`): "one-call", as the command does;
# "two-steps", in the two halves a pool's spare uses (pynox_sandbox_prepare while it
# waits, then pynox_sandbox_finish); or "shared-filter", the same halves after the
# seccomp filter's shared part went on first, as a pool's zygote installs it for the
# spares it forks (pynox_sandbox_share_filter), so that prepare adds only the own part.
CONFINEMENT = "one-call"


def apply(policy: Any) -> tuple[int, str]:
    err = ffi.new("char[]", 512)
    # The reads, the descriptors and the process settings in one half (what the
    # interpreter needs); the writes, the network and the limits in the other.
    base = ffi.new("struct pynox_policy *")
    base.read_paths, base.read_count = policy.read_paths, policy.read_count
    base.keep_fds, base.keep_fd_count = policy.keep_fds, policy.keep_fd_count
    base.new_session, base.parent_pid = policy.new_session, policy.parent_pid
    base.own_group = policy.own_group
    own = ffi.new("struct pynox_policy *")
    own.write_paths, own.write_count = policy.write_paths, policy.write_count
    own.allow_network = policy.allow_network
    own.memory_bytes, own.max_file_size = policy.memory_bytes, policy.max_file_size
    if CONFINEMENT == "one-call":
        rc = lib.pynox_sandbox_apply(base, own, err, len(err))
        return int(rc), ffi.string(err).decode()
    if CONFINEMENT == "shared-filter" and lib.pynox_sandbox_share_filter(err, len(err)) != 0:
        return -1, ffi.string(err).decode()
    prepared = ffi.new("struct pynox_prepared *")
    rc = lib.pynox_sandbox_prepare(base, prepared, err, len(err))
    if rc == 0:
        rc = lib.pynox_sandbox_finish(prepared, base, own, err, len(err))
    return int(rc), ffi.string(err).decode()


def report_from_child(
    child: Callable[[int], dict[str, Any]], timeout: float = 60.0
) -> dict[str, Any]:
    """Forks; the child runs child(w), which confines it and returns a report, sent back
    as JSON on pipe w (which child must keep open). Fails the test on a crash, a timeout
    or a child that died without a report."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        report: dict[str, Any]
        try:
            os.close(r)
            report = child(w)
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

    def child(w: int) -> dict[str, Any]:
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
        return report

    return report_from_child(child, timeout)


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
