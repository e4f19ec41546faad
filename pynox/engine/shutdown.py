"""End a pool child the way CPython's finalization ends `python`, at a fraction of the cost.

A forked child that runs Py_FinalizeEx tears down every module the pool server
loaded, touching (and so copying) most of its memory: measured here, that cost
more than a small request itself. What a program commonly observes of
finalization is kept, in CPython's order: the SystemExit message, waiting for
non-daemon threads, atexit handlers, stdout and stderr flushed, garbage
cycles, then the program's own modules and __main__ dropped so their objects
finalize (the globals of those still referenced then emptied, as CPython
empties them), stdout and stderr flushed again, exit status 120 when a flush
fails, and death by SIGINT after an uncaught KeyboardInterrupt. The order in
which a module's own objects finalize can differ from CPython's; the command
(`pynox app.py`) uses CPython's own finalization and has none of these
differences.
"""

import _signal
import _weakref
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
    # What the program printed goes out before its objects finalize, as CPython
    # flushes it before it collects (and again at the end, for what they print).
    flushed = flush_stdio()
    for name in _LAST_EXCEPTION:
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()  # garbage cycles first, while every module is still there
    # The program's modules, newest first, then __main__: dropping them lets the
    # collector finalize their objects while their globals still exist, as CPython does.
    names = [n for n in sys.modules if n not in modules_before]
    dropped = [_weak(sys.modules.pop(n, None)) for n in reversed([*names, "__main__"])]
    gc.collect()
    # What is still referenced (the program kept its module somewhere) is emptied as
    # CPython's finalization empties what outlives that collection, in the same order:
    # a file written and never closed is flushed, __del__ runs.
    left = [module for module in (ref() for ref in dropped) if module is not None]
    for module in left:
        _clear_globals(module)
    if left:
        del module, left
        gc.collect()  # the cycles their objects formed
    if not flush_stdio() or not flushed:
        status = EXIT_FLUSH_FAILED
    if exit_announcer is not None:
        exit_announcer(status, interrupted)
    if interrupted:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGINT)
    os._exit(status)


def _weak(module: object) -> "Callable[[], object]":
    """A weak reference to module, or a function giving None for what takes none."""
    try:
        return _weakref.ref(module)
    except TypeError:
        return lambda: None


def _clear_globals(module: object) -> None:
    """Empties a module's globals as CPython's finalization does (_PyModule_ClearDict):
    names with one leading underscore first, then every other but __builtins__."""
    if not isinstance(module, type(sys)):
        return  # an object the program put in sys.modules: CPython leaves it too
    try:
        namespace = vars(module)
        for private_first in (True, False):
            for name, value in list(namespace.items()):
                if value is None or not isinstance(name, str) or name == "__builtins__":
                    continue
                private = name.startswith("_") and not name.startswith("__")
                if private or not private_first:
                    namespace[name] = None
    except Exception:  # noqa: BLE001, S110 - CPython ignores what fails here too
        pass
