"""How many examples a property test draws.

The CPython that runs nox draws each test's full count; the others (nox's tests sessions
for them set PYNOX_TEST_EXAMPLE_SHARE) a share of it, enough to check the properties
against their own json, parser and standard library. Each run draws anew, so the runs
add up to far more.
"""

from __future__ import annotations

import os

SHARE = float(os.environ.get("PYNOX_TEST_EXAMPLE_SHARE", "1"))


def examples(count: int) -> int:
    """The examples to draw where the full count is COUNT: at least one."""
    return max(1, round(count * SHARE))
