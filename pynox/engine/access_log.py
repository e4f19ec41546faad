"""Remember the last operation a sandboxed program asked the OS for.

A PermissionError says which path was refused but not whether the program
meant to read or to write it, nor that it came from a socket or a subprocess.
CPython's audit events say exactly that, so the child keeps the last relevant
one; the hint that follows a denial names the one grant that would allow it.
"""

from pynox import lean_os
from pynox.policy.system_paths import CA_VARIABLES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The CA variables set where pynox runs, and the paths they name, read when pynox starts
# (the child empties its environment before the program runs): a certificate that fails
# to verify in a run that was not passed one of them gets a hint naming it
# (pynox.engine.hints).
HOST_CA_VARIABLES = {name: value for name in CA_VARIABLES if (value := lean_os.getenv(name))}
# The terminal's type where pynox runs, read alike: curses finds no terminal without it,
# and a run that was not passed it gets a hint naming it.
HOST_TERMINAL = lean_os.getenv("TERM")
# The terminal's type where pynox runs, read alike: curses finds no terminal without it,
# and a run that was not passed it gets a hint naming it.
HOST_TERMINAL = lean_os.getenv("TERM")

# Events of starting another process: the sandbox never allows one.
PROCESS_EVENTS = frozenset(
    {
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "os.startfile",
        "subprocess.Popen",
        "pty.spawn",
    }
)

# Modules whose refusals all come from processes that cannot start: a
# multiprocessing lock or queue (sem_open in /dev/shm, which no grant opens),
# shared memory, ProcessPoolExecutor. Their C calls raise no audit event, so a
# refusal is known by the module of the frame it was raised in.
PROCESS_MODULES = ("multiprocessing", "concurrent.futures.process")

# fcntl() and ioctl(): the commands seccomp refuses whatever the descriptor (a file's
# signal owner, O_ASYNC, the terminal's foreground group) are told by their arguments.
FCNTL_EVENTS = frozenset({"fcntl.fcntl", "fcntl.ioctl"})

# Extended attributes read by path, which seccomp refuses whatever the path.
XATTR_READ_EVENTS = frozenset({"os.getxattr", "os.listxattr"})

WATCHED_EVENTS = (
    PROCESS_EVENTS
    | XATTR_READ_EVENTS
    | FCNTL_EVENTS
    | frozenset(
        {
            "open",
            "os.listdir",
            "os.scandir",
            "os.mkdir",
            "os.remove",
            "os.rmdir",
            "os.rename",
            "os.link",
            "os.symlink",
            "os.truncate",
            "os.chmod",
            "os.chown",
            "os.utime",
            "os.setxattr",
            "os.removexattr",
            "os.chdir",
            "shutil.copyfile",
            "shutil.copymode",
            "shutil.copystat",
            "shutil.rmtree",
            "socket.__new__",
            "socket.bind",
            "socket.connect",
            "os.kill",
            "os.killpg",
            "resource.prlimit",
            "resource.setrlimit",
            "sqlite3.connect",
        }
    )
)


class AccessLog:
    """An audit hook that keeps the most recent watched event."""

    __slots__ = ("last", "_watched")

    def __init__(self) -> None:
        self.last: tuple[str, tuple[Any, ...]] | None = None
        # Held here, not looked up as a global: the hook runs until the interpreter is
        # gone, and at its end module globals are cleared to None while finalizers (a
        # NamedTemporaryFile's unlink) still raise events.
        self._watched = WATCHED_EVENTS

    def __call__(self, event: str, args: "tuple[Any, ...]") -> None:
        if event in self._watched:
            self.last = (event, args)
            if event == "os.system":
                # The shell could not start anyway, but system() would only say
                # "exit status 127"; say what happened instead. (errno is imported
                # here: importing it costs every run ~0.1 ms, and this is rare.)
                from errno import EPERM

                raise PermissionError(EPERM, "starting processes is not allowed")


# One per process: installed by the child right before the sandbox closes.
ACCESS_LOG = AccessLog()
