"""Requests to a live `pynox pool` and checks of its results, for tests/pool/.

`new_id` and `code` build requests; `assert_ok`, `assert_refused` and `serves` check
what comes back; `step` runs one session step; `Keeper` shares one pool between tests
and replaces it when a test killed it.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path
from typing import Any

from support.pool_client import Message, PoolClient


def new_id(prefix: str = "r") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


# What a pool child's descriptors are, told apart as a program can: its channel is a
# socket open both ways, its error report a socket shut for reading (a pipe on the command
# line), so that reading from it finds its end at once.
DESCRIPTOR_KINDS = code("""
    import os, socket, stat

    def descriptor_kind(fd):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return None
        if stat.S_ISFIFO(mode):
            return "pipe"
        if not stat.S_ISSOCK(mode):
            return None
        peer = socket.socket(fileno=os.dup(fd))
        try:
            shut = peer.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            shut = False
        finally:
            peer.close()
        return "report" if shut else "channel"
""")

# A program's prelude that finds its channel to the pool and writes a frame of its choosing
# on it, as a hostile program would: forge(message) or forge(body=raw bytes).
FORGE = DESCRIPTOR_KINDS + code("""
    import json
    CHANNEL = next(fd for fd in range(3, 256) if descriptor_kind(fd) == "channel")

    def forge(message=None, body=None):
        body = json.dumps(message).encode() if body is None else body
        data = len(body).to_bytes(4, "big") + body
        while data:
            data = data[os.write(CHANNEL, data):]
""")


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


class Keeper:
    """One pool shared by the tests of tests/pool/; a new one replaces it when a test
    killed it."""

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


def write_config(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pynox.toml"
    path.write_text(textwrap.dedent(text))
    return path


def step(client: PoolClient, session: str, program: str, **fields: Any) -> Message:
    return client.run({"id": new_id("s"), "session": session, "code": program, **fields})


def close_session(client: PoolClient, name: str) -> None:
    """Closes the session name and checks the pool's answer."""
    control_id = new_id("close")
    client.send({"id": control_id, "close_session": name})
    client.wait_for(lambda: control_id in client.results)
    answer = client.results.pop(control_id)[0]
    assert answer == {"id": control_id, "session": {"id": name, "closed": True}}
