"""A loopback HTTP server that serves a folder like a release mirror.

It answers `Range: bytes=N-` requests with 206, records every request, and can
be told to cut the connection halfway through a file once, so that the
bundler's resume path runs against a real socket.
"""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Seen:
    path: str
    range: str | None


@dataclass
class MirrorState:
    root: Path
    drop_once: set[str] = field(default_factory=set)  # paths to cut short on first request
    requests: list[Seen] = field(default_factory=list)


class _Handler(http.server.BaseHTTPRequestHandler):
    state: MirrorState

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def do_GET(self) -> None:  # noqa: N802
        path = unquote(urlsplit(self.path).path)
        self.state.requests.append(Seen(path, self.headers.get("Range")))
        file = (self.state.root / path.lstrip("/")).resolve()
        if self.state.root.resolve() not in file.parents or not file.is_file():
            self.send_error(404)
            return
        data = file.read_bytes()
        start = 0
        wanted = self.headers.get("Range")
        if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
            start = int(wanted[len("bytes=") : -1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if path in self.state.drop_once:
            self.state.drop_once.discard(path)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class Mirror:
    """`with Mirror(folder) as mirror:` serves folder at mirror.url until the block ends."""

    def __init__(self, root: Path) -> None:
        self.state = MirrorState(root)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Mirror:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
