"""pynox writes only into its own pipes: a program that closes them and opens files of its
own under their numbers gets no report, marker or frame written into those files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.commands import pynox
from support.pool_client import PoolClient

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# Closes every descriptor past the standard ones, then fills their numbers with files.
TAKE_OVER = """
import os
os.closerange(3, 1024)
files = [open(f"out/f{i}", "w") for i in range(60)]
"""


def _written(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.iterdir()) if p.read_text()}


@pytest.mark.parametrize(
    "flags, ending",
    [
        (["--json"], "raise ValueError('reported')"),  # the error report
        (["--memory=256m"], "pass"),  # the end marker
        (["--memory=256m", "--json"], "raise ValueError('reported')"),
    ],
    ids=["json-report", "memory-end", "json-memory"],
)
def test_a_run_writes_nothing_into_files_on_its_pipes_numbers(
    tmp_path: Path, flags: list[str], ending: str
) -> None:
    (tmp_path / "out").mkdir()
    code = TAKE_OVER + ending
    proc = pynox("--allow-write=out", *flags, "-c", code, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert _written(tmp_path / "out") == {}
    if "--json" in flags:
        assert json.loads(proc.stdout)["exit"] == 1


def test_a_pool_child_writes_nothing_into_files_on_its_channels_number(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with PoolClient(workers=1, cwd=tmp_path) as client:
        for ending in ("pass", "raise SystemExit(4)", "raise ValueError('x')"):
            result = client.run(
                {"id": ending, "code": TAKE_OVER + ending, "allow_write": [str(out)]}
            )
            assert result["exit"] in (0, 1, 4), result
        session = {"session": "s", "allow_write": [str(out)]}
        client.run({"id": "s1", "code": TAKE_OVER + "x = 1", **session})
    assert _written(out) == {}
