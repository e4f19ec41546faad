"""The sandbox core's fixtures: both ways of confining, and a small tree of files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["one-call", "two-steps", "shared-filter"])
def confinement(request: pytest.FixtureRequest) -> Iterator[str]:
    """How the child confines itself (support.sandboxed_child.CONFINEMENT): in one call, as
    the command does, in the two halves a pool's spare uses, or in those halves under the
    filter's part its zygote shares. Every test of the kernel mechanisms runs each way
    (their modules use this fixture in `pytestmark`)."""
    from support import sandboxed_child  # it skips a machine without a syscall table

    sandboxed_child.CONFINEMENT = request.param
    yield request.param
    sandboxed_child.CONFINEMENT = "one-call"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/{ro,rw,wo,other}/ each with a file f.txt."""
    for name in ("ro", "rw", "wo", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text(name)
    return tmp_path
