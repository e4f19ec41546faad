"""End a pool child the way CPython's finalization ends `python`, at a fraction of the cost.

A forked child that runs Py_FinalizeEx tears down every module the pool server
loaded, touching (and so copying) most of its memory: measured here, that cost
more than a small request itself. What a program commonly observes of
finalization is kept, in CPython's order: the SystemExit message, waiting for
non-daemon threads, atexit handlers, stdout and stderr flushed, garbage
cycles, then the program's own modules and __main__ dropped so their objects
finalize (the globals of those still referenced then emptied, as CPython
empties them), what is left in the standard streams (python's own too, when the
program replaced them) flushed quietly, exit status 120 when the first flush
fails, and death by SIGINT after an uncaught KeyboardInterrupt. The order in
which a module's own objects finalize can differ from CPython's; the command
(`pynox app.py`) uses CPython's own finalization and has none of these
differences.
"""

import _signal
import _weakref
import gc
import io
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
    stderr = getattr(sys, "stderr", None)
    try:
        message: str | None = str(code)
    except Exception:  # noqa: BLE001 - python then writes the line's end alone
        message = None
    if message is not None and stderr is not None:
        try:
            stderr.write(message)
        except Exception:  # noqa: BLE001, S110 - CPython ignores a failing stderr here too
            pass
    elif message:  # written to descriptor 2, as the C library's stderr takes it
        try:
            os.write(2, message.encode(errors=_UNSTREAMED_ERRORS))
        except (OSError, UnicodeEncodeError):
            pass
    # The line's end as PySys_WriteStderr writes it: into sys.stderr, else to descriptor 2.
    if stderr is not None:
        try:
            stderr.write("\n")
            return 1
        except Exception:  # noqa: BLE001, S110 - python falls back to the descriptor too
            pass
    try:
        os.write(2, b"\n")
    except OSError:
        pass
    return 1


# How python writes SystemExit's message when sys.stderr is gone: before 3.12 a
# character UTF-8 cannot carry as its escape, since then not at all.
_UNSTREAMED_ERRORS = "backslashreplace" if sys.version_info < (3, 12) else "strict"


def flush_stdio() -> bool:
    """Flushes sys.stdout and sys.stderr as CPython's finalization does (flush_std_files):
    one that is missing, None or closed is passed over, and a failure goes to
    sys.unraisablehook worded as this CPython words it. False when one failed."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or _closed(stream):
            continue
        try:
            stream.flush()
        except BaseException as exc:  # noqa: BLE001 - reported as CPython reports it
            ok = False
            _unraisable(exc, name, stream)
    return ok


def flush_quietly() -> None:
    """Flushes what is left in the standard streams, the ones python made as well as the
    program's: CPython's finalization lets go of them, which flushes them and ignores a
    failure. Output the program printed before it replaced sys.stdout (with None, a
    StringIO, a file) so comes out, as under python."""
    streams = [getattr(sys, name, None) for name in ("stdout", "stderr")]
    for stream in (*streams, sys.__stdout__, sys.__stderr__):
        if isinstance(stream, io.IOBase):  # never a flush of the program's own objects
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001, S110 - python ignores it here too
                pass


def _closed(stream: object) -> bool:
    """Whether stream says it is closed (file_is_closed in CPython's Python/pylifecycle.c:
    a `closed` that cannot be read counts as open)."""
    try:
        return bool(stream.closed)  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 - as CPython, which clears the error
        return False


def _unraisable(exc: BaseException, name: str, stream: object) -> None:
    """Hands a failed flush to sys.unraisablehook as CPython does: "Exception ignored on
    flushing sys.stdout" from 3.13 on, "Exception ignored in: <the stream>" before."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code is flush_stdio.__code__:
        exc.__traceback__ = tb = tb.tb_next  # CPython calls flush from C: no frame of ours
    if sys.version_info >= (3, 13):
        message, culprit = f"Exception ignored on flushing sys.{name}", None
    else:
        message, culprit = None, stream
    try:
        arguments = _unraisable_arguments()((type(exc), exc, tb, message, culprit))
    except BaseException:  # noqa: BLE001 - only where the program broke the hook's machinery
        return
    hook = getattr(sys, "unraisablehook", None)
    try:
        if hook is None:
            raise AttributeError("sys.unraisablehook")
        hook(arguments)
    except BaseException:  # noqa: BLE001 - python falls back on its own hook
        try:
            sys.__unraisablehook__(arguments)
        except BaseException:  # noqa: BLE001, S110 - nowhere left to say it
            pass


def _unraisable_arguments() -> type:
    """sys.UnraisableHookArgs, which sys does not name: the type of what an error in a
    __del__ hands the hook. Made only when a flush failed."""
    seen: list[object] = []

    class _Raises:
        def __del__(self) -> None:
            raise RuntimeError

    hook = getattr(sys, "unraisablehook", None)
    sys.unraisablehook = seen.append
    try:
        _Raises()
    finally:
        if hook is None:
            del sys.unraisablehook
        else:
            sys.unraisablehook = hook
    return type(seen[0])


def finish(
    status: int, interrupted: bool, modules_before: "set[str]", reported: bool = False
) -> "NoReturn":
    """Runs what finalization would run for the program, then leaves.

    reported: a failed flush of the standard streams was shown already (a session's
    last step), and is not shown again."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    # What the program printed goes out before its objects finalize, as CPython
    # flushes it before it collects (and again at the end, for what they print).
    flushed = reported or flush_stdio()
    if reported:
        flush_quietly()
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
    flush_quietly()
    if not flushed:
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
