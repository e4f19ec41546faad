"""The supervisor: forks the sandboxed child and waits for it.

It passes on the signals sent to it to its child (which leaves the terminal's
session), enforces the wall-clock timeout through a pidfd, collects output
when asked to, and maps how the child ended.
"""

import _signal
import os
import sys
import time

from pynox.engine.child_setup import PYTHON_FINISHED, ChildSetup
from pynox.engine.time_limit import is_stopped
from pynox.errors import EXIT_TIMEOUT
from pynox.limits import REPORT_LIMIT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy

# Not forwarded: what no process can catch, the child's end and job control (this
# process waits for them), faults (a handler would return into the fault), and what
# CPython itself ignores (SIGPIPE, SIGXFSZ: the program's python ignores them too).
_KEPT_SIGNALS = (
    "SIGKILL", "SIGSTOP", "SIGCHLD", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCONT",
    "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGPIPE", "SIGXFSZ",
)  # fmt: skip


def _forwarded_signals() -> "list[int]":
    """Every signal a process may send pynox and the program could handle, as it would
    have handled it sent to python: SIGUSR1, SIGWINCH and the rest, not only SIGINT."""
    kept = {getattr(_signal, name) for name in _KEPT_SIGNALS if hasattr(_signal, name)}
    return sorted(s for s in _signal.valid_signals() if s not in kept)


_READ_CHUNK = 65536


class Outcome:
    """How a run ended, as the supervisor saw it."""

    __slots__ = (
        "exit_code",
        "signal",
        "timed_out",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "report",
        "report_truncated",
        "duration_ms",
        "python_finished",
        "stderr_capture",
        "hint_lines",
        "stopped",
    )

    def __init__(self) -> None:
        self.exit_code = 0
        self.signal: int | None = None  # the signal that killed the child
        self.timed_out = False
        self.stdout = b""
        self.stderr = b""
        self.stdout_truncated = False
        self.stderr_truncated = False
        self.report = b""  # the child's JSON error report, when it wrote one
        self.report_truncated = False  # longer than REPORT_LIMIT: never taken
        self.duration_ms = 0.0
        # Whether Python saw the program to its end, when that was watched (under a
        # memory limit): native code that gives up calls exit() behind Python's back.
        self.python_finished: bool | None = None
        # What stderr kept, before it was cut to the limit: its hint line can be rewritten
        # and the whole cut again (pynox.engine.result), never past the limit.
        self.stderr_capture: Capture | None = None
        # The hint line the program's process wrote and the one the result says instead,
        # when they differ (pynox.engine.result): a pool's streamed stderr rewrites it too.
        self.hint_lines: tuple[bytes, bytes] | None = None
        # Whether a stop signal had stopped the program when its time limit came.
        self.stopped = False

    def ended(self, status: int, timed_out: bool) -> None:
        """How the child ended, from its wait status; stopped at its time limit, with
        EXIT_TIMEOUT whatever killed it."""
        self.timed_out = timed_out
        if timed_out:
            self.signal, self.exit_code = None, EXIT_TIMEOUT
        elif os.WIFSIGNALED(status):
            self.signal = os.WTERMSIG(status)
            self.exit_code = 128 + self.signal
        else:
            self.exit_code = os.waitstatus_to_exitcode(status)

    def take_output(self, stdout: "Capture", stderr: "Capture") -> None:
        """The run's output; stderr's capture becomes the outcome's, never to be written
        to again (a session's next step gets new ones: Capture.emptied)."""
        self.stdout, self.stdout_truncated = stdout.kept(), stdout.truncated
        self.stderr, self.stderr_truncated = stderr.kept(), stderr.truncated
        self.stderr_capture = stderr


class Capture:
    """One output stream of a run: all of it up to its limit; past it, its head and its tail.

    What a longer stream keeps is its first bytes and its last, half of the limit each
    (less the line between them that says how much was left out), so the end of a long
    output (a traceback, the `pynox:` hint) always survives. While the program writes,
    the tail is a rolling window of at most twice its share (trimmed in amortized
    constant time per byte), whatever it writes: the stream is drained, never buffered.
    """

    __slots__ = ("data", "tail", "limit", "seen", "truncated", "open")

    def __init__(self, limit: int) -> None:
        self.data = bytearray()  # the head: the whole stream while it fits the limit
        self.tail = bytearray()  # past the limit: the latest bytes after the head
        self.limit = limit
        self.seen = 0  # bytes the stream carried
        self.truncated = False
        self.open = True

    def add(self, chunk: bytes) -> None:
        self.seen += len(chunk)
        if not self.truncated:
            room = self.limit - len(self.data)
            if len(chunk) <= room:
                self.data += chunk
                return
            self.truncated = True
            self.data += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        share = self._tail_share()
        if len(self.tail) > 2 * share:
            del self.tail[: len(self.tail) - share]

    def replace_line(self, old: bytes, new: bytes) -> bool:
        """Whether the stream held the line old (its last one, in what it keeps of its
        end), which new now replaces, what followed it kept: the stream cut as if the
        program had written new instead."""
        kept = self.tail if self.truncated else self.data
        at = kept.rfind(b"\n" + old) + 1
        if at == 0 and (self.truncated or not kept.startswith(old)):
            return False  # cut short, or never written
        following = bytes(kept[at + len(old) :])
        del kept[at:]
        self.seen -= len(old) + len(following)
        self.add(new + following)
        return True

    def emptied(self) -> "Capture":
        """A new capture of the same stream, empty, for the next step of a session."""
        empty = Capture(self.limit)
        empty.open = self.open
        return empty

    def _tail_share(self) -> int:
        return self.limit - self.limit // 2

    def kept(self) -> bytes:
        """What the result shows: the stream, or its head, the line saying how many bytes
        were left out, and its tail, within the limit."""
        if not self.truncated:
            return bytes(self.data)
        from pynox.left_out import left_out_line  # only for a cut stream: runs start faster

        # Room for the marker, sized for the largest count it can show, and the newline
        # that may end the head.
        budget = self.limit - len(left_out_line(self.seen)) - 1
        if budget < 0:  # too small for the line: the head alone, in whole characters
            head = bytes(self.data[: self.limit])
            return head[: _utf8_end(head)]
        # With room for the line, a budget of 0 or 1 keeps no head: the line, then the tail.
        head_size = budget // 2
        tail_size = budget - head_size
        if len(self.tail) >= tail_size:
            tail = bytes(self.tail[len(self.tail) - tail_size :])
        else:  # the tail was never trimmed: it follows the head directly
            tail = bytes((self.data + self.tail)[-tail_size:])
        head = _cut_head(bytes(self.data[:head_size]))
        tail = _cut_tail(tail)
        left_out = self.seen - len(head) - len(tail)
        if head and not head.endswith(b"\n"):  # no head: nothing to end, no line to add
            head += b"\n"
        return head + left_out_line(left_out) + tail


def _cut_head(head: bytes) -> bytes:
    """The head up to the end of a line, if that keeps three quarters of it; else up to the
    end of its last whole UTF-8 character."""
    newline = head.rfind(b"\n")
    if newline >= 0 and newline + 1 >= len(head) * 3 // 4:
        return head[: newline + 1]
    return head[: _utf8_end(head)]


def _cut_tail(tail: bytes) -> bytes:
    """The tail from the start of a line, if that keeps three quarters of it; else from the
    start of its first whole UTF-8 character."""
    newline = tail.find(b"\n")
    if newline >= 0 and newline + 1 <= len(tail) // 4:
        return tail[newline + 1 :]
    start = 0
    while start < min(3, len(tail)) and tail[start] & 0xC0 == 0x80:
        start += 1  # a continuation byte: the middle of a character
    return tail[start:]


def _utf8_end(data: bytes) -> int:
    """len(data), less a UTF-8 sequence cut short at its end."""
    size = len(data)
    for back in range(1, min(4, size) + 1):
        byte = data[size - back]
        if byte & 0xC0 != 0x80:  # the lead byte of the last sequence
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            if byte < 0x80 or byte >> 3 > 0b11110:
                need = 1  # ASCII, or not UTF-8 at all: nothing to complete
            return size if back >= need else size - back
    return size


class _Forwarder:
    """Passes the signals sent to this process on to the child, which has its own session."""

    def __init__(self) -> None:
        self.pid = 0
        self.pending: list[int] = []
        self.previous: dict[int, Any] = {}

    def __call__(self, signum: int, frame: object) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass
        else:
            self.pending.append(signum)

    def install(self) -> None:
        for signum in _forwarded_signals():
            previous = _signal.getsignal(signum)
            if previous is not None:
                self.previous[signum] = previous
                _signal.signal(signum, self)

    def uninstall(self) -> None:
        """In the child: each signal as the caller left it (pynox.engine.child then sets
        what python starts with for those python itself handles)."""
        for signum, handler in self.previous.items():
            _signal.signal(signum, handler)

    def attach(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            os.kill(pid, signum)


def wait_with_default_child_action() -> None:
    """Lets this process wait for its children although its caller started it with
    SIGCHLD ignored, which would have the kernel reap each child the moment it ended and
    lose how it ended. The program's process gets the caller's back (pynox.engine.child)."""
    if _signal.getsignal(_signal.SIGCHLD) == _signal.SIG_IGN:
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)


def supervise(
    program: "Program",
    policy: "Policy",
    setup: ChildSetup,
    capture: bool,
    run_child: "Callable[[Program, Policy, ChildSetup], NoReturn]",
) -> Outcome:
    """Runs the program in a sandboxed child of this process; returns how it ended.

    run_child(program, policy, setup) is what the child does: confine itself and run.
    """
    setup.parent_pid = os.getpid()
    pipes: dict[str, tuple[int, int]] = {}
    if capture:
        setup.stdin_null = True
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "report")}
        setup.stdout_fd = pipes["stdout"][1]
        setup.stderr_fd = pipes["stderr"][1]
        setup.report_fd = pipes["report"][1]
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    end_pipe = os.pipe() if policy.memory is not None else None
    if end_pipe is not None:
        setup.end_fd = end_pipe[1]
    forwarder = _Forwarder()
    forwarder.install()
    wait_with_default_child_action()
    # Everything alive now belongs to the supervisor: keep the child's garbage
    # collector off it, or every collection dirties (copies) those pages.
    import gc

    gc.freeze()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        forwarder.uninstall()
        for read_end, _ in pipes.values():
            os.close(read_end)
        run_child(program, policy, setup)
    forwarder.attach(pid)
    for _, write_end in pipes.values():
        os.close(write_end)
    if capture:
        # What the result is built with, loaded while the child starts (on another
        # core, where there is one) rather than after it ended.
        from pynox.engine import result  # noqa: F401
    if end_pipe is not None:
        os.close(end_pipe[1])
    outcome = Outcome()
    if capture:
        status = _collect(pid, pipes, policy, outcome)
    else:
        status = _wait(pid, policy.timeout, outcome)
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    outcome.ended(status, outcome.timed_out)
    if end_pipe is not None:
        # The child is gone, and with it the pipe's only write end: no wait here.
        outcome.python_finished = os.read(end_pipe[0], 1) == PYTHON_FINISHED
        os.close(end_pipe[0])
    return outcome


def _kill(pid: int, outcome: "Outcome") -> None:
    outcome.timed_out = True
    outcome.stopped = is_stopped(pid)
    try:
        os.kill(pid, _signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait(pid: int, timeout: float | None, outcome: "Outcome") -> int:
    if timeout is None:
        return os.waitpid(pid, 0)[1]
    import select

    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            if time.monotonic() >= deadline:
                _kill(pid, outcome)
                break
    finally:
        os.close(pidfd)
    return os.waitpid(pid, 0)[1]


def _collect(
    pid: int, pipes: dict[str, tuple[int, int]], policy: "Policy", outcome: "Outcome"
) -> int:
    """Reads stdout, stderr and the report up to their limits while waiting."""
    import select

    limits = {"stdout": policy.max_output, "stderr": policy.max_output, "report": REPORT_LIMIT}
    captures = {name: Capture(limits[name]) for name in pipes}
    names = {pipes[name][0]: name for name in pipes}
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in names:
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    deadline = None if policy.timeout is None else time.monotonic() + policy.timeout
    open_fds = set(names)
    exited = False
    while open_fds or not exited:
        wait_ms = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = poller.poll(wait_ms)
        if not events and deadline is not None and time.monotonic() >= deadline:
            _kill(pid, outcome)
            deadline = None
        for fd, _ in events:
            if fd == pidfd:
                exited = True
                poller.unregister(pidfd)
                continue
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                os.close(fd)
                continue
            captures[names[fd]].add(chunk)
    os.close(pidfd)
    outcome.take_output(captures["stdout"], captures["stderr"])
    outcome.report = bytes(captures["report"].data)
    outcome.report_truncated = captures["report"].truncated
    return os.waitpid(pid, 0)[1]
