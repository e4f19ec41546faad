"""A pool child's side of its channel to the server, as the engine's child sees it.

The engine runs every child the same way; what only a pool child does (make host
functions importable, serve a session's steps, say why its script could not be read,
announce how it ended) goes through this object, so the engine never imports the pool.
"""

import _signal
import os
import sys

from pynox.engine.child import fd_identity

# session_child too: imported before any request, it is pynox's, not one of the program's
# modules that its end drops (pynox.engine.shutdown).
from pynox.pool import channel, request_child, session_child

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import NoReturn

    from pynox.engine.child_setup import ChildSetup
    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy

# The frame a child sends when it cannot read its script: the server words the result
# (python's "can't open file") from the errno alone; 0 means not a regular file.
SCRIPT_UNREADABLE = "script_unreadable"


class ChildLink:
    __slots__ = (
        "fd",
        "functions",
        "session",
        "step",
        "identity",
        "echo",
        "host_calls",
        "announced",
    )

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.functions: list[dict[str, str]] = []  # host functions the request declared
        self.session = False
        # In a session, the number of the step it runs, which the server gave: every frame
        # of the step carries it, and the server takes a frame only from the step it names.
        self.step: int | None = None
        # Whether the run's last expression comes back as its value: for code, not scripts.
        self.echo = False
        # The channel's socket, before the program runs: a program may close the
        # channel and open a file of its own under its number, which pynox never writes.
        self.identity = fd_identity(fd)
        # Held while a host call waits for its answer, the channel's only other reader.
        self.host_calls: threading.Lock | None = None
        self.announced = False  # the server takes one exit frame (os._exit announces too)

    def intact(self) -> bool:
        """Whether self.fd is still the channel to the server."""
        try:
            return fd_identity(self.fd) == self.identity
        except OSError:
            return False

    def stamped(self, message: dict[str, object]) -> dict[str, object]:
        """message, with the number of the session step it belongs to."""
        return message if self.step is None else {**message, "step": self.step}

    def send(self, message: dict[str, object]) -> bool:
        """Sends a frame of the run (or step) to the pool server; False when the channel is
        gone or not ours."""
        if not self.intact():
            return False
        try:
            channel.send(self.fd, self.stamped(message))
        except (OSError, channel.ChannelError):
            return False
        return True

    def before_confinement(self) -> None:
        """Makes `pynox_host` importable and figures returnable, while the process may
        still set them up."""
        if self.functions:
            from pynox.pool import host_module

            self.host_calls = host_module.install(self.fd, self.functions, self.stamped)
        self._show_figures()

    def _show_figures(self) -> None:
        """Figures the program draws come back as images: matplotlib gets pynox's backend,
        unless the run's environment names one of its own."""
        from pynox.pool import display

        display.sender = self.send
        # A matplotlib the pool preloaded has its backend already (display.prepare_preloaded).
        os.environ.setdefault("MPLBACKEND", display.BACKEND)

    def finish_code(self, value: object) -> None:
        """The code ended: its value (for code) and its open figures go to the server."""
        from pynox.pool import display

        display.finish_code(value, self.echo)

    def send_open_figures(self) -> None:
        """The code failed or exited: its open figures still go to the server, after its
        traceback, as a notebook shows a failed cell's figures."""
        from pynox.pool import display

        display.send_open_figures()

    def run(self, program: "Program", policy: "Policy", setup: "ChildSetup") -> "NoReturn":
        """Runs the request in __main__ once the engine has confined this child; never
        returns."""
        if program.kind == "script":
            # Read only now, so that the request's grants decide whether it may.
            program.source = request_child.read_script(program.filename, self)
        modules_before = set(sys.modules)
        from pynox.pool import display

        display.limit_value(policy.max_output)
        if self.session:
            display.serve_session()
            session_child.serve(program, policy, setup, self, modules_before)
        request_child.run_then_finish(program, policy, setup, self, modules_before)

    def script_unreadable(self, error: int) -> None:
        if not self.intact():
            return
        try:
            channel.send(self.fd, {"type": SCRIPT_UNREADABLE, "errno": error})
        except (OSError, channel.ChannelError):
            pass

    def announce_exit(self, status: int, interrupted: bool) -> None:
        """Closes the program's output, then tells the server how the program ended: the
        server finds the output complete when the frame wakes it, and the result goes out
        while the kernel still tears the process down."""
        if self.announced or not self.intact():
            return
        self.announced = True
        for stream_fd in (1, 2):
            try:
                os.close(stream_fd)
            except OSError:
                pass  # the program closed it already
        try:
            channel.send(
                self.fd,
                {
                    "type": "exit",
                    "status": status,
                    "signal": int(_signal.SIGINT) if interrupted else None,
                },
            )
        except (OSError, channel.ChannelError):
            pass
