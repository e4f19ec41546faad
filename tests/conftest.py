"""Fixtures and hooks for the whole suite: the installed `pynox` command, a private
HOME and TMPDIR for the session, and a check that nothing is left behind.

The helpers tests call (run, pynox, python, the pool client...) are in `support/`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.examples import examples

from pynox.engine.scratch import PREFIX as SCRATCH_PREFIX

try:
    from hypothesis import settings
except ImportError:  # the examples session installs the frameworks, not the test extra
    pass
else:
    # Hypothesis times each example by the wall clock and fails a test whose example took
    # over 200 ms once ("Unreliable test timings"): on two busy cores, a test of what a
    # function returns then fails because the machine did not run it for a moment.
    # Tests without a count of their own draw hypothesis's default 100, or their share of it.
    settings.register_profile("pynox", deadline=None, max_examples=examples(100))
    settings.load_profile("pynox")

# The session's own directory, made by pytest_configure (see there).
SESSION_DIR = pytest.StashKey[Path]()
# Descriptors a library keeps open for the rest of the process and no test can close (Ray's
# driver keeps its core worker's after ray.shutdown(): tests/ray); not a test's leak.
KEPT_OPEN = pytest.StashKey[set[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Every temporary file of the session, pytest's own tmp_path trees included, and
    HOME (Pynox's configuration cache, the caches of the tools tests run) live in one
    directory, removed when the session ends; its temporary directory must then hold
    nothing but pytest's trees (see `leaves_nothing_behind`). Set before any test
    module is collected, as HOME and TMPDIR are read when a test runs a command."""
    session = Path(tempfile.mkdtemp(prefix="pynox-tests-"))
    (session / "home").mkdir()
    (session / "tmp").mkdir()
    os.environ["TMPDIR"] = str(session / "tmp")
    os.environ["HOME"] = str(session / "home")
    os.environ.pop("XDG_CACHE_HOME", None)
    tempfile.tempdir = str(session / "tmp")
    config.stash[SESSION_DIR] = session
    # The commands tests start get the signals pynox hands on to a program as from a
    # terminal, even when the suite itself was started with some ignored (a shell ignores
    # SIGINT and SIGQUIT for a job in the background, nohup SIGHUP): the tests that
    # ignore them say so (test_parity).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)


# --- nothing left behind -------------------------------------------------------------


def _pynox_processes() -> dict[int, str]:
    """This session's processes running pynox (commands, pools, zygotes, children), by pid.

    Only descendants of this process count: another test session running at the same
    time has pynox processes of its own, which are not this one's to judge or to kill.
    """
    from support.pool_client import descendants

    found = {}
    for pid in descendants(os.getpid(), zombies=False):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        command = b" ".join(argv).decode(errors="replace")
        command_is_pynox = ("pynox/_start.py", "pynox._boot", "pynox.cli.main", " -m pynox")
        if any(mark in command for mark in command_is_pynox):
            found[pid] = command
    return found


def open_descriptors() -> dict[str, str | None]:
    """Each open descriptor's number, with what it leads to: a number alone would hide a
    leak that took a number some file held as the session began."""
    gc.collect()  # files only the collector would close are not leaks of a test
    return {fd: _describe(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.fixture(scope="session", autouse=True)
def leaves_nothing_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the whole suite: no pynox process, no new descriptor, no file left behind."""
    processes_before = set(_pynox_processes())
    descriptors_before = open_descriptors()
    yield
    api = sys.modules.get("pynox.api.shared")
    if api is not None:
        api._close()  # the shared pool closes at exit; the checks come before that
    gc.collect()  # a Pool nobody closed is closed by its finalizer
    deadline = time.monotonic() + 10
    while left := {p: c for p, c in _pynox_processes().items() if p not in processes_before}:
        if time.monotonic() > deadline:
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the tests left pynox processes running: {left}")
        time.sleep(0.1)
    kept = request.config.stash.get(KEPT_OPEN, set())
    links = {
        fd: target
        for fd, target in open_descriptors().items()
        if target is not None and fd not in kept and descriptors_before.get(fd) != target
    }
    assert not links, f"the tests left descriptors open: {links}"
    # pytest's tmp_path trees are pytest's to manage; anything else is a test's leftover.
    session = request.config.stash[SESSION_DIR]
    # A plain run's scratch directory is removed by a helper just after the run ends.
    deadline = time.monotonic() + 10
    while (leftovers := _leftovers(session / "tmp")) and time.monotonic() < deadline:
        if not all(name.startswith(SCRATCH_PREFIX) for name in leftovers):
            break
        time.sleep(0.1)
    assert not leftovers, f"the tests left files behind: {_whose(session / 'tmp', leftovers)}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Removes the session's directory however the session ended: after a failed check
    above, a test that failed with its files, or in the process that only hands tests
    to workers (pytest-xdist), which never runs the fixture above."""
    session = config.stash.get(SESSION_DIR, None)
    if session is not None:
        shutil.rmtree(session, ignore_errors=True)


# When each test of this process began, by the wall clock a file's times are in: a file left
# behind names the tests that ran when it last changed.
_TESTS_BEGUN: list[tuple[float, str]] = []


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _TESTS_BEGUN.append((time.time(), nodeid))


def _whose(tmp: Path, names: list[str]) -> str:
    """Each name left in tmp, with what it holds and the tests that ran when it last
    changed: a leftover that shows up now and then must say where it came from."""
    described = []
    for name in sorted(names):
        try:
            changed = (tmp / name).lstat().st_ctime
            held = sorted(os.listdir(tmp / name))[:5] if (tmp / name).is_dir() else []
        except OSError as exc:
            described.append(f"{name} ({exc.strerror})")
            continue
        began = [nodeid for at, nodeid in _TESTS_BEGUN if at <= changed][-2:]
        described.append(
            f"{name} (holding {held}, last changed {time.time() - changed:.1f} s ago, "
            f"while {' then '.join(began) or 'no test'} ran)"
        )
    return "; ".join(described)


def _leftovers(tmp: Path) -> list[str]:
    return [p.name for p in tmp.iterdir() if not p.name.startswith("pytest-of-")]


def _describe(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None  # closed since (the listing's own descriptor, say)
