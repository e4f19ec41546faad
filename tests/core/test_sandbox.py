"""sandbox.c: the layers in order. A failure confines nothing and says why; the two
halves go in order and once; everyday Python keeps working once confined."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from pynox._core import ffi, lib
from support.sandboxed_child import (
    LIBC,
    PR_GET_SECCOMP,
    PY_READ,
    apply,
    in_child,
    make_policy,
    needs_landlock,
    read_file,
    run_sandboxed,
    sandboxed,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only"),
    pytest.mark.usefixtures("confinement"),  # each test confines in one call, then in two
]


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
    if confinement != "one-call":
        # The halves install seccomp first, by design; the pool then refuses the run.
        pytest.skip("a pool's spare has a seccomp filter before its policy applies")

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
    """Prepared.finish raises SandboxError; the pool's child then refuses the run."""
    from pynox.engine import prepared_sandbox
    from pynox.errors import SandboxError
    from pynox.policy import system_paths
    from pynox.policy.resolve import Policy

    def child(w: int) -> str:
        base = prepared_sandbox.base_policy(system_paths.interpreter_reads(), os.getppid())
        prepared = prepared_sandbox.prepare(base, [w])
        policy = Policy()
        policy.allow_read = [str(tmp_path / "gone")]
        try:
            prepared.finish(policy)
        except SandboxError as exc:
            return str(exc)
        return "finished"

    outcome = in_child(child)
    assert outcome.startswith("cannot apply the sandbox: cannot open the read path ")
    assert "gone" in outcome
