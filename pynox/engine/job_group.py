"""Which process group the program runs in under the launcher's supervision.

The launcher (runtime/launcher_supervise.c) passes on to the program the signals a
process sends it. In the launcher's own process group the program also gets its own
copy of a signal sent to the whole group (`kill -- -PGID`, a job runner that signals
the process tree it started), and so got it twice where python gets it once: a second
KeyboardInterrupt in the middle of the program's cleanup. Where no terminal's job
control needs the program in that group, it leaves it for one of its own, and only the
launcher's copy reaches it. On a terminal it stays the foreground job, which reads what
is typed and gets Ctrl-C from the terminal itself (docs/commands.md says what that
leaves); so does a --json run granted the terminal (--allow-read=/dev/tty, or its
device under any name), which a job in the background could not read without being
stopped (SIGTTIN).
"""

import posix

_NO_TERMINAL = 6  # ENXIO: opening /dev/tty without a controlling terminal
_TERMINAL = "/dev/tty"
_FILE_TYPE, _CHARACTER_DEVICE = 0o170000, 0o020000  # S_IFMT, S_IFCHR
# Devices that open another terminal than their own: /dev/tty the controlling terminal of
# whichever process opens it (a node of that number is the terminal under any name), and
# /dev/console and /dev/tty0 the console, as /sys/class/tty names it.
_CONTROLLING = (5, 0)
_CONSOLES = {(5, 1): "console", (4, 0): "tty0"}


class _Terminal:
    """This process's controlling terminal: its paths (with named, its device's too,
    /dev/pts/N) and its device's number."""

    __slots__ = ("device", "paths")

    def __init__(self, paths: "list[str]", device: "int | None") -> None:
        self.paths = paths
        self.device = device


def _controlling_terminal(named: bool) -> "_Terminal | None":
    """The controlling terminal, or None without one."""
    try:
        fd = posix.open(_TERMINAL, posix.O_RDONLY | posix.O_NOCTTY | posix.O_NONBLOCK)
    except OSError as exc:
        return None if exc.errno == _NO_TERMINAL else _Terminal([_TERMINAL], None)
    try:
        device = posix.fstat(fd).st_rdev
        try:
            return _Terminal([_TERMINAL, posix.ttyname(fd)] if named else [_TERMINAL], device)
        except OSError:
            return _Terminal([_TERMINAL], device)
    finally:
        posix.close(fd)


def _granted(terminal: _Terminal, grants: "list[str]") -> bool:
    """Whether a grant (a real path) is one of the terminal's paths or a folder above one,
    or a device node that opens it under another name (/dev/console, /dev/tty0 on the
    console, a node of /dev/tty's number)."""
    for grant in grants:
        if any(
            path == grant or path.startswith(grant.rstrip("/") + "/") for path in terminal.paths
        ):
            return True
        try:
            status = posix.stat(grant)
        except (OSError, ValueError):
            continue
        if status.st_mode & _FILE_TYPE != _CHARACTER_DEVICE:
            continue
        number = (posix.major(status.st_rdev), posix.minor(status.st_rdev))
        if number == _CONTROLLING or status.st_rdev == terminal.device:
            return True
        if number in _CONSOLES and _console_device(_CONSOLES[number]) == terminal.device:
            return True
    return False


def _console_device(name: str) -> "int | None":
    """The device number of the terminal /dev/console (name "console") or /dev/tty0
    ("tty0") opens: the last that /sys/class/tty/NAME/active lists, followed from tty0."""
    for _ in range(2):
        try:
            with open(f"/sys/class/tty/{name}/active", "rb") as active:
                words = active.read(4096).split()
        except OSError:
            return None
        if not words:
            return None
        name = words[-1].decode("ascii", "replace")
        if name != "tty0":
            break
    try:
        with open(f"/sys/class/tty/{name}/dev", "rb") as numbers:
            major, _, minor = numbers.read(64).strip().partition(b":")
        return posix.makedev(int(major), int(minor))
    except (OSError, ValueError):
        return None


def leave_launcher_group(captured: bool, grants: "list[str]") -> bool:
    """Moves this process into a group of its own when it has no terminal, or its output
    is captured (--json: the launcher then passes on the terminal's signals too) and
    none of grants (the program's read and write grants) reaches the terminal. Returns
    whether it did: the new group holds this process alone, so the sandbox may let the
    program signal it with os.kill(0, sig), as python does its job's group."""
    terminal = _controlling_terminal(named=captured)
    if terminal is None or (captured and not _granted(terminal, grants)):
        try:
            posix.setpgid(0, 0)
        except OSError:
            return False  # it stays in the launcher's group, as before
        return True
    return False
