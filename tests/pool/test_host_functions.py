"""Host functions: values and exceptions come back, a hanging one times out, many calls
and calls from threads are answered, arguments are checked in the child."""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.pool_client import NO_ANSWER, PoolClient
from support.pool_requests import assert_ok, code, new_id, serves

from pynox.limits import MAX_CALLS_IN_FLIGHT


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


def test_calls_the_client_can_no_longer_answer_fail_at_once() -> None:
    """Answers come on the pool's input: once the client closes it, a call waiting and
    every later one fail in the program, which goes on, instead of waiting until its
    timeout while the client waits for the pool to end."""
    program = code("""
        from pynox_host import HostError, wait
        for _ in range(2):
            try:
                wait()
            except HostError as exc:
                print(exc)
    """)
    with PoolClient(workers=1) as client:
        request = {"id": "w", "functions": [{"name": "wait"}], "timeout": "10m", "code": program}
        client.send(request, host={"wait": lambda: NO_ANSWER})
        client.event(lambda message: message.get("event") == "host_call")
        client.close_stdin()
        result = client.result("w", timeout=60)
        refusal = "the pool's client closed its input, so no host function answers now\n"
        assert_ok(result, refusal * 2)
        assert client.close() == 0


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


def test_host_call_keys_that_json_writes_alike_raise_hosterror(pool: PoolClient) -> None:
    """{1: "a", "1": "b"} would reach the host as one key, the other silently gone."""
    request_id = new_id("keys")
    result = pool.run(
        {
            "id": request_id,
            "functions": [{"name": "f"}],
            "code": code("""
        import pynox_host
        try:
            pynox_host.f({1: "a", "1": "b"})
        except pynox_host.HostError as exc:
            print(exc)
        print(pynox_host.f({1: "a", "2": "b"}))
    """),
        },
        host={"f": lambda value: sorted(value)},
    )
    assert_ok(
        result,
        "f() takes JSON arguments only: a dict has two keys that JSON writes alike, as '1' "
        "(such as 1 and '1'); give each key once\n['1', '2']\n",
    )
    assert len([c for c in pool.host_calls if c["id"] == request_id]) == 1


def test_any_keyword_reaches_the_host(pool: PoolClient) -> None:
    result = pool.run(
        {
            "id": new_id("self"),
            "functions": [{"name": "f"}],
            "code": "import pynox_host\nprint(pynox_host.f(self=1, other=2))",
        },
        host={"f": lambda **kwargs: sorted(kwargs)},
    )
    assert_ok(result, "['other', 'self']\n")


def test_a_call_an_exception_interrupted_leaves_the_next_calls_theirs(pool: PoolClient) -> None:
    """A signal handler that raises while a call waits (a timeout made with setitimer)
    abandons that call; its answer, when it comes, is not taken for the next call's."""

    def wait() -> str:
        time.sleep(0.5)  # the client answers in turn: this answer goes out first
        return "waited"

    result = pool.run(
        {
            "id": new_id("interrupted"),
            "functions": [{"name": "wait"}, {"name": "then"}],
            "code": code("""
        import signal
        import pynox_host

        class Late(Exception):
            pass

        def give_up(*_):
            raise Late

        signal.signal(signal.SIGALRM, give_up)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        try:
            pynox_host.wait()
        except Late:
            print("gave up")
        print(pynox_host.then(), pynox_host.then())
    """),
        },
        host={"wait": wait, "then": lambda: "answered"},
    )
    assert_ok(result, "gave up\nanswered answered\n")


def test_calls_interrupted_again_and_again_wait_for_room(pool: PoolClient) -> None:
    """A program that retries a slow function under a timeout of its own leaves one call
    in flight per try: past the pool's bound, a call waits for the host to answer one of
    them, where it would have ended the request."""

    def slow() -> str:
        time.sleep(0.2)
        return "late"

    result = pool.run(
        {
            "id": new_id("retries"),
            "functions": [{"name": "slow"}, {"name": "then"}],
            "code": code(f"""
        import signal
        import pynox_host

        class Late(Exception):
            pass

        def give_up(*_):
            raise Late

        signal.signal(signal.SIGALRM, give_up)
        for _ in range({MAX_CALLS_IN_FLIGHT + 2}):
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            try:
                pynox_host.slow()
            except Late:
                pass
        signal.setitimer(signal.ITIMER_REAL, 0)
        print(pynox_host.then())
    """),
        },
        host={"slow": slow, "then": lambda: "answered"},
    )
    assert_ok(result, "answered\n")


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


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"host_result": {"call": 1}},
            'host_result takes an object of exactly call and value, like {"call": 1, '
            '"value": [1, 2]}',
        ),
        (
            {"host_result": {"call": 1, "value": 1, "extra": 2}},
            "host_result takes an object of exactly call and value",
        ),
        (
            {"host_error": {"call": 1}},
            'host_error takes an object of exactly call and message, like {"call": 1, '
            '"message": "the catalog is down"}',
        ),
        ({"host_result": {"call": True, "value": 1}}, "host_result's call is the number"),
        ({"host_result": 5}, "host_result takes an object of exactly call and value"),
    ],
)
def test_a_malformed_answer_is_refused_and_the_call_still_waits(
    pool: PoolClient, answer: dict[str, object], message: str
) -> None:
    """An answer without its value (or message) used to reach the program as None (or
    HostError('')); now it is refused, and a right answer after it is taken."""
    request_id = new_id("shape")
    pool.send(
        {
            "id": request_id,
            "functions": [{"name": "wait"}],
            "code": "import pynox_host\nprint(pynox_host.wait())",
        },
        host={"wait": lambda: NO_ANSWER},
    )
    pool.event(lambda m: m.get("event") == "host_call" and m["id"] == request_id)
    pool.send({"id": request_id, **answer})
    event = pool.event(lambda m: m.get("id") == request_id and m.get("event") == "control_error")
    assert event["message"].startswith(message), event["message"]
    pool.send({"id": request_id, "host_result": {"call": 1, "value": "answered"}})
    assert_ok(pool.result(request_id), "answered\n")


def test_close_session_takes_a_name(pool: PoolClient) -> None:
    pool.send({"id": "close-null", "close_session": None})
    event = pool.event(lambda m: m.get("id") == "close-null" and m.get("event") == "control_error")
    assert event["message"] == "close_session takes the session's name, a string"


def test_an_integer_beyond_a_double_raises_hosterror_in_the_program(pool: PoolClient) -> None:
    """As NaN does: the program gets a HostError it can catch, and its run goes on. The pool
    refuses such a number on its channel, so sent, it ended the run as a broken channel."""
    result = pool.run(
        {
            "id": new_id("huge"),
            "functions": [{"name": "echo"}],
            "code": code("""
        from pynox_host import echo, HostError
        try:
            echo(10**400)
        except HostError as exc:
            print("refused:", "beyond the range of a double" in str(exc))
        print(echo(10**300) == 10**300)
    """),
        },
        host={"echo": lambda value: value},
    )
    assert_ok(result, "refused: True\nTrue\n")
