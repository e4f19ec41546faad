"""Result and its text: what a model reads (output, the error with its location and
hint, timeouts, truncation, sessions), from the pool's JSON."""

from __future__ import annotations

from typing import Any

import pytest

from pynox.api.result import Result

pytestmark = pytest.mark.unit


def result(**fields: Any) -> Result:
    data = {"exit": 0, "stdout": "", "stderr": "", "error": None, "duration_ms": 1}
    data.update(fields)
    return Result.from_json(data)


def error(
    kind: str,
    message: str,
    file: str | None = "agent.py",
    line: int | None = 1,
    hint: str | None = None,
) -> dict[str, Any]:
    return {
        "type": kind,
        "message": message,
        "file": file,
        "line": line,
        "path": None,
        "hint": hint,
    }


def test_ok_result_text_is_the_output() -> None:
    r = result(stdout="45\n")
    assert r.ok and not r.truncated
    assert r.text == "45"
    assert str(r) == r.text


def test_no_output_says_so() -> None:
    assert result().text == "(no output)"
    assert result(stdout="\n\n").text == "(no output)"


def test_text_escapes_lone_surrogates_the_program_chose() -> None:
    """A program's message may hold one (`raise ValueError("\\ud800")`): the text a model
    reads shows its escape, as python prints it, and stays text a model API can encode."""
    r = result(exit=1, error=error("ValueError", "a\ud800b"), stdout="\udcff\n")
    assert r.text == "\\udcff\nValueError: a\\ud800b\nat agent.py:1"
    r.text.encode()


def test_error_text_is_type_message_location_and_hint() -> None:
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 1, in <module>\n'
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        "pynox: reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']\n"
    )
    hint = "reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']"
    r = result(
        exit=1,
        stdout="before\n",
        stderr=stderr,
        error=error("PermissionError", "[Errno 13] Permission denied: '/etc/passwd'", hint=hint),
    )
    assert not r.ok
    assert r.text == (
        "before\n"
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        "at agent.py:1\n"
        f"pynox: {hint}"
    )


def test_stderr_the_program_wrote_stays_and_the_traceback_goes() -> None:
    stderr = (
        "warning: careful\n"
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 4, in f\n'
        "KeyError: 'a'\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 6, in <module>\n'
        "ValueError: bad\n"
    )
    r = result(exit=1, stderr=stderr, error=error("ValueError", "bad", line=6))
    assert r.text == "warning: careful\nValueError: bad\nat agent.py:6"


def test_what_the_program_wrote_after_the_traceback_stays() -> None:
    """python prints the traceback, then runs atexit handlers and waits for threads: what
    they write comes after the traceback and the hint, and the model reads it too."""
    hint = "reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']"
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 3, in <module>\n'
        "    open('/etc/passwd')\n"
        "PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        f"pynox: {hint}\n"
        "saving the partial results\n"
        "saved 3 of 10\n"
    )
    message = "[Errno 13] Permission denied: '/etc/passwd'"
    r = result(exit=1, stderr=stderr, error=error("PermissionError", message, line=3, hint=hint))
    assert r.text == (
        "saving the partial results\nsaved 3 of 10\n"
        f"PermissionError: {message}\nat agent.py:3\npynox: {hint}"
    )
    # A message of several lines and no hint: only the lines after it stay.
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 1, in <module>\n'
        "ValueError: first\nsecond\n"
        "thread done\n"
    )
    r = result(exit=1, stderr=stderr, error=error("ValueError", "first\nsecond"))
    assert r.text == "thread done\nValueError: first\nsecond\nat agent.py:1"
    # Lines split as the text splits them: at a carriage return too.
    stderr = stderr.replace("first\nsecond", "first\rsecond")
    r = result(exit=1, stderr=stderr, error=error("ValueError", "first\rsecond"))
    assert r.text == "thread done\nValueError: first\rsecond\nat agent.py:1"


def test_an_exception_group_s_report_stays_and_what_follows_it_too() -> None:
    """Its sub-exceptions' tracebacks are part of its display, which ends at the first
    line that is not indented: what comes after it is the program's. The hint line goes,
    as the text ends with it."""
    display = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "agent.py", line 12, in <module>\n'
        '  |     raise ExceptionGroup("eg", errors)\n'
        "  | ExceptionGroup: eg (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "agent.py", line 5, in f\n'
        "    | PermissionError: [Errno 13] Permission denied: '/etc/passwd'\n"
        "    +---------------- 2 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "agent.py", line 5, in f\n'
        "    | ValueError: 2\n"
        "    +------------------------------------\n"
    )
    hint = "reading /etc/passwd is not allowed; grant it with allow_read=['/etc/passwd']"
    stderr = f"careful\n{display}pynox: {hint}\nbye\n"
    message = "eg (2 sub-exceptions)"
    r = result(exit=1, stderr=stderr, error=error("ExceptionGroup", message, line=12, hint=hint))
    assert r.text == (
        f"careful\n{display}bye\nExceptionGroup: {message}\nat agent.py:12\npynox: {hint}"
    )


def test_what_python_adds_to_the_error_line_stays() -> None:
    """python's report ends with more than the error's message: a suggestion for a
    misspelt name, and from 3.11 on the notes added to the error. The text kept the
    message alone, and the model never read "Did you mean: 'print'?"."""
    suggested = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 1, in <module>\n'
        "    pritn(total)\n"
        "NameError: name 'pritn' is not defined. Did you mean: 'print'?\n"
    )
    r = result(exit=1, stderr=suggested, error=error("NameError", "name 'pritn' is not defined"))
    assert r.text == (
        "NameError: name 'pritn' is not defined. Did you mean: 'print'?\nat agent.py:1"
    )
    noted = (
        "Traceback (most recent call last):\n"
        '  File "agent.py", line 3, in <module>\n'
        "    raise error\n"
        "ValueError: bad row\n"
        "while reading row 12 of sales.csv\n"
    )
    r = result(exit=1, stderr=noted, error=error("ValueError", "bad row", line=3))
    # The notes stay with what followed the report, as what atexit handlers write does.
    assert r.text == "while reading row 12 of sales.csv\nValueError: bad row\nat agent.py:3"


def test_an_exception_groups_report_stays_with_the_errors_in_it() -> None:
    """An exception group (asyncio.TaskGroup's, 3.11 on) lost the errors in it: the text
    was cut at the traceback of its first error, or at the group's own header, and the
    error names the group alone."""
    group = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "agent.py", line 7, in <module>\n'
        "  |     asyncio.run(main())\n"
        '  |   File "agent.py", line 5, in main\n'
        "  |     async with asyncio.TaskGroup() as group:\n"
        "  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "agent.py", line 3, in load\n'
        "    |     raise ValueError('the column price is missing')\n"
        "    | ValueError: the column price is missing\n"
        "    +---------------- 2 ----------------\n"
        "    | KeyError: 'total'\n"
        "    +------------------------------------\n"
    )
    message = "unhandled errors in a TaskGroup (2 sub-exceptions)"
    r = result(exit=1, stderr="warning: careful\n" + group, error=error("ExceptionGroup", message))
    assert r.text == f"warning: careful\n{group}ExceptionGroup: {message}\nat agent.py:1"


def test_syntax_error_report_is_not_repeated() -> None:
    stderr = (
        "  File \"agent.py\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed\n"
    )
    r = result(
        exit=1, stderr=stderr, error=error("SyntaxError", "'(' was never closed (agent.py, line 1)")
    )
    assert r.text == "SyntaxError: '(' was never closed (agent.py, line 1)\nat agent.py:1"


def test_a_one_line_syntax_error_is_not_repeated() -> None:
    """A NUL in the code: python reports it in one line, with no file or caret."""
    message = "source code string cannot contain null bytes"
    stderr = f"SyntaxError: {message}\n"
    reported = error("SyntaxError", message, file=None, line=None)
    r = result(exit=1, stderr=stderr, error=reported)
    assert r.text == f"SyntaxError: {message}"
    # What the program wrote before it stays.
    r = result(exit=1, stderr="before\n" + stderr, error=reported)
    assert r.text == f"before\nSyntaxError: {message}"


def test_stderr_without_error_is_kept_and_exit_status_shown() -> None:
    r = result(exit=3, stdout="out\n", stderr="bye\n")
    assert r.text == "out\nbye\n[exit status 3]"
    assert not r.ok


def test_timeout_text_has_no_location_and_no_repeated_hint() -> None:
    message = "the program ran past its 1s time limit and was stopped; raise it with timeout='2s'"
    r = result(
        exit=124,
        stdout="partial\n",
        error=error("Timeout", message, file=None, line=None, hint=message),
    )
    assert r.text == f"partial\nTimeout: {message}"


def test_truncation_is_noted() -> None:
    r = result(
        stdout="x" * 40 + "\n[... 60 bytes left out ...]\n" + "x" * 40, stdout_truncated=True
    )
    assert r.truncated
    assert r.text.endswith(
        "[stdout truncated: its middle was left out, its start and end kept; print less]"
    )


def test_session_restart_and_end_are_noted() -> None:
    restarted = result(
        stdout="1\n", session={"id": "s", "step": 3, "restarted": True, "ended": None}
    )
    assert restarted.text.startswith("[a new session started")
    ended = result(
        exit=124,
        session={"id": "s", "step": 2, "restarted": False, "ended": "timeout"},
        error=error("Timeout", "too slow", file=None, line=None),
    )
    assert "[the session ended (timeout)" in ended.text


def test_result_fields_from_json() -> None:
    data = {
        "id": "1",
        "exit": 0,
        "stdout": "a",
        "stderr": "b",
        "stdout_truncated": False,
        "stderr_truncated": True,
        "error": None,
        "duration_ms": 7,
        "policy": {"network": "deny"},
    }
    r = Result.from_json(data)
    assert (r.exit, r.stdout, r.stderr, r.duration_ms) == (0, "a", "b", 7)
    assert r.truncated and r.policy == {"network": "deny"} and r.raw == data


def test_a_result_stored_as_json_text_comes_back_from_that_text() -> None:
    """The agents page: store json.dumps(result.raw), and Result.from_json gives the Result
    back, from that text as from the dict it decodes to."""
    import json

    r = result(stdout="45\n", error=error("ValueError", "bad", hint="fix it"))
    stored = json.dumps(r.raw)
    assert Result.from_json(stored) == r
    assert Result.from_json(stored.encode()) == r
    assert Result.from_json(json.loads(stored)) == r


def test_from_json_refuses_what_is_not_a_result_in_one_sentence() -> None:
    with pytest.raises(TypeError, match=r"^Result.from_json takes .* not int; pass json"):
        Result.from_json(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not list; pass json.dumps\(result.raw\)"):
        Result.from_json("[1, 2]")
