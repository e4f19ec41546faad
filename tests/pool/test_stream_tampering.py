"""A program that tampers with its standard streams (closes a descriptor, replaces
sys.stdout, gives it a flush that fails) gets in the pool what `python` shows: the same
output, messages and exit status, nothing printed before lost; a session says when its
output can no longer reach the client, and outlives a stream that fails."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.pool_client import PoolClient
from support.pool_requests import new_id

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
    assert (result["stdout"], result["stderr"], result["exit"]) == (
        python.stdout,
        python.stderr,
        python.returncode,
    )
