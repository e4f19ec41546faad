"""The one engine: run a program sandboxed, in this process or in a child forked from it.

A plain run (nothing to collect, no clock to enforce) confines this very
process and runs the program in it. Everything else forks a sandboxed child
from this warm interpreter and supervises it (pynox.engine.supervisor, imported only
then, which keeps the plain run's start-up short).
"""

import os
import sys

from pynox.engine import scratch
from pynox.engine.child import ChildSetup, run_child
from pynox.policy import system_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
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
    setup.system_reads = system_paths.interpreter_reads()
    directory = scratch.attach(policy)
    end_start_up()
    if not capture and policy.timeout is None and policy.memory is None:
        # Nothing to supervise: no output to collect, no clock to enforce, no
        # memory limit that native code may die of (the supervisor then says
        # so). The program runs in this very process, the terminal's own
        # foreground job, which spares the fork and the copying of every page a
        # child touches.
        setup.scratch_fd = scratch.remove_when_gone(directory)
        run_child(program, policy, setup)
    from pynox.engine import supervisor

    # Removed by the supervisor after the child, and by the launcher's helper, if any,
    # should the supervisor itself be killed (its pipe stays open until this process
    # ends; the child's copy closes as it is confined).
    scratch.hand_to_launcher_helper(directory)
    try:
        return supervisor.supervise(program, policy, setup, capture)
    finally:
        # The child's own end (SystemExit) comes through here too: only the supervisor,
        # once the child is gone, removes the directory.
        if os.getpid() == setup.parent_pid:
            scratch.remove(directory)


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
