"""What the pool server does once, as it starts (pynox.pool.server): shares its limit on
open files with its children and checks it, moves the protocol to a descriptor of its
own, preloads and warms up what every request shares."""

import os
import stat

from pynox.errors import PynoxError
from pynox.policy.path_grant import resolve_grant
from pynox.pool import first_use, warmup, zygote

# Spares ordered from the zygote and not yet answered. Each answer carries a pidfd; with
# hundreds of orders written at once, the zygote's answers fill its socket while it waits
# to write the next, and the server waits to write its next order: the rest are ordered
# as answers come. It bounds the orders sent and not yet read, too: each carries
# descriptors, and the kernel lets a user without CAP_SYS_RESOURCE have no more in flight
# on Unix sockets than its limit on open files (ETOOMANYREFS past it), which a stopped
# zygote's unread orders would reach (orders_in_flight lowers it under a low limit).
_ORDERS_IN_FLIGHT = 64
# What each child holds open in the pool server (its pipes, channel and pidfd), and how
# many children a pool of N workers keeps: N spares and N running.
DESCRIPTORS_PER_CHILD = len(zygote.CHILD_FDS) + 1
_CHILDREN_PER_WORKER = 2
_DESCRIPTORS_OF_ITS_OWN = 16


def share_open_files() -> "tuple[int, int]":
    """Raises the pool's soft limit on open files to its hard limit; returns the soft and
    hard limits its children run under instead: the pool's own soft one, within half of
    its hard one, which bounds them both.

    The kernel passes no descriptor over a Unix socket (ETOOMANYREFS) once this user's
    descriptors in flight are past the SENDER's soft limit on open files, unless the
    sender holds CAP_SYS_RESOURCE or CAP_SYS_ADMIN, which no sandboxed program does. A
    program may keep in flight as many as its own soft limit, and one message more (253),
    for as long as it runs: under the pool's own limit, the server and the zygote could
    then pass none, and the pool started no process until that program ended. A program
    may raise its soft limit up to its hard one, hence the halved hard limit: the
    other half is the pool's alone, for the descriptors it passes itself."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:  # Linux takes none above fs.nr_open, but in case
        return soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    half = hard // 2
    return min(soft, half), half


def orders_in_flight() -> int:
    """How many orders for spares may be sent and not yet answered: _ORDERS_IN_FLIGHT, or
    fewer under a low limit on open files, so that the descriptors the orders and the
    zygote's answers hold in flight stay within half of it (the kernel's bound on them,
    which an answer of the zygote that met it waits on)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY:
        return _ORDERS_IN_FLIGHT
    return max(1, min(_ORDERS_IN_FLIGHT, limit // (2 * DESCRIPTORS_PER_CHILD)))


def check_descriptors(workers: int) -> "int | None":
    """Refuses a number of workers whose children would take more descriptors than the
    pool server may open: it would stop at the first one past the limit. Returns how many
    more children (those of sessions) the limit leaves room for; None if it has none."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    needed = workers * _CHILDREN_PER_WORKER * DESCRIPTORS_PER_CHILD + _DESCRIPTORS_OF_ITS_OWN
    if limit == resource.RLIM_INFINITY:
        return None
    if needed > limit:
        most = (limit - _DESCRIPTORS_OF_ITS_OWN) // (_CHILDREN_PER_WORKER * DESCRIPTORS_PER_CHILD)
        raise PynoxError(
            f"a pool of {workers} workers holds up to {needed} open files, more than the "
            f"{limit} this process may open; use at most {max(most, 0)} workers, or raise "
            f"the limit (ulimit -n {needed})"
        )
    return (limit - needed) // DESCRIPTORS_PER_CHILD


def protocol_output() -> int:
    """A descriptor of the pool's standard output, for the protocol's lines alone; fd 1
    becomes a copy of stderr. What the host's preloaded code, or a thread its warm-up left
    running, prints from then on (from Python or C) lands there, never among the lines a
    client parses. Close-on-exec, for the helpers; the zygote closes it as it starts."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


def nonblocking_to_a_pipe(fd: int) -> None:
    """The pool's output to a pipe or socket does not block the loop (see PoolServer.out).

    A file or a terminal keeps blocking writes: neither fills up because a client is slow.
    """
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        os.set_blocking(fd, False)


POOL_PACKAGES = "a package directory of the pool, which every request imports from"


def pool_package_dirs(configured: list[str], given: list[str], cwd: str) -> list[str]:
    """[pool] package_dirs (already absolute, from the file's directory) and the
    --package-dir flags (from the working directory), resolved as any grant is."""
    resolved = [resolve_grant(path, "imports from", cwd) for path in [*configured, *given]]
    return list(dict.fromkeys(resolved))


def preload(modules: list[str], package_dirs: list[str]) -> None:
    """Imports what every request starts with, from where a request imports: the
    standard library, then the pool's package directories (warmup.importing_as_requests).

    sys.path is so only while it imports: the zygote and its children start
    with pynox's own path, and a child sets the one of its policy once it is
    confined, as for any run.
    """
    with warmup.importing_as_requests(package_dirs):
        for module in modules:
            open_before = warmup.open_descriptors()
            try:
                with warmup.printing_to_stderr():
                    __import__(module)
                    companions = first_use.import_companions(module)
            except BaseException as exc:  # noqa: BLE001 - sys.exit() too: the user's to see
                if isinstance(exc, KeyboardInterrupt):
                    raise
                hint = ""
                # Only a missing top-level module: one missing in a package found is no
                # matter of where packages are installed.
                if isinstance(exc, ModuleNotFoundError) and "." not in (exc.name or "."):
                    # Named as both interfaces spell it: the Python API starts this command.
                    hint = (
                        " (add the directory it is installed in to the pool's package_dirs,"
                        " --package-dir on the command line)"
                    )
                failure = warmup.describe_failure(exc)
                raise PynoxError(
                    f"cannot preload {module}: {failure}{hint}; fix or remove it"
                ) from None
            left = warmup.left_open(open_before)
            if left:
                if companions:
                    module += f" (with {', '.join(companions)}, which it imports on first use)"
                raise PynoxError(
                    f"cannot preload {module}: it leaves {left} open, which each child closes"
                    " before its request runs, so the module would find it closed (or a file"
                    " of the request's at its number); remove it from preload, and requests"
                    " import it themselves"
                )


def warm_up() -> None:
    """Imports what children use on their way, so no child pays for it."""
    import __future__  # noqa: F401 - a code's last expression is compiled apart, with ast

    import ast
    import builtins
    import linecache  # noqa: F401 - tracebacks of pool code read their lines here
    import traceback  # noqa: F401

    from pynox.pool import display

    ast.parse("value")  # builds the syntax tree's classes once, for every child
    display.prepare_preloaded()

    from pynox.engine import (
        child,
        shutdown,  # noqa: F401
    )

    if not hasattr(builtins, "exit"):
        child.install_site_builtins()


def version() -> str:
    from pynox import __version__

    return __version__
