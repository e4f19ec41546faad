"""Robustness of `pynox pool` (docs/pool-protocol.md) against its clients and its children.

Malformed and hostile lines (hypothesis against the parser, then a sample through a live
pool); children that segfault, run out of memory, time out, forge protocol lines on every
descriptor or break their channel; host functions that raise or hang; sessions; the
[pool.limits] caps; the client or the pool killed mid-request (no orphans); and 10,000
requests in a row with bounded descriptors, processes and memory.

Every test talks to the installed `pynox pool` through tests/support/pool_client.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.pool_client import (
    NO_ANSWER,
    PYNOX,
    Message,
    PoolClient,
    PoolDied,
    alive,
    clean_env,
    descendants,
    open_fds,
    process_table,
    processes_with,
    rss_kib,
    wait_gone,
)

from pynox.errors import PynoxError, RequestError
from pynox.limits import DEFAULT_TIMEOUT, MAX_LINE
from pynox.policy.config import Config, Grants
from pynox.policy.resolve import build_policy
from pynox.pool.request import (
    CONTROL_FIELDS,
    REQUEST_FIELDS,
    cap,
    check_fields,
    host_functions,
    parse_line,
    request_grants,
)

# --- helpers ------------------------------------------------------------------------------


def new_id(prefix: str = "r") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def assert_ok(result: Message, stdout: str) -> None:
    shown = {k: result.get(k) for k in ("exit", "stdout", "stderr", "error")}
    assert result["exit"] == 0, shown
    assert result["error"] is None, shown
    assert result["stdout"] == stdout, shown


def assert_refused(result: Message, request_id: object, *words: str) -> None:
    """An error result as docs/pool-protocol.md describes a refused line."""
    assert result["exit"] == 125, result
    assert result["id"] == request_id, result
    error = result["error"]
    assert isinstance(error, dict) and error["type"] == "RequestError", result
    for word in words:
        assert word in error["message"], (word, error["message"])


def serves(client: PoolClient) -> None:
    """The pool still answers a normal request, and that answer is the next line it writes."""
    request_id = new_id("alive")
    client.send({"id": request_id, "code": "print(6 * 7)"})
    line = client.read(30)
    assert line.get("id") == request_id, f"an unexpected line before the check's result: {line}"
    client.results.pop(request_id, None)
    assert_ok(line, "42\n")


def validate(line: bytes) -> str:
    """The template's checks for one line, in its order (pool_server.Template._handle_line,
    _request, _policy), without running anything. Returns "control" or "request", or raises;
    anything but a PynoxError escaping here would escape the template's loop too."""
    message = parse_line(line)
    if any(key in message for key in CONTROL_FIELDS):
        return "control"
    check_fields(message)
    host_functions(message)
    grants = request_grants(message)
    profile = message.get("profile")
    if isinstance(profile, str):
        grants = Config("").profile(profile).merged(grants)
    grants = cap(grants, Grants(), frozenset(), message["id"])
    if grants.timeout is None:
        grants.timeout = DEFAULT_TIMEOUT
    script = message.get("script")
    implicit = [os.path.dirname(os.path.realpath(script))] if isinstance(script, str) else []
    build_policy(grants, implicit, {}, "/")
    return "request"


def readable_id(line: bytes) -> object:
    """The id the pool should echo for a refused line: the line's own, when it has one."""
    try:
        return parse_line(line)["id"]
    except RequestError as exc:
        return exc.request_id  # a line refused only for NaN or Infinity still names its id
    except Exception:  # noqa: BLE001 - a parser bug; the pool cannot know the id either
        return None


class Keeper:
    """One pool shared by a module's tests; a new one replaces it when a test killed it."""

    def __init__(self) -> None:
        self.client: PoolClient | None = None
        self.restarts = 0

    def get(self) -> PoolClient:
        if self.client is not None and not self.healthy(self.client):
            self.client.__exit__()
            self.client = None
            self.restarts += 1
        if self.client is None:
            self.client = PoolClient(workers=2)
        return self.client

    @staticmethod
    def healthy(client: PoolClient) -> bool:
        """Alive and answering (a failed test may have left it dead or stuck)."""
        if client.eof or client.proc.poll() is not None:
            return False
        probe = new_id("probe")
        try:
            client.send({"id": probe, "code": "pass"})
            return client.result(probe, 10)["exit"] == 0
        except (AssertionError, TimeoutError) as exc:
            print(f"replacing the shared pool: {exc}")
            return False

    def stop(self) -> None:
        if self.client is not None:
            try:
                if self.client.proc.poll() is None:
                    assert self.client.close() == 0
            finally:
                self.client.__exit__()


@pytest.fixture(scope="module")
def keeper() -> Iterator[Keeper]:
    kept = Keeper()
    yield kept
    kept.stop()


@pytest.fixture
def pool(keeper: Keeper) -> PoolClient:
    return keeper.get()


@pytest.fixture
def fresh() -> Iterator[PoolClient]:
    """A pool of its own, for tests that may break it; it must exit cleanly afterwards."""
    with PoolClient(workers=2) as client:
        yield client
        if client.proc.poll() is None and not client.eof:
            assert client.close() == 0


def write_config(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pynox.toml"
    path.write_text(textwrap.dedent(text))
    return path


# --- 1. the parser, directly (hypothesis) -------------------------------------------------

# JSON as RFC 8259 has it: no NaN or Infinity (the pool refuses those, see test_pool_hostile.py).
JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)
FIELD_NAMES = st.sampled_from(sorted(REQUEST_FIELDS))
IDS = st.one_of(st.integers(), st.text(max_size=20))


@st.composite
def request_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """An object with an id and known fields holding anything, sometimes with unknown keys."""
    message: dict[str, Any] = {"id": draw(IDS)}
    for name in draw(st.lists(FIELD_NAMES, max_size=6, unique=True)):
        if name != "id":
            message[name] = draw(JSON_VALUES)
    extra = st.text(max_size=12).filter(lambda key: key != "id")
    message.update(draw(st.dictionaries(extra, JSON_VALUES, max_size=2)))
    return message


ASSERTIVE = settings(max_examples=400, deadline=None, database=None)


def assert_only_request_errors(line: bytes) -> None:
    try:
        validate(line)
    except RequestError as exc:
        assert exc.message, "a RequestError must say what to fix"
    except PynoxError:
        pass  # a PolicyError or ConfigError: the template answers those as RequestError too
    # Anything else propagates and fails the test: it would take the pool down.


@ASSERTIVE
@given(st.binary(max_size=300))
def test_parser_random_bytes_raise_only_request_errors(line: bytes) -> None:
    assert_only_request_errors(line)


@ASSERTIVE
@given(JSON_VALUES)
def test_parser_random_json_values(value: object) -> None:
    line = json.dumps(value).encode()
    if not isinstance(value, dict):
        with pytest.raises(RequestError, match="not a JSON object"):
            parse_line(line)
    else:
        assert_only_request_errors(line)


@ASSERTIVE
@given(request_shaped())
def test_parser_objects_with_random_fields(message: dict[str, Any]) -> None:
    line = json.dumps(message).encode()
    try:
        kind = validate(line)
    except PynoxError as exc:
        if isinstance(exc, RequestError) and exc.request_id is not None:
            assert exc.request_id == message["id"]
        unknown = sorted(set(message) - REQUEST_FIELDS)
        if unknown and not any(key in message for key in CONTROL_FIELDS):
            assert isinstance(exc, RequestError)
            assert f"unknown field {unknown[0]!r}" in exc.message
        return
    if kind == "request":
        assert set(message) <= REQUEST_FIELDS
        assert ("code" in message) != ("script" in message)


@ASSERTIVE
@given(st.text(max_size=60), st.binary(min_size=1, max_size=8))
def test_parser_nul_bytes_and_invalid_utf8(text: str, junk: bytes) -> None:
    for line in (
        b'{"id": 1, "code": "' + junk + b'"}',  # raw bytes inside a string
        b'{"id": 1, "code": "print(1)"}' + junk,
        json.dumps({"id": text, "code": "\x00" + text}).encode(),  # escaped NUL: valid
        b'{"id": "\x00", "code": ""}',
        b"\xff\xfe" + json.dumps({"id": 1}).encode(),
    ):
        assert_only_request_errors(line)


@pytest.mark.parametrize("field", ["allow_read", "allow_write", "package_dirs"])
@given(st.text(max_size=20))
@settings(max_examples=100, deadline=None, database=None)
def test_parser_paths_with_nul_bytes(field: str, tail: str) -> None:
    """A NUL in a granted path cannot be a path: it must be refused, not crash the checks."""
    line = json.dumps({"id": 1, "code": "", field: ["/tmp/a\x00" + tail]}).encode()
    assert_only_request_errors(line)


def test_parser_script_with_nul_byte() -> None:
    assert_only_request_errors(json.dumps({"id": 1, "script": "/tmp/a\x00.py"}).encode())


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("shape", ["array", "object", "in_field"])
def test_parser_deeply_nested(shape: str, depth: int) -> None:
    if shape == "array":
        line = b"[" * depth + b"]" * depth
    elif shape == "object":
        line = b'{"a":' * depth + b"1" + b"}" * depth
    else:
        line = b'{"id": 1, "code": "", "args": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(RequestError):
        validate(line)


@given(st.integers(min_value=100_000, max_value=3_000_000), st.sampled_from(["id", "x", "code"]))
@settings(max_examples=10, deadline=None, database=None)
def test_parser_huge_strings(size: int, key: str) -> None:
    big = "é" * size
    message = {"id": big if key == "id" else 1, "code": 5 if key != "code" else big, key: big}
    assert_only_request_errors(json.dumps(message).encode())


def test_unknown_field_is_named() -> None:
    with pytest.raises(RequestError, match="unknown field 'allow_reed'") as caught:
        validate(b'{"id": "u", "code": "", "allow_reed": ["/tmp"]}')
    assert caught.value.request_id == "u"


@pytest.mark.parametrize("field", ["allow_read", "allow_write", "package_dirs"])
def test_relative_path_is_refused(field: str) -> None:
    with pytest.raises(RequestError, match="not absolute") as caught:
        validate(json.dumps({"id": 3, "code": "", field: ["data"]}).encode())
    assert field in caught.value.message and "'data'" in caught.value.message
    assert caught.value.request_id == 3


def test_relative_script_is_refused() -> None:
    """docs: "Paths must be absolute: the pool cannot know the client's working directory"."""
    with pytest.raises(RequestError, match="absolute"):
        validate(b'{"id": 1, "script": "tool.py"}')


@pytest.mark.parametrize("fields", [{}, {"code": "", "script": "/tmp/x.py"}])
def test_exactly_one_of_code_and_script(fields: dict[str, str]) -> None:
    with pytest.raises(RequestError, match='exactly one of "code" and "script"'):
        validate(json.dumps({"id": 1, **fields}).encode())


# Every field, with values of the wrong type or out of range. The message must name the field.
WRONG: dict[str, list[object]] = {
    "id": [None, True, 1.5, [], {"a": 1}],
    "code": [1, None, [], {}, True],
    "script": [1, None, [], {}, False],
    "args": ["a", [1], {}, [None], 1, [["x"]]],
    "name": [1, [], {}, None],
    "profile": [1, [], True, "no-such-profile"],
    "allow_read": ["/tmp", [1], ["relative"], {}, [None], 7],
    "allow_write": ["/tmp", [1], ["relative"], {}],
    "package_dirs": ["/tmp", [1], ["./x"], {}],
    "allow_env": ["HOME", [1], {}, [None], ["LD_PRELOAD"]],
    "allow_network": ["yes", 1, 0, [], {}],
    "timeout": ["abc", -1, 0, [], {}, True, "1x", 1e10, "-5s"],
    "memory": ["1q", -1, 1.5, [], True, "1m", 2**70],
    "max_output": ["x", -1, (16 << 20) + 1, True, [], "17m"],
    "max_file_size": ["x", 0, -5, True, [], 1.5],
    "session": [1, [], {}, True],
    "functions": ["f", [1], [{"name": 1}], [{"name": "_private"}], [{"name": "a b"}], {}, [{}]],
}


def wrong_type_cases() -> list[tuple[str, object, bytes]]:
    cases = []
    for field, values in WRONG.items():
        for value in values:
            message: dict[str, object] = {"id": "w", "code": "pass"}
            if field == "code":
                message = {"id": "w"}
            if field == "script":
                message = {"id": "w"}
            message[field] = value
            cases.append((field, value, json.dumps(message).encode()))
    return cases


def named(field: str, message: str) -> bool:
    if field == "functions":
        return "function" in message
    if field == "allow_env" and "LD_PRELOAD" in message:
        return True  # a loader variable: the message names the variable and allow_env
    return field in message


@pytest.mark.parametrize(
    ("field", "value", "line"),
    wrong_type_cases(),
    ids=[f"{f}={v!r}"[:40] for f, v, _ in wrong_type_cases()],
)
def test_wrong_types_for_every_field(field: str, value: object, line: bytes) -> None:
    with pytest.raises(PynoxError) as caught:
        validate(line)
    assert named(field, caught.value.message), caught.value.message
    if isinstance(caught.value, RequestError) and field != "id":
        assert caught.value.request_id == "w"


# --- 1b. the parser, through a live pool --------------------------------------------------


def hostile_lines() -> st.SearchStrategy[bytes]:
    no_newline = st.binary(min_size=1, max_size=200).map(lambda b: b.replace(b"\n", b" "))
    non_objects = JSON_VALUES.filter(lambda v: not isinstance(v, dict)).map(
        lambda v: json.dumps(v).encode()
    )
    unknown = st.builds(
        lambda i, k, v: json.dumps({"id": i, "code": "", "zz" + k: v}).encode(),
        IDS,
        st.text(max_size=8),
        JSON_VALUES,
    )
    shaped = request_shaped().map(lambda m: json.dumps(m).encode())
    junk_inside = st.builds(
        lambda j: b'{"id": "j", "code": "' + j + b'"}',
        st.binary(min_size=1, max_size=20).map(lambda b: b.replace(b"\n", b"") + b"\xff\x00"),
    )
    deep = st.integers(min_value=10, max_value=60_000).flatmap(
        lambda d: st.sampled_from(
            [b"[" * d + b"]" * d, b'{"id": 2, "code": "", "args": ' + b"[" * d + b"]" * d + b"}"]
        )
    )
    huge = st.integers(min_value=1, max_value=4_000_000).map(
        lambda n: json.dumps({"id": n, "name": 1, "code": "x" * n}).encode()
    )
    return st.one_of(no_newline, non_objects, unknown, shaped, junk_inside, deep, huge)


@given(hostile_lines())
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_live_pool_answers_each_hostile_line_once(keeper: Keeper, line: bytes) -> None:
    assume(line.strip())  # blank lines get no answer at all
    try:
        kind = validate(line)
    except PynoxError:
        kind = "refused"
    except Exception:  # noqa: BLE001 - a parser bug: the pool must still refuse the line
        kind = "refused"
    assume(kind == "refused")
    client = keeper.get()
    client.send_raw(line + b"\n")
    try:
        answer = client.read(30)
    except PoolDied as died:
        raise AssertionError(f"the pool died on the line {line[:200]!r}") from died
    assert "event" not in answer, answer
    client.results.pop(answer.get("id"), None)
    assert_refused(answer, readable_id(line))
    serves(client)


WRONG_LINES = [
    b"not json",
    b"[1, 2, 3]",
    b'"a string"',
    b"null",
    b'{"code": "print(1)"}',
    b'{"id": null, "code": "print(1)"}',
    b'{"id": true, "code": "print(1)"}',
    b'{"id": 1.5, "code": "print(1)"}',
    b'{"id": "x", "code": "print(1)"',
    b'{"id": "x", "code": "\xff\xfe"}',
    b'{"id": "x", "code": "a\x00b"}',
    b'\x00\x00\x00{"id": 1}',
    b'{"id": "x", "code": "print(1)"}\x00',
    b'{"id": "x", "code": "' + b"\xc3\x28" * 1000 + b'"}',
    b'{"id": "x", "code": "print(1)", "id": [1]}',
    b'{"id": ' + b"9" * 5000 + b', "code": ""}',
    b'{"id": "x", "code": "", "timeout": NaN}',
    b'{"id": "x", "code": "", "memory": Infinity}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b'{"id": "deep", "code": "", "args": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    json.dumps({"id": "nul-read", "code": "", "allow_read": ["/tmp/a\x00b"]}).encode(),
    json.dumps({"id": "nul-write", "code": "", "allow_write": ["/tmp/\x00"]}).encode(),
    json.dumps({"id": "nul-pkg", "code": "", "package_dirs": ["/\x00"]}).encode(),
    json.dumps({"id": "nul-script", "script": "/tmp/a\x00.py"}).encode(),
    json.dumps({"id": "rel-script", "script": "tool.py"}).encode(),
    json.dumps({"id": "huge", "bogus": "x" * 8_000_000}).encode(),
]


@pytest.mark.parametrize("line", WRONG_LINES, ids=[repr(line[:30]) for line in WRONG_LINES])
def test_live_pool_refuses_line(keeper: Keeper, line: bytes) -> None:
    client = keeper.get()
    client.send_raw(line + b"\n")
    try:
        answer = client.read(30)
    except PoolDied as died:
        raise AssertionError(f"the pool died on {line[:80]!r}: {died}") from died
    client.results.pop(answer.get("id"), None)
    assert_refused(answer, readable_id(line))
    serves(client)


def test_live_pool_wrong_types_name_the_field(pool: PoolClient) -> None:
    for field, value, line in wrong_type_cases():
        pool.send_raw(line + b"\n")
        answer = pool.read(30)
        pool.results.pop(answer.get("id"), None)
        assert_refused(answer, None if field == "id" else "w")
        assert named(field, answer["error"]["message"]), (field, value, answer["error"])
    serves(pool)


def test_live_pool_unknown_field_and_relative_path(pool: PoolClient) -> None:
    request_id = new_id()
    refused = pool.run({"id": request_id, "code": "print(1)", "allow_reed": ["/tmp"]})
    assert_refused(refused, request_id, "unknown field 'allow_reed'")
    refused = pool.run({"id": request_id, "code": "print(1)", "allow_read": ["tmp"]})
    assert_refused(refused, request_id, "allow_read", "'tmp'", "absolute")
    refused = pool.run({"id": request_id, "code": "", "script": "/tmp/x.py"})
    assert_refused(refused, request_id, '"code" and "script"')
    refused = pool.run({"id": request_id})
    assert_refused(refused, request_id, '"code" and "script"')
    serves(pool)


def test_line_just_over_16_mib(fresh: PoolClient) -> None:
    head = b'{"id": "big", "code": "#'
    tail = b'"}'
    line = head + b"x" * (MAX_LINE + 1 - len(head) - len(tail)) + tail
    assert len(line) == MAX_LINE + 1
    started = time.monotonic()
    fresh.send_raw(line + b"\n")
    answer = fresh.read(60)
    print(f"16 MiB + 1 line answered in {time.monotonic() - started:.2f}s")
    fresh.results.pop(answer.get("id"), None)
    assert_refused(answer, None, "longer than")
    serves(fresh)


def test_code_between_8_and_16_mib(fresh: PoolClient) -> None:
    """A line under 16 MiB is a valid line; its code must run or be refused, not crash."""
    body = "x = 1\n" + "#" * (9 << 20) + "\nprint('big', x)\n"
    fresh.send({"id": "nine-mib", "code": body})
    try:
        answer = fresh.result("nine-mib", 60)
    except PoolDied as died:
        raise AssertionError(f"a 9 MiB program killed the pool: {died}") from died
    if answer["exit"] == 125:
        assert_refused(answer, "nine-mib")
    else:
        assert_ok(answer, "big 1\n")
    serves(fresh)


def test_duplicate_running_id_is_refused(pool: PoolClient) -> None:
    request_id = new_id("dup")
    pool.send({"id": request_id, "code": "import time\ntime.sleep(1)\nprint('first')"})
    pool.send({"id": request_id, "code": "print('second')"})
    refused = pool.result(request_id, 30)
    assert_refused(refused, request_id, "already running")
    assert_ok(pool.result(request_id, 30), "first\n")
    # Once it finished, the id is free again.
    assert_ok(pool.run({"id": request_id, "code": "print('third')"}), "third\n")


def test_integer_and_string_ids_are_distinct(pool: PoolClient) -> None:
    pool.send({"id": 424242, "code": "import time\ntime.sleep(0.3)\nprint('int')"})
    pool.send({"id": "424242", "code": "print('str')"})
    assert_ok(pool.result("424242"), "str\n")
    assert_ok(pool.result(424242), "int\n")


def test_control_lines_get_events_not_results(pool: PoolClient) -> None:
    control_id = new_id("c")
    pool.send({"id": control_id, "close_session": "no-such-session"})
    event = pool.event(lambda m: m.get("id") == control_id)
    assert event == {
        "id": control_id,
        "event": "control_error",
        "message": "there is no session 'no-such-session' to close",
    }
    pool.send({"id": control_id, "host_result": {"call": 1, "value": None}})
    event = pool.event(lambda m: m.get("id") == control_id and "host result" in m["message"])
    assert event["event"] == "control_error"
    assert control_id not in pool.results
    serves(pool)


def test_last_line_without_newline_is_answered(fresh: PoolClient) -> None:
    """JSON Lines allows the last line to end without a newline; it must not vanish."""
    fresh.send_raw(b'{"id": "last", "code": "print(5)"}')
    assert fresh.close() == 0
    assert "last" in fresh.results, f"no answer to the unterminated last line: {fresh.lines}"


def test_crlf_and_blank_lines(pool: PoolClient) -> None:
    request_id = new_id()
    line = json.dumps({"id": request_id, "code": "print(8)"}).encode()
    pool.send_raw(b"\n   \n" + line + b"\r\n")
    assert_ok(pool.result(request_id), "8\n")
    serves(pool)


# --- 1c. scripts: the template opens the path the client names ----------------------------


def test_script_runs_with_args_and_its_directory_readable(pool: PoolClient, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("beside the script")
    script = tmp_path / "tool.py"
    script.write_text(
        code("""
        import sys, pathlib
        print(sys.argv[1:], pathlib.Path(__file__).with_name('data.txt').read_text())
    """)
    )
    result = pool.run({"id": new_id(), "script": str(script), "args": ["a", "b"]})
    assert_ok(result, "['a', 'b'] beside the script\n")
    assert result["policy"]["implicit_read"] == [str(tmp_path.resolve())]


@pytest.mark.parametrize("kind", ["fifo", "own_stdin", "nine_mib"])
def test_script_path_that_is_not_a_small_regular_file(tmp_path: Path, kind: str) -> None:
    """The template reads the script itself, in its one thread: a FIFO must not block it,
    /dev/stdin must not swallow the protocol, a script too big for the channel must not
    crash it. Each is refused or fails alone while the pool keeps serving."""
    if kind == "fifo":
        path = tmp_path / "fifo.py"
        os.mkfifo(path)
    elif kind == "own_stdin":
        path = Path("/dev/stdin")
    else:
        path = tmp_path / "big.py"
        path.write_text("#" * (9 << 20) + "\nprint('big')\n")
    with PoolClient(workers=2) as client:
        client.send({"id": "script", "script": str(path)})
        client.send({"id": "after", "code": "print('after')"})
        try:
            after = client.result("after", 10)
            script = client.result("script", 10)
        except PoolDied as died:
            raise AssertionError(f"a {kind} script killed the pool: {died}") from died
        except TimeoutError as stuck:
            raise AssertionError(f"a {kind} script stopped the pool: {stuck}") from stuck
        print(f"{kind} script:", script["exit"], script["error"])
        assert_ok(after, "after\n")
        assert script["exit"] == 125 or (kind == "nine_mib" and script["stdout"] == "big\n")


# --- 2. children that misbehave -----------------------------------------------------------


def test_segfault(pool: PoolClient) -> None:
    result = pool.run({"id": new_id(), "code": "import ctypes\nctypes.string_at(0)"})
    assert result["exit"] == 128 + signal.SIGSEGV == 139
    assert result["error"]["type"] == "Signal"
    assert "SIGSEGV" in result["error"]["message"]
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
    assert result["stdout"] == "x" * 1000 and result["stdout_truncated"] is True
    assert result["stderr"] == "y" * 1000 and result["stderr_truncated"] is True
    serves(pool)


# --- 3. host functions --------------------------------------------------------------------


def test_host_function_returns_a_value(pool: PoolClient) -> None:
    request_id = new_id("host")
    got: list[tuple[Any, ...]] = []

    def search(query: str, limit: int = 5) -> list[dict[str, str]]:
        got.append((query, limit))
        return [{"name": f"{query} {i}"} for i in range(limit)]

    result = pool.run(
        {
            "id": request_id,
            "code": code("""
        from pynox_host import search
        print(search('lamp', limit=2))
    """),
            "functions": [{"name": "search", "signature": "(query, limit=5)", "doc": "d"}],
        },
        host={"search": search},
    )
    assert_ok(result, "[{'name': 'lamp 0'}, {'name': 'lamp 1'}]\n")
    assert got == [("lamp", 2)]
    call = [c for c in pool.host_calls if c["id"] == request_id]
    assert call == [
        {
            "id": request_id,
            "event": "host_call",
            "call": 1,
            "function": "search",
            "args": ["lamp"],
            "kwargs": {"limit": 2},
        }
    ]


def test_host_function_raises(pool: PoolClient) -> None:
    def search(query: str) -> None:
        raise RuntimeError(f"the catalog is down for {query}")

    result = pool.run(
        {
            "id": new_id(),
            "functions": [{"name": "search"}],
            "code": code("""
        import pynox_host
        try:
            pynox_host.search('lamp')
        except pynox_host.HostError as exc:
            print(type(exc).__module__, type(exc).__name__, exc)
    """),
        },
        host={"search": search},
    )
    assert_ok(result, "pynox_host HostError the catalog is down for lamp\n")
    uncaught = pool.run(
        {
            "id": new_id(),
            "functions": [{"name": "search"}],
            "code": "import pynox_host\npynox_host.search('x')",
        },
        host={"search": search},
    )
    assert uncaught["exit"] == 1
    assert uncaught["error"]["type"].endswith("HostError")
    assert uncaught["error"]["message"] == "the catalog is down for x"


def test_host_function_that_hangs_times_out(pool: PoolClient) -> None:
    request_id = new_id("hang")
    started = time.monotonic()
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "wait"}],
            "timeout": "2s",
            "code": "import pynox_host\nprint(pynox_host.wait())",
        },
        host={"wait": lambda: NO_ANSWER},
    )
    elapsed = time.monotonic() - started
    print(f"hanging host function: result after {elapsed:.2f}s")
    assert result["exit"] == 124 and result["error"]["type"] == "Timeout"
    assert 2.0 <= elapsed < 4.0
    # A late answer has nobody waiting: an event, not a result.
    pool.send({"id": request_id, "host_result": {"call": 1, "value": 1}})
    event = pool.event(lambda m: m.get("id") == request_id and m.get("event") == "control_error")
    assert "host result" in event["message"]
    serves(pool)


def test_host_function_called_many_times(pool: PoolClient) -> None:
    request_id = new_id("many")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "double"}],
            "code": code("""
        from pynox_host import double
        print(sum(double(i) for i in range(100)))
    """),
        },
        host={"double": lambda x: 2 * x},
    )
    assert_ok(result, f"{2 * sum(range(100))}\n")
    numbers = [c["call"] for c in pool.host_calls if c["id"] == request_id]
    assert sorted(numbers) == list(range(1, 101))


def test_host_function_from_two_threads(pool: PoolClient) -> None:
    def slow_echo(value: str) -> str:
        return value.upper()

    result = pool.run(
        {
            "id": new_id("threads"),
            "functions": [{"name": "echo"}],
            "code": code("""
        import threading
        from pynox_host import echo
        out = {}
        def work(name):
            out[name] = [echo(f"{name}{i}") for i in range(20)]
        threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(out["a"] == [f"A{i}" for i in range(20)], out["b"] == [f"B{i}" for i in range(20)])
    """),
        },
        host={"echo": slow_echo},
    )
    assert_ok(result, "True True\n")


def test_host_call_arguments_are_checked_in_the_child(pool: PoolClient) -> None:
    request_id = new_id("args")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "f"}],
            "code": code("""
        import pynox_host
        for value in ({1, 2}, "x" * (9 << 20)):
            try:
                pynox_host.f(value)
            except pynox_host.HostError as exc:
                print("HostError", str(exc)[:30])
            except Exception as exc:
                print("other", type(exc).__module__, type(exc).__name__)
    """),
        },
        host={"f": lambda value: "called"},
    )
    assert not [c for c in pool.host_calls if c["id"] == request_id]
    print(result["stdout"])
    lines = result["stdout"].splitlines()
    assert lines[0].startswith("HostError f() takes JSON")
    assert lines[1].startswith("HostError"), "an oversized call should raise HostError too"


def test_a_large_host_result_reaches_the_program(pool: PoolClient) -> None:
    """The 8 MiB bound is on what a child sends; the client's answers may be larger."""
    request_id = new_id("bigresult")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "f"}],
            "code": "import pynox_host\nprint(len(pynox_host.f()))",
        },
        host={"f": lambda: "x" * (9 << 20)},
    )
    assert (result["exit"], result["stdout"]) == (0, f"{9 << 20}\n"), result["error"]
    serves(pool)


# --- 4. sessions --------------------------------------------------------------------------


def step(client: PoolClient, session: str, program: str, **fields: Any) -> Message:
    return client.run({"id": new_id("s"), "session": session, "code": program, **fields})


def test_session_keeps_state_and_survives_errors(pool: PoolClient) -> None:
    name = new_id("notebook")
    first = step(pool, name, "x = 41")
    assert first["exit"] == 0
    assert first["session"] == {"id": name, "step": 1, "restarted": False, "ended": None}
    failed = step(pool, name, "1 / 0")
    assert failed["exit"] == 1 and failed["error"]["type"] == "ZeroDivisionError"
    assert failed["session"]["ended"] is None
    later = step(pool, name, "print(x + 1)")
    assert_ok(later, "42\n")
    assert later["session"] == {"id": name, "step": 3, "restarted": False, "ended": None}
    close(pool, name)


def close(client: PoolClient, name: str) -> None:
    control_id = new_id("close")
    client.send({"id": control_id, "close_session": name})
    client.wait_for(lambda: control_id in client.results)
    answer = client.results.pop(control_id)[0]
    assert answer == {"id": control_id, "session": {"id": name, "closed": True}}


def test_session_steps_run_in_order(pool: PoolClient) -> None:
    name = new_id("ordered")
    ids = [new_id("o") for _ in range(5)]
    for i, request_id in enumerate(ids):
        pool.send(
            {
                "id": request_id,
                "session": name,
                "code": f"import time\ntime.sleep(0.05)\nlog = globals().get('log', [])"
                f"\nlog.append({i})\nprint(log)",
            }
        )
    for i, request_id in enumerate(ids):
        result = pool.result(request_id)
        assert_ok(result, f"{list(range(i + 1))}\n")
        assert result["session"]["step"] == i + 1
    close(pool, name)


@pytest.mark.parametrize(
    ("program", "ended", "exit_code", "kind"),
    [
        ("while True:\n    pass", "timeout", 124, "Timeout"),
        ("import sys\nsys.exit(3)", "exit", 3, None),
        ("import ctypes\nctypes.string_at(0)", "crash", 139, "Signal"),
    ],
)
def test_session_ends_and_restarts(
    pool: PoolClient, program: str, ended: str, exit_code: int, kind: str | None
) -> None:
    name = new_id(f"ending-{ended}")
    first = step(pool, name, "import os\nx = 1\nprint(os.getpid())", timeout="2s")
    pid = int(first["stdout"])
    started = time.monotonic()
    end = step(pool, name, program)
    print(f"session {ended}: {end['exit']} {end['error']} after {time.monotonic() - started:.2f}s")
    assert end["exit"] == exit_code
    assert (end["error"] or {}).get("type") == kind
    assert end["session"] == {"id": name, "step": 2, "restarted": False, "ended": ended}
    assert not wait_gone([pid], 5), "the ended session's process is still there"
    fresh = step(pool, name, "print('x' in globals())")
    assert_ok(fresh, "False\n")
    assert fresh["session"] == {"id": name, "step": 3, "restarted": True, "ended": None}
    again = step(pool, name, "print('again')")
    assert again["session"]["restarted"] is False
    close(pool, name)


def test_close_session(pool: PoolClient) -> None:
    name = new_id("closing")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    assert alive(pid)
    close(pool, name)
    assert not wait_gone([pid], 5)
    control_id = new_id("close")
    pool.send({"id": control_id, "close_session": name})
    event = pool.event(lambda m: m.get("id") == control_id)
    assert event["event"] == "control_error" and name in event["message"]
    # The name is free again: a new session, not a restarted one.
    fresh = step(pool, name, "print('pid' in globals())")
    assert_ok(fresh, "False\n")
    assert fresh["session"]["step"] == 1
    close(pool, name)


def test_close_session_while_a_step_runs(pool: PoolClient) -> None:
    name = new_id("busy")
    pid = int(step(pool, name, "import os\nprint(os.getpid())")["stdout"])
    running, queued = new_id("running"), new_id("queued")
    pool.send(
        {"id": running, "session": name, "code": "import time\ntime.sleep(1)\nprint('slept')"}
    )
    pool.send({"id": queued, "session": name, "code": "print('never')"})
    time.sleep(0.3)
    close(pool, name)
    assert_refused(pool.result(queued), queued, "closed")
    result = pool.result(running, 30)
    print(
        "the step that ran while its session closed:",
        {k: result[k] for k in ("exit", "stdout", "error", "session")},
        result["stderr"][-300:],
    )
    assert not wait_gone([pid], 5)
    # Whatever the pool makes of it, the program's result carries none of pynox's insides.
    assert "pynox/" not in result["stderr"] and "BrokenPipeError" not in result["stderr"]
    assert result["exit"] == 0 or result["error"] is not None, "a failure needs a reason"
    serves(pool)


def test_max_sessions(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[pool]\nmax_sessions = 1\n")
    with PoolClient(config=config) as client:
        assert step(client, "one", "a = 1")["exit"] == 0
        refused = step(client, "two", "b = 1")
        assert refused["exit"] == 125
        assert refused["error"]["type"] == "RequestError"
        assert "max_sessions" in refused["error"]["message"]
        assert step(client, "one", "print(a)")["stdout"] == "1\n"
        assert_ok(client.run({"id": "oneshot", "code": "print(1)"}), "1\n")  # not a session
        close(client, "one")
        assert step(client, "two", "print('two')")["stdout"] == "two\n"
        assert client.close() == 0


def test_idle_session_is_closed(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[pool]\nsession_idle = "1s"\n')
    with PoolClient(config=config) as client:
        first = step(client, "idle", "import os\nx = 1\nprint(os.getpid())")
        pid = int(first["stdout"])
        kept = step(client, "idle", "print(x)")  # within the idle time: the same session
        assert_ok(kept, "1\n")
        time.sleep(2)
        assert not wait_gone([pid], 3), "the idle session's process is still there"
        after = step(client, "idle", "print('x' in globals())")
        print("step after the idle close:", after["session"])
        # docs: an idle session "is closed"; its state is gone and the name starts afresh.
        assert_ok(after, "False\n")
        assert after["session"]["ended"] is None
        assert client.close() == 0


def test_session_ignores_later_permissions(pool: PoolClient, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("secret")
    name = new_id("perm")
    step(pool, name, "x = 1")
    later = step(
        pool, name, f"print(open({str(tmp_path / 'f.txt')!r}).read())", allow_read=[str(tmp_path)]
    )
    assert later["exit"] == 1
    assert later["error"]["type"] == "PermissionError"
    close(pool, name)


# --- 5. [pool.limits] ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PoolClient, Path]]:
    base = tmp_path_factory.mktemp("limits")
    data = base / "data"
    data.mkdir()
    (data / "in.txt").write_text("inside")
    outside = base / "outside"
    outside.mkdir()
    config = write_config(
        base / "config",
        f"""
        [pool.limits]
        allow_read = [{json.dumps(str(data))}]
        allow_network = false
        timeout = "5s"
        memory = "512m"
    """,
    )
    with PoolClient(config=config) as client:
        yield client, base
        assert client.close() == 0


def test_limits_refuse_a_read_outside(limited: tuple[PoolClient, Path]) -> None:
    client, base = limited
    refused = client.run({"id": "out", "code": "", "allow_read": [str(base / "outside")]})
    assert_refused(refused, "out", "allow_read", "[pool.limits]", str(base / "outside"))
    inside = client.run(
        {
            "id": "in",
            "allow_read": [str(base / "data")],
            "code": f"print(open({str(base / 'data' / 'in.txt')!r}).read())",
        }
    )
    assert_ok(inside, "inside\n")
    sneaky = client.run(
        {"id": "dotdot", "code": "", "allow_read": [str(base / "data" / ".." / "outside")]}
    )
    assert_refused(sneaky, "dotdot", "allow_read")


def test_limits_refuse_network(limited: tuple[PoolClient, Path]) -> None:
    client, _ = limited
    assert_refused(
        client.run({"id": "net", "code": "", "allow_network": True}),
        "net",
        "allow_network",
        "[pool.limits]",
    )
    assert client.run({"id": "nonet", "code": "", "allow_network": False})["exit"] == 0


def test_limits_refuse_a_longer_timeout_and_fill_an_omitted_one(
    limited: tuple[PoolClient, Path],
) -> None:
    client, _ = limited
    assert_refused(
        client.run({"id": "t", "code": "", "timeout": "10s"}), "t", "timeout", "[pool.limits]"
    )
    assert_refused(client.run({"id": "m", "code": "", "memory": "1g"}), "m", "memory")
    filled = client.run({"id": "fill", "code": "print(1)"})
    assert filled["policy"]["timeout_ms"] == 5000
    assert filled["policy"]["memory_bytes"] == 512 << 20
    shorter = client.run({"id": "short", "code": "", "timeout": "2s"})
    assert shorter["policy"]["timeout_ms"] == 2000


def test_empty_limit_lists_still_limit(tmp_path: Path) -> None:
    """`allow_read = []` in [pool.limits] allows reading nothing (pool_request.cap says "an
    empty list there still limits"); a request asking for a path must be refused."""
    config = write_config(tmp_path / "config", "[pool.limits]\nallow_read = []\nallow_env = []\n")
    with PoolClient(config=config) as client:
        read = client.run({"id": "r", "code": "print(1)", "allow_read": ["/etc"]})
        env = client.run({"id": "e", "code": "print(1)", "allow_env": ["HOME"]})
        print("with empty limits:", read["exit"], read["policy"], env["exit"])
        assert_refused(read, "r", "allow_read")
        assert_refused(env, "e", "allow_env")
        assert client.close() == 0


# --- 6. the client or the pool goes away --------------------------------------------------

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


# --- 7. 10,000 requests -------------------------------------------------------------------


@pytest.mark.slow
def test_ten_thousand_requests_hold_resources_steady() -> None:
    workers, total, batch = 2, 10_000, 100
    with PoolClient(workers=workers) as client:
        pool_pid = client.pid
        zygotes = [pid for pid, (parent, _) in process_table().items() if parent == pool_pid]
        assert len(zygotes) == 1, zygotes  # the template's only child; spares are the zygote's
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
