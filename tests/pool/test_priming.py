"""Primed spares (pynox.pool.priming): a spare that waits idle confines itself ahead to the
policy of the pool's last request; a request of that very policy runs there, and every
other request gets a spare confined to its own policy, as if no spare had been primed."""

from __future__ import annotations

import base64
import os
import signal
import time
from pathlib import Path

from support.pool_client import (
    POOL_TIMING,
    PoolClient,
    descendants,
    seccomp_filters,
    wait_gone,
)
from support.pool_requests import assert_ok, code, new_id
from support.waiting import wait_until

pytestmark = POOL_TIMING

# Prints the file it is given, or the error reading it, then the process that ran it.
READ_THEN_PID = code("""
    import os, sys
    try:
        print(open(sys.argv[1]).read())
    except OSError as exc:
        print(type(exc).__name__)
    print(os.getpid())
""")


# A waiting spare's seccomp filters: the part its zygote installed, then its own.
WAITING_SPARE_FILTERS = 2


def _primed(client: PoolClient) -> set[int]:
    """The pool's children confined to a run's policy: a spare that installed its run's
    seccomp filter on top of those every spare has while it waits."""
    return {
        pid
        for pid, filters in seccomp_filters(descendants(client.pid, zombies=False)).items()
        if filters > WAITING_SPARE_FILTERS
    }


def _wait_primed(client: PoolClient, besides: set[int]) -> set[int]:
    """The primed spares, once there is one; besides: the processes of requests that ran,
    confined as a primed spare is, and spares primed to an earlier policy, which a request
    of another policy closed: each may take a moment to exit (under load, more than one)."""
    deadline = time.monotonic() + 20
    while not (primed := _primed(client) - besides):
        if time.monotonic() > deadline:
            raise AssertionError("no spare of the pool was primed")
        time.sleep(0.02)
    return primed


def _with_note(directory: Path, text: str) -> Path:
    """directory, made, with note.txt holding text."""
    directory.mkdir()
    (directory / "note.txt").write_text(text)
    return directory


def _read(client: PoolClient, path: Path, grant: Path | None, **extra: object) -> tuple[str, int]:
    """What a request granted `grant` (or nothing) read at path, and its process."""
    request: dict[str, object] = {"id": new_id(), "code": READ_THEN_PID, "args": [str(path)]}
    if grant is not None:
        request["allow_read"] = [str(grant)]
    request.update(extra)
    result = client.run(request)
    assert result["exit"] == 0, result
    text, pid = result["stdout"].rsplit("\n", 2)[:2]
    return text, int(pid)


def test_a_request_of_the_last_policy_runs_in_a_primed_spare(tmp_path: Path) -> None:
    data = _with_note(tmp_path / "data", "v1")
    with PoolClient(workers=2) as client:
        text, ran = _read(client, data / "note.txt", data)
        assert text == "v1"
        primed = _wait_primed(client, besides={ran})
        text, pid = _read(client, data / "note.txt", data)
        assert text == "v1"
        assert pid in primed
        # Its scratch directory is the one its result names, and its own to write.
        result = client.run(
            {
                "id": new_id(),
                "allow_read": [str(data)],
                "code": code("""
                import os
                with open(os.path.join(os.environ["TMPDIR"], "out", "made.txt"), "w") as f:
                    f.write("made")
                print(os.environ["TMPDIR"])
            """),
            }
        )
        assert_ok(result, result["policy"]["scratch"] + "\n")
        assert base64.b64decode(result["files"]["made.txt"]) == b"made"
        assert client.close() == 0


def test_a_script_runs_in_a_primed_spare_as_python_runs_it(tmp_path: Path) -> None:
    script = tmp_path / "show.py"
    script.write_text(
        "import os, sys\nprint(sys.argv, sys.path[0], __file__, sys.orig_argv[1:])\n"
        "print(os.getpid())\n"
    )
    # sys.orig_argv as `python SCRIPT x` has it, never the pool's own command line.
    expected = f"{[str(script), 'x']} {tmp_path} {script} {[str(script), 'x']}"
    with PoolClient(workers=2) as client:
        first = client.run({"id": new_id(), "script": str(script), "args": ["x"]})
        shown, ran = first["stdout"].split("\n")[:2]
        assert shown == expected, first
        primed = _wait_primed(client, besides={int(ran)})
        second = client.run({"id": new_id(), "script": str(script), "args": ["x"]})
        shown, pid = second["stdout"].split("\n")[:2]
        assert (shown, int(pid) in primed) == (expected, True), second
        assert client.close() == 0


def test_a_request_of_another_policy_gets_none_of_the_primed_grants(tmp_path: Path) -> None:
    data = _with_note(tmp_path / "data", "secret")
    other = _with_note(tmp_path / "other", "other")
    with PoolClient(workers=2) as client:
        ran = {_read(client, data / "note.txt", data)[1]}
        primed = _wait_primed(client, besides=ran)
        text, pid = _read(client, data / "note.txt", None)
        assert (text, pid in primed) == ("PermissionError", False)
        _wait_primed(client, besides=ran | primed | {pid})
        text, pid = _read(client, data / "note.txt", other)
        assert (text, pid in primed) == ("PermissionError", False)
        assert _read(client, other / "note.txt", other)[0] == "other"
        assert client.close() == 0


def test_a_primed_grant_whose_path_names_another_directory_now_is_not_used(
    tmp_path: Path,
) -> None:
    """Landlock binds a rule to the directory its path named when the spare was primed: a
    request granted the path reads what the path names when it runs, never the old one."""
    data = _with_note(tmp_path / "data", "old")
    with PoolClient(workers=2) as client:
        ran = _read(client, data / "note.txt", data)[1]
        primed = _wait_primed(client, besides={ran})
        data.rename(tmp_path / "moved")
        _with_note(data, "new")
        text, pid = _read(client, data / "note.txt", data)
        assert (text, pid in primed) == ("new", False)
        assert _read(client, tmp_path / "moved" / "note.txt", data)[0] == "PermissionError"
        assert client.close() == 0


def test_requests_without_grants_get_the_default_policy_whatever_ran_between(
    tmp_path: Path,
) -> None:
    """The pool makes its default policy once (PoolServer._policy): every request that asks
    for nothing still gets all of it, a scratch directory of its own, none of another
    request's grants, and a spare primed to it."""
    data = _with_note(tmp_path / "data", "secret")
    with PoolClient(workers=2) as client:
        first = client.run({"id": new_id(), "code": "import os\nprint(os.getpid())"})
        # Each request of another policy closes the spare primed to the last one.
        exiting = {int(first["stdout"])}
        exiting |= _wait_primed(client, besides=exiting)
        text, ran = _read(client, data / "note.txt", data)
        assert text == "secret"
        exiting |= {ran} | _wait_primed(client, besides=exiting | {ran})
        text, ran = _read(client, data / "note.txt", None)
        assert text == "PermissionError"
        primed = _wait_primed(client, besides=exiting | {ran})
        text, pid = _read(client, data / "note.txt", None)
        assert (text, pid in primed) == ("PermissionError", True)
        last = client.run({"id": new_id(), "code": "print(1)"})
        assert client.close() == 0
    policies = [dict(result["policy"]) for result in (first, last)]
    scratches = [policy.pop("scratch") for policy in policies]
    assert policies[0] == policies[1]
    assert policies[0]["allow_read"] == [] and scratches[0] != scratches[1]


def test_requests_with_files_or_host_functions_do_not_take_a_primed_spare(
    tmp_path: Path,
) -> None:
    """Both are set up for the request before its confinement, which a primed spare is past."""
    with PoolClient(workers=2) as client:
        ran = _read(client, Path("/nonexistent"), None)[1]
        _wait_primed(client, besides={ran})
        with_file = client.run(
            {
                "id": new_id(),
                "code": "import os\nprint(open(os.environ['TMPDIR'] + '/in.txt').read())",
                "files": {"in.txt": base64.b64encode(b"given").decode()},
            }
        )
        assert_ok(with_file, "given\n")
        ran = _read(client, Path("/nonexistent"), None)[1]
        _wait_primed(client, besides={ran})
        calling = client.run(
            {
                "id": new_id(),
                "code": "from pynox_host import twice\nprint(twice(21))",
                "functions": [{"name": "twice"}],
            },
            host={"twice": lambda value: value * 2},
        )
        assert_ok(calling, "42\n")
        assert client.close() == 0


def test_a_spare_that_died_waiting_is_not_given_a_request() -> None:
    with PoolClient(workers=2) as client:
        ran = _read(client, Path("/nonexistent"), None)[1]
        _wait_primed(client, besides={ran})

        def spares_now() -> set[int]:
            # The zygote is the one child of the pool's own; the spares are its children.
            return {
                pid
                for pid in descendants(client.pid, zombies=False)
                if int(_parent(pid)) != client.pid
            }

        # The spare that replaces the request's may still be on its way from the zygote.
        assert wait_until(lambda: len(spares_now()) == 2), spares_now()
        spares = spares_now()
        for pid in spares:
            os.kill(pid, signal.SIGKILL)
        assert wait_gone(spares, 10) == set()
        time.sleep(0.2)  # the zygote's word that they ended reaches the pool server
        for _ in range(3):
            result = client.run({"id": new_id(), "code": "print('ran')"})
            assert_ok(result, "ran\n")
        assert client.close() == 0


def _parent(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]


def _wakeups(pid: int) -> int:
    """How often the pool server's loop has gone to sleep and woken since it started."""
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def test_an_idle_pool_sleeps_once_its_spares_are_ready_and_primed() -> None:
    """Nothing wakes the pool server's loop while no request comes, no spare is missing and
    none waits to be primed: an idle pool costs no CPU time."""
    with PoolClient(workers=2) as client:
        ran = _read(client, Path("/nonexistent"), None)[1]
        _wait_primed(client, besides={ran})
        time.sleep(0.5)  # the scratch directories of the run that ended go meanwhile
        before = _wakeups(client.pid)
        time.sleep(1)
        assert _wakeups(client.pid) - before < 20
        assert client.close() == 0
