"""Everyday file operations run with the grants a user gives (moves and links between
folders, editing in place, work inside a temporary directory): the hint after a refusal
names what was missing, and following it makes the program work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import follow, follow_code, hint_line, hinted_flags

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


def _world(tmp_path: Path) -> Path:
    """out/ and out2/ with a file each, data/ with a file and a folder."""
    for name in ("out", "out2", "data", "data/folder"):
        (tmp_path / name).mkdir()
    (tmp_path / "out" / "a.txt").write_text("a")
    (tmp_path / "out2" / "b.txt").write_text("b")
    (tmp_path / "data" / "in.txt").write_text("input")
    return tmp_path


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
    _, hints = follow_code(cwd, code, ["--allow-write=out"])
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
        _, hints = follow_code(cwd, code, ["--allow-write=out"])
        assert hints == [
            f"pynox: changing the entries of {cwd / 'data'} is not allowed; "
            f"grant it with --allow-write={cwd / 'data'}"
        ]
        (cwd / "data" / "link").unlink()


@pytest.mark.parametrize(
    "code",
    [
        "import os; os.rename('out/a.txt', 'out2/a.txt'); print(open('out2/a.txt').read())",
        "import os; os.link('out/a.txt', 'out2/a.txt'); print(open('out2/a.txt').read())",
        "import os, tempfile; os.rename('out/a.txt', tempfile.gettempdir() + '/a.txt')",
    ],
    ids=["rename", "link", "rename-into-scratch"],
)
def test_moving_out_of_a_write_only_folder_to_where_it_is_readable_names_the_read(
    tmp_path: Path, code: str
) -> None:
    """Landlock refuses (EXDEV, as between file systems) what would let the program read
    a file it may not read where it is: reading that folder is what is missing."""
    cwd = _world(tmp_path)
    grants = ["--allow-write=out", "--allow-write=out2", "--allow-read=out2"]
    first = pynox(*grants, "-c", code, cwd=cwd)
    assert b"OSError: [Errno 18] Invalid cross-device link" in first.stderr
    _, hints = follow_code(cwd, code, grants)
    assert len(hints) == 1, hints
    assert hints[0].startswith(f"pynox: moving or linking a file out of {cwd / 'out'}, which ")
    assert hints[0].endswith(f"; grant it with --allow-read={cwd / 'out'}")


def test_a_folder_of_a_grant_moved_into_the_scratch_directory_is_hinted_to_copy(
    tmp_path: Path,
) -> None:
    """No grant lets a folder of a grant move into the scratch directory (docs/sandbox.md)."""
    cwd = _world(tmp_path)
    code = "import os, tempfile; os.rename('data/folder', tempfile.gettempdir() + '/folder')"
    proc = pynox("--allow-read=data", "--allow-write=data", "-c", code, cwd=cwd)
    assert b"Invalid cross-device link" in proc.stderr
    line = hint_line(proc.stderr)
    assert "cannot be moved into the run's scratch directory" in line
    assert "there is nothing to grant" in line and "--allow" not in line


def test_a_hard_link_of_a_read_only_file_into_a_write_tree_names_copying(
    tmp_path: Path,
) -> None:
    cwd = _world(tmp_path)
    code = "import os; os.link('data/in.txt', 'out/in.txt')"
    proc = pynox("--allow-read=data", "--allow-write=out", "-c", code, cwd=cwd)
    assert b"Invalid cross-device link" in proc.stderr
    line = hint_line(proc.stderr)
    assert "copy the file instead (shutil.copyfile)" in line
    assert hinted_flags(proc.stderr) == [f"--allow-write={cwd / 'data'}"]
    copied = "import shutil; shutil.copyfile('data/in.txt', 'out/in.txt')"
    assert pynox("--allow-read=data", "--allow-write=out", "-c", copied, cwd=cwd).returncode == 0


def test_a_rename_to_another_file_system_gets_no_hint(tmp_path: Path) -> None:
    """A real EXDEV fails under python too: nothing of the sandbox's to hint at."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system to move to")
    cwd = _world(tmp_path)
    folder = shm / f"pynox-test-{tmp_path.name}"
    folder.mkdir()
    try:
        code = f"import os; os.rename('out/a.txt', {str(folder / 'a.txt')!r})"
        proc = pynox("--allow-write=out", f"--allow-write={folder}", "-c", code, cwd=cwd)
        assert b"Invalid cross-device link" in proc.stderr
        assert b"pynox:" not in proc.stderr
    finally:
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()


# fileinput's inplace mode moves the file to a backup beside it, then reads the backup.
EDIT_IN_PLACE = {
    "with": (
        "import fileinput\n"
        "with fileinput.input('out/a.txt', inplace=True) as lines:\n"
        "    for line in lines: print(line.upper(), end='')\n"
    ),
    "plain": (
        "import fileinput\n"
        "for line in fileinput.input('out/a.txt', inplace=True): print(line.upper(), end='')\n"
    ),
}


@pytest.mark.parametrize("form", list(EDIT_IN_PLACE))
def test_editing_in_place_in_a_write_only_folder_says_where_the_file_went(
    tmp_path: Path, form: str
) -> None:
    """fileinput renames the file before it is refused reading it, and when it is closed
    (at the end of a with block or of the program) removes the backup: rerunning with the
    read grant alone would find no file. The hint says so, and following it then works."""
    cwd = _world(tmp_path)
    out = cwd / "out"
    code = EDIT_IN_PLACE[form]
    proc = pynox("--allow-write=out", "-c", code, cwd=cwd)
    line = hint_line(proc.stderr)
    assert line.endswith(f"grant reading with --allow-read={out}")
    assert "once fileinput is closed without backup= (at the end of a with block or of" in line
    # Gone, as under python when reading the backup fails: fileinput removed it as it closed.
    assert sorted(out.iterdir()) == []
    (out / "a.txt").write_text("a")  # put back
    again = pynox("--allow-write=out", f"--allow-read={out}", "-c", code, cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert (out / "a.txt").read_text() == "A"


def test_reading_with_fileinput_gets_the_hint_of_a_read(tmp_path: Path) -> None:
    """Without inplace=True, fileinput reads the file where it is: its refusal got the
    in-place hint, which said the file had been moved to a backup it never was."""
    cwd = _world(tmp_path)
    data = cwd / "data" / "in.txt"
    code = "import fileinput\nfor line in fileinput.input('data/in.txt'): print(line.upper())\n"
    proc = pynox("-c", code, cwd=cwd)
    assert hint_line(proc.stderr) == (
        f"pynox: reading {data} is not allowed; grant it with --allow-read={data}"
    )
    assert sorted(p.name for p in data.parent.iterdir()) == ["folder", "in.txt"]
    followed = pynox(f"--allow-read={data}", "-c", code, cwd=cwd)
    assert (followed.returncode, followed.stdout) == (0, b"INPUT\n"), followed.stderr


# The program's work inside a temporary directory: its removal, as the refusal unwinds
# the with block, is the last file operation the program made.
IN_TEMPORARY_DIRECTORY = (
    "import os, tempfile\n"
    "with tempfile.TemporaryDirectory() as scratch:\n"
    "    os.mkdir(os.path.join(scratch, 'work'))\n"
    "    {}\n"
)


@pytest.mark.parametrize(
    "step, grants, expected",
    [
        ("open('data/new.txt', 'w').write('x')", ["--allow-read=data"], "changing the entries of"),
        ("open('data/in.txt', 'w').write('x')", ["--allow-read=data"], "writing"),
        ("print(os.listdir('data'))", [], "listing"),
        ("print(open('data/in.txt').read())", [], "reading"),
    ],
    ids=["create", "overwrite", "list", "read"],
)
def test_what_the_program_did_after_the_refusal_does_not_change_its_hint(
    tmp_path: Path, step: str, grants: list[str], expected: str
) -> None:
    cwd = _world(tmp_path)
    refused = cwd / "data" / step.partition("'data/")[2].partition("'")[0]
    grant = "--allow-read" if expected in ("listing", "reading") else "--allow-write"
    _, hints = follow_code(cwd, IN_TEMPORARY_DIRECTORY.format(step), grants)
    assert hints == [
        f"pynox: {expected} {refused.parent if expected.startswith('changing') else refused} "
        f"is not allowed; grant it with {grant}="
        f"{refused.parent if expected.startswith('changing') else refused}"
    ]


def test_a_folder_rmtree_could_not_remove_quietly_is_named_when_the_program_fails(
    tmp_path: Path,
) -> None:
    """Emptying an output folder: shutil.rmtree(ignore_errors=True) cannot list a folder
    granted only for writing, says nothing and leaves it, and os.makedirs then finds it."""
    cwd = _world(tmp_path)
    (cwd / "out" / "build" / "old").mkdir(parents=True)
    (cwd / "out" / "build" / "old" / "stale.txt").write_text("stale")
    code = (
        "import os, shutil\n"
        "shutil.rmtree('out/build', ignore_errors=True)\n"
        "os.makedirs('out/build')\n"
    )
    build = cwd / "out" / "build"
    _, hints = follow_code(cwd, code, ["--allow-write=out"])
    assert hints == [
        f"pynox: shutil.rmtree(ignore_errors=True) left {build} in place, since removing a "
        f"folder takes listing it; grant it with --allow-read={build}"
    ]
    assert not (build / "old").exists()


def test_rmtree_of_a_pathlib_path_is_named_too(tmp_path: Path) -> None:
    cwd = _world(tmp_path)
    (cwd / "out" / "build").mkdir()
    code = (
        "import shutil\nfrom pathlib import Path\n"
        "shutil.rmtree(Path('out/build'), ignore_errors=True)\nPath('out/build').mkdir()\n"
    )
    _, hints = follow_code(cwd, code, ["--allow-write=out"])
    assert len(hints) == 1 and hints[0].endswith(f"--allow-read={cwd / 'out' / 'build'}"), hints


def test_a_temporary_directory_in_a_write_only_folder_names_the_read_its_removal_needs(
    tmp_path: Path,
) -> None:
    """TemporaryDirectory's removal cannot list a folder granted only for writing, and
    then tries to make it writable (chmod), which is refused too: that last refusal is not
    what to hint at, since no mode would help."""
    cwd = _world(tmp_path)
    code = (
        "import tempfile\n"
        "with tempfile.TemporaryDirectory(dir='out') as work:\n"
        "    open(work + '/part.txt', 'w').write('x')\n"
    )
    out = cwd / "out"
    _, hints = follow_code(cwd, code, ["--allow-write=out"])
    assert hints == [f"pynox: listing {out} is not allowed; grant it with --allow-read={out}"]


ROTATING_LOGS = {
    "size": "logging.handlers.RotatingFileHandler('out/app.log', maxBytes=20, backupCount=2)",
    "time": "logging.handlers.TimedRotatingFileHandler('out/app.log', when='S', backupCount=2)",
}


@pytest.mark.parametrize("handler", list(ROTATING_LOGS))
def test_a_rotating_log_is_granted_its_folder_not_its_file(tmp_path: Path, handler: str) -> None:
    """Rollovers rename the log beside it (and a timed one lists the folder for old
    backups to remove): a grant of the file alone would let the program start, and logging
    would print an error at every rollover and go on."""
    cwd = _world(tmp_path)
    (cwd / "out" / "app.log").write_text("")
    code = (
        "import logging, logging.handlers, time\n"
        f"log = logging.getLogger('app'); log.addHandler({ROTATING_LOGS[handler]})\n"
        "log.warning('first line of the log')\n"
        # A timed log rolls over on the first line past its second.
        f"time.sleep({1.1 if handler == 'time' else 0})\n"
        "log.warning('second line of the log'); print('logged')\n"
    )
    last, hints = follow(lambda flags: pynox(*flags, "-c", code, cwd=cwd), [])
    out = cwd / "out"
    wanted = {
        "size": f"changing the entries of {out} is not allowed; grant it with --allow-write={out}",
        "time": f"the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}",
    }
    assert hints == [f"pynox: {wanted[handler]}"]
    assert last.stdout == b"logged\n" and b"Logging error" not in last.stderr, last.stderr
    assert (out / "app.log.1").exists() or handler == "time"


def test_writing_where_the_scratch_directories_are_names_the_runs_own(tmp_path: Path) -> None:
    """A program that writes to /tmp by name: the folder holds every run's scratch
    directory, and a grant of it would open the others' to the program."""
    cwd = _world(tmp_path)
    shared = tmp_path / "tmp"
    shared.mkdir()
    code = f"open({str(shared / 'report.txt')!r}, 'w').write('done')"
    proc = pynox("-c", code, cwd=cwd, env={"TMPDIR": str(shared)})
    line = hint_line(proc.stderr)
    assert line.startswith(f"pynox: {shared} holds the scratch directories of other runs")
    assert f"--allow-write={shared} " not in line + " "
    assert f"--allow-write={shared}/out" in line
    own = "import os, tempfile; open(os.path.join(tempfile.gettempdir(), 'report.txt'), 'w')"
    assert pynox("-c", own, cwd=cwd, env={"TMPDIR": str(shared)}).returncode == 0


@pytest.mark.parametrize(
    "make",
    [
        "os.makedirs('out/shared', mode={})",
        "from pathlib import Path; Path('out/shared').mkdir(mode={})",
        "os.close(os.open('out/tool', os.O_CREAT | os.O_WRONLY, {}))",
    ],
    ids=["makedirs", "path-mkdir", "os-open"],
)
def test_a_set_id_mode_is_hinted_as_never_allowed(tmp_path: Path, make: str) -> None:
    """seccomp refuses making a set-user-ID or set-group-ID file or folder in a write
    grant (docs/sandbox.md): no grant helps, the mode without those bits does."""
    cwd = _world(tmp_path)
    refused = pynox("--allow-write=out", "-c", "import os; " + make.format("0o2775"), cwd=cwd)
    assert b"PermissionError: [Errno 1]" in refused.stderr
    line = hint_line(refused.stderr)
    assert "set-user-ID or set-group-ID" in line and "there is nothing to grant" in line
    plain = pynox("--allow-write=out", "-c", "import os; " + make.format("0o775"), cwd=cwd)
    assert plain.returncode == 0, plain.stderr


def test_editing_a_set_id_file_in_place_says_what_to_change(tmp_path: Path) -> None:
    """fileinput makes the file it edits again with the old one's mode: seccomp refuses a
    set-ID bit there, which the program never chose, so the hint for os.open's own mode did
    not apply. This one says where the file went and which bits to clear, and followed,
    the edit works."""
    cwd = _world(tmp_path)
    tool = cwd / "out" / "a.txt"
    tool.chmod(0o4755)
    code = EDIT_IN_PLACE["plain"]
    refused = pynox("--allow-read=out", "--allow-write=out", "-c", code, cwd=cwd)
    assert b"PermissionError: [Errno 1]" in refused.stderr
    assert hint_line(refused.stderr) == (
        f"pynox: fileinput (inplace=True) makes {tool} again with the mode of the file it "
        "edits, whose set-user-ID or set-group-ID bit the sandbox never lets a program give, "
        "and there is nothing to grant; it moved the file to a backup beside it (its name "
        "and .bak), left there or, once fileinput is closed without backup= (at the end of "
        "a with block or of the program), gone: put it back, then clear those bits where "
        f"pynox runs (chmod u-s,g-s {tool})"
    )
    assert sorted(tool.parent.iterdir()) == []  # gone, as the hint says: no backup= kept it
    tool.write_text("a")  # put back
    tool.chmod(0o4755)
    subprocess.run(["chmod", "u-s,g-s", str(tool)], check=True)
    again = pynox("--allow-read=out", "--allow-write=out", "-c", code, cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert tool.read_text() == "A"


def test_opening_for_reading_with_o_append_is_hinted_as_reading(tmp_path: Path) -> None:
    """O_APPEND alone opens for reading (O_RDONLY is 0): the refusal is of reading, which
    the write grant does not give, not of writing, which it does."""
    cwd = _world(tmp_path)
    code = "import os; print(os.read(os.open('out/a.txt', os.O_RDONLY | os.O_APPEND), 9))"
    _, hints = follow_code(cwd, code, ["--allow-write=out"])
    out = cwd / "out"
    assert hints == [f"pynox: reading {out} is not allowed; grant it with --allow-read={out}"]


def test_copying_into_a_folder_is_hinted_as_copyfile_given_the_file(tmp_path: Path) -> None:
    """shutil.copy into a folder copies the contents, then is refused the mode: the hint
    names shutil.copyfile, which takes the new file's path, not the folder shutil.copy
    took (given the folder, it fails with IsADirectoryError)."""
    cwd = _world(tmp_path)
    copy = "import shutil; shutil.copy('data/in.txt', 'out2')"
    proc = pynox("--allow-read=data", "--allow-write=out2", "-c", copy, cwd=cwd)
    assert proc.returncode == 1 and b"PermissionError" in proc.stderr
    hint = hint_line(proc.stderr)
    assert hint.endswith("(shutil.copyfile rather than shutil.copy, given the new file's path: "
                         "copyfile takes no folder)")  # fmt: skip
    (cwd / "out2" / "in.txt").unlink()
    followed = "import shutil; shutil.copyfile('data/in.txt', 'out2/in.txt'); print('ok')"
    done = pynox("--allow-read=data", "--allow-write=out2", "-c", followed, cwd=cwd)
    assert done.stdout == b"ok\n", done.stderr
    assert (cwd / "out2" / "in.txt").read_text() == "input"


def test_a_hard_link_out_of_a_folder_pynox_never_grants_names_copying_only(
    tmp_path: Path,
) -> None:
    """The working directory holds its pynox.toml, which no write grant may reach: the
    hint names no grant of it, only the copy, which then works."""
    cwd = _world(tmp_path)
    (cwd / "in.txt").write_text("input")
    code = "import os; os.link('in.txt', 'out/in.txt')"
    proc = pynox(f"--allow-read={cwd}", "--allow-write=out", "-c", code, cwd=cwd)
    assert b"Invalid cross-device link" in proc.stderr
    assert hint_line(proc.stderr) == (
        f"pynox: hard-linking a file of {cwd}, which the program may not write and no run may "
        "be granted writing, into a folder it may write is refused (the kernel says EXDEV, as "
        "between file systems); copy the file instead (shutil.copyfile)"
    )
    assert pynox(f"--allow-write={cwd}", "-c", "pass", cwd=cwd).returncode == 125
    copied = "import shutil; shutil.copyfile('in.txt', 'out/in.txt'); print('ok')"
    done = pynox(f"--allow-read={cwd}", "--allow-write=out", "-c", copied, cwd=cwd)
    assert done.stdout == b"ok\n", done.stderr
