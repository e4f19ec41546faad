"""A pool spare's confinement in two halves: what no request changes while it waits,
then the request's own policy (runtime/sandbox.c: pynox_sandbox_prepare and _finish).

Apart from pynox.engine.sandbox because only a pool's children confine themselves so;
every command-line run unpacks that module and never runs this.
"""

import pynox._native as _native
from pynox.engine.sandbox import CPolicy, check, own_policy
from pynox.errors import SandboxError
from pynox.policy import system_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.engine.child_setup import ChildSetup
    from pynox.policy.resolve import Policy


class Prepared:
    """The first half of a confinement, done while a pool's spare waits (see prepare)."""

    def __init__(self, base: CPolicy) -> None:
        self.base = base  # built ahead too: the request pays only for its own paths
        self.state = bytearray(_native.PREPARED_SIZE)  # a struct pynox_prepared

    def finish(self, policy: "Policy") -> None:
        """Confines the prepared process to the run's policy, for good."""
        check(_native.finish(self.state, self.base.fields, own_policy(policy).fields))


def base_policy(system_reads: list[str], parent_pid: int) -> CPolicy:
    """What every program of a pool may use (the interpreter's files, the devices).

    A pool's zygote builds it once; every spare it forks shares that copy (see
    prepare) instead of building the same structure again for each request.
    """
    devices = list(system_paths.DEVICES_READ_WRITE)
    return CPolicy(system_reads + devices, devices, [], True, None, None, parent_pid)


def share_filter() -> None:
    """For a pool's zygote, just before it forks spares: the part of the seccomp filter
    that names no process, installed once (runtime/sandbox.h, pynox_sandbox_share_filter).

    Every spare inherits it as the kernel compiled it, and compiles only its own few
    rules when it prepares. Should the kernel refuse it, nothing is lost but that time:
    each spare then installs the whole filter itself, and fails with the reason if it
    cannot either.
    """
    _native.share_filter()


def prepare(base: CPolicy, keep_fds: list[int]) -> Prepared:
    """Everything of confine_policy() that no program's policy changes, ahead of the program.

    The process is then bound to its parent, in its own session, without its other
    descriptors (all but keep_fds), privileges or capabilities, and under a seccomp
    filter that still allows IPv4 and IPv6 sockets; Prepared.finish adds the program's
    own policy.
    """
    base.keep(keep_fds)
    prepared = Prepared(base)
    check(_native.prepare(base.fields, prepared.state))
    return prepared


def prepare_child(setup: "ChildSetup", base: CPolicy) -> None:
    """For a pool's spare: the half of its confinement no request's policy changes.

    Done while the spare waits, so a request pays only for its own policy. A
    failure is kept and raised by pynox.engine.child.start, which then refuses to
    run the program. base: base_policy() of setup's system reads and parent.
    """
    try:
        setup.prepared = prepare(base, setup.kept_fds())
    except SandboxError as exc:
        setup.prepared = exc
