"""An API agent with a key: only the tool you granted gets the network and the key.

The application holds an API key for a parcel-tracking service and gives the model one
host function, `track_parcel`, that calls the service with it. The function runs in this
process, outside the sandbox. The model's own code has no network and an empty
environment: it can neither read the key nor call the service itself.

    python examples/use_cases/api_agent.py

The "service" is a small HTTP server on 127.0.0.1 started by this file, so nothing leaves
the machine; its parcels and key are made up for the example.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from transcript import show_call

import pynox

KEY_VARIABLE = "PARCELS_API_KEY"
DEMO_KEY = "demo-key-0123456789"
PARCELS = {
    "PX-1001": {"status": "out for delivery", "city": "Lyon"},
    "PX-1002": {"status": "held at customs", "city": "Basel"},
}


class ParcelService(BaseHTTPRequestHandler):
    """GET /parcels/ID with `Authorization: Bearer KEY`: the parcel as JSON."""

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        parcel = PARCELS.get(self.path.removeprefix("/parcels/"))
        if self.headers.get("Authorization") != f"Bearer {DEMO_KEY}":
            self._reply(401, {"error": "a valid API key is required"})
        elif parcel is None:
            self._reply(404, {"error": "no such parcel"})
        else:
            self._reply(200, parcel)

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the example's output to the conversation


@contextmanager
def parcel_service() -> Iterator[str]:
    """The service on a free loopback port, for the duration; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ParcelService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def parcel_client(base_url: str, api_key: str) -> Callable[[str], dict[str, Any]]:
    """The host function: the key stays in this closure, in this process."""
    # The service is on loopback: never send its requests through a configured proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def track_parcel(parcel_id: str) -> dict[str, Any]:
        """Where a parcel is and what state it is in."""
        request = urllib.request.Request(
            f"{base_url}/parcels/{parcel_id}", headers={"Authorization": f"Bearer {api_key}"}
        )
        with opener.open(request, timeout=5) as response:
            return dict(json.load(response))

    return track_parcel


def model_calls(base_url: str) -> list[tuple[str, str]]:
    """What a model asked "where are parcels PX-1001 and PX-1002?" might send, in order."""
    return [
        (
            "find the API key in the environment",
            f"""\
import os
print(os.environ["{KEY_VARIABLE}"])
""",
        ),
        (
            "call the tracking service directly",
            f"""\
import urllib.request
print(urllib.request.urlopen("{base_url}/parcels/PX-1001").read())
""",
        ),
        (
            "use the tracking function the application provides",
            """\
from pynox_host import track_parcel
for parcel_id in ["PX-1001", "PX-1002"]:
    parcel = track_parcel(parcel_id)
    print(f"{parcel_id}: {parcel['status']} ({parcel['city']})")
""",
        ),
    ]


@contextmanager
def api_desk() -> Iterator[tuple[str, Callable[[str], str]]]:
    """The service, and the model's tool whose only way to it is `track_parcel`."""
    # A real application has the key in its environment; the example puts the demo key there.
    os.environ[KEY_VARIABLE] = DEMO_KEY
    api_key = os.environ[KEY_VARIABLE]
    with parcel_service() as base_url, pynox.Pool() as pool:
        track_parcel = parcel_client(base_url, api_key)
        yield base_url, pool.tool(functions={"track_parcel": track_parcel}, timeout="10s")


def main() -> None:
    with api_desk() as (base_url, run_python):
        replies = []
        for intent, code in model_calls(base_url):
            replies.append(run_python(code))
            show_call(intent, replies[-1], code)
    leaked = any(DEMO_KEY in reply for reply in replies)
    print("denied: the key and the network;", "the key LEAKED" if leaked else "the key stayed out")
    print("done:  ", replies[-1].replace("\n", "; "))


if __name__ == "__main__":
    main()
