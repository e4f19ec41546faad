"""The pipes the `pynox` launcher hands over (runtime/launcher_supervise.c and
launcher_scratch.c): each named by an environment variable, "FD:PID"."""

import os


def launcher_pipe(variable: str, pid: int) -> "int | None":
    """The pipe named by `variable`, taken out of the environment; None unless it was
    set for process `pid` (the launcher's: not a variable the caller set or another
    run passed on) and names a pipe."""
    entry = os.environ.pop(variable, None)
    if entry is None:
        return None
    fd_text, _, pid_text = entry.partition(":")
    if not (fd_text.isdigit() and pid_text == str(pid)):
        return None
    fd = int(fd_text)
    try:
        if fd < 3 or os.fstat(fd).st_mode & 0o170000 != 0o010000:  # a pipe (S_ISFIFO)
            return None
    except OSError:
        return None
    return fd
