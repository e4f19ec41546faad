"""What a run stopped at its wall-clock limit reports: its error object and its line.

Apart from pynox.engine.result: a run with a time limit hands the line to the
launcher before the program starts, and must not load the result's JSON
writer for that.
"""

from pynox.limits import MAX_TIMEOUT, SHORTEST_SUGGESTED_TIMEOUT
from pynox.unit_format import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.policy.resolve import Policy


def timeout_error(
    policy: "Policy", api: bool, longest: float = MAX_TIMEOUT, allowed_by: str = "pynox"
) -> "dict[str, Any]":
    """The error object of a run stopped at its time limit.

    longest: the longest limit the run could have asked for, which `allowed_by` sets; the
    hint never names a limit that would be refused.
    """
    limit = policy.timeout or 0
    shown = format_duration(limit)
    if limit >= longest:
        hint = f"make it faster: {shown} is the longest time limit {allowed_by} allows"
    else:
        longer = format_duration(min(max(limit * 2, SHORTEST_SUGGESTED_TIMEOUT), longest))
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


def timeout_line(policy: "Policy") -> str:
    """What the command prints when it stops a program at its time limit."""
    error = timeout_error(policy, api=False)
    return f"pynox: {error['message']}; {error['hint']}"
