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
import tempfile
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


# What `pynox mcp --http` says when another process took the port first.
PORT_TAKEN = "Address already in use"


def _wait_listening(port: int, server: subprocess.Popen[bytes], said: Path) -> bool:
    """Whether the server listens on port; False if it ended because another process took
    the port between free_port() and its own bind."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            error = said.read_text(errors="replace")
            if PORT_TAKEN in error:
                return False
            raise RuntimeError(f"pynox mcp --http ended with status {server.returncode}: {error}")
        if _listens(server.pid, port):
            return True
        time.sleep(0.05)
    raise RuntimeError("pynox mcp --http did not listen within 60 s")


_LISTEN = "0A"  # the state /proc/net/tcp gives a listening socket


def _listens(pid: int, port: int) -> bool:
    """Whether process pid, or one it started, holds a socket listening on port: not only
    whether something answers there, which may be another process that took it first."""
    listening = set()
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                listening.add(f"socket:[{fields[9]}]")
    return any(_holds(process, listening) for process in _tree(pid))


def _tree(pid: int) -> list[int]:
    """pid and its descendants (the launcher supervises the process that listens)."""
    found, index = [pid], 0
    while index < len(found):
        with contextlib.suppress(OSError):  # a process may end meanwhile
            for task in os.listdir(f"/proc/{found[index]}/task"):
                with open(f"/proc/{found[index]}/task/{task}/children") as children:
                    found += [int(child) for child in children.read().split()]
        index += 1
    return found


def _holds(pid: int, sockets: set[str]) -> bool:
    with contextlib.suppress(OSError):  # the process may end meanwhile
        fds = f"/proc/{pid}/fd"
        return any(os.readlink(f"{fds}/{fd}") in sockets for fd in os.listdir(fds))
    return False


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
    with tempfile.TemporaryDirectory() as scratch:
        said = Path(scratch) / "stderr"
        server, url = _listening_server(args, cwd, url, said)
        try:
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
            sys.stderr.write(said.read_text(errors="replace"))


def _listening_server(
    args: list[str], cwd: Path, url: str | None, said: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """The server, listening, and its URL; its error output goes to said. A port that
    free_port() found may be taken by another process before the server binds it: then
    another port is tried."""
    for _ in range(5):
        if url is None:
            port = free_port()
            command, served = (
                [PYNOX, "mcp", *args, "--http", str(port)],
                f"http://127.0.0.1:{port}/mcp",
            )
        else:
            port = int(url.split(":")[2].split("/")[0])
            command, served = [PYNOX, "mcp", *args], url
        with said.open("wb") as error:
            server = subprocess.Popen(command, cwd=cwd, env=environment(), stderr=error)
        try:
            listening = _wait_listening(port, server, said)
        except BaseException:
            server.kill()  # never left running behind a failed test
            server.wait()
            raise
        if listening:
            return server, served
        if url is not None:
            raise RuntimeError(f"pynox mcp could not listen at {url}: the port is taken")
    raise RuntimeError("pynox mcp --http found each of five free ports taken")
