"""A program's sys.excepthook that is missing or fails, shown as python shows it.

python hands an exception that ends the program to sys.excepthook; without one it
writes "sys.excepthook is missing", and when the hook raises, "Error in
sys.excepthook:", the hook's error and "Original exception was:", each exception
shown by its own display (_PyErr_PrintEx in CPython's Python/pythonrun.c). Imported
only then (pynox.engine.child._print_as_python).
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    # CPython's own display, as the program found it (pynox.engine.child.PYTHON_DISPLAY).
    Display = Callable[[type, BaseException, "TracebackType | None"], object]

# An exception's context as CPython keeps it, not through a property of the program's.
_CONTEXT = BaseException.__dict__["__context__"]


def missing_hook(
    display: "Display", kind: type, exc: BaseException, tb: "TracebackType | None"
) -> None:
    _write_stderr("sys.excepthook is missing\n")
    display(kind, exc, tb)


def failed_hook(
    display: "Display",
    kind: type,
    exc: BaseException,
    tb: "TracebackType | None",
    failure: BaseException,
    failure_tb: "TracebackType | None",
) -> None:
    """failure: what the hook raised, with its traceback cut to the program's frames."""
    _unchain(failure, exc)
    _write_stderr("Error in sys.excepthook:\n")
    display(type(failure), failure, failure_tb)
    _write_stderr("\nOriginal exception was:\n")
    display(kind, exc, tb)


def _unchain(failure: BaseException, handled: BaseException) -> None:
    """Takes the exception pynox was handling out of the implicit context of failure's
    chain: python runs the hook with no exception being handled."""
    seen = set()
    while id(failure) not in seen:
        seen.add(id(failure))
        context = _CONTEXT.__get__(failure)
        if context is handled:
            _CONTEXT.__set__(failure, None)
            return
        if context is None:
            return
        failure = context


def _write_stderr(text: str) -> None:
    """Writes to sys.stderr as python's PySys_WriteStderr does: silently not at all
    when it is gone or fails."""
    try:
        sys.stderr.write(text)
    except Exception:  # noqa: BLE001, S110 - python ignores a failing stderr here too
        pass
