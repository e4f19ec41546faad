"""Commands run in a control group of their own whose process count is limited
(pids.max), as a container or a systemd unit limits it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.waiting import wait_until

_CGROUPS = Path("/sys/fs/cgroup")


def _pids_hierarchy() -> Path | None:
    """Where control groups with pids.max can be made: the pids controller's own
    hierarchy (cgroup v1), or the unified one that enables it for its children (v2)."""
    v1 = _CGROUPS / "pids"
    if (v1 / "cgroup.procs").exists():
        return v1
    controls = _CGROUPS / "cgroup.subtree_control"
    if controls.exists() and "pids" in controls.read_text().split():
        return _CGROUPS
    return None


@contextlib.contextmanager
def limiting_processes_by_group(limit: int) -> Iterator[list[str]]:
    """A prefix for a command line: what follows runs in a new control group that may
    hold at most `limit` processes and threads, removed when the block ends. Skips where
    no such group can be made (not root, no pids controller, a read-only hierarchy)."""
    hierarchy = _pids_hierarchy()
    if hierarchy is None:
        pytest.skip("no pids controller of control groups here")
    if os.geteuid() != 0 or not os.access(hierarchy, os.W_OK):
        pytest.skip(f"cannot make a control group in {hierarchy}")
    try:
        group = Path(tempfile.mkdtemp(prefix="pynox-tests-", dir=hierarchy))
    except OSError as error:
        pytest.skip(f"cannot make a control group in {hierarchy}: {error}")
    try:
        (group / "pids.max").write_text(str(limit))
        yield ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group)]
    finally:
        # The commands have ended; a helper of theirs (the one that removes a run's
        # scratch directory) may still be leaving the group.
        wait_until(lambda: not (group / "cgroup.procs").read_text().strip())
        group.rmdir()
