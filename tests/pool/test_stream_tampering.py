"""A program that tampers with its standard streams (closes a descriptor, replaces
sys.stdout, gives it a flush that fails) gets in the pool what `python` shows: the same
output, messages and exit status, nothing printed before lost; a session says when its
output can no longer reach the client, and outlives a stream that fails."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.pool_client import PoolClient
from support.pool_requests import close_session, new_id, step

FAILING_FLUSH = (
    "import sys\n"
    "print('before')\n"
    "class Failing:\n"
    "    def write(self, text):\n"
    "        return len(text)\n"
    "    def flush(self):\n"
    "        raise RuntimeError('no flush')\n"
    "sys.stdout = Failing()\n"
    "print('lost, as under python')\n"
)

PROGRAMS = {
    # python reports the failed flush once, in its own words, and exits 120.
    "descriptor 1 closed": "import os\nos.close(1)\nprint('x')\n",
    # What the program printed before it replaced sys.stdout still comes out.
    "sys.stdout set to None": "import sys\nprint('before')\nsys.stdout = None\nprint('x')\n",
    "a StringIO left in sys.stdout": (
        "import io, sys\nprint('before')\nsys.stdout = io.StringIO()\nprint('x')\n"
    ),
    "a sys.stdout whose flush fails": FAILING_FLUSH,
    # python's stderr is line-buffered, even into a pipe.
    "sys.stderr then descriptor 2": (
        "import os, sys\nsys.stderr.write('first\\n')\nos.write(2, b'second\\n')\n"
    ),
}


@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_a_request_that_tampers_with_its_streams_ends_as_under_python(
    pool: PoolClient, program: str
) -> None:
    python = subprocess.run(
        [sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60
    )
    result = pool.run({"id": new_id("streams"), "code": program, "name": "<string>"})
    assert (result["stdout"], _unplaced(result["stderr"]), result["exit"]) == (
        python.stdout,
        _unplaced(python.stderr),
        python.returncode,
    )


def _unplaced(stderr: str) -> str:
    """stderr without the addresses of objects, which differ from process to process
    (before Python 3.13, "Exception ignored in: <__main__.Failing object at 0x...>")."""
    return re.sub(r" at 0x[0-9a-f]+>", " at 0x...>", stderr)


def test_a_session_step_that_replaced_sys_stdout_keeps_what_it_printed_before(
    pool: PoolClient,
) -> None:
    name = new_id("replaced")
    first = step(pool, name, "import io, sys\nprint('before')\nsys.stdout = io.StringIO()")
    assert (first["stdout"], first["exit"]) == ("before\n", 0)
    # Later steps print into what the program put there, as in python's REPL.
    second = step(pool, name, "print('into the StringIO')\nsys.stdout.getvalue()")
    assert (second["stdout"], second["value"]) == ("", repr("into the StringIO\n"))
    close_session(pool, name)


def test_a_session_outlives_a_sys_stdout_whose_flush_fails(pool: PoolClient) -> None:
    name = new_id("failing")
    first = step(pool, name, FAILING_FLUSH)
    assert first["stdout"] == "before\n"
    assert first["stderr"].endswith("RuntimeError: no flush\n")
    assert "pynox" not in first["stderr"]  # no traceback of pynox's own
    assert (first["exit"], first["session"]["ended"]) == (120, None)
    second = step(pool, name, "sys.stdout = sys.__stdout__\nprint('still here')")
    assert (second["stdout"], second["exit"]) == ("still here\n", 0)
    assert (second["session"]["step"], second["session"]["restarted"]) == (2, False)
    close_session(pool, name)


STDOUT_CLOSED = (
    "pynox: a step closed this session's standard output (descriptor 1), so what its "
    "steps print is lost; end the session (sys.exit() in a step, or close it) and the "
    "next step starts a new one\n"
)
FLUSH_FAILED = (
    "Exception ignored on flushing sys.stdout:\n"
    if sys.version_info >= (3, 13)
    else "Exception ignored in: <_io.TextIOWrapper name='<stdout>' mode='w' encoding='utf-8'>\n"
) + "OSError: [Errno 9] Bad file descriptor\n"


def test_a_session_whose_step_closed_its_output_says_so_at_every_step(
    pool: PoolClient,
) -> None:
    name = new_id("closed")
    first = step(pool, name, "import os\nos.close(1)\nprint('lost')")
    assert (first["stdout"], first["stderr"], first["exit"]) == (
        "",
        FLUSH_FAILED + STDOUT_CLOSED,
        120,
    )
    second = step(pool, name, "print('lost too')")
    assert (second["stdout"], second["stderr"], second["exit"]) == (
        "",
        FLUSH_FAILED + STDOUT_CLOSED,
        120,
    )
    assert second["session"]["ended"] is None
    # What the hint says to do works, either way.
    ended = step(pool, name, "import sys\nsys.exit()")
    assert ended["session"]["ended"] == "exit"
    restarted = step(pool, name, "print('back')")
    assert (restarted["stdout"], restarted["exit"]) == ("back\n", 0)
    assert restarted["session"]["restarted"]
    step(pool, name, "import os\nos.close(1)\nprint('lost')")
    close_session(pool, name)
    fresh = step(pool, name, "print('back')")
    assert (fresh["stdout"], fresh["exit"], fresh["session"]["step"]) == ("back\n", 0, 1)
    close_session(pool, name)


def test_a_traceback_with_sys_stderr_set_to_none_is_shown_nowhere(pool: PoolClient) -> None:
    program = "import sys\nprint('before')\nsys.stderr = None\nraise ValueError('boom')\n"
    python = subprocess.run(
        [sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60
    )
    assert (python.stdout, python.stderr, python.returncode) == ("before\n", "", 1)
    name = new_id("no-stderr")
    for result in (
        pool.run({"id": new_id("no-stderr"), "code": program}),
        step(pool, name, program),
    ):
        assert (result["stdout"], result["stderr"], result["exit"]) == ("before\n", "", 1)
        assert result["error"]["message"] == "boom"
    close_session(pool, name)


def test_a_session_step_that_exits_with_its_output_closed_ends_as_python_does(
    pool: PoolClient,
) -> None:
    program = "import os, sys\nos.close(1)\nprint('lost')\nsys.exit(0)\n"
    python = subprocess.run(
        [sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60
    )
    result = step(pool, new_id("exits"), program)
    assert (result["stdout"], result["stderr"], result["exit"]) == (
        python.stdout,
        python.stderr,
        python.returncode,
    )
    assert result["session"]["ended"] == "exit"


def test_a_script_has_its_output_flushed_as_it_ends_as_under_python(
    pool: PoolClient, tmp_path: Path
) -> None:
    script = tmp_path / "flushes.py"
    script.write_text(
        "import sys\n"
        "class Counting:\n"
        "    def write(self, text):\n"
        "        return len(text)\n"
        "    def flush(self):\n"
        "        sys.__stderr__.write('flushed\\n')\n"
        "sys.stdout = Counting()\n"
    )
    python = subprocess.run(
        [sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=60
    )
    assert python.stderr == "flushed\nflushed\n"  # as it ends, then at its exit
    result = pool.run(
        {"id": new_id("script"), "script": str(script), "allow_read": [str(tmp_path)]}
    )
    assert (result["stdout"], result["stderr"], result["exit"]) == (
        python.stdout,
        python.stderr,
        python.returncode,
    )
