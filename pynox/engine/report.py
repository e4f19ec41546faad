"""The structured error of a run: what failed, where, and what to do about it.

Imported only in a child whose program failed.
"""

import os

from pynox.engine.hint_text import Style, format_hint
from pynox.engine.hints import classify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy

_MAX_MESSAGE = 4096


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _location(
    exc: BaseException, tb: "TracebackType | None", program: "Program"
) -> tuple[str | None, int | None]:
    """The line of the user's program the error comes from."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return None, None
    for filename, line in reversed(frames):
        if filename == program.filename:
            return filename, line
    stdlib = os.path.dirname(os.__file__) + os.sep
    for filename, line in reversed(frames):
        if not filename.startswith(stdlib) and not filename.startswith("<frozen"):
            return filename, line
    return frames[-1]


def describe_error(
    exc: BaseException,
    tb: "TracebackType | None",
    program: "Program",
    policy: "Policy",
    last_event: "tuple[str, tuple[Any, ...]] | None",
    api_hints: bool,
) -> "dict[str, Any]":
    kind, value, path = classify(exc, last_event, policy)
    hint = format_hint(kind, value, Style(api_hints), policy.memory, policy.max_file_size)
    filename, line = _location(exc, tb, program)
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error
        message = f"<unprintable {type(exc).__name__}>"
    return {
        "type": _type_name(exc),
        "message": message[:_MAX_MESSAGE],
        "file": filename,
        "line": line,
        "path": path,
        "hint": hint,
        # What the supervisor makes its own hint text from (see pynox.engine.hints).
        "hint_kind": kind,
        "hint_value": value,
    }
