"""What no SDK client would send: raw lines on `pynox mcp`'s standard input, and arguments
the tools refuse before any run (checked in-process, on a pool that never starts)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.commands import PYNOX
from support.mcp_client import free_port, http_server

from pynox.api.connection import PoolError
from pynox.api.pool import Pool
from pynox.limits import DEFAULT_MCP_SESSIONS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")
pytest.importorskip("mcp", reason="the MCP SDK comes with the test extra (pynox[mcp])")

from pynox.mcp.server import build_server  # noqa: E402
from pynox.mcp.tools import BadCall, PythonTools  # noqa: E402

HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def unreadable(reply: dict[str, Any]) -> tuple[object, int]:
    """The id and code of the error answering a line the server could not read, once its
    message is checked to say what to send."""
    assert set(reply) == {"jsonrpc", "id", "error"}, reply
    assert reply["error"]["message"].startswith("the line is not ")
    assert "; send " in reply["error"]["message"]
    return reply["id"], reply["error"]["code"]


def call(request_id: int, params: Any) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    )


def test_garbage_lines_are_answered_and_serving_goes_on() -> None:
    """JSON-RPC answers a line it cannot read with an error, under its id if it has one:
    a client waiting for that id must not wait forever."""
    server = subprocess.Popen(
        [PYNOX, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert server.stdin is not None and server.stdout is not None

    def send(line: str | bytes) -> None:
        assert server.stdin is not None
        server.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        server.stdin.flush()

    def answer() -> dict[str, Any]:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        assert ready, "pynox mcp did not answer within 60 s"
        return dict(json.loads(server.stdout.readline()))

    try:
        send(json.dumps(HELLO))
        assert answer()["id"] == 0
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send("not json")
        assert unreadable(answer()) == (None, -32700)
        send(b"\xff\xfe{")
        assert unreadable(answer()) == (None, -32700)
        send('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"code":"\\ud800"}}')
        assert unreadable(answer()) == (1, -32700)
        send('{"jsonrpc":"2.0","id":"\\udc80","method":"ping"}')  # an id not to write back
        assert unreadable(answer()) == (None, -32700)
        # Nested past what any JSON parser here takes: the id cannot be read.
        deep = "[" * 100_000 + "]" * 100_000
        send('{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":' + deep + "}}")
        assert unreadable(answer()) == (None, -32700)
        send('{"jsonrpc":"2.0","id":"x","method":5}')
        assert unreadable(answer()) == ("x", -32600)
        # Ids MCP does not take, which the SDK would read as notifications, never answered.
        for bad_id in ("null", "1.5", "2.0", "true", "[1]", "NaN"):
            send('{"jsonrpc":"2.0","id":' + bad_id + ',"method":"ping"}')
            reply = answer()
            assert reply["id"] is None and reply["error"]["code"] == -32600
            assert reply["error"]["message"] == (
                f"the request's id {bad_id} is not a string or an integer, the only ids MCP "
                'takes; send the request again with an id such as "id": 1'
            )
        send('{"jsonrpc":"2.0","id":"s","method":"ping"}')
        assert answer() == {"jsonrpc": "2.0", "id": "s", "result": {}}
        send(call(2, {"name": "run_python", "arguments": [1]}))
        assert answer() == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32602, "message": "Invalid request parameters", "data": ""},
        }
        send(call(3, {"name": "run_python", "arguments": {"code": "print('alive')"}}))
        reply = answer()
        assert reply["id"] == 3
        assert reply["result"]["content"] == [{"type": "text", "text": "alive"}]
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    assert server.returncode == 0


def test_a_request_whose_id_mcp_does_not_take_is_answered_over_http_too(
    tmp_path: Path,
) -> None:
    """Not 202 Accepted, as for a notification, with no answer ever to come."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def post(message: dict[str, Any]) -> Any:
        request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
        return opener.open(request, timeout=30)

    with http_server(["--http", str(port)], cwd=tmp_path, url=url):
        with post(HELLO) as hello:
            headers["Mcp-Session-Id"] = hello.headers["Mcp-Session-Id"]
        headers["Mcp-Protocol-Version"] = HELLO["params"]["protocolVersion"]  # type: ignore[index]
        with post({"jsonrpc": "2.0", "method": "notifications/initialized"}) as done:
            assert done.status == 202
        with pytest.raises(urllib.error.HTTPError) as refused:
            post({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}).close()
        assert refused.value.code == 400
        assert json.loads(refused.value.read()) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "the request's id 1.5 is not a string or an integer, the only ids "
                'MCP takes; send the request again with an id such as "id": 1',
            },
        }
        refused.value.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"code": "\ud800"}, "code is not valid Unicode text (it has a lone surrogate)"),
        ({"code": None}, "code is missing"),
        ({"code": ["print(1)"]}, "code must be a string of Python source, not an array"),
        ({"code": "1", "timeout": "1h"}, "run_python takes only code, not 'timeout'"),
    ],
)
def test_arguments_are_refused_before_anything_runs(
    arguments: dict[str, Any], message: str
) -> None:
    pool = Pool(lazy=True)
    try:
        tools = PythonTools(pool, check=False)
        with pytest.raises(BadCall) as caught:
            asyncio.run(tools.call("run_python", arguments))
        assert caught.value.message.startswith(message)
        assert pool.pid is None  # refused on the trusted side: no pool was started for it
    finally:
        pool.close()


def test_idle_sessions_are_closed_and_a_later_call_is_told_to_start_anew() -> None:
    pool = Pool(lazy=True)
    try:
        tools = PythonTools(pool, check=False)
        session_id, entry = asyncio.run(tools._open())
        entry.last_used -= tools.session_idle + 1
        with pytest.raises(BadCall) as caught:
            asyncio.run(tools.call("python_session", {"code": "1", "session_id": session_id}))
        assert caught.value.message == (
            f"there is no session {session_id!r} (closed, or unused for 10m); call "
            "python_session without session_id to start a new one"
        )
        assert entry.session.closed and tools.sessions == {}
    finally:
        pool.close()


def test_sessions_are_bounded_even_when_the_config_sets_no_bound() -> None:
    pool = Pool(lazy=True)
    try:
        tools = PythonTools(pool, check=False)
        assert tools.max_sessions == DEFAULT_MCP_SESSIONS
        for _ in range(DEFAULT_MCP_SESSIONS):
            asyncio.run(tools._open())
        with pytest.raises(BadCall, match="16 sessions are open, the most this server allows"):
            asyncio.run(tools.call("python_session", {"code": "1"}))
        assert len(tools.sessions) == DEFAULT_MCP_SESSIONS
        tools.close()
    finally:
        pool.close()


def test_concurrent_calls_that_find_idle_sessions_each_get_their_own_answer() -> None:
    """Two calls arriving together after two sessions went idle: both are told their
    session is gone, neither fails on the other closing the same idle sessions."""
    pool = Pool(lazy=True)
    try:
        tools = PythonTools(pool, check=False)
        opened = [asyncio.run(tools._open()) for _ in range(2)]
        for _, entry in opened:
            entry.last_used -= tools.session_idle + 1

        async def both() -> list[object]:
            calls = [
                tools.call("python_session", {"code": "1", "session_id": session_id})
                for session_id, _ in opened
            ]
            return await asyncio.gather(*calls, return_exceptions=True)

        answers = asyncio.run(both())
        assert [type(answer) for answer in answers] == [BadCall, BadCall], answers
        assert all(entry.session.closed for _, entry in opened) and tools.sessions == {}
    finally:
        pool.close()


def test_a_first_session_call_cancelled_or_failed_leaves_no_session_open(
    tmp_path: Path,
) -> None:
    """The client never got the id of a session whose first call it cancelled (a timeout of
    its own) or that failed, so it cannot close it: it must not count towards max_sessions."""
    pool = Pool(workers=1)
    try:
        tools = PythonTools(pool)

        async def cancelled() -> None:
            call = tools.call("python_session", {"code": "import time\ntime.sleep(60)"})
            task = asyncio.ensure_future(call)
            while not tools.sessions:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())
        assert tools.sessions == {}
    finally:
        pool.close()
    config = tmp_path / "pynox.toml"
    config.write_text('[pool]\npreload = ["no_such_module_here"]\n')
    broken = Pool(config=str(config))
    try:
        tools = PythonTools(broken)
        with pytest.raises(PoolError, match="cannot preload no_such_module_here"):
            asyncio.run(tools.call("python_session", {"code": "1"}))
        assert tools.sessions == {}
    finally:
        broken.close()


def test_a_step_whose_session_was_closed_meanwhile_does_not_offer_its_id_again() -> None:
    pool = Pool(workers=1)
    try:
        tools = PythonTools(pool)

        async def close_during_step() -> str | None:
            first = await tools.call("python_session", {"code": "x = 1"})
            assert first.note is not None
            session_id = first.note.split()[1]
            step = asyncio.ensure_future(
                tools.call("python_session", {"code": "x += 1", "session_id": session_id})
            )
            while not tools.sessions[session_id].running and not step.done():
                await asyncio.sleep(0)
            await tools.call("close_python_session", {"session_id": session_id})
            return (await step).note

        note = asyncio.run(close_during_step())
        assert note is not None and note.endswith(
            " was closed while this call ran; call python_session without session_id to "
            "start a new one"
        )
    finally:
        pool.close()


def test_ctrl_c_ends_the_server_while_its_client_stays_connected(tmp_path: Path) -> None:
    """SIGINT ends the server and the run it was serving at once, not once the client
    closes standard input (a read of it that waits for a line is abandoned)."""
    server = subprocess.Popen(
        [PYNOX, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(json.dumps(HELLO).encode() + b"\n")
        server.stdin.flush()
        assert select.select([server.stdout], [], [], 60)[0], "no answer to initialize"
        server.stdout.readline()
        sleep = {"name": "run_python", "arguments": {"code": "import time\ntime.sleep(60)"}}
        server.stdin.write(call(1, sleep).encode() + b"\n")
        server.stdin.flush()
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("pynox-run-*")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the run has made its scratch directory: it is under way
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0
        assert server.stderr is not None and server.stderr.read() == b""
        deadline = time.monotonic() + 30
        while list(tmp_path.glob("pynox-run-*")) and time.monotonic() < deadline:
            time.sleep(0.05)  # removed once the run's process is gone
        assert not list(tmp_path.glob("pynox-run-*"))
    finally:
        server.kill()
        server.communicate()


def test_a_step_queued_behind_one_when_its_session_is_closed_is_told_so() -> None:
    """Not with the pool's refusal, which names the session by an id of the pool's own:
    the model would read two ids for one session."""
    pool = Pool(workers=1)
    try:
        tools = PythonTools(pool)

        async def close_with_a_step_queued() -> object:
            first = await tools.call("python_session", {"code": "x = 1"})
            assert first.note is not None
            session_id = first.note.split()[1]
            entry = tools.sessions[session_id]
            steps = [
                asyncio.ensure_future(
                    tools.call("python_session", {"code": code, "session_id": session_id})
                )
                for code in ("import time\ntime.sleep(1)", "x += 1")
            ]
            while entry.running < 2:
                await asyncio.sleep(0)
            await asyncio.sleep(0.1)  # both sent: the second waits behind the first
            await tools.call("close_python_session", {"session_id": session_id})
            ran, queued = await asyncio.gather(*steps, return_exceptions=True)
            assert not isinstance(ran, BaseException) and ran.result is not None
            assert ran.result.ok
            return queued

        queued = asyncio.run(close_with_a_step_queued())
        assert isinstance(queued, BadCall), queued
        assert queued.message.endswith(
            " was closed while this call ran; call python_session without session_id to "
            "start a new one"
        )
    finally:
        pool.close()


def test_a_client_that_closes_the_servers_output_ends_it_quietly() -> None:
    """As one that closes its input does: not with an internal error to report."""
    server = subprocess.Popen(
        [PYNOX, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(json.dumps(HELLO).encode() + b"\n")
        server.stdin.flush()
        assert select.select([server.stdout], [], [], 60)[0], "no answer to initialize"
        server.stdout.close()
        server.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        server.stdin.flush()
        assert server.wait(timeout=30) == 0
        assert server.stderr is not None and server.stderr.read() == b""
    finally:
        server.kill()
        server.communicate()


def test_a_step_the_pools_end_stopped_says_its_session_ended() -> None:
    """The pool process died under the step: the session's process went with it, and the
    note says so, as for a step that ended its session itself."""
    pool = Pool(workers=1)
    try:
        tools = PythonTools(pool)

        async def step_under_a_dying_pool() -> str | None:
            first = await tools.call("python_session", {"code": "x = 1"})
            assert first.note is not None
            session_id = first.note.split()[1]
            step = asyncio.ensure_future(
                tools.call(
                    "python_session",
                    {"code": "import time\ntime.sleep(30)", "session_id": session_id},
                )
            )
            while not tools.sessions[session_id].running:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # sent to the pool
            assert pool.pid is not None
            os.kill(pool.pid, signal.SIGKILL)
            return (await step).note

        note = asyncio.run(step_under_a_dying_pool())
        assert note is not None and note.endswith(
            " (its process ended; the next call starts afresh)"
        ), note
    finally:
        pool.close()


def test_a_bound_of_one_session_is_said_in_the_singular(tmp_path: Path) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 1\n")
    pool = Pool(lazy=True, config=str(config))
    try:
        tools = PythonTools(pool, check=False)
        description = tools.descriptions()[1]["description"]
        assert "at most 1 session is open at once" in description
        asyncio.run(tools._open())
        with pytest.raises(BadCall, match="^1 session is open, the most this server allows"):
            asyncio.run(tools.call("python_session", {"code": "1"}))
        tools.close()
    finally:
        pool.close()


def test_a_bound_of_no_sessions_offers_run_python_alone(tmp_path: Path) -> None:
    """Not python_session, whose every call would be told to close a session first."""
    config = tmp_path / "pynox.toml"
    config.write_text("[pool]\nmax_sessions = 0\n")
    pool = Pool(lazy=True, config=str(config))
    try:
        tools = PythonTools(pool, check=False)
        assert [tool["name"] for tool in tools.descriptions()] == ["run_python"]
        assert build_server(tools).instructions == (
            "Runs Python in a kernel-enforced sandbox: run_python for one program. Each "
            "tool's description says what the code may touch."
        )
        for name, arguments in [
            ("python_session", {"code": "1"}),
            ("close_python_session", {"session_id": "x"}),
        ]:
            with pytest.raises(BadCall) as refused:
                asyncio.run(tools.call(name, arguments))
            assert refused.value.message == (
                "this server keeps no sessions ([pool] max_sessions = 0); use run_python, "
                "which runs each program in a fresh process"
            )
        with pytest.raises(BadCall, match="; the tool is run_python$"):
            asyncio.run(tools.call("run_shell", {"code": "1"}))
    finally:
        pool.close()
