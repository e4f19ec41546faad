"""Cancellation: {"control": "cancel"} ends a running request (its process killed, its
worker free again), drops a queued one, ends a session step (the next one restarts the
session), and answers anything else with a control_error; always exactly one result."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.pool_client import NO_ANSWER, Message, PoolClient, alive, wait_gone
from support.pool_requests import assert_ok, code, new_id, serves, step

SLEEPER = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"


@pytest.fixture
def single() -> Iterator[PoolClient]:
    """A pool of one worker: a request that does not end holds it."""
    with PoolClient(workers=1) as client:
        yield client
        assert client.close() == 0


def started(client: PoolClient, request_id: str, program: str = SLEEPER, **fields: object) -> int:
    """Sends a streaming request and waits for the pid its program prints first."""
    client.send({"id": request_id, "code": program, "stream": True, **fields})
    event = client.event(lambda m: m.get("event") == "output" and m["id"] == request_id)
    return int(event["data"].split()[0])


def cancel(client: PoolClient, request_id: str) -> None:
    client.send({"id": request_id, "control": "cancel"})


def assert_cancelled(result: Message, request_id: str, before_start: bool = False) -> None:
    assert result["id"] == request_id
    assert result["exit"] == 137, result
    error = result["error"]
    assert error["type"] == "Cancelled", result
    when = "before it started" if before_start else "while it ran"
    assert error["message"].startswith(f"the client cancelled the request {when}"), error


def test_cancel_a_running_request(single: PoolClient) -> None:
    request_id = new_id("running")
    pid = started(single, request_id)
    sent = time.monotonic()
    cancel(single, request_id)
    result = single.result(request_id)
    took = time.monotonic() - sent
    print(f"cancel to result: {took * 1000:.1f} ms")
    assert_cancelled(result, request_id)
    assert result["stdout"] == f"{pid}\n"  # what it wrote before is kept
    assert result["policy"] is not None
    assert took < 1, "the cancelled request's result took more than a second"
    assert not alive(pid), "the result came before its process was gone"
    # Its only worker is free again: the next request runs now.
    serves(single)


def test_cancel_a_queued_request(single: PoolClient) -> None:
    running, queued = new_id("running"), new_id("queued")
    started(single, running)
    single.send({"id": queued, "code": "print('never')"})
    cancel(single, queued)
    result = single.result(queued)
    assert_cancelled(result, queued, before_start=True)
    assert result["stdout"] == "" and result["policy"] is None
    cancel(single, running)
    assert_cancelled(single.result(running), running)
    serves(single)
    assert "never" not in str(single.lines)


def test_cancel_another_request_leaves_the_others_alone(pool: PoolClient) -> None:
    first, second = new_id("first"), new_id("second")
    first_pid = started(pool, first)
    pool.send({"id": second, "code": "import time\ntime.sleep(0.5)\nprint('second')"})
    cancel(pool, first)
    assert_cancelled(pool.result(first), first)
    assert not wait_gone([first_pid], 5)
    assert_ok(pool.result(second), "second\n")


def test_cancel_racing_the_natural_end_gives_one_result(pool: PoolClient) -> None:
    """A cancel that meets a request at its end: exactly one result, whichever it is, and
    a control_error only when the result had gone already."""
    ids = [new_id("race") for _ in range(40)]
    for i, request_id in enumerate(ids):
        pool.send({"id": request_id, "code": "pass"})
        time.sleep(i % 10 * 0.002)  # before, during and after its few milliseconds
        cancel(pool, request_id)
    outcomes = {}
    for request_id in ids:
        result = pool.result(request_id)
        outcomes[request_id] = result["error"]["type"] if result["error"] else result["exit"]
        assert outcomes[request_id] in (0, "Cancelled"), result
    # Lines are handled in order: once a later request's result is back, every cancel
    # has been answered.
    assert_ok(pool.run({"id": new_id("after"), "code": "print(1)"}), "1\n")
    pool.expect_silence(0.3)
    late = [e for e in pool.events if e.get("event") == "control_error" and e["id"] in ids]
    for event in late:
        assert outcomes[event["id"]] == 0, "a cancelled request also got a control_error"
        assert (
            event["message"] == f"there is no running or queued request {event['id']!r} to cancel"
        )
    pool.events[:] = [e for e in pool.events if e not in late]
    print({kind: list(outcomes.values()).count(kind) for kind in (0, "Cancelled")}, len(late))
    serves(pool)


def test_cancel_while_a_host_call_waits(pool: PoolClient) -> None:
    request_id = new_id("host")
    program = "import os\nprint(os.getpid(), flush=True)\nfrom pynox_host import wait\nwait()"
    functions = [{"name": "wait", "signature": "()", "doc": ""}]
    pool.send(
        {"id": request_id, "code": program, "functions": functions, "stream": True},
        host={"wait": lambda: NO_ANSWER},
    )
    call = pool.event(lambda m: m.get("event") == "host_call" and m["id"] == request_id)
    cancel(pool, request_id)
    result = pool.result(request_id)
    assert_cancelled(result, request_id)
    assert not wait_gone([int(result["stdout"])], 5)
    # The answer that comes too late finds nobody waiting.
    pool.send({"id": request_id, "host_result": {"call": call["call"], "value": 1}})
    event = pool.event(lambda m: m.get("event") == "control_error" and m["id"] == request_id)
    assert "waits for a host result" in event["message"]
    pool.events.remove(event)
    serves(pool)


def test_cancel_a_session_step_restarts_the_session(pool: PoolClient) -> None:
    name = new_id("cancelled-session")
    first = step(pool, name, "import os\nx = 1\nprint(os.getpid())")
    pid = int(first["stdout"])
    request_id = new_id("step")
    pool.send({"id": request_id, "session": name, "code": SLEEPER, "stream": True})
    pool.event(lambda m: m.get("event") == "output" and m["id"] == request_id)
    cancel(pool, request_id)
    result = pool.result(request_id)
    assert_cancelled(result, request_id)
    assert result["session"] == {"id": name, "step": 2, "restarted": False, "ended": "cancelled"}
    assert not wait_gone([pid], 5), "the cancelled session's process is still there"
    fresh = step(pool, name, "print('x' in globals())")
    assert_ok(fresh, "False\n")
    assert fresh["session"] == {"id": name, "step": 3, "restarted": True, "ended": None}


def test_cancel_a_queued_session_step(pool: PoolClient) -> None:
    name = new_id("queued-session")
    running, queued = new_id("running"), new_id("queued")
    pool.send({"id": running, "session": name, "code": "import time\ntime.sleep(0.5)\nx = 1"})
    pool.send({"id": queued, "session": name, "code": "print('never')"})
    cancel(pool, queued)
    result = pool.result(queued)
    assert_cancelled(result, queued, before_start=True)
    assert result["session"] == {"id": name, "step": None, "restarted": False, "ended": None}
    assert pool.result(running)["session"]["step"] == 1
    # The session lives on: its state is there, and the dropped step never ran.
    later = step(pool, name, "print(x)")
    assert_ok(later, "1\n")
    assert later["session"] == {"id": name, "step": 2, "restarted": False, "ended": None}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ({"control": "cancel"}, "there is no running or queued request"),
        ({"control": "stop"}, '"control" takes "cancel"'),
        ({"control": "cancel", "code": "pass"}, "close_session and control"),
        ({"control": "cancel", "close_session": "x"}, "exactly one of"),
    ],
)
def test_control_lines_it_cannot_act_on(pool: PoolClient, line: Message, words: str) -> None:
    control_id = new_id("control")
    pool.send({"id": control_id, **line})
    event = pool.event(lambda m: m.get("event") == "control_error" and m["id"] == control_id)
    assert words in event["message"], event
    pool.events.remove(event)
    assert control_id not in pool.results
    serves(pool)


def test_cancel_a_finished_request(pool: PoolClient) -> None:
    request_id = new_id("done")
    assert_ok(pool.run({"id": request_id, "code": "print(1)"}), "1\n")
    cancel(pool, request_id)
    event = pool.event(lambda m: m.get("event") == "control_error" and m["id"] == request_id)
    assert event["message"] == f"there is no running or queued request {request_id!r} to cancel"
    pool.events.remove(event)
    pool.expect_silence(0.2)


def test_cancel_a_streaming_request_held_by_back_pressure(single: PoolClient) -> None:
    """Cancelled while its output waits for the client: the result still comes, at once
    after what had been sent, and no more output events follow the cancel."""
    request_id = new_id("held")
    program = code(
        """
        import os, sys
        print(os.getpid(), flush=True)
        while True:
            sys.stdout.write('y' * 65536)
        """
    )
    pid = started(single, request_id, program)
    time.sleep(1)  # the pool's backlog fills; it stops reading the program's pipe
    cancel(single, request_id)
    result = single.result(request_id, 60)
    assert_cancelled(result, request_id)
    assert not wait_gone([pid], 5)
    serves(single)
