"""The Python face of the C sandbox core, through pynox._native (runtime/binding.c)."""

import posix

import pynox._native as _native
from pynox import lean_os
from pynox.errors import SandboxError
from pynox.policy import system_paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy


class CPolicy:
    """A struct pynox_policy, as the binding takes it (runtime/binding.c): a tuple of
    its fields, the paths encoded."""

    __slots__ = ("fields",)

    def __init__(
        self,
        reads: list[str],
        writes: list[str],
        keep_fds: list[int],
        network: bool,
        memory: int | None,
        max_file_size: int | None,
        parent_pid: int,
        resolved: bool = False,
        new_session: bool = True,
        scratch: str | None = None,
        own_group: bool = False,
    ) -> None:
        self.fields = (
            [lean_os.fsencode(path) for path in reads],
            [lean_os.fsencode(path) for path in writes],
            list(keep_fds),
            int(network),
            memory or 0,
            max_file_size or 0,
            # A supervised child leaves the terminal's session; a program run in
            # the pynox process itself is the terminal's foreground job and stays,
            # bound to the launcher that supervises it, if any.
            int(parent_pid != 0 and new_session),
            int(own_group),  # a group of its own the launcher's run made (job_group)
            parent_pid,
            int(resolved),
            None if scratch is None else lean_os.fsencode(scratch),
        )

    def keep(self, keep_fds: list[int]) -> None:
        """The descriptors the process keeps open: this process's own, in a shared base."""
        self.fields = (*self.fields[:2], list(keep_fds), *self.fields[3:])


def check(reason: str | None) -> None:
    """Raises SandboxError with the sandbox core's reason, if it gave one."""
    if reason is not None:
        raise SandboxError("cannot apply the sandbox: " + reason)


def confine_policy(
    policy: "Policy",
    system_reads: list[str],
    keep_fds: list[int],
    parent_pid: int,
    new_session: bool = True,
    own_group: bool = False,
) -> None:
    """Confines this process for good to a run's policy plus what the interpreter needs.

    Raises SandboxError with the reason when the kernel cannot.
    """
    devices = list(system_paths.DEVICES_READ_WRITE)
    base = CPolicy(
        system_reads + devices, devices, keep_fds, False, None, None, parent_pid,
        new_session=new_session, own_group=own_group,
    )  # fmt: skip
    check(_native.apply(base.fields, own_policy(policy).fields))


def own_policy(policy: "Policy") -> CPolicy:
    """What the run itself may read and write, its network and limits.

    Its paths are resolved (the policy's grants, the resolver's files with the
    network, the process's own facts), so the sandbox core refuses one that a
    symbolic link swapped in since would redirect. /proc/self and /proc/thread-self
    become this process's own entries.
    """
    resolver = system_paths.network_reads() if policy.allow_network else []
    own_facts = system_paths.existing(system_paths.OWN_PROCESS_FACTS)
    reads = [_own_process(path) for path in resolver + own_facts + policy.reads()]
    writes = [_own_process(path) for path in policy.writes()]
    return CPolicy(
        reads,
        writes,
        [],
        policy.allow_network,
        policy.memory,
        policy.max_file_size,
        0,
        resolved=True,
        scratch=policy.scratch,
    )


def _own_process(path: str) -> str:
    pid = posix.getpid()
    # Single-threaded here: the process's one thread has the process's id.
    own = {"/proc/self": f"/proc/{pid}", "/proc/thread-self": f"/proc/{pid}/task/{pid}"}
    for link in system_paths.OWN_PROCESS_LINKS:
        if path == link or path.startswith(link + "/"):
            return own[link] + path[len(link) :]
    return path


def scrub_environment() -> None:
    """Empties the environment and overwrites what it held in this process's memory.

    The environment is cleared in libc and in posix.environ, where os.environ keeps
    its entries (pynox.lean_os); then the names and values it held and the block the
    kernel placed on the stack are overwritten, so that a program reading its own memory
    finds no secret of the user's environment. Locale and granted variables are set
    again after.
    """
    # Names too: a pool server's objects are immortal (runtime/immortal.c), so the names
    # it dropped would stay in every child's memory, telling which secrets the host holds.
    held = [*posix.environ, *posix.environ.values()]
    for key in list(posix.environ):
        posix.unsetenv(key)
    posix.environ.clear()
    for text in held:
        # Single bytes and the empty string are shared singletons: never touch them.
        if len(text) > 1:
            _native.wipe(text)
    del held
    reason = _native.scrub_environment_block()
    if reason is not None:
        if not posix.access("/proc/self", posix.F_OK):  # a chroot, a bare mount namespace
            reason += "; mount proc at /proc, which pynox needs"
        raise SandboxError("cannot clear the environment: " + reason)


def probe() -> dict[str, int]:
    """What the kernel offers, without changing this process (for `pynox doctor`, through
    the complete binding: no run needs it)."""
    from pynox._core import ffi, lib

    out = ffi.new("struct pynox_probe *")
    lib.pynox_probe_kernel(out)
    return {
        "landlock_abi": out.landlock_abi,
        "seccomp_filter": out.seccomp_filter,
        "no_new_privs": out.no_new_privs,
        "pidfd": out.pidfd,
        "capabilities": out.capabilities,
    }
