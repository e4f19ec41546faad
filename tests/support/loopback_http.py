"""An HTTP server on loopback, serving from a thread for the length of a `with` block."""

from __future__ import annotations

import contextlib
import http.server
import ssl
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def serving(
    handler: Callable[..., http.server.BaseHTTPRequestHandler],
    tls: ssl.SSLContext | None = None,
) -> Iterator[http.server.ThreadingHTTPServer]:
    """The running server (its port: `server.server_address[1]`), over TLS with tls."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True  # a client left hanging never holds up the test's end
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    """Serves a folder's files without a log line per request on the test's stderr."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass
