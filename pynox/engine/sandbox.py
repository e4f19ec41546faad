"""The Python face of the C sandbox core (pynox._core, a cffi extension)."""

import os

from pynox._core import ffi, lib
from pynox.errors import SandboxError
from pynox.policy import system_paths
from pynox.policy.resolve import OWN_PROCESS_LINKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy


# Parsed once at import: a pool's children are forked after that and share the
# result, instead of each parsing the same C declarations again (~0.3 ms).
_CHARS = ffi.typeof("char[]")
_STRINGS = ffi.typeof("char *[]")
_INTS = ffi.typeof("int[]")
_POLICY = ffi.typeof("struct pynox_policy *")
_PREPARED = ffi.typeof("struct pynox_prepared *")


class CPolicy:
    """A struct pynox_policy and the buffers it points into (cffi frees what ffi.new
    returns once unreferenced, so they live as long as this object)."""

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
    ) -> None:
        self.buffers = [ffi.new(_CHARS, os.fsencode(p)) for p in reads + writes]
        read_array = ffi.new(_STRINGS, self.buffers[: len(reads)])
        write_array = ffi.new(_STRINGS, self.buffers[len(reads) :])
        fds = ffi.new(_INTS, keep_fds or [0])
        self.arrays = (read_array, write_array, fds)
        self.struct = ffi.new(
            _POLICY,
            {
                "read_paths": read_array,
                "read_count": len(reads),
                "write_paths": write_array,
                "write_count": len(writes),
                "keep_fds": fds,
                "keep_fd_count": len(keep_fds),
                "allow_network": int(network),
                "memory_bytes": memory or 0,
                "max_file_size": max_file_size or 0,
                # A supervised child leaves the terminal's session; a program run in
                # the pynox process itself is the terminal's foreground job and stays,
                # bound to the launcher that supervises it, if any.
                "new_session": int(parent_pid != 0 and new_session),
                "parent_pid": parent_pid,
                "paths_resolved": int(resolved),
            },
        )

    def keep(self, keep_fds: list[int]) -> None:
        """The descriptors the process keeps open: this process's own, in a shared base."""
        fds = ffi.new(_INTS, keep_fds or [0])
        self.arrays = (*self.arrays[:2], fds)
        self.struct.keep_fds = fds
        self.struct.keep_fd_count = len(keep_fds)


def _check(rc: int, err: object) -> None:
    if rc != 0:
        reason = ffi.string(err).decode(errors="replace")
        raise SandboxError("cannot apply the sandbox: " + reason)


class Prepared:
    """The first half of a confinement, done while a pool's spare waits (see prepare)."""

    def __init__(self, base: CPolicy) -> None:
        self.base = base  # built ahead too: the request pays only for its own paths
        self.state = ffi.new(_PREPARED)


def base_policy(system_reads: list[str], parent_pid: int) -> CPolicy:
    """What every program of a pool may use (the interpreter's files, the devices).

    A pool's zygote builds it once; every spare it forks shares that copy (see
    prepare) instead of building the same structure again for each request.
    """
    devices = list(system_paths.DEVICES_READ_WRITE)
    return CPolicy(system_reads + devices, devices, [], True, None, None, parent_pid)


def prepare(base: CPolicy, keep_fds: list[int]) -> Prepared:
    """Everything of confine_policy() that no program's policy changes, ahead of the program.

    The process is then bound to its parent, in its own session, without its other
    descriptors (all but keep_fds), privileges or capabilities, and under a seccomp
    filter that still allows IPv4 and IPv6 sockets; `finish` adds the program's own policy.
    """
    base.keep(keep_fds)
    prepared = Prepared(base)
    err = ffi.new(_CHARS, 512)
    _check(lib.pynox_sandbox_prepare(base.struct, prepared.state, err, len(err)), err)
    return prepared


def finish(prepared: Prepared, policy: "Policy") -> None:
    """Confines a prepared process to the run's policy, for good."""
    err = ffi.new(_CHARS, 512)
    own = own_policy(policy)
    rc = lib.pynox_sandbox_finish(prepared.state, prepared.base.struct, own.struct, err, len(err))
    _check(rc, err)


def confine_policy(
    policy: "Policy",
    system_reads: list[str],
    keep_fds: list[int],
    parent_pid: int,
    new_session: bool = True,
) -> None:
    """Confines this process for good to a run's policy plus what the interpreter needs.

    Raises SandboxError with the reason when the kernel cannot.
    """
    devices = list(system_paths.DEVICES_READ_WRITE)
    base = CPolicy(
        system_reads + devices, devices, keep_fds, False, None, None, parent_pid,
        new_session=new_session,
    )  # fmt: skip
    own = own_policy(policy)  # held: its buffers must outlive the call
    err = ffi.new(_CHARS, 512)
    _check(lib.pynox_sandbox_apply(base.struct, own.struct, err, len(err)), err)


def own_policy(policy: "Policy") -> CPolicy:
    """What the run itself may read and write, its network and limits.

    Its paths are resolved (the policy's grants, the resolver's files with the
    network), so the sandbox core refuses one that a symbolic link swapped in
    since would redirect. /proc/self and /proc/thread-self become this
    process's own entries.
    """
    resolver = system_paths.network_reads() if policy.allow_network else []
    reads = [_own_process(path) for path in resolver + policy.reads()]
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
    )


def _own_process(path: str) -> str:
    pid = os.getpid()
    # Single-threaded here: the process's one thread has the process's id.
    own = {"/proc/self": f"/proc/{pid}", "/proc/thread-self": f"/proc/{pid}/task/{pid}"}
    for link in OWN_PROCESS_LINKS:
        if path == link or path.startswith(link + "/"):
            return own[link] + path[len(link) :]
    return path


def scrub_environment() -> None:
    """Empties the environment and overwrites what it held in this process's memory.

    os.environ is cleared as usual; then the values it held (bytes shared
    with the posix module) and the block the kernel placed on the stack are
    overwritten, so that a program reading its own memory finds no secret of
    the user's environment. Locale and granted variables are set again after.
    """
    import posix

    held = list(posix.environ.values())
    if getattr(os.environ, "_data", None) is posix.environ:
        # os.environ keeps its entries in posix.environ itself (CPython on POSIX):
        # unset them in libc and empty the dict at once, not one popitem() each.
        for key in list(posix.environ):
            posix.unsetenv(key)
        posix.environ.clear()
    else:
        os.environ.clear()
    for value in held:
        # Single bytes and the empty string are shared singletons: never touch them.
        if len(value) > 1:
            ffi.memmove(ffi.from_buffer(value), b"\0" * len(value), len(value))
    del held
    err = ffi.new(_CHARS, 256)
    if lib.pynox_scrub_environment_block(err, len(err)) != 0:
        raise SandboxError(
            "cannot clear the environment: " + ffi.string(err).decode(errors="replace")
        )


def probe() -> dict[str, int]:
    """What the kernel offers, without changing this process."""
    out = ffi.new("struct pynox_probe *")
    lib.pynox_probe_kernel(out)
    return {
        "landlock_abi": out.landlock_abi,
        "seccomp_filter": out.seccomp_filter,
        "no_new_privs": out.no_new_privs,
        "pidfd": out.pidfd,
    }
