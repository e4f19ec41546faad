"""End a pool child the way CPython's finalization ends `python`, at a fraction of the cost.

A forked child that runs Py_FinalizeEx tears down every module the pool server
loaded, touching (and so copying) most of its memory: measured here, that cost
more than a small request itself. What a program commonly observes of
finalization is kept, in CPython's order: the SystemExit message, waiting for
non-daemon threads, atexit handlers, garbage cycles, then the program's own
modules dropped so their objects finalize, then stdout and stderr flushed,
exit status 120 when that fails, and death by SIGINT after an uncaught
KeyboardInterrupt. The order in which a module's own objects finalize can
differ from CPython's; the command (`pynox app.py`) uses CPython's own
finalization and has none of these differences.
"""

import _signal
import gc
import os
import sys

from pynox.errors import EXIT_FLUSH_FAILED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

_LAST_EXCEPTION = ("last_type", "last_value", "last_traceback", "last_exc")

# A pool child tells the server how it ended (pynox.pool.child_link.ChildLink).
exit_announcer: "Callable[[int, bool], None] | None" = None


def system_exit_status(exc: SystemExit) -> int:
    """The exit status of SystemExit, printing its message as CPython does."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001, S110 - CPython ignores a failing stderr here too
        pass
    return 1


def flush_stdio() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        if stream is None or getattr(stream, "closed", False):
            continue
        try:
            stream.flush()
        except Exception as exc:  # noqa: BLE001 - reported as CPython reports it
            ok = False
            try:
                os.write(
                    2,
                    f"Exception ignored in: {stream!r}\n{type(exc).__name__}: {exc}\n".encode(
                        errors="replace"
                    ),
                )
            except OSError:
                pass
    return ok


def finish(status: int, interrupted: bool, modules_before: "set[str]") -> "NoReturn":
    """Runs what finalization would run for the program, then leaves."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    for name in _LAST_EXCEPTION:
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()  # garbage cycles first, while every module is still there
    # The program's modules, newest first: dropping them lets the collector
    # finalize their objects while their globals still exist, as CPython does.
    for name in reversed([n for n in sys.modules if n not in modules_before]):
        sys.modules.pop(name, None)
    sys.modules.pop("__main__", None)
    gc.collect()
    if not flush_stdio():
        status = EXIT_FLUSH_FAILED
    if exit_announcer is not None:
        exit_announcer(status, interrupted)
    if interrupted:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGINT)
    os._exit(status)
