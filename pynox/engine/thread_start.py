"""Which limit stopped a thread from starting: its stack's memory, or the number of
processes and threads.

threading says "can't start new thread" for both: the C library reports an mmap() of
the stack that the memory limit refused and a clone() that a limit on processes refused
alike. Asked in the child, only once the program failed: what it imports then, only when
a thread did not start (threading itself may no longer import: a program that deleted
sys.excepthook leaves it so).
"""

import _thread
import os

# Kinds of pynox.engine.hint_text: the process-count limit of this user (RLIMIT_NPROC,
# as ulimit -u sets it) or of the control group (pids.max), when pynox cannot tell which,
# and that of the control group alone, when RLIMIT_NPROC cannot be what was reached.
USER_OR_GROUP = "thread_count"
GROUP = "thread_count_group"


def process_count_limit() -> "str | None":
    """The kind of the process-count limit that stopped a thread, or None when a thread's
    stack did not fit in memory (or nothing can tell)."""
    import resource

    if _stack_fits() is not True:
        return None
    if os.getuid() == 0:
        return GROUP  # the kernel holds no process of root's user to RLIMIT_NPROC
    if resource.getrlimit(resource.RLIMIT_NPROC)[0] == resource.RLIM_INFINITY:
        return GROUP
    return USER_OR_GROUP


def _stack_fits() -> "bool | None":
    """Whether memory holds a thread's stack now, mapped as the C library maps one
    (private and writable, which RLIMIT_DATA counts); None when its size is unknown."""
    import mmap
    import resource

    size = _thread.stack_size() or resource.getrlimit(resource.RLIMIT_STACK)[0]
    if size == resource.RLIM_INFINITY or size <= 0:
        return None
    try:
        stack = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    except (OSError, OverflowError, ValueError):
        return False
    stack.close()
    return True
