"""What one request or session leaves behind (in its scratch directory, its out/) never
reaches another, the pool's other requests, or the host, through the pool's own work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.pool_client import PoolClient

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
    os.rename(os.path.join({grant!r}, name), os.path.join(out, name))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root passes over file modes")
def test_out_returns_nothing_the_program_could_not_read(tmp_path: Path) -> None:
    """Run as root, the pool reads whatever the modes say; its program, without
    capabilities, does not. A file of another user in a write grant, which the program
    may move but not read, was returned whole once moved into out/; so was what a
    folder it may not list holds."""
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
        assert result["stdout"] == "theirs.txt Permission denied\nfolder Permission denied\n"
        assert "files" not in result or result["files"] == {}, result["files"]
        assert result["files_left_out"] == [
            "folder: not a directory that can be read",
            "theirs.txt: could not be read (Permission denied)",
        ]
        assert pool.close() == 0
