"""The hints of the memory and file size limits: what a program that reached one is told,
made from the hint's kind and value and the run's limits alone.

Apart from pynox.engine.hint_text, which words every other kind: a run with a memory
limit under the launcher hands the lines of native code's end over before the program
starts (pynox.engine.native_end), and a --json run with either limit the texts of these
kinds (limit_hint_texts), without loading the wording of the rest.
"""

import posix
import sys

from pynox.engine.hint_style import LIMITED_BY, VALUE_PLACEHOLDER, Style, templates, worded
from pynox.unit_format import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy

# The kinds whose text depends on the run's memory or file size limit (and has none
# without them): every other kind reads the same under any policy.
LIMIT_KINDS = frozenset(
    {
        "memory",
        "memory_for",
        "memory_beyond",
        "memory_machine",
        "memory_inherited",
        "memory_limits",
        "stack_limit",
        "thread_stacks",
        "thread_stacks_inherited",
        "thread_processes",
        "native_abort",
        "native_exit",
        "open_files",
        "open_files_limit",
        "file_size",
        "file_size_limit",
        "file_size_inherited",
    }
)
# Native code's ends in a process pynox was started under a lower limit than the run's.
NATIVE_INHERITED = frozenset({"native_abort_inherited", "native_exit_inherited"})
# Every kind worded here.
WORDED_HERE = LIMIT_KINDS | NATIVE_INHERITED


# The memory limit also caps open files: one per MiB of it, from 64 to 1024
# (runtime/limits.c).
_MIB = 1 << 20
_MIN_DESCRIPTORS = 64
_MAX_DESCRIPTORS = 1024


def open_files_allowed(memory: int) -> int:
    """How many files a program may hold open under a memory limit of `memory` bytes."""
    return min(max(memory // _MIB, _MIN_DESCRIPTORS), _MAX_DESCRIPTORS)


def _open_files_hint(style: Style, memory: int | None) -> str | None:
    if memory is None:
        return None  # the host's own limit: no grant raises it
    size = format_size(memory)
    if memory >= _MAX_DESCRIPTORS * _MIB:
        return (
            f"the {size} memory limit allows at most {_MAX_DESCRIPTORS} open files; "
            "close files the program no longer needs"
        )
    larger = style.larger("memory", memory, max(memory * 2, 2 * _MIN_DESCRIPTORS * _MIB))
    allows = f"the {size} memory limit allows one open file per MiB (at least {_MIN_DESCRIPTORS})"
    if larger is None:
        return f"{allows}, the most {LIMITED_BY} allows; close files the program no longer needs"
    return (
        f"{allows}; close files the program no longer needs or raise the limit with "
        f"{style.limit('memory', larger)}"
    )


def _open_files_limit_hint(style: Style, memory: int) -> str:
    """The program tried to raise its limit on open files past what --memory set."""
    size = format_size(memory)
    most = open_files_allowed(memory)
    refused = (
        f"the program may not raise its limit on open files above {most}, what the {size} "
        f"memory limit allows (one per MiB, from {_MIN_DESCRIPTORS} to {_MAX_DESCRIPTORS})"
    )
    larger = None
    if most < _MAX_DESCRIPTORS:
        larger = style.larger("memory", memory, max(memory * 2, 2 * _MIN_DESCRIPTORS * _MIB))
    if larger is None:
        return f"{refused}; keep fewer files open at once"
    return f"{refused}; raise that limit with {style.limit('memory', larger)}"


def physical_memory() -> "int | None":
    """The bytes of memory this machine has, if the system says (posix, not os: the texts
    of a run with a memory limit are made before it starts)."""
    try:
        return posix.sysconf("SC_PHYS_PAGES") * posix.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def limit_beyond_machine(memory: int) -> bool:
    """Whether a memory limit is at least all the memory this machine has: the machine runs
    out first (the kernel refuses what it cannot back), and a larger limit would not help."""
    machine = physical_memory()
    return machine is not None and memory >= machine


# How a memory hint ends under a limit that is more than the machine has.
_BEYOND_MACHINE = "which is more than this machine has: a larger limit would not help"


def _memory_hint(what: str, style: Style, memory: int) -> str:
    """`what` happened under the memory limit: raise it, or, at its most, allocate less."""
    under = f"{what} {format_size(memory)} memory limit"
    if limit_beyond_machine(memory):
        return f"{under}, {_BEYOND_MACHINE}; allocate less"
    larger = style.larger("memory", memory, memory * 2)
    if larger is None:
        return f"{under}, the most {LIMITED_BY} allows; allocate less"
    return f"{under}; raise the limit with {style.limit('memory', larger)}"


# The size of a thread's stack unless threading.stack_size() sets another: the C
# library's default, from the stack limit pynox starts with (8 MiB on most systems).
_DEFAULT_THREAD_STACK = 8 * _MIB
# The stack the stack limit's hint suggests for a thread that recurses deeply.
_DEEP_STACK_MIB = 64


def thread_stack_size() -> str:
    """The size of the stack a thread starts with now, as the thread_stacks hint shows it
    (its value): the program may have set a larger one (threading.stack_size()), which a
    limit raised by the default's size would not fit."""
    return format_size(_thread_stack_bytes())


def _thread_stack_bytes() -> int:
    threading = sys.modules.get("threading")
    if threading is None:
        return _DEFAULT_THREAD_STACK
    size = threading.stack_size()  # which sets the default as it reads the size...
    if size:
        threading.stack_size(size)  # ...so it is set back, for the hints read after
    return size or _DEFAULT_THREAD_STACK


# What a thread's stack needs besides its size to be mapped once the memory it failed
# for has been given back: the report's reserve (pynox.engine.child.REPORT_RESERVE_BYTES,
# set aside while the program ran, free now), and a page table's worth more.
_PROBE_SLACK = 5 * _MIB


def processes_limit_reached() -> "str | None":
    """Why a thread could not start when it was not memory: its stack, and then some, can
    be mapped under the memory limit now, so what was reached is a limit on processes,
    which counts threads. That limit as the hint names it: ulimit -u's value, or "" when
    that one is unlimited or, for root, not enforced (then a container's pids limit, or
    the system's threads-max). None when memory may have been what was missing, which the
    thread_stacks hint says."""
    import mmap
    import resource

    stack = _thread_stack_bytes()
    try:
        # Private and writable, as a thread's stack is: RLIMIT_DATA counts it too.
        probe = mmap.mmap(-1, stack + _PROBE_SLACK, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError:
        return None
    probe.close()
    limit = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return "" if limit == resource.RLIM_INFINITY or posix.getuid() == 0 else str(limit)


def _processes_hint(memory: int, limit: str) -> str:
    reached = (
        f"the limit on processes pynox was started with (ulimit -u {limit}), which counts "
        "each thread, was reached"
        if limit
        else "a limit on processes or threads was reached (a container's, or the system's)"
    )
    return (
        f"a thread could not start, though its stack fits under the {format_size(memory)} "
        f"memory limit: {reached}; run fewer threads at once "
        "(concurrent.futures.ThreadPoolExecutor(max_workers=4)), or raise that limit where "
        "pynox starts"
    )


# How native code ends a program when an allocation fails, before the limit's words.
_NATIVE_ENDS = {
    "native_abort": (
        "native code ended the program, as it often does when an allocation fails under the"
    ),
    "native_exit": (
        "native code ended the program before Python finished it, as libraries such as "
        "OpenBLAS do when an allocation fails under the"
    ),
}


def _thread_stacks_hint(
    style: Style, memory: int, stack: str, inherited: str | None = None
) -> str | None:
    """A thread could not start: its stack (its size as thread_stack_size() shows it) did
    not fit under the memory limit."""
    counts = (
        f"a thread could not start: each thread's stack ({stack} here) counts against the "
        f"{format_size(memory)} memory limit"
    )
    fewer = "run fewer threads at once (concurrent.futures.ThreadPoolExecutor(max_workers=4))"
    smaller = "make their stacks smaller before starting them (threading.stack_size(1 << 20))"
    if inherited is not None:  # pynox was started under a lower one, which no flag raises
        reached = counts.removesuffix(f" the {format_size(memory)} memory limit")
        return _inherited_limit_hint(reached, "memory", inherited, memory, f"{fewer} or {smaller}")
    if style.larger("memory", memory, memory * 2) is None:
        return f"{counts}, the most {LIMITED_BY} allows; {fewer} or {smaller}"
    name = style.field("memory")
    return (
        f"{counts}; {fewer}, {smaller}, or raise the limit with {name} by {stack} for each "
        "thread that runs at once"
    )


def _stack_limit_hint(style: Style, memory: int) -> str:
    """The program may not raise its stack limit: a thread with a larger stack instead, and
    the memory limit raised by as much, which the stack counts against: under a limit
    the program already needed most of, the thread alone would not start."""
    refused = (
        "the program may not raise its stack limit: under the memory limit the main thread's "
        "stack keeps the limit it started with, which no grant raises; run deep recursion in "
        f"a thread with a larger stack instead (threading.stack_size({_DEEP_STACK_MIB} << 20) "
        "before starting it)"
    )
    wanted = memory + _DEEP_STACK_MIB * _MIB
    larger = style.larger("memory", memory, wanted)
    if larger is None:
        return (
            f"{refused}, which counts against the {format_size(memory)} memory limit, the "
            f"most {LIMITED_BY} allows"
        )
    if larger != format_size(wanted):  # a pool's ceiling lies in between
        return (
            f"{refused}, and raise the limit with {style.limit('memory', larger)}, the most "
            f"{LIMITED_BY} allows, since the stack counts against it"
        )
    return (
        f"{refused}, and raise the limit by as much with {style.limit('memory', larger)}, "
        "since the stack counts against it"
    )


def format_limit_hint(
    kind: object, target: object, style: Style, memory: int | None, max_file_size: int | None
) -> str | None:
    """The hint's text, for a kind of WORDED_HERE (pynox.engine.hint_text.format_hint
    takes every kind)."""
    return worded(limit_hint_of, kind, target, style, memory, max_file_size)


def limit_hint_of(
    kind: object, target: object, style: Style, memory: int | None, max_file_size: int | None
) -> str | None:
    """The text of a kind of WORDED_HERE, without a session's note (see format_limit_hint);
    None for a limit the run does not have."""
    value = target if isinstance(target, str) else None
    if kind in ("memory", "memory_for"):
        if memory is None:
            # No limit of pynox's was hit: the traceback says all python would say.
            return None
        larger = style.larger("memory", memory, memory * 2)
        if kind == "memory_for" and value == VALUE_PLACEHOLDER:
            larger = value  # the launcher puts the child's value in its place
        elif kind == "memory_for" and value is not None and _size(value) > memory * 2:
            # The limit the child found to fit the allocation (pynox.engine.hints.
            # _memory_wanted), within the pool's limits.
            wanted = _size(value)
            most = style.ceilings.get("memory")
            # wanted is the allocation's need rounded up to a power of two: at most half
            # of it is less than the need, and a limit that small would fail again.
            if most is not None and most <= wanted // 2:
                return (
                    f"the program used up its {format_size(memory)} memory limit, and the "
                    f"allocation that failed needs more than the {format_size(most)} "
                    f"{LIMITED_BY} allows; allocate less, or work through the data in parts"
                )
            larger = style.larger("memory", memory, wanted)
        if larger is None:
            return (
                f"the program used up its {format_size(memory)} memory limit, the most "
                f"{LIMITED_BY} allows; allocate less"
            )
        return (
            f"the program used up its {format_size(memory)} memory limit; allocate less "
            f"or raise the limit with {style.limit('memory', larger)}"
        )
    if kind == "memory_beyond":
        if memory is None:
            return None
        return (
            f"the program used up its {format_size(memory)} memory limit, asking at once for "
            "more than this machine has; allocate less, or work through the data in parts"
        )
    if kind == "memory_machine":
        if memory is None:
            return None
        return (
            f"the program ran out of memory under its {format_size(memory)} memory limit, "
            f"{_BEYOND_MACHINE}; allocate less, or work through the data in parts"
        )
    if kind == "thread_stacks":
        if memory is None or value is None:
            return None
        return _thread_stacks_hint(style, memory, value)
    if kind == "thread_processes":
        return None if memory is None or value is None else _processes_hint(memory, value)
    if kind == "thread_stacks_inherited":
        if memory is None:
            return None
        return _thread_stacks_hint(style, memory, format_size(_DEFAULT_THREAD_STACK), value)
    if kind in ("native_abort", "native_exit"):
        return None if memory is None else _memory_hint(_NATIVE_ENDS[kind], style, memory)
    if kind in ("native_abort_inherited", "native_exit_inherited"):
        reached = _NATIVE_ENDS[kind.removesuffix("_inherited")].removesuffix(" the")
        return _inherited_limit_hint(reached, "memory", value, memory)
    if kind == "open_files":
        return _open_files_hint(style, memory)
    if kind == "open_files_limit":
        return None if memory is None else _open_files_limit_hint(style, memory)
    if kind == "memory_limits":
        if memory is None:
            return None
        return _memory_hint(
            "the program may not raise its memory limits (RLIMIT_DATA, RLIMIT_AS, RLIMIT_STACK) "
            "above what pynox set for the",
            style,
            memory,
        )
    if kind == "stack_limit":
        return None if memory is None else _stack_limit_hint(style, memory)
    if kind == "file_size_limit":
        if max_file_size is None:
            return None
        refused = (
            f"the program may not raise its file size limit above the "
            f"{format_size(max_file_size)} pynox set"
        )
        larger = style.larger("max_file_size", max_file_size, max_file_size * 2)
        if larger is None:
            return f"{refused}, the most {LIMITED_BY} allows; write less"
        return f"{refused}; raise it with {style.limit('max_file_size', larger)}"
    if kind == "file_size":
        if max_file_size is None:
            return None
        larger = style.larger("max_file_size", max_file_size, max_file_size * 2)
        if larger is None:
            return (
                f"a file reached the {format_size(max_file_size)} size limit, the most "
                f"{LIMITED_BY} allows; write less"
            )
        return (
            f"a file reached the {format_size(max_file_size)} size limit; write less or "
            f"raise it with {style.limit('max_file_size', larger)}"
        )
    if kind == "file_size_inherited":
        return _inherited_limit_hint("a file reached", "size", value, max_file_size)
    if kind == "memory_inherited":
        return _inherited_limit_hint("the program used up", "memory", value, memory)
    return None


def limit_hint_texts(policy: "Policy") -> dict[str, str]:
    """What pynox.engine.hint_text.hint_texts(policy) adds to unlimited_hint_texts(): the
    texts of LIMIT_KINDS."""
    return templates(format_limit_hint, LIMIT_KINDS, policy.memory, policy.max_file_size)


# How a limit pynox was started with is set, and what to do instead, by the limit.
_INHERITED = {
    "size": ("ulimit -f", "write less"),
    "memory": ("ulimit -d or ulimit -v", "allocate less"),
}


def _inherited_limit_hint(
    reached: str, limit_name: str, limit: str | None, asked: int | None, instead: str = ""
) -> str | None:
    """The program reached a limit pynox was started with, below the one the run asked for
    (--memory, --max-file-size): pynox keeps a lower limit, soft or hard, and never raises
    one (runtime/limits.c), so a larger flag would not help. instead: what to do rather
    than raise it, if not to allocate or write less."""
    if asked is None or limit is None:
        return None
    if limit != VALUE_PLACEHOLDER:  # the launcher puts the child's value in its place
        size = _size(limit)
        if not 0 < size < asked:
            return None
        limit = format_size(size)
    setter, usual = _INHERITED[limit_name]
    return (
        f"{reached} the {limit} {limit_name} limit that pynox was started with (as {setter} "
        f"sets it), below the {format_size(asked)} asked for, which pynox never raises; "
        f"{instead or usual}, or raise that limit where pynox starts"
    )


def _size(text: str) -> int:
    """A size as format_size writes it ("4g", "512m", "300000k", "1048577"); 0 for anything
    else."""
    factors = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    number, factor = (text[:-1], factors[text[-1]]) if text[-1:] in factors else (text, 1)
    return int(number) * factor if number.isdigit() and len(number) < 16 else 0
