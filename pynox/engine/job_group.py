"""Which process group the program runs in under the launcher's supervision.

The launcher (runtime/launcher_supervise.c) passes on to the program the signals a
process sends it. In the launcher's own process group the program also gets its own
copy of a signal sent to the whole group (`kill -- -PGID`, a job runner that signals
the process tree it started), and so got it twice where python gets it once: a second
KeyboardInterrupt in the middle of the program's cleanup. Where no terminal's job
control needs the program in that group, it leaves it for one of its own, and only the
launcher's copy reaches it. On a terminal it stays the foreground job, which reads what
is typed and gets Ctrl-C from the terminal itself (docs/commands.md says what that
leaves).
"""

import posix

_NO_TERMINAL = 6  # ENXIO: opening /dev/tty without a controlling terminal


def has_controlling_terminal() -> bool:
    try:
        fd = posix.open("/dev/tty", posix.O_RDONLY | posix.O_NOCTTY | posix.O_NONBLOCK)
    except OSError as exc:
        return exc.errno != _NO_TERMINAL
    posix.close(fd)
    return True


def leave_launcher_group(captured: bool) -> None:
    """Moves this process into a group of its own when its output is captured (--json:
    the launcher then passes on the terminal's signals too) or it has no terminal."""
    if captured or not has_controlling_terminal():
        try:
            posix.setpgid(0, 0)
        except OSError:
            pass  # it stays in the launcher's group, as before
