"""The pipes of the pool's children (pynox.pool.server): opened as a child is ordered,
read into its captures, streamed to the client of a streaming run (held in the pipe
while the client's backlog is long), left unread for a one-shot run's first moments,
and closed.

ChildOutput is a mixin of PoolServer, as SessionSteps is (see pynox.pool.session_steps
for why): the server state and methods it uses are declared below for the type
checker, which checks them against PoolServer's own.
"""

import os
import select
import socket
import time

from pynox.engine.supervisor import Outcome
from pynox.limits import STREAM_BACKLOG
from pynox.pool import descriptors
from pynox.pool.records import Child, Run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# How much the pool server reads of a descriptor at once.
READ_CHUNK = 65536
# A one-shot run's output pipes and report go unread for its first moments (_quiet): a small
# program has written and closed them by the time it says it ended, and the pool server
# then wakes once to read it all, instead of once per write and once per close.
# Meanwhile its output pipes hold up to _QUIET_PIPE bytes (the most an unprivileged
# process may ask for), not 64 KiB: a program that writes more that soon waits at most
# _QUIET for the reader. They shrink back after, as the kernel counts their size against
# the user's pipes (past its soft limit, every new pipe of the user gets 8 KiB).
_QUIET = 0.003
_QUIET_ROLES = ("stdout", "stderr", "report")
_GROWN_ROLES = ("stdout", "stderr")  # the report is small unless a program abuses it
_QUIET_PIPE = 1 << 20
_PIPE = 1 << 16  # Linux's default


class ChildOutput:
    """The child-output part of PoolServer."""

    # What it uses of the server's state and methods (pynox.pool.server.PoolServer),
    # declared for the type checker only.
    poller: "select.poll"
    handlers: dict[int, tuple[Child, str]]
    child_runs: dict[int, Run]
    out: bytearray
    held: set[int]
    quiet: dict[int, Child]

    if TYPE_CHECKING:

        def emit(self, message: "dict[str, Any]") -> None: ...
        def _maybe_finish(self, child: Child) -> None: ...

    def _open_pipes(self, child: Child) -> None:
        """The child's pipes and channel: the server's ends in child.fds, read from now on
        (but while its run is quiet, _quiet), and the ends its order passes to the zygote
        in child.passed. Made as the order is sent, not while it waits: a pool whose
        orders wait (for a stopped zygote) would hold twice the descriptors per child."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rep_r, rep_w = descriptors.report_socket()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child.passed = [out_w, err_w, rep_w, theirs.detach()]
        child.fds = {"stdout": out_r, "stderr": err_r, "report": rep_r, "channel": ours.detach()}
        for role, fd in child.fds.items():
            os.set_blocking(fd, False)
            self.handlers[fd] = (child, role)
            if child.quiet_until and role in _QUIET_ROLES:
                if role in _GROWN_ROLES:
                    descriptors.resize_pipe(fd, _QUIET_PIPE)
            else:
                self.poller.register(fd, select.POLLIN)

    def _read_output(self, child: Child, role: str) -> None:
        fd = child.fds[role]
        capture = {"stdout": child.stdout, "stderr": child.stderr, "report": child.report}[role]
        run = self.child_runs.get(child.token)
        if len(self.out) > STREAM_BACKLOG and run is not None and role in run.decoders:
            # Back-pressure: the program blocks on its full pipe until the client reads.
            self.poller.unregister(fd)
            self.held.add(fd)
            return
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        if data:
            capture.add(data)
            self._stream_output(run, role, data)
            return
        capture.open = False
        self._close_fd(child, role)
        self._maybe_finish(child)

    def _stream_output(self, run: Run | None, role: str, data: bytes, final: bool = False) -> None:
        """An output event for a streaming run: the text its program wrote, decoded."""
        decoder = run.decoders.get(role) if run is not None else None
        if decoder is None or run is None:
            return
        if role == "stderr" and not final:
            data = run.hint_hold.feed(data)
        text = decoder.decode(data, final)
        if text:
            self.emit({"id": run.id, "event": "output", "stream": role, "data": text})

    def _stream_held_output(self, run: Run, child: Child) -> None:
        """The first output events of a streaming step: what a thread of an earlier step
        wrote since that step ended, read with no step to stream it to. It is this step's
        output (its result holds it), so its events begin with it."""
        for role, capture in (("stdout", child.stdout), ("stderr", child.stderr)):
            kept = capture.kept() if run.decoders else b""
            for at in range(0, len(kept), READ_CHUNK):
                self._stream_output(run, role, kept[at : at + READ_CHUNK])

    def _end_stream(self, run: Run, outcome: Outcome) -> None:
        """Before a streaming run's result: what stderr held back, its hint line as the
        result says it (outcome.hint_lines), and the end of a character cut short, if any."""
        decoder = run.decoders.get("stderr")
        if decoder is not None:
            text = decoder.decode(run.hint_hold.release(*(outcome.hint_lines or ())))
            if text:
                self.emit({"id": run.id, "event": "output", "stream": "stderr", "data": text})
        for role in list(run.decoders):
            self._stream_output(run, role, b"", final=True)
        run.decoders.clear()

    def _drain(self, child: Child, roles: "tuple[str, ...]" = ("stdout", "stderr")) -> None:
        captures = {"stdout": child.stdout, "stderr": child.stderr, "report": child.report}
        run = self.child_runs.get(child.token)
        for role in roles:
            capture = captures[role]
            fd = child.fds.get(role)
            while fd is not None:
                try:
                    data = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    break
                if not data:
                    capture.open = False
                    self._close_fd(child, role)
                    break
                capture.add(data)
                self._stream_output(run, role, data)

    def _close_fd(self, child: Child, role: str) -> None:
        fd = child.fds.pop(role, None)
        if fd is not None:
            if fd in self.held:
                self.held.discard(fd)
            elif child.quiet_until == 0.0 or role not in _QUIET_ROLES:
                self.poller.unregister(fd)
            self.handlers.pop(fd, None)
            os.close(fd)

    def _quiet(self, run: Run) -> None:
        """Leaves the pipes of a run that just started unread for _QUIET, or until it ends.

        Not for a streaming run: its client reads the output as it comes.
        """
        child = run.child
        if child is None or run.decoders or child.quiet_until:
            return
        for role in _QUIET_ROLES:
            fd = child.fds.get(role)
            if fd is not None and fd not in self.held:
                self.poller.unregister(fd)
                if role in _GROWN_ROLES:
                    descriptors.resize_pipe(fd, _QUIET_PIPE)
        child.quiet_until = time.monotonic() + _QUIET
        self.quiet[child.token] = child

    def _unquiet(self, child: Child) -> None:
        """Reads a quiet child's pipes again: its run is no longer new, or it ended."""
        if not child.quiet_until:
            return
        child.quiet_until = 0.0
        self.quiet.pop(child.token, None)
        for role in _QUIET_ROLES:
            fd = child.fds.get(role)
            if fd is not None and fd not in self.held:
                self.poller.register(fd, select.POLLIN)
                if role in _GROWN_ROLES:
                    descriptors.resize_pipe(fd, _PIPE)  # fails while it holds more: then it stays

    def _release(self, child: Child) -> None:
        """Reads a child's held output again, whatever the client's backlog."""
        for role in ("stdout", "stderr"):
            fd = child.fds.get(role)
            if fd is not None and fd in self.held:
                self.held.discard(fd)
                self.poller.register(fd, select.POLLIN)
