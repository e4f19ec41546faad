"""A client of `pynox mcp`: the MCP SDK's own ClientSession, over stdio or streamable HTTP.

The client lives on an event loop in a thread of its own, so that one server can serve a
whole test module while tests call it synchronously. Imported only where the SDK is
installed (tests/mcp skips without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from support.commands import PYNOX

T = TypeVar("T")


class Client:
    """A ClientSession on its own event loop; `call` runs one of its coroutines there."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[ClientSession] = self.loop.create_future()
        self._task = asyncio.run_coroutine_threadsafe(self._hold(connect), self.loop)
        self.session = self._wait(self._ready_session())

    async def _ready_session(self) -> ClientSession:
        return await self._ready

    async def _hold(self, connect: Callable[[], Any]) -> None:
        try:
            async with connect() as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                self._ready.set_result(session)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def _wait(self, coroutine: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)  # type: ignore[arg-type]

    def call(self, tool: str, arguments: dict[str, Any] | None) -> Any:
        return self._wait(self.session.call_tool(tool, arguments))

    def list_tools(self) -> Any:
        return self._wait(self.session.list_tools())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        with contextlib.suppress(Exception):
            self._task.result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"pynox mcp --http ended with status {server.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.05)
    raise RuntimeError("pynox mcp --http did not listen within 60 s")


def environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ["HOME"],
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "LANG": "C.UTF-8",
    }


def stdio_server(args: list[str], cwd: Path) -> Client:
    """`pynox mcp ARGS` started by the SDK's stdio client, which ends it on close()."""
    parameters = StdioServerParameters(
        command=PYNOX, args=["mcp", *args], env=environment(), cwd=str(cwd)
    )
    return Client(lambda: stdio_client(parameters, errlog=sys.stderr))


@contextlib.contextmanager
def http_server(args: list[str], cwd: Path, url: str | None = None) -> Iterator[Client]:
    """`pynox mcp ARGS --http PORT` on loopback, with a client connected to it; with `url`,
    ARGS hold --http already and `url` is where it serves."""
    if url is None:
        port = free_port()
        args = [*args, "--http", str(port)]
        url = f"http://127.0.0.1:{port}/mcp"
    port = int(url.split(":")[2].split("/")[0])
    server = subprocess.Popen([PYNOX, "mcp", *args], cwd=cwd, env=environment())
    try:
        _wait_listening(port, server)
        client = Client(lambda: streamable_http_client(url))
        try:
            yield client
        finally:
            client.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
