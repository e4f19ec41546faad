"""The Python face of the C sandbox core (pynox._core, a cffi extension)."""

import os

from pynox import system_paths
from pynox._core import ffi, lib
from pynox.errors import PynoxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy import Policy


# Parsed once at import: a pool's children are forked after that and share the
# result, instead of each parsing the same C declarations again (~0.3 ms).
_CHARS = ffi.typeof("char[]")
_STRINGS = ffi.typeof("char *[]")
_INTS = ffi.typeof("int[]")
_POLICY = ffi.typeof("struct pynox_policy *")


class SandboxError(PynoxError):
    """The kernel could not confine the process; nothing of the program ran."""

    exit_code = 125


def confine(
    reads: list[str],
    writes: list[str],
    keep_fds: list[int],
    network: bool,
    memory: int | None,
    max_file_size: int | None,
    parent_pid: int,
) -> None:
    """Confines this process for good, or raises SandboxError with the reason."""
    # cffi frees what ffi.new returns once unreferenced: keep every buffer alive.
    read_bufs = [ffi.new(_CHARS, os.fsencode(p)) for p in reads]
    write_bufs = [ffi.new(_CHARS, os.fsencode(p)) for p in writes]
    read_array = ffi.new(_STRINGS, read_bufs)
    write_array = ffi.new(_STRINGS, write_bufs)
    fds = ffi.new(_INTS, keep_fds or [0])
    policy = ffi.new(
        _POLICY,
        {
            "read_paths": read_array,
            "read_count": len(read_bufs),
            "write_paths": write_array,
            "write_count": len(write_bufs),
            "keep_fds": fds,
            "keep_fd_count": len(keep_fds),
            "allow_network": int(network),
            "memory_bytes": memory or 0,
            "max_file_size": max_file_size or 0,
            # A supervised child leaves the terminal's session; a program run in
            # the pynox process itself is the terminal's foreground job and stays.
            "new_session": int(parent_pid != 0),
            "parent_pid": parent_pid,
        },
    )
    err = ffi.new(_CHARS, 512)
    if lib.pynox_sandbox_apply(policy, err, len(err)) != 0:
        raise SandboxError("cannot apply the sandbox: " + ffi.string(err).decode(errors="replace"))


def confine_policy(
    policy: "Policy", system_reads: list[str], keep_fds: list[int], parent_pid: int
) -> None:
    """Confines this process to a run's policy plus what the interpreter needs."""
    devices = list(system_paths.DEVICES_READ_WRITE)
    resolver = system_paths.network_reads() if policy.network else []
    confine(
        reads=system_reads + devices + resolver + policy.reads(),
        writes=devices + policy.allow_write,
        keep_fds=keep_fds,
        network=policy.network,
        memory=policy.memory,
        max_file_size=policy.max_file_size,
        parent_pid=parent_pid,
    )


def scrub_environment() -> None:
    """Empties the environment and overwrites what it held in this process's memory.

    os.environ is cleared as usual; then the values it held (bytes shared
    with the posix module) and the block the kernel placed on the stack are
    overwritten, so that a program reading its own memory finds no secret of
    the user's environment. Locale and granted variables are set again after.
    """
    import posix

    held = list(posix.environ.values())
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
