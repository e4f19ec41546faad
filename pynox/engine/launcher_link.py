"""What the `pynox` launcher hands over, and what pynox tells it back.

The launcher (runtime/launcher_supervise.c, launcher_scratch.c) passes pipes, each
named by an environment variable, "FD:PID", or "FD,FD,FD:PID" for several. When it
stays behind as the run's supervisor, pynox writes it one message before the program
starts and closes the pipe: netstrings ("LENGTH:BYTES"), the wall-clock limit in
milliseconds (0: none), the line to print when it is reached and the one to print when
a stop signal had stopped the program by then; for a run with a
memory limit, then the lines to print when native code ends the program
(pynox.engine.native_end.memory_frame), for which the program's process writes
PYTHON_FINISHED on the supervisor's second pipe once Python has seen it to its end;
for a captured run (--json), then what the launcher needs to write the run's result
itself (pynox.engine.result_frame.launcher_frame).
"""

import posix

from pynox import lean_os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy


def launcher_pipes(variable: str, pid: int, count: int) -> "list[int] | None":
    """The `count` pipes named by `variable`, taken out of the environment; None unless
    it was set for process `pid` (the launcher's: not a variable the caller set or
    another run passed on) and names that many pipes."""
    entry = lean_os.popenv(variable)
    if entry is None:
        return None
    fds_text, _, pid_text = entry.partition(":")
    texts = fds_text.split(",")
    if pid_text != str(pid) or len(texts) != count or not all(t.isdigit() for t in texts):
        return None
    fds = [int(text) for text in texts]
    try:
        for fd in fds:
            if fd < 3 or posix.fstat(fd).st_mode & 0o170000 != 0o010000:  # a pipe (S_ISFIFO)
                return None
    except OSError:
        return None
    return fds


def netstring(data: "bytes | str | int") -> bytes:
    if isinstance(data, int):
        data = str(data)
    if isinstance(data, str):
        data = data.encode()
    return b"%d:%s" % (len(data), data)


def supervisor_message(
    policy: "Policy", capture: bool, unlimited_hints: "dict[str, str] | None" = None
) -> bytes:
    """What the launcher that supervises this run is told (see the module's text).
    unlimited_hints: for a captured run, the start-up image's hint texts of a run without
    size limits (pynox.engine.result_frame), if pynox started up from one."""
    milliseconds, line, stopped_line = 0, "", ""
    if policy.timeout is not None:
        from pynox.engine.time_limit import timeout_line

        milliseconds = max(1, round(policy.timeout * 1000))
        line = timeout_line(policy) + "\n"
        stopped_line = timeout_line(policy, stopped=True) + "\n"
    message = netstring(milliseconds) + netstring(line) + netstring(stopped_line)
    if policy.memory is not None:
        from pynox.engine.native_end import memory_frame

        message += b"".join(map(netstring, memory_frame(policy)))
    if capture:
        from pynox.engine.result_frame import launcher_frame

        message += b"".join(map(netstring, launcher_frame(policy, unlimited_hints)))
    return message


def write_message(fd: int, message: bytes) -> None:
    """Writes the message whole and closes the pipe: its end tells the launcher it is all."""
    try:
        view = memoryview(message)
        while view:
            view = view[posix.write(fd, view) :]
    finally:
        posix.close(fd)
