"""Hints after a refusal that the file system's own permissions make as well: the user
pynox runs as may not read or write the file even granted, since a sandboxed program
runs without capabilities (root's too). A hint that named the grant alone would send the
model round in a circle: granted, the run fails alike, and the hint says why, naming no
grant (python as root would have read it).

Modes that refuse their own owner stand for another user's files: they refuse every
process without capabilities, so these tests see what any user sees, root included."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import hint_line
from support.pool_client import PoolClient

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

REFUSED = (
    "is refused by the file system's permissions to this user, as the sandbox runs the "
    "program (without capabilities, even for root), so no grant alone would allow it"
)
WRITE_ELSEWHERE = (
    "write somewhere this user may write instead, such as the run's scratch directory ($TMPDIR)"
)
GRANTED_REFUSED = REFUSED.replace("no grant alone would allow it", "its grant does not allow it")
USE_A_COPY = "use a copy this user may read instead"


def _read_hint(path: Path, grant: str) -> str:
    return (
        f"reading {path} {REFUSED}; {USE_A_COPY}, or once its permissions let this user read "
        f"it, grant it with {grant}"
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """data/secret.txt that no one may read, ro/ that no one may write, and locked/ that
    no one may enter, holding inside.txt; their modes are given back afterwards."""
    (tmp_path / "data").mkdir()
    secret = tmp_path / "data" / "secret.txt"
    secret.write_text("secret")
    (tmp_path / "ro").mkdir()
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "inside.txt").write_text("inside")
    secret.chmod(0)
    (tmp_path / "ro").chmod(0o500)
    (tmp_path / "locked").chmod(0)
    try:
        yield tmp_path
    finally:
        for path in (secret, tmp_path / "ro", tmp_path / "locked"):
            path.chmod(0o700)


def _failed(proc: object) -> str:
    stderr = proc.stderr.decode()  # type: ignore[attr-defined]
    assert proc.returncode == 1, stderr  # type: ignore[attr-defined]
    assert "PermissionError: [Errno 13] Permission denied" in stderr, stderr
    return stderr


def test_reading_a_file_its_modes_refuse_says_a_grant_alone_would_not_help(
    project: Path,
) -> None:
    secret = project / "data" / "secret.txt"
    code = "open('data/secret.txt').read()"
    stderr = _failed(pynox("-c", code, cwd=project))
    assert hint_line(stderr) == "pynox: " + _read_hint(secret, f"--allow-read={secret}")
    # Granted, it fails as under python for this user (root's python would read it): the
    # hint says why, and names no grant.
    granted = _failed(pynox(f"--allow-read={secret}", "-c", code, cwd=project))
    assert hint_line(granted) == f"pynox: reading {secret} {GRANTED_REFUSED}; {USE_A_COPY}"
    # Followed: a copy this user may read, granted, is read.
    copy = project / "copy.txt"
    copy.write_text("secret")  # what the fixture wrote there
    copy.chmod(0o644)
    read = pynox(f"--allow-read={copy}", "-c", "print(open('copy.txt').read())", cwd=project)
    assert (read.returncode, read.stdout) == (0, b"secret\n"), read.stderr


def test_a_json_result_and_the_line_say_the_same(project: Path) -> None:
    """The launcher writes a --json result's hint from texts pynox hands it: the same."""
    secret = project / "data" / "secret.txt"
    proc = pynox("--json", "-c", "open('data/secret.txt').read()", cwd=project)
    result = json.loads(proc.stdout)
    assert result["exit"] == 1, result
    assert result["error"]["hint"] == _read_hint(secret, f"--allow-read={secret}")
    assert result["stderr"].endswith("pynox: " + result["error"]["hint"] + "\n")
    granted = pynox("--json", f"--allow-read={project}", "-c", "open('data/secret.txt').read()",
                    cwd=project)  # fmt: skip
    result = json.loads(granted.stdout)
    assert result["error"]["hint"] == f"reading {secret} {GRANTED_REFUSED}; {USE_A_COPY}"
    assert result["stderr"].endswith("pynox: " + result["error"]["hint"] + "\n")


def test_a_file_in_a_folder_its_modes_close_is_refused_reaching_it(project: Path) -> None:
    """Looking a path up through a folder that may not be searched fails whatever the
    grants (Landlock never refuses it): not a refused change of that folder's entries."""
    inside = project / "locked" / "inside.txt"
    for code in ("import os; os.stat('locked/inside.txt')", "open('locked/inside.txt').read()"):
        stderr = _failed(pynox("-c", code, cwd=project))
        assert hint_line(stderr) == "pynox: " + _read_hint(inside, f"--allow-read={inside}")


def test_listing_a_folder_its_modes_refuse_says_a_grant_alone_would_not_help(
    project: Path,
) -> None:
    locked = project / "locked"
    stderr = _failed(pynox("-c", "import os; os.listdir('locked')", cwd=project))
    assert hint_line(stderr) == (
        f"pynox: listing {locked} {REFUSED}; use a copy this user may read instead, or once "
        f"its permissions let this user read it, grant it with --allow-read={locked}"
    )


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("open('ro/new.txt', 'w')", "changing the entries of {ro}"),
        ("open('data/secret.txt', 'w')", "writing {secret}"),
        ("open('data/secret.txt', 'r+')", "reading and writing {secret}"),
    ],
    ids=["new-file", "existing-file", "read-write"],
)
def test_writing_where_modes_refuse_names_where_to_write_instead(
    project: Path, code: str, hint: str
) -> None:
    stderr = _failed(pynox("-c", code, cwd=project))
    what = hint.format(ro=project / "ro", secret=project / "data" / "secret.txt")
    assert hint_line(stderr) == f"pynox: {what} {REFUSED}; {WRITE_ELSEWHERE}"


def test_a_pool_request_gets_the_hint_in_its_fields_words(project: Path) -> None:
    secret = project / "data" / "secret.txt"
    with PoolClient(workers=1) as pool:
        result = pool.run({"id": "1", "code": f"open({str(secret)!r}).read()"})
        code = {"code": f"open({str(secret)!r}).read()", "allow_read": [str(project)]}
        granted = pool.run({"id": "2", **code})
        assert pool.close() == 0
    assert result["exit"] == 1, result
    assert result["error"]["hint"] == _read_hint(
        secret, f'"allow_read": [{json.dumps(str(secret))}]'
    )
    assert granted["error"]["hint"] == f"reading {secret} {GRANTED_REFUSED}; {USE_A_COPY}"


def test_a_path_no_grant_may_reach_says_so_before_its_modes(project: Path) -> None:
    """A kernel setting that no one may write, root included once without capabilities:
    that pynox never grants it is what to say, whatever its modes."""
    setting = "/proc/sys/kernel/version"
    stderr = _failed(pynox("-c", f"open({setting!r}, 'w')", cwd=project))
    assert hint_line(stderr).startswith(
        f"pynox: {setting} cannot be granted for writing: what is written there reaches past "
        "the sandbox"
    ), stderr
