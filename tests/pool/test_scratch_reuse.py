"""A scratch directory that its run left as it was made goes, renamed, to a later run;
any other is removed (pynox.pool.scratch_reuse)."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.commands import bound_by_file_modes
from support.pool_client import PYNOX, PoolClient, clean_env

from pynox.file_names import OUT_DIR
from pynox.pool.scratch_keeper import ScratchKeeper

_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_NODUMP_FL = 0x80086601, 0x40086602, 0x40


def _eventually(condition: Callable[[], bool], within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def keeper(tmp_path: Path) -> Iterator[ScratchKeeper]:
    kept = ScratchKeeper(str(tmp_path))
    yield kept
    kept.close()


@pytest.fixture
def exited() -> Callable[[], int]:
    """pidfds of processes that have exited, as a run's child has when the pool is done."""

    def pidfd() -> int:
        with subprocess.Popen(["sleep", "60"]) as process:
            fd = os.pidfd_open(process.pid)
            process.kill()
        return fd

    return pidfd


def _ready_one(keeper: ScratchKeeper, used: str = "") -> str:
    """A directory the keeper hands out after it was asked to keep one ready (with a run's
    used one handed back, another name than that)."""
    keeper.keep_ready(1)
    assert _eventually(lambda: bool(set(keeper.directories()) - {used}))
    return keeper.take()


def _inode(path: str) -> int:
    return os.stat(path).st_ino


def test_a_directory_left_as_made_is_renamed_and_given_again(
    keeper: ScratchKeeper, exited: Callable[[], int]
) -> None:
    used = _ready_one(keeper)
    inode = _inode(used)
    keeper.discard(used, exited())
    again = _ready_one(keeper, used)
    assert _inode(again) == inode
    assert again != used and not os.path.lexists(used)  # the old name is gone
    assert os.path.dirname(again) == os.path.dirname(used)
    assert os.listdir(again) == [OUT_DIR] and os.listdir(os.path.join(again, OUT_DIR)) == []
    keeper.discard(again, exited())
    keeper.remove_used()  # fewer ready than kept: given again rather than removed
    assert _eventually(lambda: again not in keeper.directories())
    (kept,) = keeper.directories()
    assert _inode(kept) == inode and kept != again


def _file_in(path: str) -> None:
    Path(path, "left.txt").write_text("from the last run")


def _file_in_out(path: str) -> None:
    Path(path, OUT_DIR, "chart.png").write_bytes(b"png")


def _directory_in_out(path: str) -> None:
    os.mkdir(os.path.join(path, OUT_DIR, "sub"))


def _out_a_link(path: str) -> None:
    out = os.path.join(path, OUT_DIR)
    os.rmdir(out)
    os.mkdir(path + "-elsewhere")
    os.symlink(path + "-elsewhere", out)


def _out_replaced(path: str) -> None:
    out = os.path.join(path, OUT_DIR)
    os.rename(out, path + "-old-out")  # kept, so that the new one is another inode
    os.mkdir(out, 0o700)


def _out_gone(path: str) -> None:
    os.rmdir(os.path.join(path, OUT_DIR))


def _mode(path: str) -> None:
    os.chmod(path, 0o755)


def _out_mode(path: str) -> None:
    os.chmod(os.path.join(path, OUT_DIR), 0o777)


def _xattr(path: str) -> None:
    try:
        os.setxattr(path, "user.pynox-test", b"1")
    except OSError as exc:
        pytest.skip(f"this file system keeps no user extended attributes: {exc.strerror}")


def _flag(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            flags = struct.unpack_from("=I", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8)))[0]
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("=Q", flags | _FS_NODUMP_FL))
        except OSError as exc:
            pytest.skip(f"this file system keeps no inode flags: {exc.strerror}")
    finally:
        os.close(fd)


def _file_made_and_removed(path: str) -> None:
    time.sleep(0.02)  # past the tick of the file system's clock since the directory was made
    Path(path, "gone.txt").write_text("")
    os.unlink(os.path.join(path, "gone.txt"))


def _times(path: str) -> None:
    os.utime(path, ns=(10**9, 10**9))


def _out_times(path: str) -> None:
    os.utime(os.path.join(path, OUT_DIR), ns=(10**9, 10**9))


def _replaced(path: str) -> None:
    os.rename(path, path + "-moved")
    os.mkdir(path, 0o700)
    os.mkdir(os.path.join(path, OUT_DIR), 0o700)


CHANGES = [
    _file_in,
    _file_in_out,
    _directory_in_out,
    _out_a_link,
    _out_replaced,
    _out_gone,
    _mode,
    _out_mode,
    _xattr,
    _flag,
    _file_made_and_removed,
    _times,
    _out_times,
    _replaced,
]


@pytest.mark.parametrize("change", CHANGES, ids=[change.__name__[1:] for change in CHANGES])
def test_a_directory_changed_in_any_way_is_removed_not_given_again(
    keeper: ScratchKeeper, exited: Callable[[], int], change: Callable[[str], None]
) -> None:
    used = _ready_one(keeper)
    change(used)
    inode = _inode(used)
    keeper.discard(used, exited())
    fresh = _ready_one(keeper, used)
    assert _inode(fresh) != inode and fresh != used
    assert os.path.lexists(used)  # kept aside, then removed while the pool is idle
    keeper.remove_used()
    assert _eventually(lambda: not os.path.lexists(used))


def test_nothing_is_given_again_while_its_process_runs(
    keeper: ScratchKeeper, tmp_path: Path
) -> None:
    used = _ready_one(keeper)
    inode = _inode(used)
    with subprocess.Popen(["sleep", "60"]) as running:
        keeper.discard(used, os.pidfd_open(running.pid))
        fresh = _ready_one(keeper, used)
        running.kill()
    assert _inode(fresh) != inode
    keeper.remove_used()
    assert _eventually(lambda: not os.path.lexists(used))


def test_nothing_is_given_again_without_a_process_to_watch(keeper: ScratchKeeper) -> None:
    used = _ready_one(keeper)
    inode = _inode(used)
    keeper.discard(used)
    assert _inode(_ready_one(keeper, used)) != inode
    keeper.remove_used()
    assert _eventually(lambda: not os.path.lexists(used))


_LOOK = """
import os
home = os.environ['HOME']
print(os.stat(home).st_mtime_ns, sorted(os.listdir(home)), os.listdir(home + '/out'))
"""
# What some runs leave for the next: a file of their own, and a file of their result.
_LEAVE = {0: "\nopen(home + '/left.txt', 'w').write('x')", 3: "\nopen(home + '/out/a', 'w')"}
_PAUSE = 0.06


def test_runs_find_their_directory_empty_and_some_were_made_for_a_run_before(
    tmp_path: Path,
) -> None:
    """With one worker, run N's directory was made (or given again) once run N-1 took its
    own, after N-1 was sent; a directory made before that served an earlier run. (File
    times lag the clock by up to a tick, far less than the pause between requests.)"""
    with PoolClient(workers=1, env=clean_env({"TMPDIR": str(tmp_path)})) as pool:
        sent, changed = [], []
        for number in range(24):
            leave = _LEAVE.get(number % 6, "")
            sent.append(time.time_ns())
            result = pool.run({"id": number, "code": _LOOK + leave})
            mtime, seen = result["stdout"].split(" ", 1)
            assert seen == "['out'] []\n", result  # nothing of an earlier run
            changed.append(int(mtime))
            time.sleep(_PAUSE)  # the pool goes idle: what runs left is tidied
        margin = int(_PAUSE / 2 * 1e9)
        given_again = [n for n in range(1, 24) if changed[n] < sent[n - 1] - margin]
        assert len(given_again) >= 8, (given_again, changed, sent)
        assert pool.close() == 0


def test_a_queued_run_holds_no_scratch_directory(tmp_path: Path) -> None:
    with PoolClient(workers=1, env=clean_env({"TMPDIR": str(tmp_path)})) as pool:
        pool.send({"id": "slow", "code": "import time; time.sleep(1.5)"})
        for number in range(20):
            pool.send({"id": number, "code": "pass"})
        time.sleep(0.5)
        (root,) = tmp_path.iterdir()
        held = len(list(root.iterdir()))
        assert held <= 3, f"{held} scratch directories for one run and 20 queued"
        clash = {"a": "eA==", "a/b": "eA=="}
        pool.send({"id": "clash", "code": "print('ran')", "files": clash})
        pool.send({"id": "after", "code": "print('after')"})
        assert "cannot place file 'a/b'" in pool.result("clash")["error"]["message"]
        assert pool.result("after")["stdout"] == "after\n"
        assert all(pool.result(number)["exit"] == 0 for number in range(20))
        assert pool.close() == 0


def test_every_pidfd_handed_over_is_closed(
    keeper: ScratchKeeper, exited: Callable[[], int]
) -> None:
    used = [_ready_one(keeper)] + [keeper.take() for _ in range(3)]
    _ready_one(keeper)  # taken, never handed back: one fewer than the ready ones it keeps
    pidfds = [exited() for _ in used]
    before = len(os.listdir("/proc/self/fd"))
    for path, pidfd in zip(used, pidfds, strict=True):
        keeper.discard(path, pidfd)
    keeper.remove_used()  # one is given again, three are removed
    assert _eventually(lambda: not any(os.path.lexists(path) for path in used))
    # Eventually: the thread closes its own descriptors a moment after the last rmdir.
    assert _eventually(lambda: len(os.listdir("/proc/self/fd")) == before - len(pidfds))


def test_a_busy_pool_removes_what_finished_runs_left(tmp_path: Path) -> None:
    """A pool that never goes idle (here a run streams output without pause) still removes
    the scratch directories of runs that ended: on a small TMPDIR, a busy pool would
    otherwise fill it and its next runs fail."""
    with PoolClient(workers=2, env=clean_env({"TMPDIR": str(tmp_path)})) as pool:
        busy = "import time\nwhile True:\n    print(1, flush=True)\n    time.sleep(0.001)"
        pool.send({"id": "busy", "code": busy, "stream": True})
        pool.event(lambda event: event.get("id") == "busy")
        left = "import os\nopen(os.path.join(os.environ['HOME'], 'left.bin'), 'wb').write(b'x')"
        scratch = pool.run({"id": "writer", "code": left})["policy"]["scratch"]
        assert _eventually(lambda: not os.path.lexists(scratch), within=5)
        pool.send({"id": "busy", "control": "cancel"})
        assert pool.result("busy")["error"]["type"] == "Cancelled"
        assert pool.close() == 0


def _remove_all(path: Path) -> None:
    """Removes path and what it holds, as someone emptying a TMPDIR would, while the pool's
    thread may still make directories in it."""
    while path.exists():
        subprocess.run(["rm", "-rf", str(path)], check=False)


def test_a_pool_whose_scratch_root_was_removed_makes_it_again(tmp_path: Path) -> None:
    """The pool's own directory in TMPDIR is made again; without TMPDIR itself, each request
    says what to do, and serves again once TMPDIR is back."""
    base = tmp_path / "tmp"
    base.mkdir()
    with PoolClient(workers=2, env=clean_env({"TMPDIR": str(base)})) as pool:
        pool.run({"id": "warm", "code": "print(0)"})
        time.sleep(0.1)  # idle: a spare is primed, with a scratch directory of its own
        (root,) = base.iterdir()
        _remove_all(root)
        for number in range(3):
            result = pool.run({"id": number, "code": "print(1)"})
            assert (result["exit"], result["stdout"]) == (0, "1\n"), result
        _remove_all(base)
        refused = pool.run({"id": "no tmp", "code": "print(2)"})
        assert refused["exit"] == 125
        assert refused["error"]["message"] == (
            f"the pool's scratch directory {root} was removed and cannot be made again (No "
            f"such file or directory); make {base} again, or restart the pool with TMPDIR set "
            "to a writable directory"
        )
        base.mkdir()
        result = pool.run({"id": "back", "code": "print(3)"})
        assert (result["exit"], result["stdout"]) == (0, "3\n"), result
        assert pool.close() == 0


def test_a_scratch_root_whose_name_another_took_is_refused(tmp_path: Path) -> None:
    """Once the pool's directory was removed, its name (in /tmp for all to see) may be
    taken by a directory that is not the pool's, another user's: no run's directory is
    made there, and each request says what to do."""
    base = tmp_path / "tmp"
    base.mkdir()
    with PoolClient(workers=1, env=clean_env({"TMPDIR": str(base)})) as pool:
        warm = pool.run({"id": "warm", "code": "import os\nprint(os.environ['TMPDIR'])"})
        (root,) = base.iterdir()
        # The pool's thread makes the next runs' directories, the warm run's renamed among
        # them or removed: done, it makes nothing more, the root included, until a request.
        used = Path(warm["stdout"].strip())
        assert _eventually(lambda: used not in (ready := list(root.iterdir())) and ready != [])
        _remove_all(root)
        root.mkdir()
        root.chmod(0o777)  # as a directory of someone else's would let anyone write it
        refused = pool.run({"id": "taken", "code": "print(1)"})
        assert refused["exit"] == 125 and refused["stdout"] == ""
        assert refused["error"]["message"] == (
            f"the pool's scratch directory {root} was removed, and something not the pool's "
            "took its name; restart the pool"
        )
        assert list(root.iterdir()) == []
        assert pool.close() == 0


def test_a_pool_refuses_a_tmpdir_every_user_may_write_without_the_sticky_bit(
    tmp_path: Path,
) -> None:
    """There another user could swap the pool's directory, or a run's, for one of their
    own: the pool does not start, and says what to do (pynox.engine.scratch)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = subprocess.run(
        [PYNOX, "pool"], env=clean_env({"TMPDIR": str(shared)}), input=b"", capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (125, b"")
    assert done.stderr.decode() == (
        f"pynox: the temporary directory {shared} is writable by every user and has no sticky "
        "bit: another user could swap a run's scratch directory there for one of their own; "
        f"set TMPDIR to a directory only you can write, or run chmod +t {shared}\n"
    )
    assert _eventually(lambda: not list(shared.iterdir()))


def test_a_session_whose_scratch_directory_was_removed_is_closed_with_the_reason(
    tmp_path: Path,
) -> None:
    """Its HOME, with what its steps left there, is gone with the pool's root, and its
    sandbox grants nothing else: its next step says so instead of failing in the program,
    and sent again, starts a new session."""
    base = tmp_path / "tmp"
    base.mkdir()
    with PoolClient(workers=1, env=clean_env({"TMPDIR": str(base)})) as pool:
        keep = "import os\nopen(os.environ['HOME'] + '/state', 'w').write('1')"
        assert pool.run({"id": 1, "session": "s", "code": keep})["exit"] == 0
        (root,) = base.iterdir()
        _remove_all(root)
        step = {"session": "s", "code": "print(sorted(os.listdir()))", "files": {"a": "eA=="}}
        lost = pool.run({"id": 2, **step})
        assert (lost["exit"], lost["stdout"], lost["error"]["type"]) == (125, "", "PoolError")
        assert lost["error"]["message"] == (
            "session 's' lost its scratch directory, its HOME with the files its steps left "
            "there: something outside the pool removed it (emptying TMPDIR, say), so the "
            "session was closed; send this step again to start a new session"
        )
        assert lost["session"] == {
            "id": "s",
            "step": 2,
            "restarted": False,
            "ended": "scratch_removed",
        }
        again = pool.run(
            {"id": 3, **step, "code": "import os\nprint(sorted(os.listdir(os.environ['HOME'])))"}
        )
        assert (again["exit"], again["stdout"]) == (0, "['a', 'out']\n"), again
        assert again["session"] == {"id": "s", "step": 1, "restarted": False, "ended": None}
        assert pool.close() == 0


HIDE = """\
import os
for where in (os.environ['HOME'], os.environ['HOME'] + '/out'):
    os.mkdir(where + '/hidden', 0o300)  # its owner may not list it; chmod is refused
    open(where + '/hidden/data', 'wb').write(b'x' * 4096)
os.mkdir(os.environ['HOME'] + '/nest')
os.mkdir(os.environ['HOME'] + '/nest/read-only', 0o500)  # it may not be moved: its .. is
os.mkdir(os.environ['HOME'] + '/nest/closed', 0)
"""


def test_directories_a_run_made_that_its_owner_cannot_list_or_move_are_removed(
    tmp_path: Path,
) -> None:
    """Or each run could leave files in the pool's TMPDIR that outlive the pool."""
    base = tmp_path / "tmp"
    base.mkdir()
    env = clean_env({"TMPDIR": str(base)})
    with PoolClient(workers=1, env=env, launched_by=bound_by_file_modes()) as pool:
        result = pool.run({"id": "hide", "code": HIDE})
        assert result["exit"] == 0, result
        assert result["files_left_out"] == ["hidden: not a directory that can be read"]
        assert _eventually(lambda: not os.path.lexists(result["policy"]["scratch"]))
        step = pool.run({"id": "step", "session": "s", "code": HIDE})
        assert step["exit"] == 0, step
        assert pool.close() == 0
    assert _eventually(lambda: not list(base.iterdir()))


def test_an_out_directory_its_owner_cannot_list_is_said_to_be_unreadable(tmp_path: Path) -> None:
    """Not a link, as any other out/ that cannot be opened is said to be."""
    code = "import os\nout = os.environ['HOME'] + '/out'\nos.rmdir(out)\nos.mkdir(out, 0o300)"
    env = clean_env({"TMPDIR": str(tmp_path)})
    with PoolClient(workers=1, env=env, launched_by=bound_by_file_modes()) as pool:
        result = pool.run({"id": "hide-out", "code": code})
        assert result["exit"] == 0, result
        assert result["files_left_out"] == ["out: could not be read (Permission denied)"]
        assert pool.close() == 0


def test_a_directory_a_run_filled_is_not_listed_to_be_judged(
    keeper: ScratchKeeper, exited: Callable[[], int]
) -> None:
    """A run that left many names in its directory changed its times: that says it is
    not to be given again, before a name is read. Listed whole, its names took the pool's
    memory, and its loop's time when a request took the directory (here, take())."""
    used = keeper.take()
    Path(used, "file").write_bytes(b"")
    for number in range(15000):  # names without inodes of their own: quick to make
        os.link(os.path.join(used, "file"), os.path.join(used, f"link-{number}"))
    keeper.discard(used, exited())
    tracemalloc.start()
    try:
        fresh = keeper.take()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fresh != used
    assert peak < 1 << 18, f"{peak} bytes to judge a directory of 15000 names"
    keeper.remove_used()
    assert _eventually(lambda: not os.path.lexists(used))
