"""Four pipe hops between Python processes that do nothing else: a session step's hops.

A session step goes from the client to the pool server, from the server to the session's
process and back, and from the server to the client. Here a relay stands for the server
and an echo for the session: one byte makes the same four hops, with no work between them.
Timed in the same rounds as the pool, it shows what the hops alone cost after the same
pauses, apart from the Python code the pool runs at each of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

# The relay: a byte from the client goes to the echo, and the echo's answer to the client.
_RELAY = """
import os, sys
source, to_echo, from_echo, to_client = map(int, sys.argv[1:])
while data := os.read(source, 1):
    os.write(to_echo, data)
    os.read(from_echo, 1)
    os.write(to_client, data)
"""
_ECHO = """
import os, sys
source, answer = map(int, sys.argv[1:])
while data := os.read(source, 1):
    os.write(answer, data)
"""


class HopChain:
    """The client's end of a relay and an echo, each a `python -I` process of its own."""

    def __init__(self, python: str = sys.executable) -> None:
        client_out, relay_in = os.pipe()
        relay_to_echo, echo_in = os.pipe()
        echo_out, relay_from_echo = os.pipe()
        relay_out, client_in = os.pipe()
        self._echo = subprocess.Popen(
            [python, "-I", "-c", _ECHO, str(relay_to_echo), str(relay_from_echo)],
            pass_fds=(relay_to_echo, relay_from_echo),
        )
        self._relay = subprocess.Popen(
            [python, "-I", "-c", _RELAY, str(client_out), str(echo_in), str(echo_out),
             str(client_in)],
            pass_fds=(client_out, echo_in, echo_out, client_in),
        )  # fmt: skip
        for fd in (client_out, relay_to_echo, echo_in, echo_out, relay_from_echo, client_in):
            os.close(fd)
        self._send, self._receive = relay_in, relay_out
        self.time_hops()  # both are up and running

    def time_hops(self) -> int:
        """One byte through the four hops, in nanoseconds."""
        started = time.perf_counter_ns()
        os.write(self._send, b"x")
        if os.read(self._receive, 1) != b"x":
            raise RuntimeError("the hop chain's relay ended")
        return time.perf_counter_ns() - started

    def close(self) -> None:
        os.close(self._send)  # the relay ends, closing the echo's input: it ends too
        os.close(self._receive)
        for process in (self._relay, self._echo):
            process.wait(timeout=10)
