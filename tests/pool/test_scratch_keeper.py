"""The pool's scratch directories, made ahead and removed after by a thread of their own."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pynox.errors import PolicyError
from pynox.file_names import OUT_DIR
from pynox.pool import scratch_keeper
from pynox.pool.scratch_keeper import ScratchKeeper


def _eventually(condition: object, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_directories_are_made_ahead_with_their_out_directory(tmp_path: Path) -> None:
    keeper = ScratchKeeper(str(tmp_path))
    try:
        keeper.keep_ready(2)
        assert _eventually(lambda: len(os.listdir(tmp_path)) == 2)
        made = set(os.listdir(tmp_path))
        taken = keeper.take()
        assert os.path.basename(taken) in made  # one made ahead, not a new one
        assert os.listdir(taken) == [OUT_DIR]
        assert os.stat(taken).st_mode & 0o777 == 0o700
        time.sleep(0.1)
        assert len(os.listdir(tmp_path)) == 2  # none made while its program starts
        keeper.keep_ready(2)
        assert _eventually(lambda: len(os.listdir(tmp_path)) == 3)
    finally:
        keeper.close()
    assert os.listdir(tmp_path) == [os.path.basename(taken)]  # only the one given out


def test_a_directory_made_while_one_is_taken_is_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread may be making a directory when take() runs: that one still counts, and
    no other follows until keep_ready asks again."""
    second_started, let_it_finish = threading.Event(), threading.Event()
    calls = []

    def slow_make(root: str) -> str:
        calls.append(root)
        if len(calls) == 2:
            second_started.set()
            let_it_finish.wait(10)
        return scratch_keeper.scratch.create(root)

    monkeypatch.setattr(scratch_keeper, "make", slow_make)
    keeper = ScratchKeeper(str(tmp_path))
    try:
        keeper.keep_ready(2)
        assert second_started.wait(10)
        keeper.take()
        let_it_finish.set()
        assert _eventually(lambda: len(keeper.directories()) == 1)
        time.sleep(0.1)
        assert len(calls) == 2
    finally:
        let_it_finish.set()
        keeper.close()


def test_used_directories_wait_until_asked_then_go(tmp_path: Path) -> None:
    keeper = ScratchKeeper(str(tmp_path))
    try:
        used = [keeper.take() for _ in range(3)]
        Path(used[0], OUT_DIR, "chart.png").write_bytes(b"x")
        for path in used:
            keeper.discard(path)
        assert keeper.used() == 3
        time.sleep(0.1)
        assert all(os.path.isdir(path) for path in used)  # not before remove_used
        keeper.remove_used()
        assert keeper.used() == 0  # no longer waiting: being removed
        assert _eventually(lambda: not any(os.path.lexists(path) for path in used))
    finally:
        keeper.close()


def test_a_used_directory_the_thread_tries_to_reuse_still_counts_as_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's loop sleeps without a deadline when used() is 0, so a directory the thread
    has taken to reuse, and may give back, must still count: else it would stay until the
    pool's next request."""
    monkeypatch.setattr(scratch_keeper, "_EXIT_WAIT", 300)  # how long it waits for the run
    keeper = ScratchKeeper(str(tmp_path))
    running = subprocess.Popen(["sleep", "2"])
    try:
        path = keeper.take()
        keeper.discard(path, os.pidfd_open(running.pid))  # its run's process still runs
        keeper.keep_ready(1)  # the thread takes it to reuse, and waits for the process
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            assert keeper.used() == 1
            time.sleep(0.001)
        running.kill()
        running.wait()  # removed once its process has exited, as the loop asks again
        assert _eventually(lambda: _removed_when_asked(keeper, path))
    finally:
        running.kill()
        running.wait()
        keeper.close()


def _removed_when_asked(keeper: ScratchKeeper, path: str) -> bool:
    """Whether path is gone, asking for what runs left to be removed, as the pool's loop
    does every _TIDY_AGAIN while some is."""
    keeper.remove_used()
    return not os.path.lexists(path)


def test_a_used_directory_is_removed_only_once_its_process_has_exited(tmp_path: Path) -> None:
    """A process killed as its run ended may still be in system calls that make entries
    there: removed before it exits, the directory would keep what those make after the
    removal listed it, until the pool ends."""
    keeper = ScratchKeeper(str(tmp_path))
    running = subprocess.Popen(["sleep", "60"])
    try:
        path = keeper.take()
        keeper.discard(path, os.pidfd_open(running.pid))
        keeper.remove_used()
        assert _eventually(lambda: keeper.used() == 1)  # given back: its process runs
        assert os.path.isdir(path)
        running.kill()
        running.wait()
        assert _eventually(lambda: _removed_when_asked(keeper, path))
    finally:
        running.kill()
        running.wait()
        keeper.close()


def test_close_removes_every_directory_it_holds(tmp_path: Path) -> None:
    keeper = ScratchKeeper(str(tmp_path))
    keeper.keep_ready(2)
    assert _eventually(lambda: len(os.listdir(tmp_path)) == 2)
    keeper.discard(keeper.take())
    keeper.close()
    assert os.listdir(tmp_path) == []


def test_without_a_directory_take_says_why(tmp_path: Path) -> None:
    base = tmp_path / "gone"
    root = base / "root"
    keeper = ScratchKeeper(str(root))
    try:
        keeper.keep_ready(2)  # the thread fails, and leaves it to take()
        with pytest.raises(PolicyError) as refused:
            keeper.take()
        assert refused.value.message == (
            f"the pool's scratch directory {root} was removed and cannot be made again (No "
            f"such file or directory); make {base} again, or restart the pool with TMPDIR "
            "set to a writable directory"
        )
        base.mkdir()
        assert os.path.dirname(keeper.take()) == str(root)
    finally:
        keeper.close()
