"""Remember the last operation a sandboxed program asked the OS for.

A PermissionError says which path was refused but not whether the program
meant to read or to write it, nor that it came from a socket or a subprocess.
CPython's audit events say exactly that, so the child keeps the last relevant
one; the hint that follows a denial names the one grant that would allow it.
"""

import posix
import sys

from pynox import lean_os
from pynox.policy.system_paths import CA_VARIABLES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, FrameType
    from typing import Any

# The CA variables set where pynox runs, and the paths they name, read when pynox starts
# (the child empties its environment before the program runs): a certificate that fails
# to verify in a run that was not passed one of them gets a hint naming it
# (pynox.engine.hints).
HOST_CA_VARIABLES = {name: value for name in CA_VARIABLES if (value := lean_os.getenv(name))}


def _proxy_variable(scheme: str) -> "str | None":
    """The variable that names scheme's proxy where pynox runs, as urllib.request's
    getproxies() picks it (requests and httpx read them through it): the lowercase name
    over the uppercase one, an empty value naming none, and no HTTP_PROXY in a CGI script
    (REQUEST_METHOD set), where a client's Proxy header could have set it."""
    lower = f"{scheme}_proxy"
    if lower.encode() in posix.environ:
        return lower if posix.environ[lower.encode()] else None
    upper = lower.upper()
    if scheme == "http" and b"REQUEST_METHOD" in posix.environ:
        return None
    return upper if posix.environ.get(upper.encode()) else None


# The proxy variables set where pynox runs, one per scheme ("https", "http", "all"), by
# name only (their values may hold a password): a connection that failed in a run that
# was not passed the one its client reads for its URL gets a hint naming it
# (pynox.engine.hints).
HOST_PROXY_VARIABLES = tuple(
    name for name in map(_proxy_variable, ("https", "http", "all")) if name is not None
)
# The hosts NO_PROXY sends directly where pynox runs, as its value lists them (as
# getproxies() picks no_proxy or NO_PROXY), or "" for none: a request to one of them
# would connect directly under python too, and gets no proxy hint.
HOST_NO_PROXY = lean_os.getenv(_proxy_variable("no") or "no_proxy") or ""
# Whether the terminal's type is set where pynox runs (not what it is: the program's
# process keeps no copy of a variable it was not passed): curses finds no terminal
# without it, and a run that was not passed it gets a hint naming it.
HOST_HAS_TERMINAL = b"TERM" in posix.environ

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
# shared memory, ProcessPoolExecutor, and subprocess (whose fork and exec in C raise
# no audit event of their own). A refusal is known by the module of the frame it was
# raised in.
PROCESS_MODULES = ("multiprocessing", "concurrent.futures.process", "subprocess")

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


LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
# Events whose first argument is the socket itself.
SOCKET_OWN_EVENTS = frozenset({"socket.__new__", "socket.bind", "socket.connect"})
# shutil.rmtree lists the folder it removes, and with ignore_errors=True leaves one it may
# not list as it is, without a word: kept with the folders listed (see AccessLog.listed).
RMTREE_EVENT = "shutil.rmtree"
# How many of the folders listed last are kept (see AccessLog.listed).
LISTED_KEPT = 64
# Modules that list folders to import or to find installed packages, passing over the
# ones they may not list, as they do under python wherever a path entry is unreadable;
# and pynox's own, which lists folders to make a hint.
_IMPORT_MODULES = ("importlib", "_frozen_importlib", "pkgutil", "pkg_resources", "pynox.")


class AccessLog:
    """An audit hook that keeps the most recent watched event, and the last folders the
    program listed."""

    __slots__ = ("last", "listed", "process_call", "_watched", "_caller", "_modules", "_getcwd")
    # Class attributes, unlike module globals, outlive the interpreter's end (see _watched).
    _LISTING = LISTING_EVENTS
    _PROCESSES = PROCESS_EVENTS
    _RMTREE = RMTREE_EVENT
    _SOCKET_OWN = SOCKET_OWN_EVENTS
    _IMPORTING = _IMPORT_MODULES
    _KEPT = LISTED_KEPT
    _LONGEST = 4096  # PATH_MAX

    def __init__(self) -> None:
        self.last: tuple[str, tuple[Any, ...]] | None = None
        # The folders the program itself listed last, by the path it gave,
        # most recent last: glob, pathlib's glob and os.walk pass over a folder they were
        # refused listing as if it were empty, so a later failure has no denial to hint
        # at; pynox.engine.hints looks here for one. Which of them were refused is found
        # only then, once the program failed: remembering costs a dictionary entry. Each
        # maps to whether shutil.rmtree listed it, to remove it.
        self.listed: dict[str, bool] = {}
        # Where the program last tried to start a process (os.fork, os.execv, os.system,
        # ...): the calling frame's id, its code and the offset of the call in it, which
        # the traceback of the refusal shows in its innermost entry. A later error the
        # program raises after catching that refusal is not about processes. The frame
        # itself is not kept: that would keep its variables alive.
        self.process_call: tuple[int, CodeType, int] | None = None
        # Held here, not looked up as a global: the hook runs until the interpreter is
        # gone, and at its end module globals are cleared to None while finalizers (a
        # NamedTemporaryFile's unlink) still raise events.
        self._watched = WATCHED_EVENTS
        self._caller = sys._getframe
        self._modules = sys.modules
        self._getcwd = posix.getcwd

    def __call__(self, event: str, args: "tuple[Any, ...]") -> None:
        if event in self._watched:
            if event in self._SOCKET_OWN:
                # Not the socket itself: kept here, a socket the program dropped would
                # stay open, without the ResourceWarning python gives, until the next
                # event. No hint looks at it.
                args = (None, *args[1:])
            self.last = (event, args)
            if event in self._LISTING:
                # The frame that called os.listdir or os.scandir (none from C code). A
                # library may raise the event itself (sys.audit), with no argument.
                self._listing(args[0] if args else None, self._caller(0).f_back, False)
            elif event == self._RMTREE:
                # It passes the path on as it was given: often a pathlib path, whose
                # class is the standard library's only when it is exactly PosixPath.
                path = args[0] if args else None
                pathlib = self._modules.get("pathlib")
                if pathlib is not None and type(path) is getattr(pathlib, "PosixPath", None):
                    path = str(path)
                self._listing(path, self._caller(0).f_back, True)
            elif event == "os.chdir" and self.listed:
                self._anchor()
            elif event in self._PROCESSES:
                caller = self._caller(0).f_back
                if caller is not None:
                    self.process_call = (id(caller), caller.f_code, caller.f_lasti)
                if event == "os.system":
                    # The shell could not start anyway, but system() would only say
                    # "exit status 127"; say what happened instead. (errno is imported
                    # here: importing it costs every run ~0.1 ms, and this is rare.)
                    from errno import EPERM

                    raise PermissionError(EPERM, "starting processes is not allowed")

    def _anchor(self) -> None:
        """Makes the folders listed absolute: relative, they would name others once the
        program changes directory."""
        try:
            cwd = self._getcwd()
        except OSError:  # its directory was removed: what they named is unknown
            self.listed.clear()
            return
        listed = self.listed.copy()  # as in _listing: it may change meanwhile
        self.listed = {(p if p[:1] == "/" else f"{cwd}/{p}"): r for p, r in listed.items()}

    def _listing(self, path: object, caller: "FrameType | None", removing: bool) -> None:
        # Exact types only: a program's own path class would run its code here. A path
        # longer than the kernel takes lists nothing and is not kept.
        if (type(path) is not str and type(path) is not bytes) or len(path) > self._LONGEST:
            return
        if isinstance(path, bytes):
            path = path.decode("utf-8", "surrogateescape")  # as os.fsdecode does
        module = caller.f_globals.get("__name__") if caller is not None else None
        if type(module) is str and module.startswith(self._IMPORTING):  # never its own str
            return
        listed = self.listed
        listed.pop(path, None)
        listed[path] = removing
        if len(listed) > self._KEPT:
            # The oldest, found in a copy: another thread, or a callback the garbage
            # collector runs in between, may list a folder meanwhile, which would change
            # the log under an iterator (RuntimeError) or remove that folder (KeyError).
            for oldest in listed.copy():
                listed.pop(oldest, None)
                break


# One per process: installed by the child right before the sandbox closes.
ACCESS_LOG = AccessLog()
