"""The JSON result of a run, as `pynox --json` prints it and the pool sends it."""

import _signal
import sys

from pynox import strict_json
from pynox.engine.native_end import native_exit_hint, native_signal_hint, native_signal_line
from pynox.engine.result_frame import fixed_fields, runtime_info
from pynox.engine.signal_names import signal_name
from pynox.engine.time_limit import timeout_error
from pynox.errors import EXIT_SETUP_FAILURE
from pynox.readable_json import dumps_readable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pynox.engine.hint_style import Style
    from pynox.engine.supervisor import Outcome
    from pynox.policy.resolve import Policy


def _ended_behind_python(outcome: "Outcome", policy: "Policy") -> bool:
    """Under a memory limit, whether native code exit()ed with a failure status before
    Python saw the program to its end (OpenBLAS's "giving up", say)."""
    return (
        policy.memory is not None
        and outcome.python_finished is False
        and outcome.signal is None
        and not outcome.timed_out
        and outcome.exit_code not in (0, EXIT_SETUP_FAILURE)
    )


def signal_line(outcome: "Outcome", policy: "Policy") -> str | None:
    """What the command prints when native code ended its program (a signal, or an exit
    behind Python's back under a memory limit), if anything."""
    if outcome.timed_out:
        return None
    if outcome.signal is None:
        if not _ended_behind_python(outcome, policy):
            return None
        return f"pynox: {native_exit_hint(policy, api=False)}"
    return native_signal_line(outcome.signal, policy)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _trusted_report(outcome: "Outcome") -> "dict[str, Any] | None":
    """The child's error report, when how it ended says it could have written one.

    Until the child is confined, only pynox writes to the report; once it
    is, the child writes REPORT_CONFINED and the program runs, so anything
    after that byte is the program's word. A report before it (with status 125)
    says why the sandbox could not be set up; one after it is taken only from a
    program that died of an uncaught exception (status 1, or SIGINT for
    KeyboardInterrupt), never as a setup failure, and its hint is rebuilt from
    its kind. A report that is not small, flat, strict JSON is ignored: an object
    of strings, integers, booleans and nulls, no longer than REPORT_LIMIT.
    """
    from pynox.engine.child_setup import REPORT_CONFINED

    if not outcome.report or outcome.report_truncated or outcome.timed_out:
        return None
    confined = outcome.report.startswith(REPORT_CONFINED)
    if confined:
        if outcome.exit_code != 1 and outcome.signal != _signal.SIGINT:
            return None
    elif outcome.exit_code != EXIT_SETUP_FAILURE:
        return None
    try:
        report = strict_json.loads(outcome.report[len(REPORT_CONFINED) if confined else 0 :])
    except ValueError:
        return None
    if not isinstance(report, dict) or not all(map(_flat, report.values())):
        return None
    if confined == (report.get("type") == "SandboxError"):
        return None
    return report


def _flat(value: object) -> bool:
    """Whether a report may hold value: a string, null, a boolean, or a 64-bit integer
    (the launcher reads reports by the same rule, runtime/launcher_result.c)."""
    if isinstance(value, int):
        return -(1 << 63) <= value < 1 << 63
    return value is None or isinstance(value, str)


def _error(
    outcome: "Outcome",
    report: "dict[str, Any] | None",
    policy: "Policy",
    api: bool,
    style: "Style | None",
) -> "dict[str, Any] | None":
    """The result's error; report: the outcome's report, if it is to be trusted."""
    empty = {"file": None, "line": None, "path": None}
    if outcome.timed_out:
        return timeout_error(policy, api, stopped=outcome.stopped)
    if report is not None:
        from pynox.engine.hint_style import Style
        from pynox.engine.hint_text import format_hint

        line = report.get("line")
        hint = format_hint(
            report.get("hint_kind"),
            report.get("hint_value"),
            style if style is not None else Style(api),
            policy.memory,
            policy.max_file_size,
        )
        return {
            "type": _text_or_none(report.get("type")),
            "message": _text_or_none(report.get("message")),
            "file": _text_or_none(report.get("file")),
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
            "path": _text_or_none(report.get("path")),
            "hint": hint,
        }
    if outcome.signal is not None:
        name = signal_name(outcome.signal)
        return {
            "type": "Signal",
            "message": f"the program was killed by {name}",
            **empty,
            "hint": native_signal_hint(outcome.signal, policy, api, style),
        }
    if _ended_behind_python(outcome, policy):
        return {
            "type": "NativeExit",
            "message": f"native code ended the program with exit status {outcome.exit_code}",
            **empty,
            "hint": native_exit_hint(policy, api, style),
        }
    return None


def build_result(
    outcome: "Outcome", policy: "Policy", api: bool = False, style: "Style | None" = None
) -> "dict[str, Any]":
    """The result; style: how its hint names grants, when not as `api` says (a pool's,
    which knows what its [pool.limits] refuse)."""
    report = _trusted_report(outcome)
    error = _error(outcome, report, policy, api, style)
    if style is not None and error is not None and error["hint"] is not None:
        _hint_line_as_judged(outcome, report, error["hint"])
    stderr = outcome.stderr.decode("utf-8", errors="replace")
    return {
        "exit": outcome.exit_code,
        "stdout": outcome.stdout.decode("utf-8", errors="replace"),
        "stderr": stderr,
        "stdout_truncated": outcome.stdout_truncated,
        "stderr_truncated": outcome.stderr_truncated,
        "error": error,
        "duration_ms": round(outcome.duration_ms),
        **fixed_fields(policy),
    }


def _hint_line_as_judged(outcome: "Outcome", report: "dict[str, Any] | None", hint: str) -> None:
    """Rewrites the hint line the program's process wrote after its traceback (what the
    program wrote after it, from an atexit handler, say, stays) as the result's own hint
    says it. That process knows nothing of a pool's [pool.limits], its scratch
    directories or its sessions: its line could name a grant that the pool refuses every
    request. Cut again, the stream stays within its limit."""
    written = report.get("hint") if report is not None else None
    if not isinstance(written, str) or written == hint:
        return
    try:  # as the process wrote it: paths not in UTF-8 as their bytes
        line = f"pynox: {written}\n".encode(errors="surrogateescape")
        judged = f"pynox: {hint}\n".encode(errors="surrogateescape")
    except UnicodeEncodeError:
        return  # a lone surrogate: no process wrote such a line
    outcome.hint_lines = line, judged
    capture = outcome.stderr_capture
    if capture is not None and capture.replace_line(line, judged):
        outcome.stderr, outcome.stderr_truncated = capture.kept(), capture.truncated


def error_object(kind: str, message: str) -> "dict[str, Any]":
    """An error that has no place in the program: no file, line, path or hint."""
    return {
        "type": kind,
        "message": message,
        "file": None,
        "line": None,
        "path": None,
        "hint": None,
    }


def refusal(kind: str, message: str, exit_code: int = EXIT_SETUP_FAILURE) -> "dict[str, Any]":
    """The result of a run refused before it started: no output, no policy."""
    return {
        "exit": exit_code,
        "stdout": "",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "error": error_object(kind, message),
        "duration_ms": 0,
        "runtime": runtime_info(),
        "policy": None,
    }


def print_refusal(kind: str, message: str, exit_code: int) -> int:
    return _print_result(refusal(kind, message, exit_code), exit_code)


def print_json_result(outcome: "Outcome", policy: "Policy") -> int:
    return _print_result(build_result(outcome, policy), outcome.exit_code)


def _print_result(result: "dict[str, Any]", exit_code: int) -> int:
    """The result on stdout, and the exit status: 1 in place of 0 when stdout is closed
    or cannot take it (a full disk), as the launcher does (runtime/launcher_result.c)."""
    try:
        sys.stdout.write(dumps_readable(result) + "\n")
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # None (closed), a failed write, closed
        return exit_code or 1
    return exit_code
