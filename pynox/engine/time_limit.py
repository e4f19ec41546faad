"""What a run stopped at its wall-clock limit reports: its error object and its line.

Apart from pynox.engine.result: a run with a time limit hands the line to the
launcher before the program starts, and must not load the result's JSON
writer for that.
"""

from pynox.limits import MAX_TIMEOUT, SHORTEST_SUGGESTED_TIMEOUT
from pynox.unit_format import format_duration

# A program a stop signal stopped does not run on, however long it is given: only SIGCONT
# continues it, and nothing in the sandbox may send it (signals reach only the program's
# own process, which is stopped).
STOPPED_HINT = (
    "a stop signal (SIGSTOP, SIGTSTP, SIGTTIN or SIGTTOU) had paused it, and nothing in the "
    "sandbox lets it go on, so a longer limit would not help; do not pause the program with "
    "a signal (os.kill(os.getpid(), signal.SIGSTOP)): to wait, use time.sleep() or a "
    "threading.Event"
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.policy.resolve import Policy


def timeout_error(
    policy: "Policy",
    api: bool,
    longest: float = MAX_TIMEOUT,
    allowed_by: str = "pynox",
    stopped: bool = False,
    json: bool = False,
) -> "dict[str, Any]":
    """The error object of a run stopped at its time limit.

    longest: the longest limit the run could have asked for, which `allowed_by` sets; the
    hint never names a limit that would be refused. stopped: whether a stop signal had
    stopped the program by then (is_stopped). json: with api, named as a request's field
    (pynox.engine.hint_style.Style.json).
    """
    limit = policy.timeout or 0
    shown = format_duration(limit)
    if stopped:
        hint = STOPPED_HINT
    elif limit >= longest:
        hint = f"make it faster: {shown} is the longest time limit {allowed_by} allows"
    else:
        longer = format_duration(min(max(limit * 2, SHORTEST_SUGGESTED_TIMEOUT), longest))
        if api and json:
            from pynox.engine.hint_style import json_field

            grant = json_field("timeout", longer)
        else:
            grant = f"timeout={longer!r}" if api else f"--timeout={longer}"
        hint = f"make it faster or raise the limit with {grant}"
    return {
        "type": "Timeout",
        "message": f"the program ran past its {shown} time limit and was stopped",
        "file": None,
        "line": None,
        "path": None,
        "hint": hint,
    }


def timeout_line(policy: "Policy", stopped: bool = False) -> str:
    """What the command prints when it stops a program at its time limit."""
    error = timeout_error(policy, api=False, stopped=stopped)
    return f"pynox: {error['message']}; {error['hint']}"


def is_stopped(pid: int) -> bool:
    """Whether the process pid is stopped by a signal (or for a tracer), as its state in
    /proc says; False when that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2][1:2]  # after the name, which may hold ")"
    except OSError:
        return False
    return state in (b"T", b"t")
