"""The protocol through a live pool: hostile and malformed lines get exactly one refusal
and the pool keeps serving; big lines, ids, control lines, line endings; scripts the
pool server opens for the client."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.commands import bound_by_file_modes, python
from support.examples import examples
from support.pool_client import PoolClient, PoolDied
from support.pool_requests import Keeper, assert_ok, assert_refused, code, new_id, serves
from support.request_lines import (
    IDS,
    JSON_VALUES,
    named,
    request_shaped,
    validate,
    wrong_type_cases,
)

from pynox.errors import PynoxError
from pynox.limits import MAX_LINE
from pynox.pool.request import RequestError, parse_line


def readable_id(line: bytes) -> object:
    """The id the pool should echo for a refused line: the line's own, when it has one.

    Read in a thread of its own, near the top of its stack as the pool's parse is: on
    Python 3.12 how deep the JSON may nest depends on the C stack below the parse (1,496
    levels from the top, 1,396 fifty calls down), and the test's stack is far deeper than
    the pool's. Read here, a line the pool parses could pass for one it cannot."""
    answer: list[object] = []

    def read() -> None:
        try:
            answer.append(parse_line(line)["id"])
        except RequestError as exc:
            answer.append(exc.request_id)  # refused for NaN or Infinity: still its id
        except Exception:  # noqa: BLE001 - a parser bug; the pool cannot know the id either
            answer.append(None)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    return answer[0]


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
    max_examples=examples(60),
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


def test_a_line_that_gives_two_ids_is_answered_under_neither(pool: PoolClient) -> None:
    """A client's parser may read either id: a refusal under one would pass for the result
    of a request of that id (here one that runs). Two equal ids name one request."""
    running, other = new_id("running"), new_id("other")
    pool.send({"id": running, "code": "import time\ntime.sleep(0.5)\nprint('ran')"})
    pool.send_raw(f'{{"id": "{other}", "id": "{running}", "code": "print(1)"}}\n'.encode())
    refused = pool.result(None, 10)
    assert_refused(refused, None)
    assert refused["error"]["message"] == (
        "the line gives 'id' more than once, with different values; give each key once, so "
        "that the answer to the line can name it"
    )
    assert_ok(pool.result(running), "ran\n")
    assert running not in pool.results and other not in pool.results
    same = new_id("same")
    pool.send_raw(f'{{"id": "{same}", "id": "{same}", "code": "print(1)"}}\n'.encode())
    assert_refused(pool.result(same), same, "the line gives 'id' twice in one object")
    serves(pool)


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


def test_a_last_line_too_long_without_newline_is_answered(fresh: PoolClient) -> None:
    fresh.send_raw(b'{"id": "last", "code": "' + b"x" * MAX_LINE + b'"}')
    assert fresh.close() == 0
    (answer,) = fresh.lines[1:]
    assert_refused(answer, None, "longer than")


def test_crlf_and_blank_lines(pool: PoolClient) -> None:
    request_id = new_id()
    line = json.dumps({"id": request_id, "code": "print(8)"}).encode()
    pool.send_raw(b"\n   \n" + line + b"\r\n")
    assert_ok(pool.result(request_id), "8\n")
    serves(pool)


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


def test_cwd_is_where_the_program_runs(pool: PoolClient, tmp_path: Path) -> None:
    """A request's cwd is its program's working directory, with the pynox.toml a later
    run there would find kept out of its writes, as on the command line."""
    (tmp_path / "notes.txt").write_text("here")
    result = pool.run(
        {
            "id": new_id(),
            "code": "print(open('notes.txt').read())",
            "cwd": str(tmp_path),
            "allow_read": [str(tmp_path)],
        }
    )
    assert_ok(result, "here\n")
    result = pool.run(
        {"id": new_id(), "code": "pass", "cwd": str(tmp_path), "allow_write": [str(tmp_path)]}
    )
    assert result["error"]["type"] == "RequestError"
    assert (
        f"{tmp_path}/pynox.toml, where pynox reads its configuration" in result["error"]["message"]
    )
    gone = tmp_path / "gone"
    result = pool.run({"id": new_id(), "code": "pass", "cwd": str(gone)})
    assert result["error"]["message"] == (
        f"cwd {gone} is not a directory that exists; send the directory the program should "
        "run in, or leave cwd out to run it in the pool's"
    )


def test_a_cwd_the_pool_may_not_enter_is_refused(tmp_path: Path) -> None:
    """A cwd that exists but that the pool's user has no search permission in was taken,
    and the child then failed to enter it with "run it from a directory that exists"."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    with PoolClient(workers=1, launched_by=bound_by_file_modes()) as client:
        result = client.run({"id": "locked", "code": "pass", "cwd": str(locked)})
        assert (result["exit"], result["error"]["type"]) == (125, "RequestError")
        assert result["error"]["message"] == (
            f"cwd {locked} is a directory the pool's user may not enter (it lacks search "
            "permission there); send one it may enter, or leave cwd out to run the program "
            "in the pool's"
        )
        assert client.close() == 0


def test_a_session_whose_directory_is_removed_says_to_start_a_new_one(
    pool: PoolClient, tmp_path: Path
) -> None:
    """A session's process starts again, after one that ended, in its first step's
    directory, which no later step can change: once that directory is removed, each step
    is told to start a new session, not to run from a directory that exists, which a
    later step's cwd cannot do. The result's error says so too (it was null: a client
    that reads the error, as pynox.Session does, learnt nothing), and doing what it says
    works."""
    where = tmp_path / "work"
    where.mkdir()
    session = new_id()
    first = {"id": new_id(), "session": session, "cwd": str(where), "code": "raise SystemExit"}
    assert pool.run(first)["session"]["ended"] == "exit"
    where.rmdir()
    result = pool.run({"id": new_id(), "session": session, "cwd": "/", "code": "pass"})
    assert (result["exit"], result["stdout"]) == (125, "")
    message = (
        f"cannot run the session's program in {where}, the directory its first step "
        "gave it (No such file or directory); close the session and start a new one from a "
        "directory that exists"
    )
    assert result["stderr"] == f"pynox: {message}\n"
    assert result["error"] == {
        "type": "SandboxError",
        "message": message,
        "file": None,
        "line": None,
        "path": None,
        "hint": None,
    }
    pool.run({"id": new_id(), "close_session": session})
    again = {"id": new_id(), "session": session, "cwd": str(tmp_path), "code": "print('on')"}
    result = pool.run(again)
    assert_ok(result, "on\n")
    assert result["session"]["step"] == 1
    pool.run({"id": new_id(), "close_session": session})


def test_a_script_whose_path_is_not_utf8_runs_as_python_runs_it(
    pool: PoolClient, tmp_path: Path
) -> None:
    """A path is bytes: one that is not UTF-8 comes as os.fsdecode spells it (\\udcff for
    the byte 0xff), the way a grant's path does, and the program finds in sys.argv what
    python would; surrogates whose bytes are UTF-8 are the character they make, as
    python decodes those bytes."""
    folder = os.fsencode(tmp_path) + b"/d\xff"
    os.mkdir(folder)
    script = folder + b"/t\xfe.py"
    Path(os.fsdecode(script)).write_text("import sys; print(ascii(sys.argv), ascii(__file__))")
    args = ["\udcc3\udca9", "x\udcff"]
    result = pool.run({"id": new_id(), "script": os.fsdecode(script), "args": args})
    expected = python(os.fsdecode(script), *[os.fsdecode(os.fsencode(a)) for a in args])
    assert_ok(result, expected.stdout.decode())
    assert result["stdout"].startswith(ascii([os.fsdecode(script), "é", "x\udcff"]))
    assert result["policy"]["implicit_read"] == [os.fsdecode(folder)]


def test_code_sees_python_s_command_line_not_the_pool_s(pool: PoolClient) -> None:
    """sys.orig_argv is the interpreter and sys.argv, as `python SCRIPT` has it: the pool's
    own command line (its flags, its configuration's path) is none of the code's business."""
    show = "import sys; print(sys.orig_argv[1:] == sys.argv, 'pool' in sys.orig_argv)"
    assert_ok(pool.run({"id": new_id(), "code": show}), "True False\n")


def test_a_script_sees_the_flags_python_gives_its_command_line(
    pool: PoolClient, tmp_path: Path
) -> None:
    """sys.flags go with sys.orig_argv: `python SCRIPT` sets no option, where the pool's own
    interpreter runs isolated (-I -S), which a request's sys.path does not follow."""
    script = tmp_path / "flags.py"
    script.write_text(
        "import sys\n"
        "names = [n for n in dir(sys.flags) if n[0] != '_' and n not in ('count', 'index')]\n"
        "print([(n, getattr(sys.flags, n)) for n in names if n != 'no_site'])\n"
    )
    expected = python(str(script))
    assert expected.returncode == 0, expected.stderr
    for request in ({"script": str(script)}, {"code": script.read_text()}):
        assert_ok(pool.run({"id": new_id(), **request}), expected.stdout.decode())


@pytest.mark.parametrize("kind", ["fifo", "own_stdin", "nine_mib"])
def test_script_path_that_is_not_a_small_regular_file(tmp_path: Path, kind: str) -> None:
    """The pool server reads the script itself, in its one thread: a FIFO must not block it,
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
