"""A minimal synchronous JSON Lines client for `pynox pool`, for the tests.

It speaks the protocol of docs/pool-protocol.md and nothing more: it starts the pool,
waits for the ready event, writes lines (draining the pool's output meanwhile, so a big
write never deadlocks against a full pipe), reads lines with a timeout, answers host calls
with Python callables and, on close, checks that the pool and every process it started are
gone. Deliberately independent of `pynox.api`: the tests check the server, not the API.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from pynox.engine.scratch import HELPER_SCRIPT

PYNOX = str(Path(sys.executable).with_name("pynox"))

Message = dict[str, Any]
HostFunction = Callable[..., Any]


class NoAnswer:
    """Returned by a host function: the client never answers that call."""


NO_ANSWER = NoAnswer()


class PoolDied(AssertionError):
    """The pool closed its output (or exited) while the test still expected lines."""


# --- processes ----------------------------------------------------------------------------


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) for every process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int, zombies: bool = True) -> set[int]:
    """Every process below pid (not pid itself); zombies too unless told otherwise.

    Not the helper that removes the pool's scratch directories once the pool ends: it
    outlives the pool by design (tests/core/test_scratch.py checks that it does its job).
    """
    children: dict[int, list[int]] = {}
    for child, (parent, state) in process_table().items():
        if (zombies or state != "Z") and not is_scratch_helper(child):
            children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = list(children.get(pid, []))
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


def status_field(pid: int, field: str) -> str | None:
    """The first word of a field of /proc/PID/status; None if the process is gone or the
    field is not there."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return line.split()[1]
    return None


def seccomp_filters(pids: Iterable[int]) -> dict[int, int]:
    """How many seccomp filters each process runs under (Seccomp_filters in
    /proc/PID/status); a process that is gone is left out."""
    found = {pid: status_field(pid, "Seccomp_filters") for pid in pids}
    return {pid: int(count) for pid, count in found.items() if count is not None}


def is_scratch_helper(pid: int) -> bool:
    """Whether pid is the helper that removes a pool's scratch directories (/bin/sh)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) > 2 and argv[2] == HELPER_SCRIPT.encode()


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (a zombie holds nothing but its number)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pids: Iterable[int], timeout: float) -> set[int]:
    """Waits until none of pids is alive; returns those still alive at the deadline."""
    pids = set(pids)
    deadline = time.monotonic() + timeout
    while True:
        left = {pid for pid in pids if alive(pid)}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def processes_with(marker: str) -> set[int]:
    """Live processes whose command line contains marker."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry)):
            found.add(int(entry))
    return found


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update(extra or {})
    return env


# --- the client ---------------------------------------------------------------------------


class PoolClient:
    """One `pynox pool` process and the lines it wrote."""

    def __init__(
        self,
        *args: str,
        workers: int | None = None,
        config: str | os.PathLike[str] | None = None,
        preload: Iterable[str] = (),
        cwd: str | os.PathLike[str] = "/",
        env: dict[str, str] | None = None,
        ready_timeout: float = 30,
        launched_by: Iterable[str] = (),
    ) -> None:
        """launched_by: a command that starts the pool (support.commands.ignoring)."""
        command = [*launched_by, PYNOX, "pool", *args]
        if workers is not None:
            command += ["--workers", str(workers)]
        if config is not None:
            command += ["--config", str(config)]
        for module in preload:
            command += ["--preload", module]
        self.command = command
        self.stderr_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            cwd=cwd,
            env=clean_env() if env is None else env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin_fd = self.proc.stdin.fileno()
        self.stdout_fd = self.proc.stdout.fileno()
        os.set_blocking(self.stdin_fd, False)
        self.pid = self.proc.pid
        self.buffer = bytearray()
        self.eof = False
        self.lines: list[Message] = []  # every line the pool wrote, parsed, in order
        self.results: dict[object, list[Message]] = {}  # by id, not yet taken
        self.events: list[Message] = []  # every event but host calls and ready
        self.host_calls: list[Message] = []
        self.host: dict[object, dict[str, HostFunction]] = {}  # request id -> functions
        self.ready = self.read(ready_timeout)
        if self.ready.get("event") != "ready":
            raise AssertionError(f"the pool's first line is not the ready event: {self.ready}")

    # --- writing ---------------------------------------------------------------------------

    def send(self, request: Message, host: dict[str, HostFunction] | None = None) -> None:
        """Writes one request line; host functions answer the host calls it makes."""
        if host is not None:
            self.host[request["id"]] = host
        self.send_raw(json.dumps(request).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        """Writes bytes as they are, reading what the pool writes meanwhile."""
        view = memoryview(data)
        while view:
            readable, writable, _ = select.select([self.stdout_fd], [self.stdin_fd], [], 30)
            if not readable and not writable:
                raise AssertionError("the pool neither reads its input nor writes for 30s")
            if readable:
                self._fill()
            if writable:
                try:
                    written = os.write(self.stdin_fd, view[: 1 << 20])
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    stderr = self.stderr()
                    raise PoolDied(f"the pool closed its input; stderr: {stderr!r}") from None
                view = view[written:]

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    # --- reading ---------------------------------------------------------------------------

    def _fill(self) -> None:
        try:
            data = os.read(self.stdout_fd, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.eof = True
        self.buffer += data

    def read_line(self, timeout: float = 10) -> bytes:
        """The next raw line the pool writes (without its newline)."""
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[: newline + 1]
                return line
            if self.eof:
                raise PoolDied(
                    f"the pool closed its output (exit {self.proc.poll()}); "
                    f"stderr: {self.stderr()[-2000:]!r}"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line from the pool within {timeout}s; {self.diagnose()}")
            readable, _, _ = select.select([self.stdout_fd], [], [], left)
            if readable:
                self._fill()

    def read(self, timeout: float = 10) -> Message:
        """The next line, parsed; it must be a JSON object. Answers host calls it sees."""
        line = self.read_line(timeout)
        try:
            message = json.loads(line)
        except ValueError:
            shown = line[:500]
            raise AssertionError(f"the pool wrote a line that is not JSON: {shown!r}") from None
        if not isinstance(message, dict):
            raise AssertionError(f"the pool wrote a line that is not an object: {line[:500]!r}")
        self.lines.append(message)
        if message.get("event") == "host_call":
            self.host_calls.append(message)
            self._answer(message)
        elif "event" in message:
            if message["event"] != "ready":
                self.events.append(message)
        else:
            self.results.setdefault(message.get("id"), []).append(message)
        return message

    def _answer(self, call: Message) -> None:
        functions = self.host.get(call.get("id"))
        if functions is None:
            return  # the test answers itself
        function = functions.get(call.get("function"))
        if function is None:
            raise AssertionError(f"the pool relayed a call nobody declared: {call}")
        try:
            value = function(*call.get("args", []), **call.get("kwargs", {}))
        except Exception as exc:  # noqa: BLE001 - becomes the host_error line
            self.send({"id": call["id"], "host_error": {"call": call["call"], "message": str(exc)}})
            return
        if value is not NO_ANSWER:
            self.send({"id": call["id"], "host_result": {"call": call["call"], "value": value}})

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the pool did not get there within {timeout}s")
            self.read(left)

    def result(self, request_id: object, timeout: float = 30) -> Message:
        """The result for request_id (waiting for it; other lines are kept for later)."""
        self.wait_for(lambda: bool(self.results.get(request_id)), timeout)
        found = self.results[request_id].pop(0)
        if not self.results[request_id]:
            del self.results[request_id]
        self.host.pop(request_id, None)
        return found

    def event(self, predicate: Callable[[Message], bool], timeout: float = 30) -> Message:
        """The first event (host calls included) that predicate accepts."""

        def found() -> Message | None:
            for message in self.events + self.host_calls:
                if predicate(message):
                    return message
            return None

        self.wait_for(lambda: found() is not None, timeout)
        message = found()
        assert message is not None
        return message

    def run(
        self, request: Message, host: dict[str, HostFunction] | None = None, timeout: float = 60
    ) -> Message:
        """Sends request and waits for its result."""
        self.send(request, host)
        return self.result(request["id"], timeout)

    def expect_silence(self, seconds: float) -> None:
        """Nothing more arrives for a while (use to check there is exactly one answer)."""
        before = len(self.lines)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                self.read(left)
            except TimeoutError:
                break
        extra = self.lines[before:]
        if extra:
            raise AssertionError(f"the pool wrote more than expected: {extra}")

    # --- processes -------------------------------------------------------------------------

    def tree(self) -> set[int]:
        """The pool and every process below it (the zygote, spares, running children)."""
        return {self.pid} | descendants(self.pid)

    def settles(self, size: int, within: float = 10, steady: float = 0.5) -> bool:
        """Whether the pool's tree comes to hold exactly `size` processes within `within`
        seconds and keeps that many for `steady` seconds.

        On its way it passes through other counts: a child killed as its result went out
        takes a few milliseconds more to exit, while the spare that replaces it may not be
        forked yet, so one sample of at most `size` says nothing (the next may hold both).
        A process that outlived its run stays for good, and the count with it."""
        deadline = time.monotonic() + within
        since: float | None = None
        while time.monotonic() < deadline:
            now = time.monotonic()
            if len(self.tree()) != size:
                since = None
            elif since is None:
                since = now
            elif now - since >= steady:
                return True
            time.sleep(0.05)
        return False

    def diagnose(self) -> str:
        """What the pool's processes are doing, for a test that waited in vain."""
        states = []
        for pid in sorted(self.tree()):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = Path(f"/proc/{pid}/wchan").read_text()
            except OSError:
                continue
            states.append(f"{pid}:{state}:{wchan}")
        return (
            f"pool exit status {self.proc.poll()}, processes {' '.join(states)}, "
            f"unread {bytes(self.buffer[:200])!r}, stderr {self.stderr()[-1000:]!r}"
        )

    def stderr(self) -> bytes:
        self.stderr_file.seek(0)
        return self.stderr_file.read()

    def close(self, timeout: float = 30, gone_within: float = 5) -> int:
        """Closes stdin, reads everything left, waits for the exit, checks no process stays."""
        tree = self.tree() if self.proc.poll() is None else {self.pid}
        self.close_stdin()
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the pool did not close its output within {timeout}s")
            try:
                self.read(left)
            except PoolDied:
                break
        code = self.proc.wait(max(0.1, deadline - time.monotonic()))
        left = wait_gone(tree, gone_within)
        if left:
            raise AssertionError(f"processes of the pool outlived it: {sorted(left)}")
        return code

    def kill(self) -> None:
        """Cleanup after a failed test: kills the pool and what it started, by pid."""
        tree = self.tree() if self.proc.poll() is None else set()
        for pid in sorted(tree):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.close_stdin()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> PoolClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.kill()
        elif self.proc.stdout is not None:
            self.proc.stdout.close()
        self.stderr_file.close()


# The tests that time how a pool hands out its spares, and the one that starts hundreds of
# spares at once (which takes the CPU from whatever runs beside it): never side by side
# (pytest-xdist runs a group on one worker).
POOL_TIMING = pytest.mark.xdist_group("pool-timing")
