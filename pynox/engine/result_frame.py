"""What a result says that does not depend on how the run went, and the frame the
launcher writes a --json result from.

Apart from pynox.engine.result, which builds a result from a run's outcome: a run
with --json under the launcher hands all of this over before the program starts
(pynox.engine.launcher_link), and the launcher fills in the rest itself
(runtime/launcher_result.c).
"""

import _signal
import sys

from pynox.engine.signal_names import signal_names
from pynox.engine.time_limit import timeout_error
from pynox.limits import REPORT_LIMIT
from pynox.readable_json import dumps_readable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.policy.resolve import Policy


def python_version() -> str:
    """The running CPython's version, as results and --version report it."""
    major, minor, micro = sys.version_info[:3]
    return f"{major}.{minor}.{micro}"


def runtime_info() -> dict[str, str]:
    return {"name": "pynox", "python": python_version(), "output": "captured"}


def fixed_fields(policy: "Policy") -> "dict[str, Any]":
    """What a result says about the run that does not depend on how it went."""
    return {"runtime": runtime_info(), "policy": policy.to_json()}


# The fields of build_result that the launcher fills in when it writes a --json result
# itself, in their order, each with the letter of its slot (runtime/launcher_result.c).
_LAUNCHER_SLOTS = {
    "exit": "x",
    "stdout": "o",
    "stderr": "e",
    "stdout_truncated": "O",
    "stderr_truncated": "E",
    "error": "r",
    "duration_ms": "d",
}


def launcher_frame(policy: "Policy", unlimited: "dict[str, str] | None") -> "list[str | int]":
    """What the launcher needs to write this run's --json result as build_result would,
    in the order it reads them (see pynox.engine.launcher_link): everything the run's
    course does not change, computed here, before the program runs, by the trusted side.
    unlimited: the start-up image's hint texts for a run without size limits, if any."""
    slots = ", ".join(f'"{name}": \x01{slot}' for name, slot in _LAUNCHER_SLOTS.items())
    names = signal_names()
    frame: list[str | int] = [
        "capture",
        policy.max_output,
        REPORT_LIMIT,
        "{" + slots + ", " + dumps_readable(fixed_fields(policy))[1:],
        dumps_readable(timeout_error(policy, api=False)),
        dumps_readable(timeout_error(policy, api=False, stopped=True)),
        "\n".join(names.get(n, "") for n in range(1, _signal.NSIG)),
    ]
    for kind, text in _hint_templates(policy, unlimited).items():
        frame += [kind, text]
    return frame


def _hint_templates(policy: "Policy", unlimited: "dict[str, str] | None") -> dict[str, str]:
    """The hint of each kind the launcher may need, with a placeholder for the value.

    Most read the same in every run: the start-up image holds those, made when it was
    built (making them all cost each --json run some 0.6 ms). A run with a memory or
    file size limit makes the texts that depend on them, and loads their wording
    (pynox.engine.limit_hints, pynox.engine.native_end); a run without the image makes all.
    """
    if unlimited is not None and policy.memory is None and policy.max_file_size is None:
        return unlimited
    from pynox.engine.limit_hints import limit_hint_texts
    from pynox.engine.native_end import launcher_texts

    if unlimited is None:
        from pynox.engine.hint_text import hint_texts

        return hint_texts(policy) | launcher_texts(policy)
    return unlimited | limit_hint_texts(policy) | launcher_texts(policy)
