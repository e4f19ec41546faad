"""Calls the seccomp filter refuses whatever the grants, made through the API: the hint
says what was refused and what to do instead, as the command line's does."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from pynox.api.pool import Pool
from pynox.engine import hint_text

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

REFUSED = [
    ("import os; os.memfd_create('buffer')", hint_text.MEMFD_HINT),
    (
        "import fcntl, os; fcntl.fcntl(os.pipe()[1], fcntl.F_SETPIPE_SZ, 1 << 20)",
        hint_text.PIPE_SIZE_HINT,
    ),
    (
        "import fcntl, os, tempfile; f = tempfile.TemporaryFile()\n"
        "fcntl.fcntl(f.fileno(), fcntl.F_SETLEASE, fcntl.F_WRLCK)",
        hint_text.LEASE_HINT,
    ),
    ("import os; os.kill(1, 0)", hint_text.OTHER_PROCESS_HINT),
    ("import os; os.kill(os.getppid(), 0)", hint_text.OTHER_PROCESS_HINT),
]


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


@pytest.mark.parametrize(("code", "hint"), REFUSED)
def test_a_refused_call_gets_its_hint(pool: Pool, code: str, hint: str) -> None:
    result = pool.run(code)
    assert result.error is not None and result.error["type"] == "PermissionError", result.text
    assert result.error["hint"] == hint
    assert result.text.endswith("pynox: " + hint)
