"""The one engine: run a program sandboxed, in this process or in a child forked from it.

A run with no memory limit confines this very process and runs the program in it
when the launcher stayed behind as this process's parent to supervise it
(runtime/launcher_supervise.c): the launcher keeps the wall-clock limit, if any,
and for --json collects the output and writes the result, from what this process
tells it before the program starts (pynox.engine.launcher_link). Without the
launcher (python -m pynox), only a run with no limit, no output to collect and no
memory limit runs in this process. Everything else forks a sandboxed child from
this warm interpreter and supervises it (pynox.engine.supervisor, imported only
then, which keeps the plain run's start-up short).
"""

import posix
import sys

from pynox.engine import job_group, launcher_link, scratch
from pynox.engine.child_setup import ChildSetup

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from pynox.engine.program import Program
    from pynox.engine.supervisor import Outcome
    from pynox.policy.resolve import Policy


def run(
    program: "Program",
    policy: "Policy",
    capture: bool,
    unbuffered: bool,
    no_site: bool,
    config_package_dirs: "list[str] | None" = None,
    dont_write_bytecode: bool = False,
    config_path: "str | None" = None,
) -> "Outcome":
    setup = ChildSetup()
    setup.config_package_dirs = config_package_dirs or []
    setup.config_paths = [config_path] if config_path else []
    setup.unbuffered = unbuffered
    setup.no_site = no_site
    setup.dont_write_bytecode = dont_write_bytecode
    directory = scratch.attach(policy)
    launcher = launcher_supervisor()
    captured = launcher_capture()
    by_launcher = launcher is not None and (not capture or captured is not None)
    unsupervised = launcher is None and policy.timeout is None and not capture
    # Native code may end a program under a memory limit, and its supervisor then says
    # so: the launcher does, as pynox would; without the launcher, pynox supervises.
    if by_launcher or (unsupervised and policy.memory is None):
        # A clock, output and a memory limit's last word, if any, that the launcher
        # keeps. The program runs in this very process, the terminal's own foreground
        # job, which spares the fork and the copying of every page a child touches.
        if capture and captured is not None:
            setup.stdin_null = True
            setup.stdout_fd, setup.stderr_fd, setup.report_fd = captured
        else:
            _close(captured)
        if launcher is not None:
            control, end = launcher
            if capture:
                run_from_image("result")  # what the launcher writes the result with
            elif policy.timeout is not None:
                run_from_image("time_limit")  # a pynox.toml's limit: no flag ran "limit"
            if policy.memory is not None or (capture and policy.max_file_size is not None):
                # What it prints when native code ends the program, or the wording of the
                # limits a result's hints name (pynox.engine.result_frame).
                run_from_image("native_end")
            hints = image_value("unlimited_hint_texts") if capture else None
            message = launcher_link.supervisor_message(policy, capture, hints)  # type: ignore[arg-type]
            # Before the message: once the launcher reads it, the program is where the
            # launcher's passing on of signals expects it.
            setup.own_group = job_group.leave_launcher_group(
                capture, policy.allow_read + policy.allow_write
            )
            launcher_link.write_message(control, message)
            if policy.memory is not None:
                setup.end_fd = end  # where Python says it saw the program to its end
            else:
                posix.close(end)
            setup.parent_pid, setup.new_session = posix.getppid(), False
        setup.scratch_fd = scratch.remove_when_gone(directory)
        run_in_this_process(program, policy, setup)
    _close(captured)
    # Only the supervisor's own half: the child imports the rest itself
    # (run_in_this_process), so that the process it is forked from stays small.
    # Both come from the start-up image (pynox._boot.SUPERVISED_MODULES); the
    # supervisor runs no program, so its start-up never has to end.
    from pynox.engine import scratch_removal, supervisor

    _close(launcher)  # it only waits: this process supervises the run itself
    # Removed by the supervisor after the child, and by the launcher's helper, if any,
    # should the supervisor itself be killed (its pipe stays open until this process
    # ends; the child's copy closes as it is confined).
    scratch.hand_to_launcher_helper(directory)
    try:
        return supervisor.supervise(program, policy, setup, capture, run_in_this_process)
    finally:
        # The child's own end (SystemExit) comes through here too: only the supervisor,
        # once the child is gone, removes the directory.
        if posix.getpid() == setup.parent_pid:
            scratch_removal.remove(directory)


def run_in_this_process(program: "Program", policy: "Policy", setup: ChildSetup) -> "NoReturn":
    """Confines this process and runs the program in it: the command's own process, or
    the child its supervisor forked."""
    run_from_image("child")
    from pynox.engine.child import run_child
    from pynox.policy import system_paths

    setup.system_reads = system_paths.interpreter_reads()
    end_start_up()
    run_child(program, policy, setup)


# Set by the launcher when it stays behind as the run's supervisor: "CONTROL,END:PID".
LAUNCHER_SUPERVISOR_VARIABLE = "PYNOX_SUPERVISOR"


def launcher_supervisor() -> "list[int] | None":
    """The pipes to the launcher that supervises this process (its parent), if it does:
    the one pynox tells it about the run on, and the one the program's process says on
    that Python saw the program to its end (pynox.engine.launcher_link)."""
    return launcher_link.launcher_pipes(LAUNCHER_SUPERVISOR_VARIABLE, posix.getppid(), 2)


# Set by the launcher when the command line has --json: "OUT,ERR,REPORT:PID", the
# write ends of the pipes it collects the run's output and error report from.
LAUNCHER_CAPTURE_VARIABLE = "PYNOX_CAPTURE"


def launcher_capture() -> "list[int] | None":
    """The pipes the launcher that supervises this process captures the run from."""
    return launcher_link.launcher_pipes(LAUNCHER_CAPTURE_VARIABLE, posix.getppid(), 3)


def _close(fds: "list[int] | None") -> None:
    for fd in fds or ():
        posix.close(fd)


def run_from_image(group: str) -> None:
    """Runs a group of pynox's modules from the start-up image at once, while pynox
    starts up from it: "child", what confining itself takes, "result", what tells the
    launcher how to write a --json result, "time_limit", how it words a time limit,
    "limit", what reads a limit given on the command line, "config", a pynox.toml's
    cached configuration, or "native_end", what it tells the launcher to print when native
    code ends the program (pynox._boot.GROUPS)."""
    finder = _start_up_finder()
    if finder is not None:
        finder.run_group(group)


def image_value(name: str) -> object:
    """A value the start-up image was built with (pynox._boot.BAKED), while pynox starts up
    from it; None without one."""
    finder = _start_up_finder()
    return finder.baked(name) if finder is not None else None


def _start_up_finder() -> "Any":
    """The start-up image's finder (pynox._boot._ImageFinder) on sys.meta_path, if any."""
    for finder in sys.meta_path:
        if getattr(finder, "pynox_start_up", False):
            return finder
    return None


def end_start_up() -> None:
    """Ends pynox's start-up: the program, or a pool's requests, get a plain interpreter.

    Called once pynox has imported what it runs with, before any program runs. The
    launcher starts pynox with the garbage collector off (its imports make no cycles)
    and the start-up image's finder on sys.meta_path (pynox._boot); both go back to
    what python starts with.
    """
    import gc

    gc.freeze()  # pynox's objects stay alive: keep collections off them
    gc.enable()
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "pynox_start_up", False)]
