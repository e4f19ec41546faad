"""A session: one sandboxed process that keeps its globals between steps.

The pool server sends a `run` frame per step, with the step's number; the session
runs the code in the same __main__ and answers with a `done` frame once the step's
output is flushed, so the pool server knows everything before it belongs to this
step. Every frame of a step carries its number: the server takes none from a step
that is over, so a done frame the program forges ends its own step only. A Python
error leaves the session alive; SystemExit ends it as it would end `python`.
"""

import _signal
import os
import sys

from pynox.engine import shutdown
from pynox.engine.child import fd_identity, report_exception
from pynox.engine.child_setup import ChildSetup
from pynox.errors import EXIT_FLUSH_FAILED
from pynox.pool import channel, display, step_lines
from pynox.pool.request_child import FutureFeatures, run_code
from pynox.step_names import step_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy
    from pynox.pool.child_link import ChildLink


def _flush_step() -> bool:
    """Flushes what the step printed, as python flushes at its exit (a failure shown as it
    shows it), then what streams the program replaced still hold; False when it failed."""
    flushed = shutdown.flush_stdio()
    shutdown.flush_quietly()
    return flushed


# A session keeps its descriptors as its steps leave them, as python keeps a process's:
# once a step closed descriptor 1, every step's output is lost, which this says.
_STDOUT_CLOSED = (
    "pynox: a step closed this session's standard output (descriptor 1), so what its "
    "steps print is lost; end the session (sys.exit() in a step, or close it) and the "
    "next step starts a new one\n"
)


def _say_if_stdout_closed() -> None:
    try:
        os.fstat(1)
    except OSError:
        try:
            os.write(2, _STDOUT_CLOSED.encode())
        except OSError:
            pass


def _warn_afresh() -> None:
    """Lets a step show the warnings an earlier step showed from the same lines, as
    python's REPL does: it compiles each input under catch_warnings (codeop), which
    makes every module forget where it warned (__warningregistry__). Without it a step
    run again would show none of its warnings."""
    warnings = sys.modules.get("warnings")
    if warnings is None:
        return  # nothing has warned from python code yet
    try:
        with warnings.catch_warnings():
            pass
    except Exception:  # noqa: BLE001, S110 - the program's warnings module, however it left it
        pass


def _tell(fd: int, identity: tuple[int, int], message: dict[str, object]) -> bool:
    """Sends a frame to the pool server; False when it no longer listens, or when the
    program closed the channel (a file it opened since may have taken its number)."""
    try:
        if fd_identity(fd) != identity:
            return False
        channel.send(fd, message)
    except (OSError, channel.ChannelError):
        return False
    return True


def serve(
    program: "Program",
    policy: "Policy",
    setup: ChildSetup,
    link: "ChildLink",
    modules_before: "set[str]",
) -> "NoReturn":
    main = sys.modules["__main__"]  # held by this frame alone, and let go of at the end
    fd = setup.channel_fd
    assert fd is not None
    identity = fd_identity(fd)  # before any step of the program runs
    if setup.report_fd is not None:
        os.close(setup.report_fd)  # a session reports each step's error in its done frame
        setup.report_fd = None
    future = FutureFeatures()
    while True:
        # A thread the program left running may call the host between steps: it reads its
        # answer from this channel too, so only one of them reads at a time. Its call then
        # goes out once the next step has started.
        if link.host_calls is not None:
            link.host_calls.acquire()
        try:
            message = channel.receive(fd)
            step = None if message is None else message.get("step")
            if type(step) is int:
                link.step = step  # before a waiting thread's host call goes out: it is this step's
        except (OSError, channel.ChannelError):
            message = None
        finally:
            if link.host_calls is not None:
                link.host_calls.release()
        if message is None:
            del main
            shutdown.finish(0, False, modules_before)  # the pool server closed the session
        code, name = message.get("code"), message.get("name")
        if message.get("type") != "run" or not isinstance(code, str):
            continue
        if not isinstance(name, str):
            name = step_name(link.step)  # each its own, as the REPL's inputs
        program.filename = name
        program.earlier_files = step_lines.kept
        error = None
        status = 0
        try:
            try:
                display.start_step()
                _warn_afresh()
                # In this try, as the program may break linecache; by the code's size in
                # memory, as it is kept there (a character may take up to 4 bytes).
                step_lines.keep(name, sys.getsizeof(code))
                value = run_code(code, name, main, future)
                link.finish_code(value)  # its value and figures, before done
                del value
            except SystemExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - the session outlives the step's error
                # A SystemExit from the program's sys.excepthook ends it, as under python.
                error = report_exception(exc, program, policy, setup)
                interrupted = isinstance(exc, KeyboardInterrupt)
                # python's status: it dies by SIGINT after a KeyboardInterrupt (the session,
                # like a notebook's kernel, goes on).
                status = 128 + _signal.SIGINT if interrupted else 1
                if not interrupted:  # cancelled: no time to draw
                    link.send_open_figures()
        except SystemExit as exc:
            status = shutdown.system_exit_status(exc)
            link.send_open_figures()
            flushed = _flush_step()
            if not flushed:
                status = EXIT_FLUSH_FAILED
            done = {"type": "done", "exit": status, "error": None, "ended": True}
            _tell(fd, identity, link.stamped(done))
            del main
            shutdown.finish(status, False, modules_before, reported=not flushed)
        if not _flush_step():
            status = EXIT_FLUSH_FAILED  # as python's exit status when its flush fails
            _say_if_stdout_closed()
        if not _tell(fd, identity, link.stamped({"type": "done", "exit": status, "error": error})):
            del main
            shutdown.finish(status, False, modules_before)  # nobody waits for this session
