"""The public system data the standard library reads by default (the parity corpus
runs the calls themselves: tests/parity/stdlib_system_facts.py)."""

from __future__ import annotations

import mimetypes
import os
import sys
from pathlib import Path

import pytest
from support.commands import pynox, python

from pynox.policy import system_paths

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def test_every_file_mimetypes_reads_is_readable() -> None:
    """mimetypes raises when one of its files exists and cannot be read."""
    assert set(system_paths.MIME_TYPES_FILES) == set(mimetypes.knownfiles)


@pytest.mark.parametrize("path", ["/etc/mime.types", "/etc/os-release", "/usr/lib/os-release"])
def test_a_write_grant_on_a_default_read_is_refused(tmp_path: Path, path: str) -> None:
    """Made a link to /, the file would widen every later run's reads."""
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    marker = tmp_path / "ran"
    proc = pynox(f"--allow-write={path}", "-c", f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 125, proc.stderr
    line = proc.stderr.decode()
    assert line.startswith(f"pynox: cannot grant writing {os.path.realpath(path)}: ")
    assert "a system file every run reads" in line
    assert not marker.exists()


# Prints how to clear the screen and how many colours there are, or why it cannot.
CURSES_PROGRAM = """\
import curses
try:
    curses.setupterm()
except curses.error as error:
    print(error)
else:
    print(curses.tigetstr("clear"), curses.tigetnum("colors"))
"""


def test_curses_finds_the_terminal_description_once_term_is_passed() -> None:
    pytest.importorskip("curses")
    env = {"TERM": "xterm"}
    expected = python("-c", CURSES_PROGRAM, env=env)
    if not expected.stdout.startswith(b"b'"):
        pytest.skip(f"python finds no terminal description here: {expected.stdout!r}")
    got = pynox("--allow-env=TERM", "-c", CURSES_PROGRAM, env=env)
    assert (got.stdout, got.stderr, got.returncode) == (expected.stdout, b"", 0)


CONTROL_GROUPS = Path(__file__).parent / "parity" / "control_group_limits.py"


def test_a_pool_request_reads_its_control_groups_limits() -> None:
    """As a command does (the parity corpus runs it there): the pool's children confine
    themselves, and /proc/self is each child's own."""
    import pynox

    code = CONTROL_GROUPS.read_text()
    expected = python("-c", code)
    assert expected.returncode == 0, expected.stderr
    with pynox.Pool(workers=1) as pool:
        result = pool.run(code)
    assert (result.stdout, result.stderr, result.exit) == (expected.stdout.decode(), "", 0)


def test_of_a_control_group_only_its_limits_are_readable() -> None:
    """Not the processes in it, nor what they use: only what sizes a program to it."""
    listings = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, group = line.split(":", 2)
        folder = Path(system_paths.CGROUP_ROOT, controllers.split(",")[0], group.lstrip("/"))
        listings.append(folder / "cgroup.procs")
    listing = next((path for path in listings if path.exists()), None)
    if listing is None:
        pytest.skip("no control group lists its processes here")
    proc = pynox("-c", f"open({str(listing)!r}).read()")
    assert proc.returncode == 1
    assert b"PermissionError: [Errno 13] Permission denied" in proc.stderr
