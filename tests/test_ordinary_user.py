"""pynox run by an ordinary user (nobody), beside files of root's: the command, its hints
and the pool behave as for root, and as python does for that user."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import PYNOX, PYTHON, run
from support.hints import hint_line
from support.other_user import as_nobody, open_to_all
from support.waiting import wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """tmp_path, open to nobody, with root's secret.txt that only root may read, and a
    HOME and a TMPDIR that nobody may write."""
    tmp_path.chmod(0o755)
    secret = tmp_path / "secret.txt"
    secret.write_text("root's")
    secret.chmod(0o600)
    open_to_all(tmp_path / "home")
    open_to_all(tmp_path / "tmp")
    return tmp_path


def _as_nobody(
    world: Path, command: list[str], input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """command run as nobody in world, with its HOME and TMPDIR there."""
    env = {"HOME": str(world / "home"), "TMPDIR": str(world / "tmp")}
    return run([*as_nobody(world), *command], cwd=world, env=env, input=input)


def test_a_file_only_root_may_read_is_refused_as_under_python(world: Path) -> None:
    """The user may not read it outside the sandbox either: the same error as python's,
    and a hint that says no grant alone would help, not one to follow in a circle."""
    secret = world / "secret.txt"
    code = f"print(open({str(secret)!r}).read())"
    python = _as_nobody(world, [PYTHON, "-I", "-c", code])
    refused = _as_nobody(world, [PYNOX, "-c", code])
    granted = _as_nobody(world, [PYNOX, f"--allow-read={secret}", "-c", code])
    error = f"PermissionError: [Errno 13] Permission denied: {str(secret)!r}"
    for proc in (python, refused, granted):
        assert proc.returncode == 1, proc.stderr
        assert error in proc.stderr.decode(), proc.stderr
    assert hint_line(refused.stderr).startswith(
        f"pynox: reading {secret} is refused by the file system's permissions to this user"
    )
    assert hint_line(granted.stderr) == (
        f"pynox: reading {secret} is refused by the file system's permissions to this user, as "
        "the sandbox runs the program (without capabilities, even for root), so its grant "
        "does not allow it; use a copy this user may read instead"
    )


def test_the_doctor_and_a_run_work_for_an_ordinary_user(world: Path) -> None:
    doctor = _as_nobody(world, [PYNOX, "doctor", "--json"])
    assert doctor.returncode == 0, doctor.stdout
    assert json.loads(doctor.stdout)["sandbox_supported"] is True
    code = "import os, tempfile; print(os.getuid(), tempfile.gettempdir() == os.environ['HOME'])"
    ran = _as_nobody(world, [PYNOX, "-c", code])
    assert (ran.returncode, ran.stdout) == (0, b"65534 True\n"), ran.stderr


def test_the_pool_serves_an_ordinary_user(world: Path) -> None:
    """A pool of nobody's runs requests, returns what they write into out/, and hints at
    a file nobody may not read as the command does, in the API's words."""
    secret = world / "secret.txt"
    lines = [
        {
            "id": "out",
            "code": "import os; open(os.path.expanduser('~/out/r.txt'), 'w').write('made')",
        },
        {"id": "secret", "code": f"open({str(secret)!r}).read()"},
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines).encode()
    proc = _as_nobody(world, [PYNOX, "pool", "--workers", "1"], input=stdin)
    assert proc.returncode == 0, proc.stderr
    results = {
        answer["id"]: answer
        for answer in map(json.loads, proc.stdout.splitlines())
        if "id" in answer
    }
    made = results["out"]
    assert made["exit"] == 0, made
    assert made["files"] == {"r.txt": base64.b64encode(b"made").decode()}, made
    refused = results["secret"]
    assert refused["exit"] == 1, refused
    assert refused["error"]["hint"].startswith(
        f"reading {secret} is refused by the file system's permissions to this user"
    ), refused
    # The pool's scratch directories go once it has exited (a helper of its removes them).
    assert wait_until(lambda: not any((world / "tmp").iterdir()))


def test_a_write_grant_over_a_folder_this_user_may_enter_but_not_list_is_refused(
    world: Path,
) -> None:
    """pynox searches a write grant for another name of its own code, but cannot list a
    folder of mode 0300; the program, run as the same user and refused chmod, cannot list
    it either, but opens a name it knows in it: such a folder is not passed over."""
    import os

    import pynox

    target = Path(pynox.__file__).parent / "errors.py"
    output = world / "out"
    hidden = output / "hidden"
    hidden.mkdir(parents=True)
    link = hidden / "errors.py"
    try:
        os.link(target, link)
    except OSError as error:  # another file system than pynox's
        pytest.skip(f"cannot link {target}: {error}")
    try:
        for folder in (output, hidden):
            os.chown(folder, 65534, 65534)  # nobody's; the link stays root's file
        hidden.chmod(0o300)
        proc = _as_nobody(world, [PYNOX, f"--allow-write={output}", "-c", "pass"])
    finally:
        link.unlink()
    assert proc.returncode == 125, (proc.stdout, proc.stderr)
    assert proc.stderr.decode() == (
        f"pynox: cannot grant writing {output}: pynox cannot list {hidden} to search it for "
        "another name of a file pynox loads before its sandbox (such as a hard link to "
        "libpython), and the program could open what it holds by name; let this user read "
        "that folder, or grant a directory that holds no such folder\n"
    )


def test_the_programs_own_proc_entries_made_roots_get_a_hint_that_says_why(world: Path) -> None:
    """The sandbox makes the program's process undumpable, which gives root the entries of
    /proc/self that only their owner may open (io, environ, auxv): python reads them, the
    program cannot, and the hint sent the model to grant /proc/self/io or to use a copy."""
    code = "print(open('/proc/self/io').read())"
    python = _as_nobody(world, [PYTHON, "-I", "-c", code])
    assert python.returncode == 0, python.stderr
    expected = (
        "pynox: /proc/self/io is root's while the program runs, whatever the grants: the"
        " sandbox makes the program's process undumpable, so that nothing dumps its memory"
        " outside the sandbox, and the kernel then gives that process's own /proc entries to"
        " root; get what it holds another way"
    )
    for grants in ([], ["--allow-read=/proc/self/io"], ["--allow-read=/proc"]):
        refused = _as_nobody(world, [PYNOX, *grants, "-c", code])
        assert refused.returncode == 1, refused.stderr
        assert "PermissionError: [Errno 13] Permission denied: '/proc/self/io'" in (
            refused.stderr.decode()
        )
        assert hint_line(refused.stderr) == expected, grants
    # What the file modes let this user read needs only its grant, as ever.
    maps = _as_nobody(world, [PYNOX, "-c", "open('/proc/self/maps').read()"])
    assert hint_line(maps.stderr) == (
        "pynox: reading /proc/self/maps is not allowed; grant it with --allow-read=/proc/self/maps"
    )
