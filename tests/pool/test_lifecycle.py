"""The pool's life: the client or the pool killed mid-request leaves no orphan, closing
stdin finishes the work in flight, the ready event, a silent clean shutdown; and 10,000
requests in a row with descriptors, processes and memory held steady (slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.commands import bound_by_descriptors_in_flight, limiting_open_files, soft_limiting
from support.pool_client import (
    POOL_TIMING,
    PYNOX,
    PoolClient,
    clean_env,
    descendants,
    is_scratch_helper,
    open_fds,
    process_table,
    processes_with,
    rss_kib,
    wait_gone,
)
from support.pool_requests import assert_ok, close_session, code, step, write_config

INTERMEDIATE = code("""
    import json, subprocess, sys, time
    pynox, config = sys.argv[1], sys.argv[2]
    pool = subprocess.Popen([pynox, "pool", "--config", config], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/")
    ready = json.loads(pool.stdout.readline())
    pool.stdin.write(b'{"id": "sleeper", "code": "import time\\\\ntime.sleep(30)"}\\n')
    pool.stdin.flush()
    print(json.dumps({"pool": pool.pid, "ready": ready}), flush=True)
    time.sleep(120)
""")


def wait_for_tree(pid: int, size: int, timeout: float = 10) -> set[int]:
    """pid's descendants once there are at least size of them."""
    deadline = time.monotonic() + timeout
    while True:
        found = descendants(pid, zombies=False)
        if len(found) >= size or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_client_killed_mid_request(tmp_path: Path) -> None:
    marker = f"pynox-marker-{uuid.uuid4().hex}"
    config = write_config(tmp_path / marker, "")
    script = tmp_path / "client.py"
    script.write_text(INTERMEDIATE)
    client = subprocess.Popen(
        [sys.executable, str(script), PYNOX, str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        assert client.stdout is not None
        hello = json.loads(client.stdout.readline())
        pool_pid = hello["pool"]
        assert hello["ready"]["pid"] == pool_pid
        # The zygote, the sleeping child and two spares.
        tree = wait_for_tree(pool_pid, 4) | {pool_pid}
        time.sleep(0.3)
        tree |= descendants(pool_pid)
        assert len(tree) >= 5, tree
        assert processes_with(marker) >= tree
        killed_at = time.monotonic()
        client.send_signal(signal.SIGKILL)
        client.wait(10)
        left = wait_gone(tree, 5)
        print(
            f"client killed: {len(tree)} pool processes gone after "
            f"{time.monotonic() - killed_at:.2f}s; left: {sorted(left)}"
        )
        assert not left, "pool processes outlived their client"
        assert not processes_with(marker)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def test_pool_killed_mid_request(tmp_path: Path) -> None:
    with PoolClient(workers=2) as client:
        client.send({"id": "sleeper", "code": "import time\ntime.sleep(30)"})
        tree = wait_for_tree(client.pid, 4)
        time.sleep(0.3)
        tree |= descendants(client.pid)
        assert len(tree) >= 4
        os.kill(client.pid, signal.SIGKILL)
        client.proc.wait(10)
        left = wait_gone(tree, 5)
        print(f"pool killed: {len(tree)} processes below it, left: {sorted(left)}")
        assert not left, "children outlived the pool"


def test_client_closes_stdout(tmp_path: Path) -> None:
    with PoolClient(workers=2) as client:
        client.send({"id": "sleeper", "code": "import time\ntime.sleep(30)"})
        tree = wait_for_tree(client.pid, 4) | {client.pid}
        assert client.proc.stdout is not None
        client.proc.stdout.close()
        started = time.monotonic()
        client.proc.wait(5)
        left = wait_gone(tree, 5)
        print(
            f"stdout closed: pool exited {client.proc.returncode} after "
            f"{time.monotonic() - started:.2f}s"
        )
        assert not left


def test_stdin_closed_with_requests_in_flight() -> None:
    with PoolClient(workers=2) as client:
        for i in range(6):  # more than the workers: some wait in the queue
            client.send({"id": i, "code": f"import time\ntime.sleep(0.3)\nprint({i})"})
        started = time.monotonic()
        assert client.close() == 0  # also checks that every process is gone
        print(f"stdin closed: 6 requests finished in {time.monotonic() - started:.2f}s")
        for i in range(6):
            assert_ok(client.results[i][0], f"{i}\n")


def test_stdin_closed_with_a_session_open() -> None:
    with PoolClient(workers=2) as client:
        step(client, "open", "x = 1")
        assert client.close() == 0


def test_ready_event() -> None:
    with PoolClient(workers=3, preload=["json"]) as client:
        ready = client.ready
        assert ready["pid"] == client.pid
        assert ready["workers"] == 3
        assert ready["python"] == ".".join(map(str, sys.version_info[:3]))
        tree = wait_for_tree(client.pid, 4)
        assert len(tree) == 4, f"a zygote and three spares, not {tree}"
        assert client.close() == 0


def test_clean_shutdown_is_silent() -> None:
    """Closing stdin is the normal way to stop the pool: nothing on stderr, exit 0."""
    noisy = []
    for round_number in range(15):
        with PoolClient(workers=2) as client:
            for i in range(3):
                client.send({"id": i, "code": "print(1)"})
            code_ = client.close()
            stderr = client.stderr()
            if code_ != 0 or stderr:
                noisy.append((round_number, code_, stderr.decode(errors="replace")))
    print(f"{len(noisy)} of 15 shutdowns were noisy: {noisy[:2]}")
    assert not noisy


@pytest.mark.slow
def test_ten_thousand_requests_hold_resources_steady() -> None:
    workers, total, batch = 2, 10_000, 100
    with PoolClient(workers=workers) as client:
        pool_pid = client.pid
        zygotes = [
            pid for pid, (parent, _) in process_table().items()
            if parent == pool_pid and not is_scratch_helper(pid)
        ]  # fmt: skip
        assert len(zygotes) == 1, zygotes  # the pool server's only child; spares are the zygote's
        zygote = zygotes[0]
        started = time.monotonic()
        samples = {}
        for start in range(0, total, batch):
            client.send_raw(
                b"".join(
                    b'{"id": %d, "code": "print(1)"}\n' % n for n in range(start, start + batch)
                )
            )
            for _ in range(batch):
                line = client.read(60)
                assert line.get("exit") == 0 and line.get("stdout") == "1\n", line
            client.results.clear()
            client.lines.clear()
            done = start + batch
            if done in (500, total):
                time.sleep(0.5)  # let the spares settle
                samples[done] = {
                    "fds": open_fds(pool_pid),
                    "zygote_fds": open_fds(zygote),
                    "processes": len(descendants(pool_pid)),
                    "rss_kib": rss_kib(pool_pid),
                    "zygote_rss_kib": rss_kib(zygote),
                    "seconds": round(time.monotonic() - started, 1),
                }
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 3
        while len(descendants(pool_pid)) > workers + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        processes = len(descendants(pool_pid))
        print(
            f"\n{total} requests in {elapsed:.1f}s ({elapsed / total * 1000:.2f} ms each); "
            f"after 500: {samples[500]}; at the end: {samples[total]}; processes after "
            f"settling: {processes}"
        )
        first, last = samples[500], samples[total]
        assert abs(last["fds"] - first["fds"]) <= 2
        assert abs(last["zygote_fds"] - first["zygote_fds"]) <= 2
        assert processes <= workers + 2
        assert last["rss_kib"] - first["rss_kib"] < 20 * 1024
        assert last["zygote_rss_kib"] - first["zygote_rss_kib"] < 20 * 1024
        assert client.close() == 0


def test_a_spare_readied_ahead_leaves_no_trace_for_its_request() -> None:
    """A spare walks a request's steps before any request comes (pynox.pool.zygote); the
    program still sees its own argv, environment and __main__, and the exit handlers of
    what the pool preloaded are still there to run at its end, as under python."""
    program = code("""
        import atexit, json, os, sys
        print(json.dumps({
            "argv": sys.argv,
            "environ": sorted(os.environ),
            "main": sorted(n for n in vars(sys.modules["__main__"]) if not n.startswith("__")),
            "exit_handlers": atexit._ncallbacks(),
        }))
    """)
    with PoolClient(workers=1, preload=["logging"]) as client:
        # Time to get ready: a spare whose request is already there skips the warm-up.
        time.sleep(0.5)
        result = client.run({"id": 1, "code": program, "name": "agent.py", "args": ["x"]})
        seen = json.loads(result["stdout"])
        assert seen["argv"] == ["agent.py", "x"]
        # MPLBACKEND: figures come back as images (docs/pool-protocol.md).
        assert seen["environ"] == ["HOME", "LANG", "MPLBACKEND", "TEMP", "TMP", "TMPDIR"]
        assert seen["main"] == ["atexit", "json", "os", "sys"]
        assert seen["exit_handlers"] >= 1, "logging's exit handler ran before the request"


@pytest.mark.slow  # 600 processes: it would slow the tests that run beside it
@POOL_TIMING
def test_hundreds_of_workers_start_and_serve() -> None:
    """The spares are ordered from the zygote a few dozen at a time: all at once, its
    answers filled its socket while the pool server waited to write the next order, and
    the pool never became ready."""
    with PoolClient(workers=600, launched_by=limiting_open_files(8192)) as client:
        results = [client.run({"id": f"r{i}", "code": f"print({i})"}) for i in range(3)]
        for i, result in enumerate(results):
            assert_ok(result, f"{i}\n")
        assert client.close() == 0


def test_more_workers_than_open_files_allow_is_one_sentence() -> None:
    done = subprocess.run(
        [*limiting_open_files(128), PYNOX, "pool", "--workers=20"],
        input=b"",
        capture_output=True,
        env=clean_env(),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (125, b"")
    assert done.stderr.decode() == (
        "pynox: a pool of 20 workers holds up to 216 open files, more than the 128 this "
        "process may open; use at most 11 workers, or raise the limit (ulimit -n 216)\n"
    )
    with PoolClient(workers=11, launched_by=limiting_open_files(128)) as client:
        assert_ok(client.run({"id": "fits", "code": "print(1)"}), "1\n")
        assert client.close() == 0


def test_more_sessions_than_open_files_allow_are_refused_one_by_one() -> None:
    """Each session holds a child's descriptors: past what the limit leaves room for, a new
    session is refused with what to do, and the pool, its sessions and requests go on."""
    with PoolClient(workers=2, launched_by=limiting_open_files(64)) as client:
        results = [
            client.run({"id": f"open{i}", "session": f"s{i}", "code": "x = 1"}) for i in range(20)
        ]
        refused = [r for r in results if r["exit"] != 0]
        assert refused and len(refused) < len(results)
        for result in refused:
            assert result["exit"] == 125 and result["error"]["type"] == "RequestError"
            assert (
                "as many as its limit on open files leaves room for" in result["error"]["message"]
            )
        assert_ok(client.run({"id": "step", "session": "s0", "code": "print(x)"}), "1\n")
        assert_ok(client.run({"id": "one-shot", "code": "print(2)"}), "2\n")
        close_session(client, "s0")  # answered once its process, and descriptors, are gone
        assert_ok(client.run({"id": "again", "session": "new", "code": "print(3)"}), "3\n")
        assert client.close() == 0


def test_closed_sessions_still_running_a_step_count_against_open_files() -> None:
    """A closed session whose step still runs keeps its process, and its descriptors, until
    the step ends: not counted, new sessions took the limit's room again and again, and
    the pool server stopped at the first pipe it could not open, every session lost."""
    with PoolClient(workers=1, launched_by=limiting_open_files(64)) as client:
        assert client.run({"id": "kept", "session": "kept", "code": "x = 1"})["exit"] == 0
        names = []
        for round_ in range(4):
            started = [f"r{round_}-{i}" for i in range(12)]
            for name in started:
                client.send({"id": name, "session": name, "code": "import time\ntime.sleep(3)"})
            time.sleep(0.3)
            for name in started:
                client.send({"id": f"close-{name}", "close_session": name})
            names += started
        results = [client.result(name, 30) for name in names]
        refused = [r for r in results if r["exit"] != 0]
        assert refused, "no session was refused"
        for result in refused:
            assert result["exit"] == 125 and result["error"]["type"] == "RequestError", result
            message = result["error"]["message"]
            assert "as many as its limit on open files leaves room for" in message, result
        assert_ok(client.run({"id": "step", "session": "kept", "code": "print(x)"}), "1\n")
        assert_ok(client.run({"id": "one-shot", "code": "print(2)"}), "2\n")
        assert client.close() == 0


def test_a_pool_whose_zygote_dies_answers_every_request_then_stops() -> None:
    """Without its zygote no request can run or end: each one the pool has, running,
    queued or a session's step, gets a result saying so, then the pool stops with it."""
    with PoolClient(workers=1) as client:
        client.run({"id": "warm", "code": "pass"})
        table = process_table()
        (zygote,) = [
            pid
            for pid, (parent, _) in table.items()
            if parent == client.pid and not is_scratch_helper(pid)
        ]
        assert_ok(client.run({"id": "open", "session": "s", "code": "x = 1"}), "")
        started = "import time\nprint('started', flush=True)\ntime.sleep(30)"
        client.send({"id": "running", "code": started, "stream": True})
        client.send({"id": "queued", "code": "print(1)"})
        client.send({"id": "step", "session": "s", "code": started, "stream": True})
        client.wait_for(lambda: len(client.events) == 2)  # both print "started"
        os.kill(zygote, signal.SIGKILL)
        problem = "the pool's zygote stopped; restart the pool"
        for request_id in ("running", "queued", "step"):
            result = client.result(request_id)
            assert result["exit"] == 125
            assert result["error"]["type"] == "PoolError"
            assert result["error"]["message"] == problem
        assert client.proc.wait(10) == 125
        assert client.stderr().decode() == f"pynox: {problem}\n"


def test_a_stopped_zygote_delays_no_timeout() -> None:
    """The zygote reaps children and forks spares; stopped (SIGSTOP), it does neither. A run
    still ends at its timeout: killed, it has its timeout result without the zygote's word,
    and one whose process the zygote never forked says so. Continued, the pool goes on."""
    with PoolClient(workers=1) as client:
        client.run({"id": "warm", "code": "pass"})
        (zygote,) = [
            pid
            for pid, (parent, _) in process_table().items()
            if parent == client.pid and not is_scratch_helper(pid)
        ]
        wait_for_tree(zygote, 1)  # the spare of the next request is forked
        os.kill(zygote, signal.SIGSTOP)
        try:
            client.send({"id": "forked", "code": "import time\ntime.sleep(30)", "timeout": 0.5})
            client.send({"id": "never forked", "code": "print(1)", "timeout": 0.5})
            timed_out = client.result("forked", timeout=10)
            assert timed_out["exit"] == 124
            assert timed_out["error"]["type"] == "Timeout"
            refused = client.result("never forked", timeout=10)
            assert refused["exit"] == 125
            assert refused["error"]["type"] == "PoolError"
            assert refused["error"]["message"] == (
                f"the pool's zygote (pid {zygote}) forked no process for this request within "
                f"its timeout of 0.5s; if the zygote is stopped, continue it (kill -CONT "
                f"{zygote}), else restart the pool"
            )
        finally:
            os.kill(zygote, signal.SIGCONT)
        assert_ok(client.run({"id": "after", "code": "print(2)"}), "2\n")
        assert client.close() == 0


def test_a_timeout_shorter_than_a_fork_is_a_timeout() -> None:
    """A burst of runs with a timeout of a millisecond: most end before the zygote has said
    it forked their process. Each is a run that timed out (or finished), not a PoolError
    that blames the zygote, which is running, and says to restart the pool."""
    with PoolClient(workers=2) as client:
        ids = [f"short-{number}" for number in range(20)]
        for request_id in ids:
            client.send({"id": request_id, "code": "pass", "timeout": 0.001})
        for request_id in ids:
            result = client.result(request_id)
            assert result["error"] is None or result["error"]["type"] == "Timeout", result
            assert result["exit"] in (0, 124)
        assert_ok(client.run({"id": "after", "code": "print(2)"}), "2\n")
        assert client.close() == 0


@pytest.mark.slow
@pytest.mark.parametrize("open_files", [1024, 120])
def test_a_stopped_zygote_does_not_stop_the_pool(tmp_path: Path, open_files: int) -> None:
    """Orders for spares wait in the pool once the stopped zygote has some unread: the
    pool never blocks on it, and every request gets its result. Continued, the zygote
    serves again, and no scratch directory of those requests stays. Run as any user but
    root is: unread orders hold 4 descriptors each, and the kernel refuses more in flight
    than the limit on open files (ETOOMANYREFS), which stopped the pool, or, met as the
    zygote answered, the zygote."""
    workers = 8
    launched_by = [*bound_by_descriptors_in_flight(), *limiting_open_files(open_files)]
    env = clean_env({"TMPDIR": str(tmp_path)})
    with PoolClient(workers=workers, env=env, launched_by=launched_by) as client:
        client.run({"id": "warm", "code": "pass"})
        (zygote,) = [
            pid
            for pid, (parent, _) in process_table().items()
            if parent == client.pid and not is_scratch_helper(pid)
        ]
        os.kill(zygote, signal.SIGSTOP)
        try:
            count = 320
            for number in range(count):
                client.send({"id": number, "code": "pass", "timeout": 0.01})
            for number in range(count):
                # Run by a spare forked before the stop (0, or 124 when a busy machine
                # took longer than its 10ms), or by none (125): each gets its result.
                assert client.result(number, timeout=10)["exit"] in (0, 124, 125)
        finally:
            os.kill(zygote, signal.SIGCONT)
        assert_ok(client.run({"id": "after", "code": "print(2)"}), "2\n")
        (root,) = tmp_path.iterdir()
        deadline = time.monotonic() + 10
        while len(list(root.iterdir())) > 3 * workers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(root.iterdir())) <= 3 * workers  # those made ahead, and a few more
        assert client.close() == 0


# Puts as many of this user's descriptors in flight on Unix sockets as a program may: the
# kernel passes one while they are at most the sender's soft limit on open files, which
# the program first raises to its hard one. One at a time to one past that bound, one
# taken back, then a message of the most one may carry (253): the bound and 253 more.
_FILLS_IN_FLIGHT = """
import array, errno, os, resource, socket, time
_, bound = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (bound, bound))
fd = os.open("/dev/null", os.O_RDONLY)
one = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
most = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd] * 253))]

def take_back(receiver, count):
    _, passed, _, _ = receiver.recvmsg(1, socket.CMSG_SPACE(count * 4))
    for taken in array.array("i", passed[0][2]):
        os.close(taken)

def send_most():
    while True:
        try:
            return sender.sendmsg([b"x"], most)
        except OSError as exc:  # the pool's own in flight for a moment: read at once
            if exc.errno != errno.ETOOMANYREFS:
                raise
            time.sleep(0.01)

pairs = []
try:
    while True:
        try:
            pairs[-1][0].sendmsg([b"x"], one)
        except (IndexError, BlockingIOError):  # none yet, or its queue is full
            pairs.append(socket.socketpair())
            pairs[-1][0].setblocking(False)
except OSError as exc:
    if exc.errno != errno.ETOOMANYREFS:
        raise
take_back(pairs[0][1], 1)
sender, receiver = socket.socketpair()
send_most()
"""

# Fills them so, and for three seconds takes the last 253 back for a moment, then sends
# them again.
_HOLDS_DESCRIPTORS_IN_FLIGHT = (
    _FILLS_IN_FLIGHT
    + """
end = time.monotonic() + 3
while time.monotonic() < end:
    time.sleep(0.2)
    take_back(receiver, 253)
    time.sleep(0.05)
    send_most()
print("done")
"""
)


@pytest.mark.slow
def test_a_program_that_holds_descriptors_in_flight_does_not_stop_the_pool() -> None:
    """The kernel bounds a user's descriptors in flight on Unix sockets, which a program
    the pool runs may pass where the half of the limit on open files the pool keeps to
    itself is less than one message of them (253), as at 256; the zygote's answer, which
    passes a pidfd, then waits for room, rather than the zygote leaving and the pool
    stopping with every request lost. Run as any user but root is (root is exempt from
    that bound)."""
    launched_by = [*bound_by_descriptors_in_flight(), *limiting_open_files(256)]
    with PoolClient(workers=2, launched_by=launched_by) as client:
        client.run({"id": "warm", "code": "pass"})
        client.send({"id": "holder", "code": _HOLDS_DESCRIPTORS_IN_FLIGHT})
        time.sleep(0.5)
        ids = [f"during-{number}" for number in range(20)]
        for request_id in ids:
            client.send({"id": request_id, "code": f"print({request_id!r})"})
            time.sleep(0.05)
        for request_id in ids:
            assert_ok(client.result(request_id), f"{request_id}\n")
        assert_ok(client.result("holder"), "done\n")
        assert client.close() == 0


# Fills them so, and keeps them in flight for as long as its session stays open.
_KEEPS_DESCRIPTORS_IN_FLIGHT = _FILLS_IN_FLIGHT + "print(bound)\n"


@pytest.mark.slow
def test_a_request_that_cannot_start_for_descriptors_in_flight_is_told_why() -> None:
    """While a session keeps this user's descriptors in flight at the kernel's bound, no
    process can be started for a request (its pipes and pidfd cannot be passed): the
    request ends at its timeout with a sentence that says so, not with a timeout that
    tells its program, which never ran, to be faster. A program reaches that bound where
    the half of the limit on open files the pool keeps to itself is less than one message
    of descriptors (253), as at 256. Run as any user but root is."""
    launched_by = [*bound_by_descriptors_in_flight(), *limiting_open_files(256)]
    with PoolClient(workers=2, launched_by=launched_by) as client:
        assert_ok(client.run({"id": "warm", "code": "pass"}), "")
        held = {"id": "hold", "session": "s", "code": _KEEPS_DESCRIPTORS_IN_FLIGHT}
        assert_ok(client.run(held), "128\n")  # half the pool's limit: past it all the same
        # Spares forked before the bound was reached (two workers keep up to two ready)
        # still run a request each; the requests past them cannot start.
        ids = [f"blocked-{number}" for number in range(4)]
        for request_id in ids:
            client.send({"id": request_id, "code": "print('ran')", "timeout": 2})
        results = [client.result(request_id) for request_id in ids]
        blocked = [result for result in results if result["stdout"] != "ran\n"]
        assert len(blocked) >= 2, results
        for result in blocked:
            assert (result["exit"], result["stdout"]) == (125, ""), result
            assert result["error"]["type"] == "PoolError"
            assert result["error"]["message"] == (
                "the pool could not start a process for this request within its timeout of "
                "2s: the kernel refuses to pass it descriptors while this user's descriptors "
                "in flight on Unix sockets are at its bound (the limit on open files), held "
                "by a program the pool runs or another process of this user; end that "
                "program (close its session), then send the request again"
            )
        client.run({"id": "close", "close_session": "s"})
        assert_ok(client.run({"id": "after", "code": "print('ran')"}), "ran\n")
        assert client.close() == 0


_SHOWS_OPEN_FILES = "import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE))\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("soft", "children"), [(4096, (2048, 2048)), (256, (256, 2048))], ids=["soft-at-hard", "lower"]
)
def test_a_program_cannot_keep_the_pool_from_passing_descriptors(
    soft: int, children: tuple[int, int]
) -> None:
    """The kernel passes no descriptor once this user's descriptors in flight on Unix
    sockets are past the sender's soft limit on open files. A program may raise its own
    soft limit to its hard one and keep that many in flight, and 253 more, for as long as
    it runs: with the pool's own limits, the pool could start no process for any request
    meanwhile. The pool runs with its soft limit at the hard one (4096 here), its children
    with the soft limit it started with, within half of it, which bounds them both.
    Run as any user but root is."""
    launched_by = [
        *bound_by_descriptors_in_flight(),
        *limiting_open_files(4096),
        *soft_limiting("RLIMIT_NOFILE", soft),
    ]
    with PoolClient(workers=2, launched_by=launched_by) as client:
        assert_ok(client.run({"id": "limits", "code": _SHOWS_OPEN_FILES}), f"{children}\n")
        held = {"id": "hold", "session": "s", "code": _KEEPS_DESCRIPTORS_IN_FLIGHT}
        assert_ok(client.run(held), f"{children[1]}\n")
        assert_ok(step(client, "s", _SHOWS_OPEN_FILES), f"{(children[1],) * 2}\n")
        # More than the spares forked before it: new ones pass their descriptors now.
        for number in range(6):
            request = {"id": f"after-{number}", "code": "print('ran')", "timeout": 5}
            assert_ok(client.run(request), "ran\n")
        close_session(client, "s")
        assert client.close() == 0
