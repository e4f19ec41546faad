"""What one request or session leaves behind (in its scratch directory, its out/) never
reaches another, the pool's other requests, or the host, through the pool's own work."""

from __future__ import annotations

import os

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
