"""`pynox pool` driven over its pipes with JSON lines, as any language would."""

from __future__ import annotations

import json
from pathlib import Path

from .pool_pipe import PoolPipe
from .support import Install, write


def test_ready_then_results_in_completion_order(sandboxed: Install) -> None:
    with PoolPipe(sandboxed.pynox, "--workers", "2") as pool:
        ready = pool.read()
        assert ready["event"] == "ready" and ready["workers"] == 2
        pool.send({"id": "slow", "code": "import time\ntime.sleep(1)\nprint('slow')"})
        pool.send({"id": 2, "code": "print(sum(range(10)))"})
        first = pool.read()
        assert first["id"] == 2 and first["stdout"] == "45\n" and first["exit"] == 0
        assert pool.results(1)["slow"]["stdout"] == "slow\n"
        assert pool.close() == 0


def test_denial_carries_the_hint_in_the_requests_fields(sandboxed: Install, tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.txt", "s")
    with PoolPipe(sandboxed.pynox) as pool:
        pool.read()
        pool.send({"id": "d", "code": f"open({str(secret)!r}).read()"})
        pool.send(
            {"id": "a", "code": f"print(open({str(secret)!r}).read())", "allow_read": [str(secret)]}
        )
        results = pool.results(2)
    denied = results["d"]
    assert denied["exit"] == 1
    error = denied["error"]
    assert isinstance(error, dict) and error["type"] == "PermissionError"
    # Named as this client sends a grant: the request's own field, in JSON.
    grant = json.dumps({"allow_read": [str(secret)]})[1:-1]
    assert error["hint"] == f"reading {secret} is not allowed; grant it with {grant}"
    assert results["a"]["stdout"] == "s\n"


def test_bad_lines_get_a_request_error_and_the_pool_serves_on(sandboxed: Install) -> None:
    with PoolPipe(sandboxed.pynox) as pool:
        pool.read()
        pool.send("this is not json")
        bad = pool.read()
        assert bad["exit"] == 125 and bad["id"] is None
        assert isinstance(bad["error"], dict) and bad["error"]["type"] == "RequestError"
        pool.send({"id": "rel", "code": "pass", "allow_read": ["relative/path"]})
        assert pool.read()["exit"] == 125
        pool.send({"id": "ok", "code": "print('still here')"})
        assert pool.read()["stdout"] == "still here\n"


def test_sessions_keep_their_globals(sandboxed: Install) -> None:
    with PoolPipe(sandboxed.pynox) as pool:
        pool.read()
        pool.send({"id": 1, "session": "nb", "code": "x = 20"})
        assert pool.read()["exit"] == 0
        pool.send({"id": 2, "session": "nb", "code": "print(x + 22)"})
        step = pool.read()
        assert step["stdout"] == "42\n"
        assert isinstance(step["session"], dict) and step["session"]["step"] == 2
        pool.send({"id": "c", "close_session": "nb"})
        assert pool.read()["session"] == {"id": "nb", "closed": True}


def test_timeout_in_the_pool_is_124(sandboxed: Install) -> None:
    with PoolPipe(sandboxed.pynox) as pool:
        pool.read()
        pool.send({"id": "t", "code": "while True: pass", "timeout": "300ms"})
        assert pool.read()["exit"] == 124
