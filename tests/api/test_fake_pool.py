"""A fake `pynox pool` written here drives the client through the failures a real pool
should never show: garbage, silence, death, a pool that cannot start."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.waiting import wait_until

from pynox.api.connection import PoolError
from pynox.api.pool import Pool
from pynox.api.result import Result

FAKE_POOL = r"""
import json, os, sys, time
if os.environ.get("FAKE_POOL_MODE") == "fail":
    sys.stderr.write("pynox: cannot preload nothing_here: ModuleNotFoundError\n")
    sys.exit(125)

def emit(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

emit({"event": "ready", "pynox": "0.1.0", "python": os.environ.get("FAKE_POOL_PYTHON", "3"),
      "workers": 2, "pid": os.getpid(),
      "argv": sys.argv[1:]})
refusing = set()  # requests whose next host_result the fake refuses, as a pool would
for line in sys.stdin:
    message = json.loads(line)
    rid = message["id"]
    if "host_result" in message and rid in refusing:
        refusing.discard(rid)
        emit({"id": rid, "event": "control_error",
              "message": "the line is not JSON: the number 1e999 is beyond the range of a double"})
        continue
    if "host_result" in message or "host_error" in message:
        reply = {k: message[k] for k in ("host_result", "host_error") if k in message}
        emit({"id": rid, "exit": 0, "stdout": json.dumps(reply), "stderr": "", "error": None})
        continue
    if "close_session" in message:
        emit({"id": rid, "session": {"id": message["close_session"], "closed": True}})
        continue
    code = message["code"]
    if code == "hang":
        continue
    if code == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
        continue
    if code == "die":
        os._exit(3)
    if code == "stop-reading":  # alive, but reading no more requests
        os.close(0)  # sys.stdin leaves its descriptor open
        emit({"id": rid, "exit": 0, "stdout": "", "stderr": "", "error": None})
        time.sleep(60)
    if code.startswith(("host:", "host-refused:")):
        kind, function, args = code.split(":", 2)
        if kind == "host-refused":
            refusing.add(rid)
        emit({"id": rid, "event": "host_call", "call": 1, "function": function,
              "args": json.loads(args), "kwargs": {}})
        continue
    emit({"id": rid, "exit": 0, "stdout": json.dumps(message), "stderr": "", "error": None,
          "session": {"id": message["session"], "step": 1, "restarted": False, "ended": None}
          if "session" in message else None})
"""


@pytest.fixture
def fake(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_pool.py"
    script.write_text(FAKE_POOL)
    return [sys.executable, str(script)]


def test_fake_pool_echo_shows_the_request(
    fake: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Pool(pynox_command=fake, preload=["json"]) as pool:
        monkeypatch.chdir(tmp_path)
        sent = json.loads(pool.run("print(1)", allow_read=["d"], timeout=5).stdout)
        assert sent == {
            "id": sent["id"],
            "code": "print(1)",
            "hints": "python",
            "allow_read": [str(tmp_path / "d")],
            "timeout": 5,
            # Where the code runs: here, where the call is made, not where the pool was.
            "cwd": str(tmp_path),
        }
        assert pool.info is not None and pool.info["argv"] == ["pool", "--preload", "json"]


def test_a_pool_that_cannot_start_raises_pool_error_with_its_words(
    fake: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_POOL_MODE", "fail")
    with Pool(pynox_command=fake) as pool, pytest.raises(PoolError) as caught:
        pool.run("print(1)")
    assert "cannot preload nothing_here" in str(caught.value)
    assert "status 125" in str(caught.value)


def test_a_line_that_is_not_json_fails_every_pending_request(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        waiting = []
        thread = threading.Thread(target=lambda: waiting.append(pool.run("hang")))
        thread.start()
        assert wait_until(lambda: bool(pool._state.connection and pool._state.connection._pending))
        broken = pool.run("garbage")
        thread.join(10)
        for r in (broken, waiting[0]):
            assert r.exit == 125 and r.error is not None and r.error["type"] == "PoolError"
            assert "not a JSON object" in r.error["message"]
        assert "PoolError: " in broken.text
        # The next run starts a fresh pool.
        assert pool.run("print(2)").ok


def test_a_pool_that_dies_gives_pool_error_results_then_restarts(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        first = pool.pid
        died = pool.run("die")
        assert died.exit == 125 and died.error is not None
        assert died.error["type"] == "PoolError" and "status 3" in died.error["message"]
        assert pool.run("print(1)").ok
        assert pool.pid != first


def test_a_pool_that_stops_reading_leaves_no_error_behind(
    fake: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request the pool no longer read stayed in the pipe's buffer: collecting the
    dead connection printed "Exception ignored ... BrokenPipeError" on the application's
    stderr, with a traceback in pynox."""
    ignored: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    with Pool(pynox_command=fake) as pool:
        assert pool.run("stop-reading").ok
        refused = pool.run("print(1)")
        assert refused.error is not None and refused.error["type"] == "PoolError"
        assert refused.error["message"] == "the pool stopped reading requests"
        assert pool.run("print(2)").ok  # a new pool process
        gc.collect()  # the dead connection goes
    assert [str(hook.exc_value) for hook in ignored] == []


def test_a_silent_pool_is_stopped_after_the_timeout_and_a_margin(fake: list[str]) -> None:
    pool = Pool(pynox_command=fake, lazy=True)
    pool._stall_margin = 0.5
    started = time.monotonic()
    r = pool.run("hang", timeout="500ms")
    assert time.monotonic() - started < 5
    assert r.error is not None and r.error["type"] == "PoolError"
    assert "wrote nothing" in r.error["message"]
    pool.close()


def test_close_resolves_what_is_still_pending(fake: list[str]) -> None:
    pool = Pool(pynox_command=fake)
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(pool.run("hang")))
    thread.start()
    assert wait_until(lambda: bool(pool._state.connection and pool._state.connection._pending))
    pool.close(timeout=0.5)
    thread.join(10)
    assert results[0].error is not None and "closed" in results[0].error["message"]
    # Not "run the code again": this pool cannot.
    assert results[0].error["hint"] == (
        "the application closed the sandbox service while the code ran; the code was not at "
        "fault, and this service cannot run it again"
    )
    with pytest.raises(PoolError, match="closed"):
        pool.run("print(1)")


def test_host_calls_answer_with_value_or_error(fake: list[str]) -> None:
    def search(query: str) -> list[str]:
        return [query.upper()]

    def broken(query: str) -> None:
        raise LookupError("the catalog is down")

    def odd(query: str) -> object:
        return {1, 2}

    functions = {"search": search, "broken": broken, "odd": odd}
    with Pool(pynox_command=fake) as pool:
        value = json.loads(pool.run('host:search:["lamp"]', functions=functions).stdout)
        assert value == {"host_result": {"call": 1, "value": ["LAMP"]}}
        failed = json.loads(pool.run('host:broken:["x"]', functions=functions).stdout)
        assert failed == {"host_error": {"call": 1, "message": "LookupError: the catalog is down"}}
        odd_value = json.loads(pool.run('host:odd:["x"]', functions=functions).stdout)
        assert "odd() returned a value that is not JSON" in odd_value["host_error"]["message"]
        missing = json.loads(pool.run("host:nope:[]", functions=functions).stdout)
        assert "no host function 'nope'" in missing["host_error"]["message"]


def test_a_host_result_the_pool_refuses_ends_the_call_with_an_error(fake: list[str]) -> None:
    """A pool that refuses the line of a host function's value (a control_error event) gets
    a host_error for that call in its place, naming why: the program does not wait for its
    timeout."""
    pool = Pool(pynox_command=fake, lazy=True)
    pool._stall_margin = 0.5  # a client that waits in vain fails the request soon
    with pool:
        started = time.monotonic()
        answer = pool.run('host-refused:search:["x"]', functions={"search": lambda q: q}, timeout=1)
        assert answer.ok and time.monotonic() - started < 2, answer.text
        assert json.loads(answer.stdout) == {
            "host_error": {
                "call": 1,
                "message": "the pool refused the value search() returned: the line is not "
                "JSON: the number 1e999 is beyond the range of a double",
            }
        }


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_host_call_ends_whatever_its_function_hands_back(fake: list[str]) -> None:
    """A value nested past the encoder's recursion, or an exception whose str() fails
    itself, ends the call with an error; before, the call's thread died and the run waited
    for its timeout."""

    def deep(query: str) -> list[object]:
        value: list[object] = []
        for _ in range(100_000):
            value = [value]
        return value

    def unprintable(query: str) -> None:
        raise _Unprintable

    functions = {"deep": deep, "unprintable": unprintable}
    with Pool(pynox_command=fake) as pool:
        nested = json.loads(pool.run('host:deep:["x"]', functions=functions, timeout=30).stdout)
        assert "deep() returned a value that is not JSON" in nested["host_error"]["message"]
        failed = json.loads(pool.run('host:unprintable:["x"]', functions=functions).stdout)
        assert failed == {"host_error": {"call": 1, "message": "_Unprintable"}}


def test_async_host_functions_run_on_the_callers_loop(fake: list[str]) -> None:
    async def lookup(key: str) -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"key": key, "loop": id(asyncio.get_running_loop())}

    async def main() -> tuple[dict[str, Any], int]:
        with Pool(pynox_command=fake) as pool:
            r = await pool.arun('host:lookup:["k"]', functions={"lookup": lookup})
        return json.loads(r.stdout), id(asyncio.get_running_loop())

    reply, loop_id = asyncio.run(main())
    assert reply == {"host_result": {"call": 1, "value": {"key": "k", "loop": loop_id}}}


def test_fake_session_close_is_sent(fake: list[str]) -> None:
    with Pool(pynox_command=fake) as pool:
        session = pool.session()
        assert not session.alive and session.steps == 0
        r = session.run("x = 1")
        assert json.loads(r.stdout)["session"] == session.id
        assert session.alive and session.steps == 1
        session.close()
        assert not session.alive and session.closed
        with pytest.raises(PoolError, match="closed"):
            session.run("x")


def test_closing_the_pool_ends_its_sessions(fake: list[str]) -> None:
    pool = Pool(pynox_command=fake)
    session = pool.session()
    assert session.run("x = 1").ok and session.alive
    pool.close()
    assert not session.alive and not session.closed


@pytest.mark.parametrize("timeout", ["5", None, -1, float("nan")])
def test_close_with_a_bad_timeout_says_so_and_leaves_the_pool_running(
    fake: list[str], timeout: object
) -> None:
    with Pool(pynox_command=fake) as pool:
        assert pool.run("print(1)").ok
        with pytest.raises(ValueError, match="give a number of seconds of at least 0"):
            pool.close(timeout=timeout)  # type: ignore[arg-type]
        assert not pool.closed and pool.run("print(2)").ok


def test_a_session_restarted_with_its_pool_says_so_in_its_raw_result_too(
    fake: list[str],
) -> None:
    """A Result stored as JSON (its raw line) comes back whole with Result.from_json."""
    with Pool(pynox_command=fake) as pool:
        session = pool.session()
        assert session.run("x = 1").ok
        assert pool.run("die").error is not None  # the pool process ends, and restarts
        r = session.run("x")
        assert r.session is not None and r.session["restarted"] is True
        assert Result.from_json(json.loads(json.dumps(r.raw))) == r


def test_steps_of_one_session_that_come_back_out_of_order_are_no_restart() -> None:
    """Steps run from threads at once come back in whatever order their threads wake: only
    a step the pool numbers 1 a second time (it closed the idle session and started a new
    one) says that the session restarted."""
    with Pool(lazy=True) as pool:
        session = pool.session()

        def done(step: int) -> bool:
            line = {"exit": 0, "session": {"id": session.id, "step": step, "restarted": False}}
            info = session._step_done(Result.from_json(line), 1).session
            assert info is not None
            return info["restarted"]

        assert [done(2), done(1), done(3)] == [False, False, False]
        assert [done(1), done(2)] == [True, False]  # a new session, after an idle close


@pytest.mark.parametrize("lazy", [False, True])
def test_a_tool_names_the_python_its_pool_runs(
    fake: list[str], monkeypatch: pytest.MonkeyPatch, lazy: bool
) -> None:
    """A pynox_command may run another Python than the client's: the model is told the
    one that will run its code, as the pool's ready line gives it."""
    monkeypatch.setenv("FAKE_POOL_PYTHON", "3.99.2")
    with Pool(pynox_command=fake, lazy=lazy) as pool:
        run_python = pool.tool()
        assert run_python.__doc__ is not None
        assert run_python.__doc__.startswith(
            "Run Python 3.99 code in a fresh sandboxed process and return what it printed."
        )
        assert pool.python == "3.99"
