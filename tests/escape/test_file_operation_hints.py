"""Everyday file operations that name two paths (os.rename, os.replace, os.link,
os.symlink, shutil.move), run with the grants a user gives: the hint after a refusal names
the folder that was missing, and following it makes the program work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import follow

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def _world(tmp_path: Path) -> Path:
    """out/ and out2/ with a file each, data/ with a file and a folder."""
    for name in ("out", "out2", "data", "data/folder"):
        (tmp_path / name).mkdir()
    (tmp_path / "out" / "a.txt").write_text("a")
    (tmp_path / "out2" / "b.txt").write_text("b")
    (tmp_path / "data" / "in.txt").write_text("input")
    return tmp_path


def _follow(cwd: Path, code: str, grants: list[str]) -> list[str]:
    """Runs code, adding each hint's grants, until it succeeds; returns the hints seen."""
    _, hints = follow(lambda flags: pynox(*flags, "-c", code, cwd=cwd), grants)
    return hints


@pytest.mark.parametrize(
    "code",
    [
        "import os; os.rename('out/a.txt', 'out2/a.txt')",
        "import os; os.replace('out/a.txt', 'out2/b.txt')",
        "import os; os.link('out/a.txt', 'out2/a.txt')",
        # shutil.move copies when the rename fails: its first refusal, the rename's, is
        # what to hint at, not reading the file it then could not copy.
        "import shutil; shutil.move('out/a.txt', 'out2/a.txt')",
    ],
    ids=["rename", "replace", "link", "shutil-move"],
)
def test_moving_into_a_folder_not_granted_names_that_folder(tmp_path: Path, code: str) -> None:
    cwd = _world(tmp_path)
    hints = _follow(cwd, code, ["--allow-write=out"])
    assert hints == [
        f"pynox: changing the entries of {cwd / 'out2'} is not allowed; "
        f"grant it with --allow-write={cwd / 'out2'}"
    ]


def test_a_symbolic_link_names_the_folder_it_is_made_in_not_where_it_leads(
    tmp_path: Path,
) -> None:
    """os.symlink's first path is the text the link holds: nothing is asked of it."""
    cwd = _world(tmp_path)
    for target in (str(cwd / "out" / "a.txt"), "../elsewhere/x.txt"):
        code = f"import os; os.symlink({target!r}, 'data/link')"
        hints = _follow(cwd, code, ["--allow-write=out"])
        assert hints == [
            f"pynox: changing the entries of {cwd / 'data'} is not allowed; "
            f"grant it with --allow-write={cwd / 'data'}"
        ]
        (cwd / "data" / "link").unlink()
