"""`pynox pool` against hostile children and scripts: whatever a request does, it alone pays.

docs/pool-protocol.md and DESIGN.md's trust boundary, as a client sees them: a script runs
only inside what [pool.limits] lets the request read, read by its own confined child; data a
child sends (report pipe, channel frames, host calls) is bounded in size and depth, and a bad
message ends that request with a PoolError result, never the pool; every request ends with
exactly one result within its timeout, whatever its child writes or closes; no process of a
request or session outlives it by more than a second; host calls in flight are bounded per
request; and every line in either direction is RFC 8259 JSON (no NaN, no Infinity).

Each test also checks that the pool keeps serving: a bystander session keeps its state and a
normal request succeeds afterwards. Every line the pool writes is parsed strictly here.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pool_client import (
    NO_ANSWER,
    Message,
    PoolClient,
    alive,
    clean_env,
    descendants,
    wait_gone,
)
from support.pool_requests import (
    DESCRIPTOR_KINDS,
    assert_ok,
    code,
    new_id,
    serves,
    step,
    write_config,
)

# --- helpers ------------------------------------------------------------------------------


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not RFC 8259 JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond a double: a strict client reads no Infinity")
    return value


def strict_loads(line: bytes) -> Any:
    """What a strict JSON client makes of a line: no NaN, Infinity or overflowing numbers."""
    return json.loads(line, parse_constant=_refuse_constant, parse_float=_finite)


class StrictPool(PoolClient):
    """A pool client that also fails on any line that is not RFC 8259 JSON."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.raw: list[bytes] = []
        super().__init__(*args, **kwargs)

    def read_line(self, timeout: float = 10) -> bytes:
        line = super().read_line(timeout)
        self.raw.append(line)
        try:
            strict_loads(line)
        except ValueError as exc:
            shown = line[:300]
            raise AssertionError(f"the pool wrote non-RFC 8259 JSON ({exc}): {shown!r}") from None
        return line


@pytest.fixture
def pool() -> Iterator[StrictPool]:
    """A pool of its own per test: a hostile child on old code may take it down."""
    with StrictPool(workers=2) as client:
        yield client
        if client.proc.poll() is None and not client.eof:
            assert client.close() == 0


def assert_pool_error(result: Message, *words: str) -> None:
    shown = {k: result.get(k) for k in ("exit", "error", "stderr")}
    assert result["exit"] == 125, shown
    assert result["error"]["type"] == "PoolError", shown
    for word in words:
        assert word in result["error"]["message"], (word, shown)


def close_session(client: PoolClient, name: str) -> float:
    """Closes a session; returns when the pool answered."""
    control_id = new_id("close")
    client.send({"id": control_id, "close_session": name})
    client.wait_for(lambda: control_id in client.results)
    answer = client.results.pop(control_id)[0]
    assert answer == {"id": control_id, "session": {"id": name, "closed": True}}
    return time.monotonic()


class Bystander:
    """A session opened before the hostile request: afterwards it must be intact."""

    def __init__(self, client: PoolClient) -> None:
        self.client = client
        self.name = new_id("bystander")
        first = step(client, self.name, "import os\nkept = 42\nprint(os.getpid())")
        assert first["exit"] == 0, first
        self.pid = int(first["stdout"])

    def check(self) -> None:
        later = step(self.client, self.name, "kept += 1\nprint(kept)")
        assert_ok(later, "43\n")
        assert later["session"]["restarted"] is False, later["session"]
        assert alive(self.pid)
        serves(self.client)


def results_for(client: PoolClient, request_id: object) -> list[Message]:
    return [line for line in client.lines if line.get("id") == request_id and "event" not in line]


# What every hostile program starts with: the descriptors a pool child holds besides its
# standard streams, found by what they are (a child may not list /proc/self/fd: Landlock),
# and a way to write length-prefixed frames.
PRELUDE = DESCRIPTOR_KINDS + code("""
    import json, sys, threading, time
    FDS = {descriptor_kind(_fd): _fd for _fd in range(3, 256)}
    CHANNEL, REPORT = FDS.get("channel"), FDS.get("report")

    def frame(message=None, body=None):
        if body is None:
            body = json.dumps(message).encode()
        return len(body).to_bytes(4, "big") + body

    def write_all(fd, data):
        while data:
            data = data[os.write(fd, data):]
""")


def hostile(body: str) -> str:
    return PRELUDE + code(body)


# --- 6. scripts: inside [pool.limits], read by the confined child -------------------------

SECRET = "secret-first-line-7d1f3a"


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[StrictPool, Path]]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("beside the script")
    outside = tmp_path / "outside"
    outside.mkdir()
    # Not Python: a server that reads and compiles it shows its first line in a traceback.
    (outside / "secret.py").write_text(f"{SECRET}: x y z\n")
    config = write_config(
        tmp_path / "config",
        f"""
        [pool.limits]
        allow_read = [{json.dumps(str(data))}]
    """,
    )
    with StrictPool(config=config) as client:
        yield client, tmp_path
        assert client.close() == 0


def assert_not_leaked(client: StrictPool) -> None:
    assert not [line for line in client.raw if SECRET.encode() in line], "the script leaked"


@pytest.mark.parametrize("how", ["outside", "symlink_inside_to_outside", "dotdot"])
def test_script_outside_the_limits_is_refused_unread(
    limited: tuple[StrictPool, Path], how: str
) -> None:
    client, base = limited
    if how == "outside":
        script = base / "outside" / "secret.py"
    elif how == "dotdot":
        script = base / "data" / ".." / "outside" / "secret.py"
    else:
        script = base / "data" / "link.py"
        script.symlink_to(base / "outside" / "secret.py")
    bystander = Bystander(client)
    result = client.run({"id": "outside", "script": str(script)})
    print(how, result["exit"], result["error"], result["stderr"][-300:])
    assert result["exit"] == 125, result
    assert result["error"]["type"] == "RequestError"
    for word in ("[pool.limits]", "allow_read", str(script)):
        assert word in result["error"]["message"], (word, result["error"])
    assert result["stdout"] == result["stderr"] == ""
    assert_not_leaked(client)
    bystander.check()


def test_script_inside_the_limits_runs_with_its_directory_readable(
    limited: tuple[StrictPool, Path],
) -> None:
    client, base = limited
    script = base / "data" / "tool.py"
    script.write_text(
        code("""
        import sys, pathlib
        print(sys.argv[1:], pathlib.Path(__file__).with_name('in.txt').read_text())
    """)
    )
    result = client.run({"id": "inside", "script": str(script), "args": ["a"]})
    assert_ok(result, "['a'] beside the script\n")
    assert result["policy"]["implicit_read"] == [str((base / "data").resolve())]
    assert result["policy"]["allow_read"] == []


@pytest.mark.parametrize("where", ["missing_file", "missing_directory"])
def test_missing_script_is_pythons_cant_open_file(
    limited: tuple[StrictPool, Path], where: str
) -> None:
    client, base = limited
    if where == "missing_file":
        script = base / "data" / "missing.py"
    else:
        script = base / "data" / "no-such-dir" / "missing.py"
    result = client.run({"id": "missing", "script": str(script)})
    print(where, result)
    assert result["exit"] == 2, result
    assert result["error"]["type"] == "ProgramNotFound"
    assert result["error"]["message"] == (
        f"can't open file {str(script)!r}: [Errno 2] No such file or directory"
    )
    assert "Traceback" not in result["stderr"] and "pynox/" not in result["stderr"]
    serves(client)


def test_script_is_read_under_the_requests_confinement(tmp_path: Path) -> None:
    """/proc/self is the reader's own: read by the server, it would be the pool's secrets;
    read by the confined child, it is the child's, which the sandbox does not let it read."""
    env = clean_env({"POOL_SECRET": SECRET})
    with StrictPool(workers=2, env=env) as client:
        result = client.run({"id": "environ", "script": "/proc/self/environ"})
        print("script /proc/self/environ:", result["exit"], result["error"])
        assert result["exit"] == 2, result
        assert result["error"]["type"] == "ProgramNotFound"
        assert result["error"]["message"].startswith("can't open file '/proc/self/environ'")
        assert_not_leaked(client)
        serves(client)
        assert client.close() == 0


def test_script_that_is_not_a_regular_file(pool: StrictPool, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = pool.run({"id": "fifo", "script": str(fifo), "timeout": "10s"})
    assert time.monotonic() - started < 5, "a FIFO must not stall the run"
    assert result["exit"] == 125 and result["error"]["type"] == "RequestError", result
    assert "not a regular file" in result["error"]["message"]
    serves(pool)


# --- 7. child data bounded in size and depth ----------------------------------------------


def test_deeply_nested_report_ends_only_its_request(pool: StrictPool) -> None:
    bystander = Bystander(pool)
    pool.send({"id": "other", "code": "import time\ntime.sleep(0.5)\nprint('clean')"})
    result = pool.run(
        {"id": "deep-report", "code": hostile("write_all(REPORT, b'[' * 200000)\nos._exit(1)")}
    )
    print("deep report:", result["exit"], result["error"])
    assert_pool_error(result, "report")
    assert_ok(pool.result("other"), "clean\n")
    bystander.check()


@pytest.mark.parametrize(
    "body", ['{"a": [' + "[]," * 300_000 + "[]]}", "{" + '"a":0,' * 150_000 + '"b":0}']
)
def test_error_report_of_too_many_items_ends_only_its_request(pool: StrictPool, body: str) -> None:
    """A megabyte of cheap items in the report is refused by its count, not decoded."""
    result = pool.run(
        {
            "id": new_id("report"),
            "code": hostile(f"write_all(REPORT, {body!r}.encode())\nos._exit(1)"),
        }
    )
    assert_pool_error(result, "report", "64 items")
    serves(pool)


@pytest.mark.parametrize("session", [False, True])
def test_deeply_nested_channel_frame_ends_only_its_request(pool: StrictPool, session: bool) -> None:
    bystander = Bystander(pool)
    program = hostile("write_all(CHANNEL, frame(body=b'[' * 200000))\ntime.sleep(30)")
    request: dict[str, Any] = {"id": new_id("deep"), "code": program, "timeout": "20s"}
    if session:
        request["session"] = new_id("hostile-session")
    started = time.monotonic()
    result = pool.run(request)
    print("deep frame:", result["exit"], result["error"], result.get("session"))
    assert_pool_error(result, "channel")
    assert time.monotonic() - started < 5, "the pool should drop the child at once"
    if session:
        assert result["session"]["ended"] == "crash"
    bystander.check()


def test_frame_nested_past_the_bound_is_refused(pool: StrictPool) -> None:
    """100 levels: deep enough for any real call, shallow enough for any encoder."""
    nested = "[" * 150 + "]" * 150
    result = pool.run(
        {
            "id": "nested",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": hostile(f"""
                call = {{"type": "call", "call": 1, "function": "f", "args": {nested},
                         "kwargs": {{}}}}
                write_all(CHANNEL, frame(call))
                time.sleep(30)
            """),
        },
        host={"f": lambda *args: "called"},
    )
    assert not [c for c in pool.host_calls if c["id"] == "nested"], "the deep call was relayed"
    assert_pool_error(result, "channel", "100 levels")
    serves(pool)


def test_pynox_host_refuses_arguments_nested_past_the_bound(pool: StrictPool) -> None:
    result = pool.run(
        {
            "id": "nested-call",
            "functions": [{"name": "f"}],
            "code": code("""
                import pynox_host
                deep = []
                for _ in range(150):
                    deep = [deep]
                try:
                    pynox_host.f(deep)
                except pynox_host.HostError as exc:
                    print("HostError:", exc)
                print(pynox_host.f([[1]]))
            """),
        },
        host={"f": lambda value: "shallow is fine"},
    )
    print(result["stdout"])
    assert result["exit"] == 0, result
    first, second = result["stdout"].splitlines()
    assert first.startswith("HostError: f() takes JSON arguments only") and "100" in first
    assert second == "shallow is fine"
    assert [c["args"] for c in pool.host_calls if c["id"] == "nested-call"] == [[[[1]]]]


def test_a_lone_surrogate_in_a_host_call_reaches_the_client_as_its_escape(
    pool: StrictPool,
) -> None:
    """The pool writes characters as themselves in UTF-8, but a lone surrogate, which UTF-8
    cannot carry, as its JSON escape: the line stays valid UTF-8, the value the same."""
    result = pool.run(
        {
            "id": "surrogate-call",
            "functions": [{"name": "f"}],
            "code": "import pynox_host\nprint(pynox_host.f('a\\ud800\u00e9', '\\ufffd'))",
        },
        host={"f": lambda *args: [len(arg) for arg in args]},
    )
    assert_ok(result, "[3, 1]\n")
    [call] = [line for line in pool.raw if b'"surrogate-call","event":"host_call"' in line]
    assert '"args":["a\\ud800\u00e9","\ufffd"]'.encode() in call
    call.decode("utf-8")


def test_frame_of_too_many_items_ends_only_its_request(pool: StrictPool) -> None:
    """8 MiB of `[],` decodes into 2.8 million lists: about a second of the server's one
    thread, every other request waiting. It is refused by its count, before decoding."""
    bystander = Bystander(pool)
    result = pool.run(
        {
            "id": "many-items",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": hostile("""
                body = b'{"type":"call","call":1,"function":"f","kwargs":{},"args":['
                body += b"[]," * (((8 << 20) - len(body)) // 3 - 2) + b"[]]}"
                write_all(CHANNEL, frame(body=body))
                time.sleep(30)
            """),
        },
        host={"f": lambda *args: "called"},
    )
    assert not [c for c in pool.host_calls if c["id"] == "many-items"], "the call was relayed"
    assert_pool_error(result, "channel", "262144 items")
    bystander.check()


def test_pynox_host_refuses_arguments_of_too_many_items(pool: StrictPool) -> None:
    """The server's item bound is checked first in the program, where it can be caught;
    a large argument of few items (a long text, full of commas) goes through."""
    result = pool.run(
        {
            "id": "many-items-call",
            "functions": [{"name": "size"}],
            "code": code("""
                import pynox_host
                try:
                    pynox_host.size([0] * 300_000)
                except pynox_host.HostError as exc:
                    print("HostError:", exc)
                print(pynox_host.size("1,2,[3],{4}\\n" * 500_000))
                print(pynox_host.size(list(range(200_000))))
            """),
        },
        host={"size": len},
    )
    assert result["exit"] == 0, result
    first, second, third = result["stdout"].splitlines()
    assert first.startswith("HostError: the arguments of size() are too large") and (
        "262144 items" in first
    )
    assert (second, third) == ("6000000", "200000")


MALFORMED = {
    # Each was a Python exception escaping the pool's loop (the pool exited 125).
    "unhashable_function_name": (
        False,
        'write_all(CHANNEL, frame({"type": "call", "call": 1, "function": [], "args": [],'
        ' "kwargs": {}}))',
    ),
    "report_with_a_nested_hint": (
        False,
        'write_all(REPORT, json.dumps({"type": "E", "message": "m", "hint_kind": []}).encode())'
        "\nos._exit(1)",
    ),
    "done_frame_with_a_nested_hint": (
        True,
        'write_all(CHANNEL, frame({"type": "done", "exit": 1, "step": 1,'
        ' "error": {"type": "E", "hint_kind": ["x"]}}))',
    ),
    "done_frame_with_a_huge_error": (
        True,
        'write_all(CHANNEL, frame({"type": "done", "exit": 1, "step": 1,'
        ' "error": {f"k{n}": n for n in range(200000)}}))',
    ),
    # Not a Python exception, but past the bound of an error report: 8 MiB of it reached
    # the result (one-shot runs' reports were held to 1 MiB).
    "done_frame_with_a_long_error": (
        True,
        'write_all(CHANNEL, frame({"type": "done", "exit": 1, "step": 1,'
        ' "error": {"type": "E", "message": "m" * (2 << 20)}}))',
    ),
    "exit_frame_with_a_huge_signal": (
        False,
        'write_all(CHANNEL, frame({"type": "exit", "status": 0, "signal": 10 ** 30}))\n'
        "os.close(1)\nos.close(2)",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_fields_end_only_their_request(pool: StrictPool, case: str) -> None:
    in_session, body = MALFORMED[case]
    bystander = Bystander(pool)
    request: dict[str, Any] = {
        "id": new_id(case[:10]),
        "code": hostile(body + "\ntime.sleep(30)"),
        "functions": [{"name": "f"}],
        "timeout": "20s",
    }
    if in_session:
        request["session"] = new_id("hostile-session")
    result = pool.run(request)
    print(case, result["exit"], result["error"])
    assert_pool_error(result)
    assert "Signal" not in json.dumps(result["error"])
    bystander.check()


# --- 9. exactly one result per request, within its timeout --------------------------------

# These wait out timeouts and grace periods, a few seconds each: what they check is the
# pool server's handling of processes and pipes, the same code under every CPython, so
# they are slow tests, run on the primary CPython (noxfile.py).
WAITS_OUT_ITS_TIMEOUT = pytest.mark.slow

ONE_SHOT_ENDINGS = {
    # forged result lines for this request and another on fds 1 and 2, the report and the
    # channel: the channel breaks, the request ends at once with a PoolError
    "forge_everywhere": (
        "for fd in (1, 2, REPORT, CHANNEL):\n    write_all(fd, FORGED)\ntime.sleep(30)",
        125,
    ),
    "forge_then_exit": ("for fd in (1, 2, REPORT):\n    write_all(fd, FORGED)\nos._exit(0)", 125),
    "forge_then_close_channel": (
        "for fd in (1, 2):\n    write_all(fd, FORGED)\nos.close(CHANNEL)\nprint('after')",
        0,
    ),
    "close_everything_then_exit": ("os.closerange(0, 256)", 0),
    "close_everything_then_sleep": ("os.closerange(0, 256)\ntime.sleep(30)", 124),
    "thread_that_never_ends": (
        "threading.Thread(target=time.sleep, args=(3600,)).start()\nprint('main done')",
        124,
    ),
    "blocked_read_on_the_channel": (
        "threading.Thread(target=os.read, args=(CHANNEL, 1)).start()",
        124,
    ),
    "fake_exit_frame_then_keep_running": (
        'write_all(CHANNEL, frame({"type": "exit", "status": 0, "signal": None}))\n'
        "os.close(1)\nos.close(2)\ntime.sleep(30)",
        0,
    ),
    "fake_done_frames": (
        'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None}) * 50)\n'
        "time.sleep(30)",
        125,
    ),
}

FORGE = code("""
    me, other = sys.argv[1], sys.argv[2]
    FORGED = b"".join(
        json.dumps({"id": i, "exit": 0, "stdout": "forged", "stderr": "", "error": None,
                    "duration_ms": 1}).encode() + b"\\n"
        for i in (me, other)
    )
""")


@WAITS_OUT_ITS_TIMEOUT
@pytest.mark.parametrize("ending", sorted(ONE_SHOT_ENDINGS))
def test_one_shot_request_gets_exactly_one_result(pool: StrictPool, ending: str) -> None:
    body, exit_code = ONE_SHOT_ENDINGS[ending]
    bystander = Bystander(pool)
    hostile_id, other_id = new_id("hostile"), new_id("other")
    pool.send({"id": other_id, "code": "import time\ntime.sleep(0.5)\nprint('clean')"})
    started = time.monotonic()
    pool.send(
        {
            "id": hostile_id,
            "code": hostile(FORGE + body),
            "args": [hostile_id, other_id],
            "timeout": "2s",
        }
    )
    result = pool.result(hostile_id, 10)
    elapsed = time.monotonic() - started
    print(ending, result["exit"], result["error"], f"after {elapsed:.2f}s")
    assert elapsed < 2 + 1.5, "a request must end within its timeout"
    assert result["exit"] == exit_code, result
    assert_ok(pool.result(other_id), "clean\n")
    pool.expect_silence(1.5)
    assert len(results_for(pool, hostile_id)) == 1
    assert len(results_for(pool, other_id)) == 1
    bystander.check()


SESSION_ENDINGS = {
    # the step says the process exited, without a done frame, and lingers: nothing
    # else would ever end that step
    "fake_exit_frame_then_keep_running": (
        'write_all(CHANNEL, frame({"type": "exit", "status": 0, "signal": None}))\n'
        "os.close(1)\nos.close(2)\ntime.sleep(30)",
        "exit",
    ),
    "close_channel_then_sleep": ("os.close(CHANNEL)\ntime.sleep(30)", "timeout"),
    "close_everything_then_return": ("os.closerange(0, 256)", "exit"),
    # a done frame with the step's number (which the program can read from its memory)
    # ends its own step early; the process goes on
    "fake_done_then_keep_running": (
        'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None, "step": 1}))\n'
        "sys.stdout.flush()\ntime.sleep(30)",
        None,
    ),
}


@WAITS_OUT_ITS_TIMEOUT
@pytest.mark.parametrize("ending", sorted(SESSION_ENDINGS))
def test_session_step_gets_exactly_one_result(pool: StrictPool, ending: str) -> None:
    body, ended = SESSION_ENDINGS[ending]
    bystander = Bystander(pool)
    name = new_id("hostile-session")
    step_id = new_id("step")
    started = time.monotonic()
    pool.send(
        {"id": step_id, "session": name, "code": hostile(body), "timeout": "2s"},
    )
    result = pool.result(step_id, 10)
    elapsed = time.monotonic() - started
    print(ending, result["exit"], result["error"], result["session"], f"{elapsed:.2f}s")
    assert elapsed < 2 + 1.5, "a step must end within its timeout"
    assert result["session"]["ended"] == ended
    pool.expect_silence(1.5)
    assert len(results_for(pool, step_id)) == 1
    # The session goes on: a fresh process if that one ended, else the same (or a timeout).
    after = step(pool, name, "print('next')", timeout="2s")
    assert len(results_for(pool, after["id"])) == 1
    close_session(pool, name)
    bystander.check()


# A first step that sends a done frame of its own, then goes on: prints, and ends with a value.
FORGED_DONE_STEP = (
    'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None%s}))\n'
    "time.sleep(0.3)\nprint('one')\n'value of one'"
)


@pytest.mark.parametrize("pipelined", [False, True], ids=["one-by-one", "pipelined"])
@pytest.mark.parametrize(
    "forged_step",
    ["", ', "step": 7', ', "step": True', ', "step": 1'],
    ids=["no-step", "another-step", "step-true", "its-own-step"],
)
def test_forged_done_frame_never_shifts_later_steps(
    pool: StrictPool, forged_step: str, pipelined: bool
) -> None:
    """A done frame that a step forged ended that step early, and the step's real end then
    ended the next one: every later step's result held the step before's output. A frame
    counts only for the step it names: one that names another step is dropped; one that
    names its own (a program can read the number) ends its own step, and what it prints
    after lands in the next step, as a thread's output would; the steps after are whole."""
    name = new_id("forged-done")
    programs = [hostile(FORGED_DONE_STEP % forged_step)]
    programs += [f"print({word!r})\n{word!r}" for word in ("two", "three", "four")]
    ids = [new_id("step") for _ in programs]
    results = []
    for request_id, program in zip(ids, programs, strict=True):
        pool.send({"id": request_id, "session": name, "code": program, "timeout": "10s"})
        if not pipelined:
            results.append(pool.result(request_id, 15))
    if pipelined:
        results = [pool.result(request_id, 15) for request_id in ids]
    shown = [(r["stdout"], r["value"], r["error"], r["session"]) for r in results]
    print(shown)
    assert [r["session"]["step"] for r in results] == [1, 2, 3, 4], shown
    assert all(r["exit"] == 0 and r["session"]["ended"] is None for r in results), shown
    if forged_step == ', "step": 1':
        assert (results[0]["stdout"], results[0]["value"]) == ("", None), shown
        assert (results[1]["stdout"], results[1]["value"]) == ("one\ntwo\n", "'two'"), shown
    else:
        assert (results[0]["stdout"], results[0]["value"]) == ("one\n", "'value of one'"), shown
        assert (results[1]["stdout"], results[1]["value"]) == ("two\n", "'two'"), shown
    for result, word in zip(results[2:], ("three", "four"), strict=True):
        assert (result["stdout"], result["value"]) == (f"{word}\n", repr(word)), shown
    pool.expect_silence(0.5)
    assert all(len(results_for(pool, request_id)) == 1 for request_id in ids)
    close_session(pool, name)
    serves(pool)


def test_host_call_of_a_step_that_is_over_is_never_relayed(pool: StrictPool) -> None:
    """A step that ended itself early and then called the host had its call relayed under
    the next step's id: the client ran a function for a step whose code never called it.
    (The program, reading its channel for the answer, takes the next step's frame instead:
    that step waits out its timeout, a session ruined by its own program.)"""
    name = new_id("late-call")
    calls: list[str] = []
    host = {"f": calls.append}
    ending_early = (
        'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None, "step": 1}))\n'
        "time.sleep(0.3)\nimport pynox_host\n"
        "try:\n    pynox_host.f('from step 1')\n"
        "except pynox_host.HostError as exc:\n    print(exc)"
    )
    first = {"id": new_id("first"), "session": name, "code": hostile(ending_early)}
    pool.send({**first, "functions": [{"name": "f"}], "timeout": "2s"}, host)
    second = {"id": new_id("second"), "session": name, "code": "pass"}
    pool.send(second, host)
    assert pool.result(first["id"])["stdout"] == ""
    later = pool.result(second["id"])
    print("the step after:", later["exit"], later["stdout"], later["session"], calls)
    assert calls == []
    assert not [e for e in pool.lines if e.get("event") == "host_call"]
    close_session(pool, name)
    serves(pool)


def test_frames_of_steps_that_are_over_are_bounded(pool: StrictPool) -> None:
    """The frames a session's runtime may still send for a step that ended early are few;
    a program that floods them ends its own session, as any broken frame does."""
    name = new_id("stale-frames")
    flood = (
        'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None, "step": 1}))\n'
        'write_all(CHANNEL, frame({"type": "value", "repr": "x", "step": 1}) * 50)\n'
        "kept = 1"
    )
    first = step(pool, name, hostile(flood))
    assert first["exit"] == 0 and first["session"]["ended"] is None, first
    time.sleep(1)  # the flood reaches the pool while no step runs
    later = step(pool, name, "print('kept' in globals())")
    print("after the flood:", later["stdout"], later["session"])
    assert_ok(later, "False\n")
    assert later["session"]["restarted"] is True
    close_session(pool, name)
    serves(pool)


# --- 10. no process of a request or session outlives it by more than a second -------------

GRACE = 1.0
SLACK = 1.5  # two shared cores: time for the kill, the reaping and the next look at /proc

BUSY_THREAD = code("""
    import threading, time
    def busy():
        while True:
            time.sleep(0.01)
    threading.Thread(target=busy).start()  # not a daemon: the process waits for it at exit
""")
LINGERING = {
    "non_daemon_thread": BUSY_THREAD,
    "fake_done_then_keep_running": hostile(
        'write_all(CHANNEL, frame({"type": "done", "exit": 0, "error": None, "step": 2}))\n'
        "while True:\n    time.sleep(0.01)"
    ),
}


def settled(client: PoolClient, size: int, timeout: float = 10) -> None:
    """Waits until the pool has exactly size live descendants (zygote, spares, sessions)."""
    deadline = time.monotonic() + timeout
    while (found := len(descendants(client.pid, zombies=False))) != size:
        assert time.monotonic() < deadline, f"the pool has {found} processes, not {size}"
        time.sleep(0.05)


def assert_gone(client: PoolClient, pid: int, size: int, since: float) -> None:
    """pid is gone, and the pool back to size processes, within a second (and slack)."""
    left = wait_gone([pid], GRACE + SLACK - (time.monotonic() - since))
    waited = time.monotonic() - since
    print(f"the session's process was gone {waited:.2f}s after its end")
    assert not left, f"the session's process {pid} outlived its session by {waited:.1f}s"
    settled(client, size, timeout=max(0.1, since + GRACE + SLACK - time.monotonic()))


SPARES = 1 + 2  # the zygote and two spares (workers=2)


@WAITS_OUT_ITS_TIMEOUT
@pytest.mark.parametrize("kind", sorted(LINGERING))
def test_closed_session_process_is_killed_within_a_second(pool: StrictPool, kind: str) -> None:
    settled(pool, SPARES)
    bystander = Bystander(pool)
    name = new_id("lingering")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    settled(pool, SPARES + 2)
    result = step(pool, name, LINGERING[kind], timeout="1s")
    print(kind, result["exit"], result["error"], result["session"])
    time.sleep(1.2)  # past the step's timeout: the step ended, its session lives on
    assert alive(pid)
    closed = close_session(pool, name)
    assert_gone(pool, pid, SPARES + 1, closed)
    bystander.check()


def test_session_that_exits_with_a_thread_running_is_killed(pool: StrictPool) -> None:
    name = new_id("exiting")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    settled(pool, SPARES + 1)
    result = step(pool, name, BUSY_THREAD + "import sys\nsys.exit(3)")
    ended = time.monotonic()
    assert result["exit"] == 3 and result["session"]["ended"] == "exit", result
    assert_gone(pool, pid, SPARES, ended)
    serves(pool)


@WAITS_OUT_ITS_TIMEOUT
def test_idle_session_process_is_killed_within_a_second(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[pool]\nsession_idle = "1s"\n')
    with StrictPool(config=config) as client:
        settled(client, SPARES)
        name = new_id("idle")
        pid = int(step(client, name, "import os\nprint(os.getpid())")["stdout"])
        step(client, name, BUSY_THREAD)
        idle_from = time.monotonic()
        assert_gone(client, pid, SPARES, idle_from + 1)  # idle for 1s, then closed
        serves(client)
        assert client.close() == 0


def test_pool_exit_leaves_no_lingering_session() -> None:
    with StrictPool(workers=2) as client:
        step(client, new_id("at-exit"), BUSY_THREAD)
        started = time.monotonic()
        assert client.close(gone_within=GRACE + SLACK) == 0  # every process of it is gone
        print(f"pool and sessions gone after {time.monotonic() - started:.2f}s")


# --- 11. host calls bounded per request ---------------------------------------------------


def test_host_calls_in_flight_are_bounded(pool: StrictPool) -> None:
    bystander = Bystander(pool)
    started = time.monotonic()
    result = pool.run(
        {
            "id": "flood",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": hostile("""
                calls = b"".join(
                    frame({"type": "call", "call": n, "function": "f", "args": [n],
                           "kwargs": {}})
                    for n in range(1, 1501)
                )
                write_all(CHANNEL, calls)
                time.sleep(30)
            """),
        },
        host={"f": lambda n: NO_ANSWER},
    )
    relayed = [c for c in pool.host_calls if c["id"] == "flood"]
    print(f"{len(relayed)} calls relayed;", result["error"])
    assert len(relayed) <= 4
    assert_pool_error(result, "4 host calls in flight")
    assert time.monotonic() - started < 5
    bystander.check()


def test_host_call_bytes_in_flight_are_bounded(pool: StrictPool) -> None:
    result = pool.run(
        {
            "id": "heavy",
            "functions": [{"name": "f"}],
            "timeout": "30s",
            "code": hostile("""
                big = "x" * (6 << 20)
                for n in (1, 2, 3):
                    write_all(CHANNEL, frame({"type": "call", "call": n, "function": "f",
                                              "args": [big], "kwargs": {}}))
                time.sleep(30)
            """),
        },
        host={"f": lambda value: NO_ANSWER},
    )
    relayed = [c for c in pool.host_calls if c["id"] == "heavy"]
    print(f"{len(relayed)} calls relayed;", result["error"])
    assert len(relayed) == 2
    assert_pool_error(result, "16 MiB")
    serves(pool)


def test_unread_answers_end_the_request(pool: StrictPool) -> None:
    """Each answer leaves the bound on calls in flight; a program that kept calling and
    never read had the pool server hold every answer until its timeout (16 MB a second of
    4 MB answers: 190 MB in ten seconds)."""
    bystander = Bystander(pool)
    started = time.monotonic()
    result = pool.run(
        {
            "id": "hoard",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": hostile("""
                for n in range(1, 1000):
                    write_all(CHANNEL, frame({"type": "call", "call": n, "function": "f",
                                              "args": [], "kwargs": {}}))
                    time.sleep(0.3)  # the client answers meanwhile: never 4 in flight
            """),
        },
        host={"f": lambda: "y" * (4 << 20)},
    )
    assert_pool_error(result, "without reading their answers", "16 MiB")
    assert time.monotonic() - started < 15
    bystander.check()


def test_unread_refusals_after_the_client_closed_its_input_end_the_request(
    pool: StrictPool,
) -> None:
    """Without a client every call is refused at once, past the bounds on calls in flight:
    a program that never read the refusals had the pool server hold them until its timeout."""
    pool.send(
        {
            "id": "no-client",
            "functions": [{"name": "f"}],
            "timeout": "30s",
            "code": hostile("""
                import pynox_host
                try:
                    pynox_host.f()  # answered once the client has closed its input
                except pynox_host.HostError:
                    pass
                write_all(CHANNEL, b"".join(
                    frame({"type": "call", "call": n, "function": "f", "args": [],
                           "kwargs": {}})
                    for n in range(1000, 21000)
                ))
                time.sleep(60)
            """),
        },
        host={"f": lambda: NO_ANSWER},
    )
    pool.event(lambda message: message.get("event") == "host_call")
    pool.close_stdin()
    started = time.monotonic()
    result = pool.result("no-client")
    assert_pool_error(result, "without reading their answers", "64 KiB")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "frame", [{"type": "ready"}, {"type": "exit", "status": 0, "signal": None}], ids=str
)
def test_repeated_ready_or_exit_frames_end_the_request(
    pool: StrictPool, frame: dict[str, Any]
) -> None:
    """A child sends each once. Repeated as fast as a program can write them, they kept the
    pool server busy 40% of the time, every other request waiting 40-100 ms, not 2 ms."""
    bystander = Bystander(pool)
    result = pool.run(
        {
            "id": new_id("repeated"),
            "timeout": "5s",
            "code": hostile(f"""
                keep = os.dup(1)  # the output stays open: the request waits for the end
                write_all(CHANNEL, frame({frame!r}) * 20000)
                time.sleep(30)
            """),
        }
    )
    assert_pool_error(result, "channel", f"a second {frame['type']} frame")
    bystander.check()


def test_unread_refusals_between_steps_end_the_session(pool: StrictPool) -> None:
    """Calls between steps are refused with an answer the child reads. A program that
    stops its session's loop from reading and floods calls would have the pool server
    hold every refusal for as long as the session idles (megabytes a second)."""
    bystander = Bystander(pool)
    name = new_id("flood-between-steps")
    first = step(
        pool,
        name,
        hostile("""
            import pynox_host
            pynox_host.f._link.lock.acquire()  # the session's loop waits for it: reads nothing
            MAIN = threading.main_thread().ident

            def flood():
                while sys._current_frames()[MAIN].f_code.co_name != "serve":
                    time.sleep(0.01)  # until the step has ended
                write_all(CHANNEL, b"".join(
                    frame({"type": "call", "call": n, "function": "f", "args": [],
                           "kwargs": {}})
                    for n in range(1, 20001)
                ))
                time.sleep(60)

            threading.Thread(target=flood).start()
            print(os.getpid())
        """),
        functions=[{"name": "f"}],
    )
    assert first["exit"] == 0, first
    assert not wait_gone([int(first["stdout"])], 10), "the session still runs"
    later = step(pool, name, "print('again')", functions=[{"name": "f"}])
    assert_ok(later, "again\n")
    assert later["session"]["restarted"] is True
    bystander.check()


def test_calls_answered_in_turn_stay_within_the_bounds(pool: StrictPool) -> None:
    """pynox_host makes one call at a time, from any number of threads: never over a bound."""
    result = pool.run(
        {
            "id": "threads",
            "functions": [{"name": "echo"}],
            "code": code("""
                import threading
                from pynox_host import echo
                sizes = []
                def work(n):
                    for i in range(5):
                        sizes.append(len(echo("y" * (1 << 20))))
                threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                print(len(sizes), set(sizes))
            """),
        },
        host={"echo": lambda value: value},
    )
    assert_ok(result, f"40 {{{1 << 20}}}\n")


# --- 12. RFC 8259 both ways: no NaN, no Infinity ------------------------------------------


def test_non_finite_arguments_raise_host_error_in_the_child(pool: StrictPool) -> None:
    result = pool.run(
        {
            "id": "nan",
            "functions": [{"name": "f"}],
            "code": code("""
                import math, pynox_host
                for value in (float("nan"), float("inf"), [{"x": -math.inf}]):
                    try:
                        pynox_host.f(value)
                    except pynox_host.HostError as exc:
                        print("HostError", "JSON" in str(exc), "NaN" in str(exc))
                print(pynox_host.f(1.5))
            """),
        },
        host={"f": lambda value: value},
    )
    assert_ok(result, "HostError True True\n" * 3 + "1.5\n")
    assert [c["args"] for c in pool.host_calls if c["id"] == "nan"] == [[1.5]]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_from_a_child_never_reach_the_stream(
    pool: StrictPool, literal: str
) -> None:
    request_id = new_id("forged-nan")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": hostile(f"""
                body = b'{{"type": "call", "call": 1, "function": "f", "args": [{literal}],'
                body += b' "kwargs": {{}}}}'
                write_all(CHANNEL, frame(body=body))
                time.sleep(30)
            """),
        },
        host={"f": lambda value: "called"},
    )
    assert not [c for c in pool.host_calls if c["id"] == request_id]
    assert_pool_error(result, "channel")
    serves(pool)


def test_request_line_with_nan_is_refused_naming_it(pool: StrictPool) -> None:
    bystander = Bystander(pool)
    # Without the NaN, the pool would run this (a function spec's extra keys are ignored).
    line = (
        b'{"id": "n1", "code": "print(1)", "functions": [{"name": "f", "weight": NaN}]}\n'
        b'{"id": "n2", "code": "print(2)", "args": [], "functions": [{"name": "g", '
        b'"weight": -Infinity}]}\n'
    )
    pool.send_raw(line)
    for request_id, word in (("n1", "NaN"), ("n2", "Infinity")):
        refused = pool.result(request_id)
        print(refused["error"])
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert word in refused["error"]["message"] and "RFC 8259" in refused["error"]["message"]
    bystander.check()


def test_host_result_with_nan_is_refused_and_the_call_still_answerable(
    pool: StrictPool,
) -> None:
    pool.send(
        {
            "id": "wait",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": "import pynox_host\nprint(repr(pynox_host.f()))",
        }
    )
    call = pool.event(lambda m: m.get("event") == "host_call" and m.get("id") == "wait")
    pool.send_raw(b'{"id": "wait", "host_result": {"call": %d, "value": NaN}}\n' % call["call"])
    event = pool.event(lambda m: m.get("event") == "control_error" and m.get("id") == "wait")
    print("NaN host result:", event)
    assert "NaN" in event["message"]
    pool.send({"id": "wait", "host_result": {"call": call["call"], "value": 2.5}})
    assert_ok(pool.result("wait"), "2.5\n")
    assert len(results_for(pool, "wait")) == 1
    serves(pool)


def test_host_error_message_must_be_a_string(pool: StrictPool) -> None:
    """A message nested past what str() can print (on 3.10 and 3.11) must not stop the pool."""
    pool.send(
        {
            "id": "wait",
            "functions": [{"name": "f"}],
            "timeout": "20s",
            "code": "import pynox_host\ntry:\n    pynox_host.f()\n"
            "except pynox_host.HostError as e:\n    print('raised:', e)",
        }
    )
    call = pool.event(lambda m: m.get("event") == "host_call" and m.get("id") == "wait")
    # Deep enough that str() fails where the parser allows it (3.10, 3.11); from 3.12 on
    # both are bounded alike, and what this checks is that only a string is taken.
    depth = 4000 if sys.version_info < (3, 12) else 100
    nested = b"[" * depth + b"]" * depth
    pool.send_raw(
        b'{"id": "wait", "host_error": {"call": %d, "message": %s}}\n' % (call["call"], nested)
    )
    event = pool.event(lambda m: m.get("event") == "control_error" and m.get("id") == "wait")
    assert "must be a string" in event["message"]
    pool.send({"id": "wait", "host_error": {"call": call["call"], "message": "down"}})
    assert_ok(pool.result("wait"), "raised: down\n")
    serves(pool)
