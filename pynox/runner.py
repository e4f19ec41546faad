"""The one engine: run a program sandboxed, in this process or in a child forked from it.

A plain run (nothing to collect, no clock to enforce) confines this very
process and runs the program in it. Everything else forks a sandboxed child
from this warm interpreter and supervises it (pynox.supervisor, imported only
then, which keeps the plain run's start-up short).
"""

from pynox import system_paths
from pynox.child import ChildSetup, run_child

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy import Policy
    from pynox.program import Program
    from pynox.supervisor import Outcome


def run(
    program: "Program",
    policy: "Policy",
    capture: bool,
    unbuffered: bool,
    no_site: bool,
) -> "Outcome":
    setup = ChildSetup()
    setup.unbuffered = unbuffered
    setup.no_site = no_site
    setup.system_reads = system_paths.interpreter_reads()
    from pynox import _boot

    _boot.started()
    if not capture and policy.timeout is None:
        # Nothing to supervise: no output to collect, no clock to enforce. The
        # program runs in this very process, the terminal's own foreground job,
        # which spares the fork and the copying of every page a child touches.
        run_child(program, policy, setup)
    from pynox import supervisor

    return supervisor.supervise(program, policy, setup, capture)
