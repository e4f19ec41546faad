"""A pool run ends as `python` ends: what the program left in its globals is finalized
(__del__ runs, files written and never closed are flushed) in CPython's order, after a
one-shot request and when a session closes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.pool_client import PoolClient
from support.pool_requests import assert_ok, close_session, new_id, step

CORPUS = Path(__file__).parent.parent / "parity"
# Programs of the parity corpus whose output depends on what runs after their last line.
AT_SHUTDOWN = [
    "atexit_order.py",
    "del_at_shutdown.py",
    "shutdown_finalization.py",
    "stringio_unclosed.py",
    "threads_nondaemon.py",
    "unclosed_file_flush.py",
]


@pytest.mark.parametrize("name", AT_SHUTDOWN)
def test_what_runs_at_shutdown_runs_as_in_python(pool: PoolClient, name: str) -> None:
    source = (CORPUS / name).read_text()
    python = subprocess.run(
        [sys.executable, "-I", "-c", source], capture_output=True, text=True, timeout=60
    )
    result = pool.run({"id": new_id("end"), "code": source})
    assert (result["stdout"], result["stderr"], result["exit"]) == (
        python.stdout,
        python.stderr,
        python.returncode,
    )


UNCLOSED = "log = open({path!r}, 'w')\nlog.write('abc')\n"


def test_a_file_a_request_never_closed_is_written(pool: PoolClient, tmp_path: Path) -> None:
    path = tmp_path / "left-open.txt"
    result = pool.run(
        {
            "id": new_id("unclosed"),
            "code": UNCLOSED.format(path=str(path)),
            "allow_write": [str(tmp_path)],
        }
    )
    assert_ok(result, "")
    assert path.read_text() == "abc"


def test_a_file_a_session_never_closed_is_written_when_it_closes(
    pool: PoolClient, tmp_path: Path
) -> None:
    path = tmp_path / "left-open.txt"
    name = new_id("unclosed-session")
    # An exit handler that takes its time: the answer to close_session waits for it.
    slow_exit = "import atexit, time\natexit.register(time.sleep, 0.3)\n"
    program = slow_exit + UNCLOSED.format(path=str(path))
    first = step(pool, name, program, allow_write=[str(tmp_path)])
    assert_ok(first, "")
    assert path.read_text() == ""  # still buffered, as in a python that still runs
    close_session(pool, name)
    assert path.read_text() == "abc"


def test_a_file_is_written_even_when_the_program_keeps_its_module(
    pool: PoolClient, tmp_path: Path
) -> None:
    """A module still referenced after the last collection has its globals emptied, as
    CPython empties them, so what they held is finalized all the same."""
    path = tmp_path / "kept.txt"
    keeps_main = "import builtins, sys\nbuiltins.kept = sys.modules[__name__]\n"
    result = pool.run(
        {
            "id": new_id("kept"),
            "code": keeps_main + UNCLOSED.format(path=str(path)),
            "allow_write": [str(tmp_path)],
        }
    )
    assert_ok(result, "")
    assert path.read_text() == "abc"


# Programs that end with SystemExit's message while sys.stderr is not python's own.
EXIT_MESSAGES = {
    "stderr None": "import sys\nsys.stderr = None\nsys.exit('fatal: no config é')\n",
    "stderr deleted": "import sys\ndel sys.stderr\nsys.exit(['not', 'text'])\n",
    "stderr an object": (
        "import sys\n"
        "class Log:\n"
        "    def write(self, text):\n"
        "        sys.__stdout__.write(f'write {text!r}\\n')\n"
        "    def flush(self):\n"
        "        pass\n"
        "sys.stderr = Log()\n"
        "sys.exit('fatal')\n"
    ),
}


@pytest.mark.parametrize("session", [False, True], ids=["request", "session"])
@pytest.mark.parametrize("program", list(EXIT_MESSAGES.values()), ids=list(EXIT_MESSAGES))
def test_systemexit_s_message_is_written_as_python_writes_it(
    pool: PoolClient, program: str, session: bool
) -> None:
    """python writes the message into sys.stderr, then the line's end, each with a write of
    its own; with sys.stderr None or gone, straight to descriptor 2: never lost."""
    python = subprocess.run(
        [sys.executable, "-I", "-c", program], capture_output=True, text=True, timeout=60
    )
    request = {"id": new_id("exit"), "code": program}
    if session:
        request["session"] = new_id("exit-session")
    result = pool.run(request)
    assert python.returncode == 1 and python.stdout + python.stderr
    assert (result["stdout"], result["stderr"], result["exit"]) == (
        python.stdout,
        python.stderr,
        python.returncode,
    )
