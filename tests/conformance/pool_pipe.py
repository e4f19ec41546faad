"""A minimal client of `pynox pool`: JSON lines over the process's pipes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from types import TracebackType

from .support import TIMEOUT


class PoolPipe:
    def __init__(self, pynox: str, *args: str, cwd: Path | None = None) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.process = subprocess.Popen(
            [pynox, "pool", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self._buffer = b""

    def send(self, message: dict[str, object] | str) -> None:
        assert self.process.stdin is not None
        line = message if isinstance(message, str) else json.dumps(message)
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def read(self, timeout: float = TIMEOUT) -> dict[str, object]:
        """The next line the pool writes, as an object."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"the pool wrote no line within {timeout}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError(f"the pool closed its output: {self.stderr_tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        value = json.loads(line)
        assert isinstance(value, dict)
        return value

    def results(self, count: int) -> dict[object, dict[str, object]]:
        """The next `count` results, by id (they come in completion order)."""
        found: dict[object, dict[str, object]] = {}
        while len(found) < count:
            line = self.read()
            if "event" not in line:
                found[line["id"]] = line
        return found

    def stderr_tail(self) -> str:
        self.process.kill()
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> PoolPipe:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.close()
