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


# Ways a program tries a process and carries on without it, as agent code does.
CAUGHT_ATTEMPTS = {
    "subprocess": "subprocess.run(['git', '--version'])",
    "os-fork": "os.fork()",
    "os-system": "os.system('git --version')",
}


@pytest.mark.parametrize("attempt", list(CAUGHT_ATTEMPTS))
def test_a_later_error_after_a_caught_refusal_gets_no_process_hint(
    tmp_path: Path, attempt: str
) -> None:
    """The process hint is for the call that tried to start a process. A program that
    caught that refusal and failed later, on something else refused with no file named
    (a FIFO outside its grants) or on a PermissionError of its own, was told that
    processes never run: the hint that the same failure gets without the attempt."""
    fifo = tmp_path / "fifo"  # in the script's folder, which the program may only read
    for failure in (f"os.mkfifo({str(fifo)!r})", "raise PermissionError('read-only mode')"):
        script = _script(
            tmp_path,
            f"""
            import os, subprocess
            try:
                {CAUGHT_ATTEMPTS[attempt]}
            except OSError:
                print("no git: carrying on")
            {failure}
            """,
        )
        proc = pynox(str(script), cwd=tmp_path)
        err = proc.stderr.decode()
        assert proc.returncode == 1, err
        assert proc.stdout == b"no git: carrying on\n"
        assert err.splitlines()[-1].startswith("PermissionError: "), err
        assert "pynox:" not in err
        result = json.loads(pynox("--json", str(script), cwd=tmp_path).stdout)
        assert result["error"]["type"] == "PermissionError"
        assert result["error"]["hint"] is None


@pytest.mark.parametrize("attempt", list(CAUGHT_ATTEMPTS))
def test_the_refusal_itself_still_gets_the_process_hint(tmp_path: Path, attempt: str) -> None:
    """Tried again, uncaught, after a first refusal was caught: still the process hint."""
    code = CAUGHT_ATTEMPTS[attempt]
    script = _script(
        tmp_path,
        f"""
        import os, subprocess
        try:
            {code}
        except OSError:
            pass
        {code}
        """,
    )
    err = pynox(str(script), cwd=tmp_path).stderr.decode()
    assert err.splitlines()[-1] == f"pynox: {HINT}", err


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


THREAD_POOL_HINT = (
    "multiprocessing's ThreadPool (multiprocessing.pool.ThreadPool, multiprocessing.dummy.Pool) "
    "never runs in the sandbox although its workers are threads: it takes multiprocessing "
    "locks, which are named semaphores the sandbox refuses; use "
    "concurrent.futures.ThreadPoolExecutor instead (executor.map for pool.map, "
    "executor.submit for pool.apply_async)"
)

# Thread pools of multiprocessing's, each with the same program written as the hint says.
THREAD_POOLS = {
    "thread-pool": (
        """
        from multiprocessing.pool import ThreadPool
        with ThreadPool(4) as pool:
            print(sum(pool.map(abs, range(-100, 0))))
            print(pool.apply_async(pow, (2, 10)).get())
        """,
        """
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(4) as executor:
            print(sum(executor.map(abs, range(-100, 0))))
            print(executor.submit(pow, 2, 10).result())
        """,
    ),
    "dummy-pool": (
        """
        import multiprocessing.dummy
        with multiprocessing.dummy.Pool(4) as pool:
            print(sum(pool.map(abs, range(-100, 0))))
            print(pool.apply_async(pow, (2, 10)).get())
        """,
        """
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(4) as executor:
            print(sum(executor.map(abs, range(-100, 0))))
            print(executor.submit(pow, 2, 10).result())
        """,
    ),
}


@pytest.mark.parametrize("name", list(THREAD_POOLS))
def test_a_thread_pool_of_multiprocessing_gets_the_thread_pool_hint(
    tmp_path: Path, name: str
) -> None:
    """multiprocessing's ThreadPool runs threads, yet it fails on a multiprocessing lock:
    the hint names ThreadPool and the executor to use instead (not "threads do", which the
    program did), and the program rewritten as it says runs."""
    failing, rewritten = THREAD_POOLS[name]
    script = _script(tmp_path, failing)
    proc = pynox(str(script), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "PermissionError" in err
    assert err.splitlines()[-1] == f"pynox: {THREAD_POOL_HINT}"
    result = json.loads(pynox("--json", str(script), cwd=tmp_path).stdout)
    assert result["error"]["hint"] == THREAD_POOL_HINT
    followed = pynox(str(_script(tmp_path, rewritten)), cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr.decode()
    assert followed.stdout == b"5050\n1024\n"


def test_the_thread_pool_hint_in_the_api(tmp_path: Path) -> None:
    import pynox as api

    failing, rewritten = THREAD_POOLS["thread-pool"]
    first = api.run(textwrap.dedent(failing))
    assert first.exit == 1
    assert first.error is not None and first.error["hint"] == THREAD_POOL_HINT
    second = api.run(textwrap.dedent(rewritten))
    assert second.exit == 0, second.text
    assert second.stdout == "5050\n1024\n"


def test_a_pool_program_that_cannot_change_its_process_group_is_told_so(tmp_path: Path) -> None:
    """In the pool the program leads a session of its own, where the kernel refuses even
    os.setpgrp(): the hint says there is nothing to grant, and offers nothing that fails."""
    import pynox as api

    with api.Pool(workers=1) as pool:
        result = pool.run("import os\nos.setpgrp()")
    assert result.error is not None and result.error["type"] == "PermissionError"
    assert result.error["hint"] == (
        "changing process groups (os.setpgid, os.setpgrp, os.tcsetpgrp) is not available in "
        "the sandbox, where no other process runs to need job control; there is nothing to "
        "grant, leave it out"
    )
