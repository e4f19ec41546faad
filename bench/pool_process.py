"""A `pynox pool` driven over its JSON Lines protocol (docs/pool-protocol.md).

The benchmark speaks the raw protocol through pipes, as any client would, so that what it
times is the pool: one line out, one result line back.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any


class PoolProcess:
    def __init__(
        self,
        pynox: str,
        workers: int,
        cwd: str,
        options: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            [pynox, "pool", f"--workers={workers}", *(options or [])],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout
        ready = json.loads(self._stdout.readline() or b"null")
        if not isinstance(ready, dict) or ready.get("event") != "ready":
            self.process.kill()
            raise RuntimeError(f"pynox pool did not start: {ready!r}")
        self.workers = workers
        self._next_id = 0

    def send(self, request: dict[str, Any]) -> None:
        self._next_id += 1
        line = json.dumps({"id": self._next_id, **request}) + "\n"
        self._stdin.write(line.encode())
        self._stdin.flush()

    @property
    def next_id(self) -> int:
        """The id of the last request sent (the next one gets this plus one)."""
        return self._next_id

    def receive(self, check: bool = True) -> dict[str, Any]:
        """The next result; events are skipped. A failed request stops the benchmark,
        unless check is false (a batch whose programs may fail)."""
        while True:
            line = self._stdout.readline()
            if not line:
                raise RuntimeError("pynox pool ended while a request was running")
            message: dict[str, Any] = json.loads(line)
            if "event" in message:
                continue
            if check and message.get("exit") != 0:
                raise RuntimeError(f"a benchmark request failed in the pool: {message}")
            return message

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        self.send(request)
        return self.receive()

    def time_request(self, request: dict[str, Any]) -> int:
        """Request to result, in nanoseconds."""
        started = time.perf_counter_ns()
        self.send(request)
        self.receive()
        return time.perf_counter_ns() - started

    def close(self) -> None:
        self._stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stdout.close()

    def __enter__(self) -> PoolProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
