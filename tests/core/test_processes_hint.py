"""Process pools never run in the sandbox: their refusal gets the process hint, whose way
out (threads) works."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from support.commands import pynox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

HINT = (
    "processes (subprocess, os.system, os.fork, multiprocessing, ProcessPoolExecutor) never "
    "run in the sandbox, threads do: use concurrent.futures.ThreadPoolExecutor or threading, "
    "or do the work in this program"
)

# Each fails inside CPython on a multiprocessing lock (sem_open in /dev/shm, no
# audit event) or on shared memory (shm_open), before any process starts.
PROCESS_PROGRAMS = {
    "multiprocessing-pool": """
        import multiprocessing
        with multiprocessing.Pool(2) as pool:
            print(pool.map(abs, [-1, -2]))
    """,
    "process-pool-executor": """
        import concurrent.futures
        with concurrent.futures.ProcessPoolExecutor() as executor:
            print(list(executor.map(abs, [-1, -2])))
    """,
    "multiprocessing-queue": """
        import multiprocessing
        multiprocessing.Queue()
    """,
    "shared-memory": """
        from multiprocessing import shared_memory
        shared_memory.SharedMemory(create=True, size=4096)
    """,
}


def _script(tmp_path: Path, code: str) -> Path:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(code))
    return script


@pytest.mark.parametrize("name", list(PROCESS_PROGRAMS))
def test_process_pools_get_the_process_hint(tmp_path: Path, name: str) -> None:
    script = _script(tmp_path, PROCESS_PROGRAMS[name])
    proc = pynox(str(script), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "PermissionError" in err
    assert err.splitlines()[-1] == f"pynox: {HINT}"


@pytest.mark.parametrize("name", ["multiprocessing-pool", "process-pool-executor"])
def test_process_pools_get_the_process_hint_in_json(tmp_path: Path, name: str) -> None:
    script = _script(tmp_path, PROCESS_PROGRAMS[name])
    proc = pynox("--json", str(script), cwd=tmp_path)
    result = json.loads(proc.stdout)
    assert result["exit"] == 1
    assert result["error"]["type"] == "PermissionError"
    assert result["error"]["path"] is None
    assert result["error"]["hint"] == HINT


def test_following_the_hint_works(tmp_path: Path) -> None:
    """The hint's way out: threads, through the executor or threading itself."""
    script = _script(
        tmp_path,
        """
        import concurrent.futures, threading
        with concurrent.futures.ThreadPoolExecutor(4) as executor:
            print(sum(executor.map(abs, range(-100, 0))))
        results = []
        threads = [threading.Thread(target=results.append, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(sorted(results))
        """,
    )
    for flags in ((), ("--memory=64m",), ("--json",)):
        proc = pynox(*flags, str(script), cwd=tmp_path)
        out = json.loads(proc.stdout)["stdout"] if flags == ("--json",) else proc.stdout.decode()
        assert out == "5050\n[0, 1, 2, 3]\n", proc.stderr.decode()


@pytest.mark.unit
def test_only_a_refusal_raised_in_multiprocessing_is_about_processes() -> None:
    from pynox.engine.hints import classify

    def refused() -> None:
        raise PermissionError(13, "Permission denied")

    def caught() -> PermissionError:
        try:
            refused()
        except PermissionError as exc:
            return exc
        raise AssertionError("not raised")

    ours = caught()
    assert classify(ours, None) == (None, None, None)
    # The same refusal from a frame whose module is multiprocessing's own.
    namespace: dict[str, object] = {"__name__": "multiprocessing.synchronize"}
    exec("def lock():\n    raise PermissionError(13, 'Permission denied')\n", namespace)
    try:
        namespace["lock"]()  # type: ignore[operator]
    except PermissionError as exc:
        assert classify(exc, None) == ("process", None, None)
    # A module whose name only starts the same way is not multiprocessing.
    namespace["__name__"] = "multiprocessing_helpers"
    exec("def lock():\n    raise PermissionError(13, 'Permission denied')\n", namespace)
    try:
        namespace["lock"]()  # type: ignore[operator]
    except PermissionError as exc:
        assert classify(exc, None) == (None, None, None)
