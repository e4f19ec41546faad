"""What one request or session leaves behind (in its scratch directory, its out/) never
reaches another, the pool's other requests, or the host, through the pool's own work."""

from __future__ import annotations

import base64
import os
import tempfile
import time
from pathlib import Path

import pytest
from support.pool_client import PoolClient
from support.waiting import wait_until

# 60000 names of 10 files, each linked 6000 times (ext4 allows 65000 links to one file):
# links cost no inode, so the step makes them in about a second.
_MANY_NAMES = """
import os, sys
home = os.environ['HOME']
for source in range(10):
    open(f'{home}/f{source}', 'w').close()
for number in range(60000):
    os.link(f'{home}/f{number % 10}', f'{home}/l{number}')
sys.exit(3)
"""


@pytest.mark.slow
def test_the_scratch_directory_of_an_ended_session_is_removed_beside_the_loop() -> None:
    """A session ended (here by sys.exit) and then closed: its scratch directory, with
    what its steps left there, is removed while the pool serves other requests, as a
    one-shot run's is. Removed by the loop itself, it held every request until gone."""
    with PoolClient(workers=2) as pool:
        ended = pool.run({"id": "fill", "session": "s", "code": _MANY_NAMES, "timeout": 60})
        assert ended["session"]["ended"] == "exit", ended
        scratch = ended["policy"]["scratch"]
        pool.send({"id": "close", "close_session": "s"})
        answered = pool.run({"id": "next", "code": "1"})
        assert answered["value"] == "1"
        # Removing 60000 names takes the keeper's thread a good part of a second; the
        # request took milliseconds.
        assert os.path.lexists(scratch), "the request waited for the removal"
        assert pool.close() == 0
    assert not os.path.lexists(scratch)


_MOVE_INTO_OUT = """
import os
from pathlib import Path
out = os.path.join(os.environ['HOME'], 'out')
for name in ('theirs.txt', 'folder'):
    try:
        open(os.path.join({grant!r}, name, 'inside.txt') if name == 'folder'
             else os.path.join({grant!r}, name)).read()
    except OSError as exc:
        print(name, exc.strerror)
    try:
        os.rename(os.path.join({grant!r}, name), os.path.join(out, name))
    except OSError as exc:  # no folder of a grant moves into a scratch directory
        print(name, exc.strerror)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root passes over file modes")
def test_out_returns_nothing_the_program_could_not_read(tmp_path: Path) -> None:
    """Run as root, the pool reads whatever the modes say; its program, without
    capabilities, does not. A file of another user in a write grant, which the program
    may move but not read, was returned whole once moved into out/. (A folder of theirs
    would have been listed too, but no folder of a grant moves into out/ any more.)"""
    grant = tmp_path / "shared"
    grant.mkdir()
    theirs = grant / "theirs.txt"
    theirs.write_text("another user's secret\n")
    folder = grant / "folder"
    folder.mkdir()
    (folder / "inside.txt").write_text("listed by no one but its owner\n")
    for path, mode in ((theirs, 0o600), (folder, 0o733), (folder / "inside.txt", 0o600)):
        os.chown(path, 65534, 65534)
        path.chmod(mode)
    code = _MOVE_INTO_OUT.format(grant=str(grant))
    with PoolClient(workers=2) as pool:
        result = pool.run(
            {"id": "move", "code": code, "allow_read": [str(grant)], "allow_write": [str(grant)]}
        )
        assert result["stdout"] == (
            "theirs.txt Permission denied\nfolder Permission denied\n"
            "folder Invalid cross-device link\n"
        )
        assert "files" not in result or result["files"] == {}, result["files"]
        assert result["files_left_out"] == ["theirs.txt: could not be read (Permission denied)"]
        assert pool.close() == 0


# A session step that ends its process (sys.exit) while a thread of it runs on: the
# process lingers up to a second. Its thread waits for its scratch directory to be
# renamed (the keeper's rename sets its change time), then writes there.
_LINGER_THEN_PLANT = """
import os, sys, threading, time
home = os.open(os.environ['HOME'], os.O_RDONLY | os.O_DIRECTORY)
changed = os.fstat(home).st_ctime_ns

def plant():
    deadline = time.monotonic() + 0.85
    while time.monotonic() < deadline and os.fstat(home).st_ctime_ns == changed:
        time.sleep(0.002)
    os.close(os.open('planted.txt', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=home))

threading.Thread(target=plant).start()
sys.exit(0)
"""
# A later run that watches its own scratch directory for a while.
_WATCH = """
import os, time
for _ in range(40):
    names = sorted(os.listdir(os.environ['HOME']))
    if names != ['out']:
        break
    time.sleep(0.01)
names
"""


def test_a_session_scratch_directory_never_goes_to_another_run() -> None:
    """A session's scratch directory serves each process of the session in turn. Given
    to a later run once the last one exited, it was still open to the thread of an
    earlier one, which had not yet: that thread wrote into the later run's HOME."""
    with PoolClient(workers=2) as pool:
        ended = pool.run({"id": "end", "session": "s", "code": _LINGER_THEN_PLANT})
        assert ended["session"]["ended"] == "exit", ended
        restarted = pool.run({"id": "again", "session": "s", "code": "pass"})
        assert restarted["session"]["restarted"] is True
        pool.send({"id": "close", "close_session": "s"})
        for number in range(6):
            pool.send({"id": number, "code": _WATCH})
        seen = [pool.result(number)["value"] for number in range(6)]
        assert seen == ["['out']"] * 6
        assert pool.close() == 0


# A session step that ends its process (sys.exit) with a thread running on, the process
# lingering up to a second: its folder `a` in HOME holds 30000 names, and the thread waits
# for the removal of HOME to unlink one of them (which changes the folder's modification
# time). Then it moves `a` out to its write grant and a folder of the grant into `a`.
_SWAP_UNDER_THE_REMOVAL = """
import os, sys, threading
a = os.path.join(os.environ['HOME'], 'a')
os.mkdir(a)
open(os.path.join(a, 'f'), 'w').close()
for number in range(30000):
    os.link(os.path.join(a, 'f'), os.path.join(a, f'l{{number}}'))
try:
    os.unlink({precious!r})
except PermissionError:
    print('cannot remove it')
untouched = os.stat(a).st_mtime_ns

def swap():
    try:
        while os.stat(a).st_mtime_ns == untouched:
            pass
        os.rename(a, {grant!r} + '/a')
        os.rename({grant!r} + '/victim', {grant!r} + '/a/victim')
    except OSError:
        pass

threading.Thread(target=swap).start()
sys.exit(0)
"""


def test_a_lingering_session_process_cannot_steer_the_removal_of_its_directory(
    tmp_path: Path,
) -> None:
    """A session closed right after a step that ended its process had its scratch
    directory removed while that process lingered, a thread of it still running. The
    removal holds each folder open as it empties it: moved to a write grant meanwhile,
    with a folder of the grant moved into it, that folder was emptied too, a read-only
    folder in it given its rights back, and files the program could not remove were
    gone. The removal now waits for every process of the session to have exited."""
    grant = tmp_path / "grant"
    read_only = grant / "victim" / "read-only"
    read_only.mkdir(parents=True)
    precious = read_only / "precious.txt"
    precious.write_text("kept\n")
    read_only.chmod(0o555)
    code = _SWAP_UNDER_THE_REMOVAL.format(grant=str(grant), precious=str(precious))
    with PoolClient(workers=1) as pool:
        ended = pool.run(
            {
                "id": "swap",
                "session": "s",
                "code": code,
                "allow_read": [str(grant)],
                "allow_write": [str(grant)],
                "timeout": 30,
            }
        )
        assert ended["stdout"] == "cannot remove it\n", ended
        assert ended["session"]["ended"] == "exit", ended
        pool.send({"id": "close", "close_session": "s"})
        pool.wait_for(lambda: "close" in pool.results)
        scratch = ended["policy"]["scratch"]
        assert wait_until(lambda: not os.path.lexists(scratch)), "never removed"
        assert pool.close() == 0
    assert precious.read_text() == "kept\n"
    assert sorted(os.listdir(grant)) == ["victim"]


# A session step whose out/ holds a folder `sub`: 90 files of 80 kB the pool reads first,
# then zz.txt. A thread waits for the pool to list `sub` (which sets its access time),
# then moves `sub` out to its write grant and the grant's secret over zz.txt there.
_SWAP_UNDER_THE_WALK = """
import os, threading, time
sub = os.path.join(os.environ['HOME'], 'out', 'sub')
os.mkdir(sub)
for number in range(90):
    with open(os.path.join(sub, f'a{{number:02}}'), 'wb') as file:
        file.write(bytes(80000))
open(os.path.join(sub, 'zz.txt'), 'w').write("the program's own")
try:
    open({secret!r}).read()
except PermissionError:
    print('cannot read it')
time.sleep(0.05)
unlisted = os.stat(sub).st_atime_ns

def swap():
    try:
        while os.stat(sub).st_atime_ns == unlisted:
            pass
        os.rename(sub, {grant!r} + '/sub')
        os.rename({secret!r}, {grant!r} + '/sub/zz.txt')
    except OSError:
        pass

threading.Thread(target=swap, daemon=True).start()
"""


def _listing_sets_access_times() -> bool:
    """Whether listing a folder in the pool's TMPDIR that changed since it was last read
    sets its access time (relatime, strictatime), as the race above needs to see the
    pool's walk."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "file").touch()
        time.sleep(0.05)
        before = os.stat(folder).st_atime_ns
        os.listdir(folder)
        return os.stat(folder).st_atime_ns != before


def test_a_session_cannot_move_a_grants_file_under_the_walk_of_out(tmp_path: Path) -> None:
    """A session's program runs on between steps (a thread) while the pool reads out/.
    A folder of out/ it moved to a write grant as the pool read it was read there, with
    the grant's file it had moved in: the pool returned a file the program may write
    but not read. out/ is now moved out of the program's reach before it is read."""
    if not _listing_sets_access_times():
        pytest.skip("listing a folder sets no access time here: the race cannot be timed")
    grant = tmp_path / "grant"
    grant.mkdir()
    secret = grant / "secret.txt"
    secret.write_text("the grant's secret\n")
    code = _SWAP_UNDER_THE_WALK.format(grant=str(grant), secret=str(secret))
    with PoolClient(workers=1) as pool:
        step = pool.run({"id": "walk", "session": "s", "code": code, "allow_write": [str(grant)]})
        assert step["stdout"] == "cannot read it\n", step
        returned = base64.b64decode(step["files"]["sub/zz.txt"])
        assert returned == b"the program's own", returned
        pool.send({"id": "close", "close_session": "s"})
        pool.wait_for(lambda: "close" in pool.results)
        assert pool.close() == 0
    assert secret.read_text() == "the grant's secret\n"


def test_requests_share_the_pools_hash_seed_and_draw_random_numbers_anew(
    pool: PoolClient,
) -> None:
    """As the pool protocol says: children forked from one zygote hash strings alike,
    while random is seeded anew in each."""
    code = "import random; print(hash('pynox'), random.random())"
    first, second = (pool.run({"id": f"seed-{n}", "code": code})["stdout"].split() for n in (1, 2))
    assert first[0] == second[0], (first, second)
    assert first[1] != second[1], (first, second)
