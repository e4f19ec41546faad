"""What pynox says when native code ends a program under a memory limit.

Apart from pynox.engine.result_frame: a run with a memory limit under the launcher hands
these lines over before the program starts (pynox.engine.launcher_link), and needs
nothing else of a result; pynox.engine.result words the same ends when pynox supervises.
"""

import _signal

from pynox import _native
from pynox.engine.hint_style import Style
from pynox.engine.limit_hints import format_limit_hint
from pynox.engine.signal_names import signal_name
from pynox.unit_format import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy

# Deaths native code dies when an allocation fails and it does not check
# (SIGSEGV), gives up (SIGABRT: abort() in a library or in the C++ runtime),
# or the kernel's out-of-memory killer picks the process (SIGKILL).
_NATIVE_MEMORY_SIGNALS = frozenset({6, 9, 11})  # SIGABRT, SIGKILL, SIGSEGV


def native_signal_hint(
    signum: int, policy: "Policy", api: bool, style: "Style | None" = None
) -> str | None:
    """Under a memory limit, the hint for a program that native code ended by signum."""
    if policy.memory is None or signum not in _NATIVE_MEMORY_SIGNALS:
        return None
    return _memory_hint("native_abort", policy, api, style)


def native_signal_line(signum: int, policy: "Policy") -> str | None:
    """What the command prints when signum ended its program, if anything: under a
    memory limit, how native code dies when an allocation fails."""
    hint = native_signal_hint(signum, policy, api=False)
    if hint is None:
        return None
    return f"pynox: the program was killed by {signal_name(signum)}; {hint}"


def native_exit_hint(policy: "Policy", api: bool, style: "Style | None" = None) -> str | None:
    """Under a memory limit, the hint for a program that native code exit()ed with a
    failure status before Python finished it (pynox.engine.result says when)."""
    return _memory_hint("native_exit", policy, api, style)


def launcher_texts(policy: "Policy") -> "dict[str, str]":
    """The texts of native code's ends for the launcher's --json result (see
    pynox.engine.limit_hints.limit_hint_texts), made whole now: no report comes after them."""
    style = Style(False, template=True)
    texts = {}
    for kind in ("native_abort", "native_exit"):
        text = _memory_hint(kind, policy, False, style)
        if text is not None:
            texts[kind] = text
    return texts


def _memory_hint(kind: str, policy: "Policy", api: bool, style: "Style | None") -> str | None:
    """The hint of kind, or of its _inherited kind when pynox was started under a lower
    memory limit than the run asked for, which no flag raises."""
    style = style if style is not None else Style(api)
    below = inherited_limit_below(policy.memory, "memory")
    if below is not None:
        kind += "_inherited"
    return format_limit_hint(kind, below, style, policy.memory, policy.max_file_size)


def memory_frame(policy: "Policy") -> "list[str]":
    """What the launcher prints when native code ends a program under policy's memory
    limit (it runs in the launcher's child, with no supervisor of pynox's): the line
    of an exit behind Python's back, and one line per signal from 1, empty for a
    signal that gets none. In the order it reads them (see pynox.engine.launcher_link)."""
    lines = [""] * (_signal.NSIG - 1)
    for signum in _NATIVE_MEMORY_SIGNALS:  # the only ones with a line: no call for the rest
        lines[signum - 1] = native_signal_line(signum, policy) or ""
    return ["memory", f"pynox: {native_exit_hint(policy, api=False)}", "\n".join(lines)]


def inherited_limit_below(asked: "int | None", limit: str) -> "str | None":
    """The lowest limit pynox was started with among those the run's `limit`
    ("memory" or "max_file_size") sets, as format_size writes it, when it is below
    `asked`; else None. pynox keeps such a limit (runtime/limits.c), and no flag raises
    it: a hint names it, not a larger flag that would change nothing."""
    if asked is None:
        return None
    try:
        lowest = _native.lowest_limit(limit)
    except OSError:  # unknown: the hint names the flag, as for no such limit
        return None
    if lowest is None or lowest >= asked:
        return None
    return format_size(lowest)
