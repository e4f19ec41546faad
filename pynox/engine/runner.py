"""The one engine: run a program sandboxed, in this process or in a child forked from it.

A run with no output to collect and no memory limit confines this very process
and runs the program in it. Its wall-clock limit, if any, is kept by the launcher,
which stayed behind as this process's parent (runtime/launcher_supervise.c);
without the launcher (python -m pynox), a run with a limit is supervised as the
others are. Everything else forks a sandboxed child from this warm interpreter and
supervises it (pynox.engine.supervisor, imported only then, which keeps the plain
run's start-up short).
"""

import os
import sys

from pynox.engine import scratch
from pynox.engine.child_setup import ChildSetup
from pynox.engine.launcher_link import launcher_pipe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

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
) -> "Outcome":
    setup = ChildSetup()
    setup.config_package_dirs = config_package_dirs or []
    setup.unbuffered = unbuffered
    setup.no_site = no_site
    directory = scratch.attach(policy)
    launcher = launcher_supervisor()
    in_process = not capture and policy.memory is None
    if in_process and (launcher is not None or policy.timeout is None):
        # No output to collect, no memory limit that native code may die of (the
        # supervisor then says so), and a clock, if any, that the launcher keeps.
        # The program runs in this very process, the terminal's own foreground job,
        # which spares the fork and the copying of every page a child touches.
        if launcher is not None:
            _hand_over_the_clock(launcher, policy)
            setup.parent_pid, setup.new_session = os.getppid(), False
        setup.scratch_fd = scratch.remove_when_gone(directory)
        run_in_this_process(program, policy, setup)
    # Only the supervisor's own half: the child imports the rest itself
    # (run_in_this_process), so that the process it is forked from stays small.
    # Both come from the start-up image (pynox._boot.SUPERVISED_MODULES); the
    # supervisor runs no program, so its start-up never has to end.
    from pynox.engine import supervisor

    if launcher is not None:
        os.close(launcher)  # it only waits: this process supervises the run itself
    # Removed by the supervisor after the child, and by the launcher's helper, if any,
    # should the supervisor itself be killed (its pipe stays open until this process
    # ends; the child's copy closes as it is confined).
    scratch.hand_to_launcher_helper(directory)
    try:
        return supervisor.supervise(program, policy, setup, capture, run_in_this_process)
    finally:
        # The child's own end (SystemExit) comes through here too: only the supervisor,
        # once the child is gone, removes the directory.
        if os.getpid() == setup.parent_pid:
            scratch.remove(directory)


def run_in_this_process(program: "Program", policy: "Policy", setup: ChildSetup) -> "NoReturn":
    """Confines this process and runs the program in it: the command's own process, or
    the child its supervisor forked."""
    from pynox.engine.child import run_child
    from pynox.policy import system_paths

    setup.system_reads = system_paths.interpreter_reads()
    end_start_up()
    run_child(program, policy, setup)


# Set by the launcher when it stays behind as the run's supervisor: "FD:PID".
LAUNCHER_SUPERVISOR_VARIABLE = "PYNOX_SUPERVISOR"


def launcher_supervisor() -> "int | None":
    """The pipe to the launcher that supervises this process (its parent), if it does."""
    return launcher_pipe(LAUNCHER_SUPERVISOR_VARIABLE, os.getppid())


def _hand_over_the_clock(fd: int, policy: "Policy") -> None:
    """Tells the launcher the wall-clock limit and the line to print when it is hit."""
    message = "0\n"
    if policy.timeout is not None:
        from pynox.engine.time_limit import timeout_line

        milliseconds = max(1, round(policy.timeout * 1000))
        message = f"{milliseconds}\n{timeout_line(policy)}\n"
    try:
        os.write(fd, message.encode())
    finally:
        os.close(fd)


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
