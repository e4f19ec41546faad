"""Hints under a pool's [pool.limits]: each names a grant the limits let a request ask for,
or says that none may; without limits, every kind reads as it always did."""

from __future__ import annotations

import pytest

from pynox.engine.hint_style import Style
from pynox.engine.hint_text import format_hint

pytestmark = pytest.mark.unit

MIB = 1 << 20
DATA = "/srv/data"
OUTSIDE = "/etc/hostname"


def _refuses(name: str, path: str | None) -> bool:
    """Limits that allow reading and writing DATA only, and no network."""
    return path is None or not path.startswith(DATA)


LIMITED = Style(True, {"memory": 512 * MIB, "max_file_size": 4 * MIB}, _refuses)


@pytest.mark.parametrize(
    ("kind", "value", "memory", "hint"),
    [
        (
            "native_abort",
            None,
            300 * MIB,
            "native code ended the program, as it often does when an allocation fails under "
            "the 300m memory limit; raise the limit with memory='512m'",
        ),
        (
            "native_exit",
            None,
            512 * MIB,
            "native code ended the program before Python finished it, as libraries such as "
            "OpenBLAS do when an allocation fails under the 512m memory limit, the most "
            "[pool.limits] allows; allocate less",
        ),
        (
            "open_files",
            None,
            512 * MIB,
            "the 512m memory limit allows one open file per MiB (at least 64), the most "
            "[pool.limits] allows; close files the program no longer needs",
        ),
        (
            "open_files",
            None,
            64 * MIB,
            "the 64m memory limit allows one open file per MiB (at least 64); close files the "
            "program no longer needs or raise the limit with memory='128m'",
        ),
        (
            "write",
            DATA,
            None,
            f"writing {DATA} is not allowed; grant it with allow_write=['{DATA}']",
        ),
        (
            "entries",
            OUTSIDE,
            None,
            f"changing the entries of {OUTSIDE} is not allowed; [pool.limits] lets no request "
            "grant it",
        ),
        (
            "read_write",
            OUTSIDE,
            None,
            f"the program reads back what it writes in {OUTSIDE}; [pool.limits] lets no "
            "request grant both",
        ),
        (
            "read_write",
            DATA,
            None,
            f"the program reads back what it writes in {DATA}; grant both with "
            f"allow_read=['{DATA}'], allow_write=['{DATA}']",
        ),
        (
            "module",
            "/opt/site-packages",
            None,
            "the module is installed in /opt/site-packages; [pool.limits] lets no request "
            "import from there",
        ),
    ],
)
def test_under_pool_limits(kind: str, value: str | None, memory: int | None, hint: str) -> None:
    assert format_hint(kind, value, LIMITED, memory, None) == hint


def test_a_file_size_limit_is_raised_up_to_the_limits_only() -> None:
    assert format_hint("file_size", None, LIMITED, None, 3 * MIB) == (
        "a file reached the 3m size limit; write less or raise it with max_file_size='4m'"
    )
    assert format_hint("file_size", None, LIMITED, None, 4 * MIB) == (
        "a file reached the 4m size limit, the most [pool.limits] allows; write less"
    )


@pytest.mark.parametrize(
    ("kind", "value", "hint"),
    [
        ("memory", None, "the program used up its 64m memory limit; allocate less or raise "
         "the limit with --memory=128m"),
        ("network", None, "the network is off; grant it with --allow-network"),
        ("read", OUTSIDE, f"reading {OUTSIDE} is not allowed; grant it with "
         f"--allow-read={OUTSIDE}"),
        ("module", "/opt/sp", "the module is installed in /opt/sp; import from there with "
         "--package-dir=/opt/sp"),
    ],
)  # fmt: skip
def test_without_limits_a_hint_names_the_grant(kind: str, value: str | None, hint: str) -> None:
    assert format_hint(kind, value, Style(False), 64 * MIB, None) == hint
