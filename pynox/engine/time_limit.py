"""What a run stopped at its wall-clock limit reports: its error object and its line.

Apart from pynox.engine.result: a run with a time limit hands the line to the
launcher before the program starts, and must not load the result's JSON
writer for that.
"""

from pynox.unit_format import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.policy.resolve import Policy


def timeout_error(policy: "Policy", api: bool) -> "dict[str, Any]":
    """The error object of a run stopped at its time limit."""
    limit = format_duration(policy.timeout or 0)
    longer = format_duration((policy.timeout or 0) * 2)
    grant = f"timeout={longer!r}" if api else f"--timeout={longer}"
    return {
        "type": "Timeout",
        "message": f"the program ran past its {limit} time limit and was stopped",
        "file": None,
        "line": None,
        "path": None,
        "hint": f"make it faster or raise the limit with {grant}",
    }


def timeout_line(policy: "Policy") -> str:
    """What the command prints when it stops a program at its time limit."""
    error = timeout_error(policy, api=False)
    return f"pynox: {error['message']}; {error['hint']}"
