"""What a result says that does not depend on how the run went, and the frame the
launcher writes a --json result from.

Apart from pynox.engine.result, which builds a result from a run's outcome: a run
with --json under the launcher hands all of this over before the program starts
(pynox.engine.launcher_link), and the launcher fills in the rest itself
(runtime/launcher_result.c).
"""

import _signal
import sys

from pynox.engine.hint_text import Style, format_hint, hint_texts
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


def signal_names() -> "dict[int, str]":
    """signal.Signals(n).name for every n that has one, without importing signal and
    enum (~1 ms of a --json run): of a number's names (SIGABRT, SIGIOT), the enum
    keeps the first."""
    names: dict[int, str] = {}
    for name, value in vars(_signal).items():
        named = isinstance(value, int) and name.isupper() and name[:3] == "SIG"
        if named and "_" not in name[:4] and (value not in names or name < names[value]):
            names[value] = name
    return names


def signal_name(signum: int) -> str:
    return signal_names().get(signum) or f"signal {signum}"


# Deaths native code dies when an allocation fails and it does not check
# (SIGSEGV), gives up (SIGABRT: abort() in a library or in the C++ runtime),
# or the kernel's out-of-memory killer picks the process (SIGKILL).
_NATIVE_MEMORY_SIGNALS = frozenset({6, 9, 11})  # SIGABRT, SIGKILL, SIGSEGV


def native_signal_hint(signum: int, policy: "Policy", api: bool) -> str | None:
    """Under a memory limit, the hint for a program that native code ended by signum."""
    if policy.memory is None or signum not in _NATIVE_MEMORY_SIGNALS:
        return None
    return format_hint("native_abort", None, Style(api), policy.memory, policy.max_file_size)


def native_signal_line(signum: int, policy: "Policy") -> str | None:
    """What the command prints when signum ended its program, if anything: under a
    memory limit, how native code dies when an allocation fails."""
    hint = native_signal_hint(signum, policy, api=False)
    if hint is None:
        return None
    return f"pynox: the program was killed by {signal_name(signum)}; {hint}"


def native_exit_hint(policy: "Policy", api: bool) -> str | None:
    """Under a memory limit, the hint for a program that native code exit()ed with a
    failure status before Python finished it (pynox.engine.result says when)."""
    return format_hint("native_exit", None, Style(api), policy.memory, policy.max_file_size)


def memory_frame(policy: "Policy") -> "list[str]":
    """What the launcher prints when native code ends a program under policy's memory
    limit (it runs in the launcher's child, with no supervisor of pynox's): the line
    of an exit behind Python's back, and one line per signal from 1, empty for a
    signal that gets none. In the order it reads them (see pynox.engine.launcher_link)."""
    lines = (native_signal_line(signum, policy) or "" for signum in range(1, _signal.NSIG))
    return ["memory", f"pynox: {native_exit_hint(policy, api=False)}", "\n".join(lines)]


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


def launcher_frame(policy: "Policy") -> "list[str | int]":
    """What the launcher needs to write this run's --json result as build_result would,
    in the order it reads them (see pynox.engine.launcher_link): everything the run's
    course does not change, computed here, before the program runs, by the trusted side."""
    slots = ", ".join(f'"{name}": \x01{slot}' for name, slot in _LAUNCHER_SLOTS.items())
    names = signal_names()
    frame: list[str | int] = [
        "capture",
        policy.max_output,
        REPORT_LIMIT,
        "{" + slots + ", " + dumps_readable(fixed_fields(policy))[1:],
        dumps_readable(timeout_error(policy, api=False)),
        "\n".join(names.get(n, "") for n in range(1, _signal.NSIG)),
    ]
    for kind, text in hint_texts(policy).items():
        frame += [kind, text]
    return frame
