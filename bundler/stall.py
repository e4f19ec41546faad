"""Cutting off a download that has all but stopped.

The socket's timeout bounds each read, not a whole download: a server that sends a
byte every few seconds (its headers or its body) would hold the bundler for ever. A
Stall watches the connections urllib opens for one request and shuts them down when
less than LEAST bytes arrive in WINDOW seconds; a download that keeps moving faster
than that, however slowly, is never cut.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

# A runtime archive is tens of MB: below 64 KiB a minute (about 1 KiB/s) it would take
# most of a day, so such a connection is taken for one that stopped.
WINDOW = 60.0
LEAST = 64 * 1024
CHUNK = 256 * 1024


class Stall:
    """`with Stall() as stall:` watches, until the block ends, the sockets `handlers()`
    open; `read()` counts what arrives, and `stalled` says whether it cut them."""

    def __init__(self) -> None:
        self.window = WINDOW  # read now, not at import: a test lowers them
        self.least = LEAST
        self.received = 0  # written by the reading thread only
        self.stalled = False
        self._sockets: list[socket.socket] = []  # duplicates, owned here
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="bundler-stall", daemon=True)

    def __enter__(self) -> Stall:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def read(self, source: io.BufferedIOBase) -> bytes:
        """The next bytes of source as soon as any arrive (b"" at its end), counted."""
        chunk = source.read1(CHUNK)
        self.received += len(chunk)
        return chunk

    def describe(self) -> str:
        return f"less than {self.least / 1024:g} KiB arrived in {self.window:g} s"

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib handlers whose connections this Stall watches."""
        return [_HTTPHandler(self), _HTTPSHandler(self)]

    def _connected(self, sock: socket.socket) -> None:
        # A duplicate reaches the same connection, and stays open (so its number is not
        # reused for another file) until the Stall ends, whatever urllib does with its own.
        with self._lock:
            self._sockets.append(sock.dup())
            if self.stalled:
                self._shut()

    def _shut(self) -> None:
        for sock in self._sockets:
            # A blocked read on the connection returns at once, as at its end.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _watch(self) -> None:
        tick = min(1.0, self.window / 10)
        start, mark = time.monotonic(), self.received
        while not self._done.wait(tick):
            now = time.monotonic()
            if now - start < self.window:
                continue
            if self.received - mark < self.least:
                with self._lock:
                    self.stalled = True
                    self._shut()
                return
            start, mark = now, self.received


def _reporting(
    connection: Callable[..., http.client.HTTPConnection], stall: Stall
) -> Callable[..., http.client.HTTPConnection]:
    """connection (an HTTP(S)Connection class) whose sockets are reported to stall as soon
    as they connect, before a proxy's tunnel, TLS or the response's headers."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        made = connection(host, **kwargs)
        # http.client's hook for making its socket (socket.create_connection), an attribute
        # of every HTTPConnection in CPython 3.10 to 3.14. A Python without it downloads
        # unwatched, as before: only a per-read timeout bounds it then.
        found: Callable[..., socket.socket] | None = getattr(made, "_create_connection", None)
        if found is None:
            return made
        create = found

        def created(*args: Any, **kw: Any) -> socket.socket:
            sock = create(*args, **kw)
            stall._connected(sock)
            return sock

        made._create_connection = created  # type: ignore[attr-defined]
        return made

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, stall: Stall) -> None:
        super().__init__()
        self.stall = stall

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        return super().do_open(_reporting(http_class, self.stall), req, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, stall: Stall) -> None:
        super().__init__()
        self.stall = stall

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        return super().do_open(_reporting(http_class, self.stall), req, **kwargs)
