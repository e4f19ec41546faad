"""Which process group the program runs in under the launcher's supervision.

The launcher (runtime/launcher_supervise.c) passes on to the program the signals a
process sends it. In the launcher's own process group the program also gets its own
copy of a signal sent to the whole group (`kill -- -PGID`, a job runner that signals
the process tree it started), and so got it twice where python gets it once: a second
KeyboardInterrupt in the middle of the program's cleanup. Where no terminal's job
control needs the program in that group, it leaves it for one of its own, and only the
launcher's copy reaches it. On a terminal it stays the foreground job, which reads what
is typed and gets Ctrl-C from the terminal itself (docs/commands.md says what that
leaves); so does a --json run granted the terminal (--allow-read=/dev/tty), which a
job in the background could not read without being stopped (SIGTTIN).
"""

import posix

_NO_TERMINAL = 6  # ENXIO: opening /dev/tty without a controlling terminal
_TERMINAL = "/dev/tty"


def _terminal_paths(named: bool) -> "list[str] | None":
    """The paths of this process's controlling terminal (with named, its device's too,
    /dev/pts/N), or None without one."""
    try:
        fd = posix.open(_TERMINAL, posix.O_RDONLY | posix.O_NOCTTY | posix.O_NONBLOCK)
    except OSError as exc:
        return None if exc.errno == _NO_TERMINAL else [_TERMINAL]
    try:
        return [_TERMINAL, posix.ttyname(fd)] if named else [_TERMINAL]
    except OSError:
        return [_TERMINAL]
    finally:
        posix.close(fd)


def _granted(paths: "list[str]", grants: "list[str]") -> bool:
    """Whether a grant (a real path) is one of paths or a folder above one."""
    return any(
        path == grant or path.startswith(grant.rstrip("/") + "/")
        for path in paths
        for grant in grants
    )


def leave_launcher_group(captured: bool, grants: "list[str]") -> bool:
    """Moves this process into a group of its own when it has no terminal, or its output
    is captured (--json: the launcher then passes on the terminal's signals too) and
    none of grants (the program's read and write grants) reaches the terminal. Returns
    whether it did: the new group holds this process alone, so the sandbox may let the
    program signal it with os.kill(0, sig), as python does its job's group."""
    terminal = _terminal_paths(named=captured)
    if terminal is None or (captured and not _granted(terminal, grants)):
        try:
            posix.setpgid(0, 0)
        except OSError:
            return False  # it stays in the launcher's group, as before
        return True
    return False
