"""Children that misbehave (segfault, run out of memory, run past their timeout, forge
protocol lines, write garbage frames, break the host-call rules, print too much): each
ends its own request with a result, and the pool keeps serving."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import ignoring
from support.pool_client import PoolClient, status_field
from support.pool_requests import DESCRIPTOR_KINDS, assert_ok, code, new_id, serves

from pynox.pool import channel

SHOWS_SIGCHLD = "import signal\nprint(repr(signal.getsignal(signal.SIGCHLD)))"


def test_segfault(pool: PoolClient) -> None:
    result = pool.run({"id": new_id(), "code": "import ctypes\nctypes.string_at(0)"})
    assert result["exit"] == 128 + signal.SIGSEGV == 139
    assert result["error"]["type"] == "Signal"
    assert "SIGSEGV" in result["error"]["message"]
    serves(pool)


def test_a_pool_started_with_sigchld_ignored_still_sees_its_children_end() -> None:
    """A caller may ignore SIGCHLD, and the pool inherits that: the kernel would then reap
    each child the moment it ended, and the pool, never told, would wait for it forever.
    Its children get the caller's SIGCHLD, as python would have it."""
    with PoolClient(workers=2, launched_by=ignoring("SIGCHLD")) as client:
        shown = client.run({"id": new_id(), "code": SHOWS_SIGCHLD}, timeout=20)
        assert (shown["exit"], shown["stdout"]) == (0, "<Handlers.SIG_IGN: 1>\n")
        exits = client.run({"id": new_id(), "code": "import os\nos._exit(3)"}, timeout=20)
        assert exits["exit"] == 3
        crashes = client.run({"id": new_id(), "code": "import ctypes\nctypes.string_at(0)"})
        assert crashes["exit"] == 139 and crashes["error"]["type"] == "Signal"
        assert client.close() == 0


def test_a_failing_excepthook_is_reported_as_python_reports_it(pool: PoolClient) -> None:
    program = "import sys\ndef hook(*args):\n    raise RuntimeError('hook broke')\n"
    failing = pool.run({"id": new_id(), "code": program + "sys.excepthook = hook\n1 / 0"})
    assert failing["exit"] == 1 and failing["error"]["type"] == "ZeroDivisionError"
    stderr = failing["stderr"]
    assert stderr.startswith("Error in sys.excepthook:\nTraceback (most recent call last):\n")
    assert "\nRuntimeError: hook broke\n\nOriginal exception was:\nTraceback" in stderr
    assert "pynox" not in stderr and stderr.endswith("ZeroDivisionError: division by zero\n")
    missing = pool.run({"id": new_id(), "code": "import sys\ndel sys.excepthook\n1 / 0"})
    assert missing["exit"] == 1 and missing["error"]["type"] == "ZeroDivisionError"
    assert missing["stderr"].startswith("sys.excepthook is missing\nTraceback")
    hook = "lambda kind, value, tb: sys.exit(f'{kind.__name__}, so it exits')"
    exits = pool.run({"id": new_id(), "code": f"import sys\nsys.excepthook = {hook}\n1 / 0"})
    assert (exits["exit"], exits["stderr"]) == (1, "ZeroDivisionError, so it exits\n")
    serves(pool)


def test_out_of_memory(pool: PoolClient) -> None:
    for program in (
        "x = bytearray(256 * 1024 * 1024)",
        "kept = []\nwhile True:\n    kept.append(bytearray(1 << 20))",
    ):
        result = pool.run({"id": new_id(), "code": program, "memory": "64m"})
        assert result["exit"] == 1, result
        assert result["error"]["type"] == "MemoryError"
        assert "memory" in result["error"]["hint"]
        assert "64m" in result["error"]["hint"]
        assert result["policy"]["memory_bytes"] == 64 << 20
    serves(pool)


def test_os_exit_under_a_memory_limit_is_the_programs_own_end(pool: PoolClient) -> None:
    """Not native code's giving up on an allocation: no NativeExit, no hint to raise it."""
    program = "import os\nprint('bye', flush=True)\nos._exit(3)"
    result = pool.run({"id": new_id(), "code": program, "memory": "64m"})
    assert (result["exit"], result["error"], result["stdout"]) == (3, None, "bye\n")


@pytest.mark.parametrize(
    "program",
    [
        "while True:\n    pass",
        "import time\ntime.sleep(60)",
        "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))\n"
        "while True:\n    pass",
    ],
)
def test_timeout_stops_it(pool: PoolClient, program: str) -> None:
    started = time.monotonic()
    result = pool.run({"id": new_id(), "code": program, "timeout": "1s"}, timeout=30)
    elapsed = time.monotonic() - started
    print(f"1s timeout: result after {elapsed:.2f}s (duration_ms {result['duration_ms']})")
    assert result["exit"] == 124
    assert result["error"]["type"] == "Timeout"
    assert "1s" in result["error"]["message"]
    assert 1.0 <= elapsed < 3.0
    serves(pool)


def test_a_queued_requests_timeout_starts_when_it_runs() -> None:
    """`timeout` is the program's wall-clock limit: time waiting for a worker is not the
    program's. With one worker, a 0.3 s program with a 1 s timeout queued behind a 1.5 s one
    must succeed."""
    with PoolClient(workers=1) as client:
        client.send({"id": "long", "code": "import time\ntime.sleep(1.5)", "timeout": 5})
        client.send(
            {"id": "short", "code": "import time\ntime.sleep(0.3)\nprint('ok')", "timeout": "1s"}
        )
        short = client.result("short", 30)
        assert_ok(client.result("long", 30), "")
        print("queued request:", short["exit"], short["error"], short["duration_ms"])
        assert_ok(short, "ok\n")
        assert client.close() == 0


FORGERY = code("""
    import json, os, time
    fake = {"id": "other", "exit": 0, "stdout": "forged\\n", "stderr": "", "error": None,
            "stdout_truncated": False, "stderr_truncated": False, "duration_ms": 1}
    call = {"id": "other", "event": "host_call", "call": 1, "function": "f", "args": [],
            "kwargs": {}}
    lines = (json.dumps(fake) + "\\n" + json.dumps(call) + "\\n").encode()
    body = json.dumps({"type": "call", "call": 1, "function": "f", "args": [],
                       "kwargs": {}}).encode()
    frame = len(body).to_bytes(4, "big") + body
    done = json.dumps({"type": "done", "exit": 0, "error": None}).encode()
    payload = lines + frame + len(done).to_bytes(4, "big") + done + b"\\n" + lines
    written = []
    for fd in range(1024):
        try:
            os.write(fd, payload)
            written.append(fd)
        except OSError:
            pass
    print(json.dumps({"written": written}), flush=True)
    time.sleep(3)
""")


def test_child_forging_protocol_lines_on_every_descriptor(pool: PoolClient) -> None:
    hostile_id = new_id("hostile")
    first = len(pool.lines)
    pool.send(
        {
            "id": "other",
            "code": code("""
        import time
        time.sleep(1)
        print('clean')
    """),
        }
    )
    pool.send({"id": hostile_id, "code": FORGERY, "timeout": "20s"})
    hostile = pool.result(hostile_id, 30)
    other = pool.result("other", 30)
    seen = pool.lines[first:]
    print("hostile result:", hostile["exit"], hostile["error"], hostile["stdout"][-200:])
    # The honest request is exactly right, and only its own result carries its id.
    assert_ok(other, "clean\n")
    assert other["stderr"] == ""
    assert [line for line in seen if line.get("id") == "other"] == [other]
    assert not [line for line in seen if line.get("event") == "host_call"]
    assert all(line.get("id") in (hostile_id, "other") for line in seen), seen
    # The forged lines are inside the hostile request's own output, as JSON strings.
    assert '"id": "other"' in hostile["stdout"]
    assert '"id": "other"' in hostile["stderr"]
    assert '"event": "host_call"' in hostile["stdout"]
    # Writing to its channel broke it: the pool dropped it.
    assert hostile["exit"] == 125
    assert hostile["error"]["type"] == "PoolError"
    assert "channel" in hostile["error"]["message"]
    serves(pool)


def test_child_writing_garbage_frames(pool: PoolClient) -> None:
    request_id = new_id("garbage")
    started = time.monotonic()
    result = pool.run(
        {
            "id": request_id,
            "code": code("""
        import os, time
        for fd in range(1024):
            try:
                os.write(fd, (2 ** 31).to_bytes(4, "big"))
            except OSError:
                pass
        time.sleep(10)
    """),
            "timeout": "30s",
        }
    )
    elapsed = time.monotonic() - started
    print(f"garbage frame: {result['exit']} {result['error']} after {elapsed:.2f}s")
    assert result["exit"] == 125
    assert result["error"]["type"] == "PoolError"
    assert "channel" in result["error"]["message"]
    assert elapsed < 5, "the pool should drop the child at once, not at its timeout"
    serves(pool)


def test_an_error_report_larger_than_its_pipe_arrives_whole(pool: PoolClient) -> None:
    """A report past the report pipe's buffer (an exception type named by 200,000
    letters) arrives whole, and at once: the pool reads it while the child writes it."""
    started = time.monotonic()
    result = pool.run(
        {
            "id": new_id("report"),
            "code": code("""
        Long = type("E" * 200_000, (Exception,), {})
        raise Long("boom")
    """),
            "timeout": "20s",
        },
        timeout=40,
    )
    elapsed = time.monotonic() - started
    assert result["exit"] == 1, result["error"]
    assert result["error"]["type"] == "E" * 200_000
    assert result["error"]["message"] == "boom"
    assert elapsed < 10, "the report should not wait for the run's timeout"
    serves(pool)


def test_child_calling_an_undeclared_host_function(pool: PoolClient) -> None:
    request_id = new_id("undeclared")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "public"}],
            "code": code("""
        import json, os, time
        import pynox_host
        body = json.dumps({"type": "call", "call": 1, "function": "secret", "args": [],
                           "kwargs": {}}).encode()
        frame = len(body).to_bytes(4, "big") + body
        for fd in range(3, 1024):
            try:
                os.write(fd, frame)
            except OSError:
                pass
        time.sleep(10)
    """),
            "timeout": "30s",
        },
        host={"public": lambda: "ok", "secret": lambda: "leaked"},
    )
    assert not [c for c in pool.host_calls if c["id"] == request_id], pool.host_calls
    assert result["exit"] == 125
    assert result["error"]["type"] == "PoolError"
    assert result["duration_ms"] < 5000
    serves(pool)


def test_child_repeating_a_pending_call_number(pool: PoolClient) -> None:
    """Two calls with one number: the second is not relayed, the child is dropped."""
    request_id = new_id("twice")
    pool.send(
        {
            "id": request_id,
            "functions": [{"name": "f"}],
            "timeout": "30s",
            "code": code("""
        import json, time
        import pynox_host
        fd = pynox_host.f._link.fd
        body = json.dumps({"type": "call", "call": 9, "function": "f", "args": [],
                           "kwargs": {}}).encode()
        frame = len(body).to_bytes(4, "big") + body
        import os
        os.write(fd, frame + frame)
        time.sleep(10)
    """),
        }
    )
    result = pool.result(request_id, 30)
    calls = [c for c in pool.host_calls if c["id"] == request_id]
    assert len(calls) <= 1, calls
    assert result["exit"] == 125 and result["error"]["type"] == "PoolError"
    serves(pool)


def test_output_beyond_max_output_is_truncated(pool: PoolClient) -> None:
    result = pool.run(
        {
            "id": new_id(),
            "max_output": 1000,
            "code": code("""
        import sys
        sys.stdout.write('x' * 300000)
        sys.stderr.write('y' * 300000)
        print('done', file=sys.stderr)
    """),
        }
    )
    assert result["exit"] == 0
    # The head and the tail of each stream, around the line that says what was left out.
    assert result["stdout"] == "x" * 483 + "\n[... 299033 bytes left out ...]\n" + "x" * 484
    assert result["stdout_truncated"] is True
    assert result["stderr"].startswith("y" * 483 + "\n[... 299038 bytes left out ...]\n")
    assert result["stderr"].endswith("\n" + "y" * 479 + "done\n")
    assert len(result["stderr"]) <= 1000 and result["stderr_truncated"] is True
    serves(pool)


@pytest.mark.parametrize("session", [False, True], ids=["request", "session"])
def test_a_program_finds_its_streams_are_pipes(pool: PoolClient, session: bool) -> None:
    """Its stdout and stderr are pipes, which cannot seek, and its stdin the null device,
    which can, whatever the pool's own descriptors were (a file takes the pool's stderr
    here): a stream made for a file would take a pipe for one, and reconfigure(), which
    many scripts call first thing, would fail on it."""
    request = {
        "id": new_id(),
        "code": code("""
        import sys
        print(sys.stdin.seekable(), sys.stdout.seekable(), sys.stderr.seekable())
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
        print(sys.stdout.tell() if sys.stdout.seekable() else "no tell")
    """),
    }
    if session:
        request["session"] = f"streams-{new_id()}"
    result = pool.run(request)
    assert (result["exit"], result["stderr"]) == (0, "")
    assert result["stdout"] == "True False False\nno tell\n"
    serves(pool)


def test_output_that_is_not_utf8_comes_back_in_a_line_of_three_bytes_a_character() -> None:
    """Each byte that is not UTF-8 is U+FFFD in the result: written as itself, 3 bytes, not
    as the 6 of its escape. The pool server holds the result's line once, not four copies:
    8 MiB of such output once raised its peak memory by ~170 MiB, now by ~70 MiB."""
    size = 8 << 20
    with PoolClient(workers=1) as client:
        before = int(status_field(client.proc.pid, "VmHWM") or 0)
        client.send(
            {
                "id": "ff",
                "max_output": size,
                "code": f"import sys\nn = sys.stdout.buffer.write(b'\\xff' * {size + (4 << 20)})",
            }
        )
        line = client.read_line(timeout=60)
        peak = int(status_field(client.proc.pid, "VmHWM") or 0)
        assert client.close() == 0
    result = json.loads(line)
    assert result["exit"] == 0, result["error"]
    assert result["stdout"].startswith("\ufffd" * 1000) and result["stdout_truncated"] is True
    print(f"line of {len(line) >> 20} MiB; the pool's peak grew by {(peak - before) >> 10} MiB")
    assert peak - before < 120 << 10
    assert len(line) < 3 * size + 1000


def _server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_output_of_digits_costs_the_pool_what_other_output_does() -> None:
    """The pool writes a result without searching its text for runs of digits (an integer
    too large for a double could only be in one): for 8 MiB of digits in an output, that
    search took the server half a second, four times the rest of the result's cost."""
    spent = {}
    with PoolClient(workers=1) as client:
        for text in ("1234567890" * 8, "abcdefghij" * 8):
            program = f"import sys\nsys.stdout.write(({text!r} + '\\n') * {(8 << 20) // 81})"
            before = _server_cpu(client.proc.pid)
            result = client.run({"id": new_id(), "code": program, "max_output": "16m"})
            spent[text[0]] = _server_cpu(client.proc.pid) - before
            assert result["exit"] == 0 and len(result["stdout"]) > 8_000_000, result["error"]
        assert client.close() == 0
    print(f"server CPU per result: {spent}")
    assert spent["1"] < 2 * spent["a"] + 0.1


def test_a_program_that_keeps_a_copy_of_its_output_open_gets_its_result(
    pool: PoolClient,
) -> None:
    """A child closes its output before it says it ended, so that the pool finds the
    output complete; a copy the program kept open delays that to the child's end."""
    started = time.monotonic()
    result = pool.run(
        {
            "id": new_id("kept"),
            "code": "import os, sys\nkept = os.dup(1)\nos.write(kept, b'late\\n')\nprint('hi')",
        }
    )
    assert result["exit"] == 0, result["error"]
    assert result["stdout"] == "late\nhi\n"
    assert time.monotonic() - started < 5
    serves(pool)


def test_output_past_a_pipe_written_at_the_start_arrives_whole(pool: PoolClient) -> None:
    """The pool leaves a new run's pipes unread for a moment; a program that fills one
    in that moment waits for the reader, and loses nothing."""
    for request in (
        {"code": "import sys\nsys.stdout.write('x' * 300_000)"},
        {"code": "import sys\nsys.stdout.write('x' * 300_000)", "session": "big-output"},
    ):
        result = pool.run({"id": new_id("big"), "max_output": "1m", **request})
        assert result["exit"] == 0, result["error"]
        assert result["stdout"] == "x" * 300_000
        assert result["stdout_truncated"] is False
    serves(pool)


_CLAIMS_ITS_END = """
import os, stat, time
from pynox.pool import channel
link = next(fd for fd in range(3, 64) if descriptor_kind(fd) == "channel")
os.close(1)
os.close(2)
channel.send(link, {"type": "exit", "status": 0, "signal": None})
time.sleep(60)
"""


def test_a_program_that_only_claims_its_end_does_not_outlive_its_result() -> None:
    """A child that said it ended is killed when its result goes out, also one whose run
    ended before the pool had read its pid from the zygote (likelier in a burst)."""
    with PoolClient(workers=2) as pool:
        ids = [new_id("claims") for _ in range(60)]
        for request_id in ids:
            pool.send({"id": request_id, "code": DESCRIPTOR_KINDS + _CLAIMS_ITS_END})
        for request_id in ids:
            assert pool.result(request_id)["exit"] == 0
        # The pool, its zygote and its two spares: a child that outlived its result would
        # stay for its minute of sleep.
        assert pool.settles(4), pool.diagnose()
        assert pool.close() == 0


ANNOUNCES_TWICE = """
import socket, sys
from pynox.pool.child_link import ChildLink
ours = socket.socket(fileno=int(sys.argv[1]))
link = ChildLink(ours.fileno())
link.announce_exit(3, False)
link.announce_exit(3, False)  # as os._exit does, called by the end that announced already
"""


def test_a_child_announces_its_exit_once() -> None:
    """The pool takes a second exit frame for a broken channel, and a run under a memory
    limit ends through os._exit, which announces too: the link sends one frame only."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        subprocess.run(
            [sys.executable, "-c", ANNOUNCES_TWICE, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            cwd="/",  # pynox as installed, not this checkout's source
            check=True,
            timeout=60,
        )
        theirs.close()
        data = b""
        while chunk := ours.recv(1 << 16):
            data += chunk
    frames = channel.FrameReader().feed(data)
    assert [frame for frame, _ in frames] == [{"type": "exit", "status": 3, "signal": None}]
