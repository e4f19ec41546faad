"""The conformance suite runs against an installed pynox, never the source tree.

PYNOX_BIN names the installed command (a bundle's bin/pynox or its link on PATH);
PYNOX_PYTHON the bundle's own interpreter (default: python/bin/python3 beside the
install's bin/). PYNOX_EXPECT_SANDBOX=no, with PYNOX_EXPECT_REASON, says that the
machine cannot sandbox (qemu-user): the suite then checks that `doctor` says exactly
why and that every sandboxed run is refused with exit 125, and runs the parity
checks with --no-sandbox. Only pytest and the standard library are used.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from .support import Install, find_install

SKIP_REASON = (
    "PYNOX_BIN is not set: the conformance suite tests an installed bundle "
    "(run it with `nox -s conformance -- TARGET` or `make conformance`)"
)


@pytest.fixture(scope="session")
def install() -> Install:
    if not os.environ.get("PYNOX_BIN"):
        pytest.skip(SKIP_REASON)
    return find_install(os.environ)


@pytest.fixture(autouse=True)
def _needs_install(install: Install) -> None:
    """Every test of the directory needs the install (and is skipped without one)."""


@pytest.fixture
def sandboxed(install: Install, record_property: Callable[[str, object], None]) -> Install:
    """For tests of the sandbox itself: skipped where the sandbox is expected to refuse.

    The JUnit report marks each such test, so the runner counts those that ran."""
    record_property("sandboxed", "yes")
    if not install.expect_sandbox:
        pytest.skip(
            "this machine cannot sandbox (expected: "
            f"{install.expect_reason}); test_refusal checks that these runs are refused"
        )
    return install
