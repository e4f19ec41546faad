"""Streaming: output events in the order the program writes, text decoded whole, then
the result; and back-pressure, so a client that stops reading cannot make the pool
buffer without bound nor stop it serving other requests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from support.pool_client import Message, PoolClient, rss_kib
from support.pool_requests import assert_refused, code, new_id, serves, step

from pynox.limits import STREAM_BACKLOG
from pynox.policy.grants import SESSION_NOTE


def outputs(client: PoolClient, request_id: object) -> list[Message]:
    return [e for e in client.events if e.get("event") == "output" and e.get("id") == request_id]


def joined(events: list[Message], stream: str) -> str:
    return "".join(e["data"] for e in events if e["stream"] == stream)


def test_events_come_as_written_then_the_result(pool: PoolClient) -> None:
    request_id = new_id("stream")
    program = code(
        """
        import sys, time
        for i in range(3):
            print(f"out {i}", flush=True)
            time.sleep(0.05)
            print(f"err {i}", file=sys.stderr, flush=True)
            time.sleep(0.05)
        """
    )
    pool.send({"id": request_id, "code": program, "stream": True})
    result = pool.result(request_id)
    mine = [m for m in pool.lines if m.get("id") == request_id]
    assert mine[-1] is result, "the result comes after the request's last event"
    events = mine[:-1]
    assert all(set(e) == {"id", "event", "stream", "data"} for e in events), events
    # Each stream in its order; across the two, as the pool read them (the first is sure).
    assert events[0] == {"id": request_id, "event": "output", "stream": "stdout", "data": "out 0\n"}
    assert joined(events, "stderr") == "err 0\nerr 1\nerr 2\n"
    # The result holds the output as it does without streaming.
    assert result["exit"] == 0 and result["error"] is None
    assert result["stdout"] == joined(events, "stdout") == "out 0\nout 1\nout 2\n"
    assert result["stderr"] == joined(events, "stderr")


def test_a_request_that_does_not_stream_gets_no_events(pool: PoolClient) -> None:
    request_id = new_id("quiet")
    result = pool.run({"id": request_id, "code": "print('hi', flush=True)"})
    assert result["stdout"] == "hi\n"
    assert not outputs(pool, request_id)


def test_a_character_split_between_reads_arrives_whole(pool: PoolClient) -> None:
    request_id = new_id("utf8")
    # The first byte of "é" alone, then the rest: two reads of the pool, one character.
    program = code(
        """
        import sys, time
        data = "é€".encode()
        sys.stdout.buffer.write(data[:1]); sys.stdout.flush(); time.sleep(0.2)
        sys.stdout.buffer.write(data[1:4]); sys.stdout.flush(); time.sleep(0.2)
        sys.stdout.buffer.write(data[4:] + b"\\n"); sys.stdout.flush()
        """
    )
    result = pool.run({"id": request_id, "code": program, "stream": True})
    events = outputs(pool, request_id)
    assert joined(events, "stdout") == "é€\n" == result["stdout"]
    assert all("\ufffd" not in e["data"] for e in events), events


def test_invalid_utf8_and_a_cut_character_are_replaced(pool: PoolClient) -> None:
    request_id = new_id("bad-utf8")
    program = "import sys\nsys.stdout.buffer.write(b'ok\\xff then \\xe2\\x82')"
    result = pool.run({"id": request_id, "code": program, "stream": True})
    events = outputs(pool, request_id)
    # The cut character at the very end comes before the result, replaced like the result's.
    assert joined(events, "stdout") == "ok\ufffd then \ufffd" == result["stdout"]


def test_stream_must_be_a_boolean(pool: PoolClient) -> None:
    request_id = new_id("stream-type")
    result = pool.run({"id": request_id, "code": "pass", "stream": "yes"})
    assert_refused(result, request_id, "stream must be true or false")


def test_a_session_step_streams(pool: PoolClient) -> None:
    name = new_id("streaming-session")
    step(pool, name, "x = 41")
    request_id = new_id("step")
    program = "import sys\nprint(x + 1, flush=True)\nprint('note', file=sys.stderr)"
    result = pool.run({"id": request_id, "session": name, "code": program, "stream": True})
    events = outputs(pool, request_id)
    assert joined(events, "stdout") == "42\n" and joined(events, "stderr") == "note\n"
    assert result["session"]["step"] == 2
    later = step(pool, name, "print('no events')")
    assert not outputs(pool, later["id"])


def test_a_step_streams_what_a_thread_wrote_since_the_step_before(pool: PoolClient) -> None:
    """A thread an earlier step left running writes between the steps: that output is the
    next step's, in its result, and so in its events too, before what the step writes."""
    name = new_id("streaming-thread")
    started = step(
        pool,
        name,
        code("""
        import sys, threading
        wrote = threading.Event()
        def late():
            print("between steps", flush=True)
            print("and on stderr", file=sys.stderr, flush=True)
            wrote.set()
        threading.Timer(0.1, late).start()
        """),
    )
    assert started["exit"] == 0
    time.sleep(0.5)  # the thread writes, and the pool reads it, with no step running
    request_id = new_id("step")
    program = "wrote.wait(10)\nprint('step 2', flush=True)"
    result = pool.run({"id": request_id, "session": name, "code": program, "stream": True})
    events = outputs(pool, request_id)
    assert result["stdout"] == joined(events, "stdout") == "between steps\nstep 2\n"
    assert result["stderr"] == joined(events, "stderr") == "and on stderr\n"


def test_a_slow_reader_gets_every_byte(fresh: PoolClient) -> None:
    """More than the backlog: reading stops and resumes, and nothing is lost or reordered."""
    request_id = new_id("big")
    lines = 4 * STREAM_BACKLOG // 100
    program = f"for i in range({lines}):\n    print(str(i).rjust(99))"
    fresh.send({"id": request_id, "code": program, "stream": True, "max_output": 1000})
    time.sleep(1)  # the client reads nothing meanwhile
    result = fresh.result(request_id, 60)
    text = joined(outputs(fresh, request_id), "stdout")
    assert text == "".join(str(i).rjust(99) + "\n" for i in range(lines))
    # The result keeps the head and the tail of whole lines, within max_output.
    assert result["stdout_truncated"] is True and len(result["stdout"]) <= 1000
    assert result["stdout"].startswith(str(0).rjust(99) + "\n")
    assert result["stdout"].endswith(str(lines - 1).rjust(99) + "\n")
    assert " bytes left out ...]\n" in result["stdout"]


def test_a_client_that_stops_reading_does_not_make_the_pool_buffer(
    fresh: PoolClient, tmp_path: Path
) -> None:
    """Endless output to a client that reads nothing: the pool's memory stays bounded, it
    still starts and runs other requests, and it catches up once the client reads."""
    serves(fresh)
    before = rss_kib(fresh.pid)
    flood = new_id("flood")
    program = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"
    write_line(fresh, {"id": flood, "code": program, "stream": True})
    time.sleep(3)  # at pipe speed, gigabytes; the client reads none of it
    grown = rss_kib(fresh.pid) - before
    print(f"the pool's RSS grew by {grown} KiB while the client did not read")
    assert grown < 64 * 1024, f"the pool buffered {grown} KiB for a client that does not read"
    # Other requests still run meanwhile (the client still reads nothing).
    marker = tmp_path / "ran"
    other = new_id("other")
    write_line(
        fresh,
        {
            "id": other,
            "code": f"open({str(marker)!r}, 'w').write('yes')",
            "allow_write": [str(tmp_path)],
        },
    )
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the pool stopped running requests while its client did not read"
    fresh.send({"id": flood, "control": "cancel"})
    cancelled = fresh.result(flood, 60)
    assert cancelled["error"]["type"] == "Cancelled"
    assert fresh.result(other, 30)["exit"] == 0
    serves(fresh)


def test_results_a_client_does_not_read_stay_bounded(fresh: PoolClient, tmp_path: Path) -> None:
    """Many requests with big results and a client that reads none: past a backlog, the
    pool starts no more of them (its memory stays bounded), then runs them all once the
    client reads."""
    serves(fresh)
    before = rss_kib(fresh.pid)
    count, size = 40, 1 << 20  # 40 MiB of results, more than the pool keeps for a client
    ids = [new_id("big") for _ in range(count)]
    for request_id in ids:
        program = f"print('x' * {size - 1})\nopen({str(tmp_path / request_id)!r}, 'w')"
        write_line(
            fresh,
            {"id": request_id, "code": program, "max_output": size, "allow_write": [str(tmp_path)]},
        )
    ran = lambda: len(os.listdir(tmp_path))  # noqa: E731 - requests that ran so far
    seen = -1
    while seen != ran() and seen < count:  # until no request has run for a while
        seen = ran()
        time.sleep(0.5)
    grown = rss_kib(fresh.pid) - before
    assert seen < count, "the pool ran every request for a client that reads nothing"
    assert grown < 40 * 1024, f"the pool holds {grown} KiB for a client that does not read"
    for request_id in ids:
        result = fresh.result(request_id, 60)
        assert result["exit"] == 0 and len(result["stdout"]) == size
    serves(fresh)


def write_line(client: PoolClient, message: Message) -> None:
    """Sends a short line without reading anything the pool wrote."""
    line = json.dumps(message).encode() + b"\n"
    while line:
        try:
            line = line[os.write(client.stdin_fd, line) :]
        except BlockingIOError:
            time.sleep(0.01)


def test_a_streamed_hint_line_says_what_the_result_says(pool: PoolClient) -> None:
    """A session step's hint ends by saying to start a new session with the grant, which
    the child's own line does not: the events carry the line the result carries, and the
    new session it names reads the file."""
    name = new_id("streamed-hint")
    program = (
        "import sys\nprint('pynox: not a hint', file=sys.stderr)\nopen('/etc/hostname').read()"
    )
    request_id = new_id("step")
    result = pool.run({"id": request_id, "session": name, "code": program, "stream": True})
    hint = result["error"]["hint"]
    assert (
        hint
        == 'reading /etc/hostname is not allowed; grant it with "allow_read": ["/etc/hostname"]'
        + SESSION_NOTE
    )
    streamed = joined(outputs(pool, request_id), "stderr")
    assert streamed == result["stderr"]
    assert streamed.startswith("pynox: not a hint\n")
    assert streamed.endswith(f"\npynox: {hint}\n")
    followed = pool.run(
        {
            "id": new_id("followed"),
            "session": new_id("granted"),
            "code": "print(len(open('/etc/hostname').read()) > 0)",
            "allow_read": ["/etc/hostname"],
        }
    )
    assert (followed["exit"], followed["stdout"]) == (0, "True\n"), followed["stderr"]
