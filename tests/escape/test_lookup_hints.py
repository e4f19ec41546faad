"""Hints after failures that name no refused file: a look-up in a host file the sandbox
keeps closed (groups, services, protocols, host names), a terminal type not passed, a refusal no
grant lifts, and a folder that looked empty because listing it was refused. Each hint is
exact, and following it makes the program work."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import pynox, python
from support.hints import follow, hint_line

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES", "")


def _follow(cwd: Path, code: str, grants: list[str], **kwargs: object) -> tuple[bytes, list[str]]:
    """Runs code, adding each hint's grants until it succeeds: its output and the hints."""
    proc, hints = follow(lambda flags: pynox(*flags, "-c", code, cwd=cwd, **kwargs), grants)
    return proc.stdout, hints


def _no_hint(proc: object) -> None:
    stderr = proc.stderr.decode()  # type: ignore[attr-defined]
    assert proc.returncode == 1, stderr  # type: ignore[attr-defined]
    assert "pynox:" not in stderr, stderr


# --- /etc/group --------------------------------------------------------------------------

GROUP_HINT = (
    "pynox: the program looked up a group's name (grp.getgrgid(), pathlib's Path.group()) in "
    "/etc/group, and reading /etc/group is not allowed; grant it with --allow-read=/etc/group"
)


@pytest.mark.parametrize(
    "code",
    [
        "import grp; print(grp.getgrgid(0).gr_name)",
        "import grp, os; print(grp.getgrgid(os.getgid()).gr_name)",
        "import pathlib; print(pathlib.Path(__import__('os').getcwd()).group())",
    ],
    ids=["root", "own-group", "path-group"],
)
def test_a_group_look_up_is_hinted_as_etc_group(tmp_path: Path, code: str) -> None:
    """/etc/group is private to the host, as /etc/passwd is: grp.getgrgid() finds no
    group, and the hint names the file, whose grant makes it work."""
    expected = python("-c", code, cwd=tmp_path)
    if expected.returncode != 0:
        pytest.skip("the group is in no file here")
    out, hints = _follow(tmp_path, code, [])
    assert out == expected.stdout
    assert hints == [GROUP_HINT]


def test_no_group_hint_for_a_group_in_no_file(tmp_path: Path) -> None:
    """Another gid may be in no file at all: granting /etc/group would not be sure to help."""
    _no_hint(pynox("-c", "import grp; grp.getgrgid(4242424)", cwd=tmp_path))


# --- /etc/services and /etc/protocols ----------------------------------------------------

TABLES_HINT = (
    "pynox: the services and protocols tables (/etc/services, /etc/protocols) that socket's "
    "look-ups read are readable only with the network; grant it with --allow-network"
)
TABLE_LOOK_UPS = {
    "service": ("/etc/services", "import socket; print(socket.getservbyname('http', 'tcp'))"),
    "port": ("/etc/services", "import socket; print(socket.getservbyport(80))"),
    "protocol": ("/etc/protocols", "import socket; print(socket.getprotobyname('tcp'))"),
}


@pytest.mark.parametrize("name", sorted(TABLE_LOOK_UPS))
def test_a_services_or_protocols_look_up_is_hinted_as_the_network(
    tmp_path: Path, name: str
) -> None:
    table, code = TABLE_LOOK_UPS[name]
    if not os.path.exists(table):
        pytest.skip(f"{table} is not here")
    out, hints = _follow(tmp_path, code, [])
    assert out == python("-c", code).stdout
    assert hints == [TABLES_HINT]


def test_no_tables_hint_for_a_name_in_no_table(tmp_path: Path) -> None:
    """With the network, a name the table lacks is no refusal."""
    code = "import socket; socket.getprotobyname('no-such-protocol')"
    _no_hint(pynox("--allow-network", "-c", code, cwd=tmp_path))


# --- host names -------------------------------------------------------------------------

NETWORK_HINT = "pynox: the network is off; grant it with --allow-network"
NAME_LOOK_UPS = {
    "name": "import socket; print(socket.gethostbyname('localhost'))",
    # gethostbyaddr fails with socket.herror, not gaierror.
    "address": "import socket; print(socket.gethostbyaddr('127.0.0.1')[0])",
}


@pytest.mark.parametrize("name", sorted(NAME_LOOK_UPS))
def test_a_host_look_up_is_hinted_as_the_network(tmp_path: Path, name: str) -> None:
    """The resolver's files come with the network: a name or an address looked up
    without it fails, and the hint's grant makes it work."""
    code = NAME_LOOK_UPS[name]
    expected = python("-c", code)
    if expected.returncode != 0:
        pytest.skip("localhost is in no hosts file here")
    out, hints = _follow(tmp_path, code, [])
    assert out == expected.stdout
    assert hints == [NETWORK_HINT]


# --- socket.if_nameindex -----------------------------------------------------------------

INTERFACES_HINT = (
    "pynox: looking up the network interfaces (socket.if_nameindex(), if_nametoindex(), "
    "if_indextoname()) takes a netlink socket or interface ioctls, which the sandbox never "
    "allows, with the network or without; there is nothing to grant, leave it out"
)
# Each works under python: the loopback interface is there on every Linux machine.
INTERFACE_LOOK_UPS = {
    "nameindex": "import socket; print(len(socket.if_nameindex()) > 0)",
    "nametoindex": "import socket; print(socket.if_nametoindex('lo') > 0)",
    "indextoname": (
        "import socket; print(socket.if_indextoname(socket.if_nametoindex('lo')) == 'lo')"
    ),
}


@pytest.mark.parametrize("grants", [[], ["--allow-network"]], ids=["offline", "network"])
@pytest.mark.parametrize("name", sorted(INTERFACE_LOOK_UPS))
def test_interface_look_ups_are_hinted_as_nothing_to_grant(
    tmp_path: Path, name: str, grants: list[str]
) -> None:
    if not hasattr(socket, "if_nameindex"):
        pytest.skip("no socket.if_nameindex here")
    code = INTERFACE_LOOK_UPS[name]
    if python("-c", code).stdout != b"True\n":
        pytest.skip("no loopback interface here")
    proc = pynox(*grants, "-c", code, cwd=tmp_path)
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == INTERFACES_HINT


# --- TERM --------------------------------------------------------------------------------

TERMINAL_HINT = (
    "pynox: curses found no terminal: the environment variable TERM, the terminal's type, is "
    "set where pynox runs but not passed to the program; grant it with --allow-env=TERM"
)
SETUPTERM = "import curses; curses.setupterm(); print(curses.tigetnum('colors'))"


def test_curses_without_term_is_hinted_to_pass_it(tmp_path: Path) -> None:
    pytest.importorskip("curses")
    env = {"TERM": "xterm"}
    expected = python("-c", SETUPTERM, env=env)
    if expected.returncode != 0:
        pytest.skip("no terminal description for xterm here")
    out, hints = _follow(tmp_path, SETUPTERM, [], env=env)
    assert out == expected.stdout
    assert hints == [TERMINAL_HINT]


def test_no_terminal_hint_where_pynox_runs_without_term(tmp_path: Path) -> None:
    """Passing TERM would pass nothing: python fails alike, with no hint."""
    pytest.importorskip("curses")
    _no_hint(pynox("-c", SETUPTERM, cwd=tmp_path))


# --- dbm.dumb ----------------------------------------------------------------------------

DBM_DUMB_HINT = (
    "pynox: dbm.dumb, which dbm and shelve use where gdbm and ndbm are missing, sets the mode "
    "of its files, which the sandbox never allows, and there is nothing to grant; store the "
    "data with sqlite3 instead (from Python 3.13 on, dbm and shelve use dbm.sqlite3)"
)


def _dbm_default() -> str:
    """The module dbm.open() makes a new database with on this Python: the first of its
    choices that imports (dbm.dumb where gdbm and ndbm were not built, before 3.13)."""
    import dbm

    for name in dbm._names:  # type: ignore[attr-defined]
        try:
            __import__(name)
        except ImportError:
            continue
        return name
    return "dbm.dumb"


DUMB_DATABASES = [
    pytest.param(
        "import dbm.dumb; db = dbm.dumb.open('out/notes'); db['a'] = 'b'; db.close()",
        id="dbm.dumb",
    ),
    pytest.param(
        "import dbm; db = dbm.open('out/notes', 'c'); db['a'] = 'b'; db.close()",
        marks=pytest.mark.skipif(_dbm_default() != "dbm.dumb", reason="dbm has another module"),
        id="dbm",
    ),
    pytest.param(
        "import shelve; db = shelve.open('out/notes'); db['a'] = [1]; db.close()",
        marks=pytest.mark.skipif(_dbm_default() != "dbm.dumb", reason="dbm has another module"),
        id="shelve",
    ),
]
SQLITE_INSTEAD = (
    "import sqlite3\n"
    "db = sqlite3.connect('out/notes.db')\n"
    "db.execute('create table notes(key primary key, value)')\n"
    "db.execute('insert into notes values (?, ?)', ('a', 'b')); db.commit()\n"
    "print(db.execute('select value from notes').fetchone()[0])"
)


@pytest.mark.parametrize("code", DUMB_DATABASES)
def test_dbm_dumb_is_hinted_to_use_sqlite3_which_works(tmp_path: Path, code: str) -> None:
    """dbm.dumb sets its files' mode, which the sandbox refuses: the metadata hint's way
    out (shutil.copyfile) is no way for this program. The hint's is: an SQLite database in
    the granted folder works once the folder's hints are followed."""
    (tmp_path / "out").mkdir()
    proc = pynox("--allow-write=out", "-c", code, cwd=tmp_path)
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == DBM_DUMB_HINT
    out, _ = _follow(tmp_path, SQLITE_INSTEAD, ["--allow-write=out"])
    assert out == b"b\n"


DBM_READ_BACK_HINT = (
    "pynox: dbm.sqlite3, which dbm and shelve use, reads back the database it writes in {out}, "
    "and the empty file its failed open left there is one dbm cannot open: delete that file, "
    "and grant reading with --allow-read={out}"
)
# Each program, and what it prints.
SQLITE_DATABASES = {
    "dbm": (
        "import dbm\nwith dbm.open('out/notes', 'c') as db: db['a'] = 'b'\n"
        "with dbm.open('out/notes') as db: print(db['a'])",
        b"b'b'\n",
    ),
    "shelve": (
        "import shelve\nwith shelve.open('out/notes') as db: db['a'] = [1]\n"
        "with shelve.open('out/notes') as db: print(db['a'])",
        b"[1]\n",
    ),
}


@pytest.mark.skipif(_dbm_default() != "dbm.sqlite3", reason="dbm has another module")
@pytest.mark.parametrize("name", sorted(SQLITE_DATABASES))
def test_dbm_sqlite3_in_a_write_only_folder_is_hinted_and_following_works(
    tmp_path: Path, name: str
) -> None:
    """dbm.sqlite3 makes its file, then cannot open it for reading: the hint says to grant
    the folder for reading, and to delete the empty file left, which dbm.open() cannot
    tell the kind of. Doing both works."""
    out = tmp_path / "out"
    out.mkdir()
    code, printed = SQLITE_DATABASES[name]
    proc = pynox("--allow-write=out", "-c", code, cwd=tmp_path)
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == DBM_READ_BACK_HINT.format(out=out)
    (out / "notes").unlink()
    proc = pynox("--allow-write=out", f"--allow-read={out}", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == printed


# --- a tree copied with its metadata ------------------------------------------------------

TREE_METADATA_HINT = (
    "pynox: shutil copied the files but not their modes and times, which the sandbox never "
    "lets a program change, and there is nothing to grant; copy the tree's contents instead: "
    "walk it with os.walk, make each folder with os.makedirs and copy each file with "
    "shutil.copyfile"
)
WALK_AND_COPY = """\
import os, shutil
for folder, _, files in os.walk('out/src'):
    made = os.path.join('out/copy', os.path.relpath(folder, 'out/src'))
    os.makedirs(made, exist_ok=True)
    for name in files:
        shutil.copyfile(os.path.join(folder, name), os.path.join(made, name))
print(open('out/copy/sub/notes.txt').read())
"""


@pytest.mark.parametrize(
    "copy",
    [
        "shutil.copytree('out/src', 'out/copy')",
        # The way round for a single file does not serve a tree: its folders' times are
        # still copied.
        "shutil.copytree('out/src', 'out/copy', copy_function=shutil.copyfile)",
    ],
    ids=["copy2", "copyfile"],
)
def test_a_tree_copied_with_its_metadata_is_told_to_copy_the_contents(
    tmp_path: Path, copy: str
) -> None:
    """copytree gathers every refused mode and time change into one shutil.Error, which
    named no file to grant and got no hint; following the hint's walk copies the tree."""
    (tmp_path / "out" / "src" / "sub").mkdir(parents=True)
    (tmp_path / "out" / "src" / "sub" / "notes.txt").write_text("kept")
    grants = ["--allow-read=out", "--allow-write=out"]
    proc = pynox(*grants, "-c", f"import shutil; {copy}", cwd=tmp_path)
    assert proc.returncode == 1
    assert b"shutil.Error" in proc.stderr
    assert hint_line(proc.stderr) == TREE_METADATA_HINT
    (tmp_path / "out" / "copy").rename(tmp_path / "out" / "partial")
    assert python("-c", f"import shutil; {copy}", cwd=tmp_path).returncode == 0  # parity

    (tmp_path / "out" / "copy").rename(tmp_path / "out" / "python's")
    followed = pynox(*grants, "-c", WALK_AND_COPY, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout == b"kept\n"


def test_a_tree_copy_refused_a_file_gets_no_metadata_hint(tmp_path: Path) -> None:
    """A tree copy that also failed for want of a grant (EACCES: a link out of the granted
    folder, followed) copied not all the files: the hint to copy them differently would
    not help, so it is not given."""
    (tmp_path / "out" / "src").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("not granted")
    (tmp_path / "out" / "src" / "link.txt").symlink_to(tmp_path / "secret.txt")
    proc = pynox(
        "--allow-read=out",
        "--allow-write=out",
        "-c",
        "import shutil; shutil.copytree('out/src', 'out/copy')",
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert b"[Errno 13]" in proc.stderr and b"shutil.Error" in proc.stderr
    assert TREE_METADATA_HINT not in proc.stderr.decode()


MOVE_METADATA_HINT = (
    "pynox: shutil.move copies a file to another file system with its mode and times, which "
    "the sandbox never lets a program change, and there is nothing to grant; the original is "
    "still there: copy its contents with shutil.copyfile, then remove it with os.remove"
)
MOVE_FROM_SCRATCH = """\
import os, shutil, tempfile
made = os.path.join(tempfile.mkdtemp(), 'report.csv')
with open(made, 'w') as file:
    file.write('a,b')
{move}
print(open('out/report.csv').read(), os.path.exists(made))
"""
SHARED_MEMORY = Path("/dev/shm")


@pytest.fixture
def tmpfs_temporary() -> Iterator[Path]:
    """A folder on another file system than the tests' (a tmpfs), to be TMPDIR."""
    if not SHARED_MEMORY.is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    folder = Path(tempfile.mkdtemp(dir=SHARED_MEMORY))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_a_file_moved_to_another_file_system_is_told_to_copy_then_remove(
    tmp_path: Path, tmpfs_temporary: Path
) -> None:
    """With the scratch directory on a tmpfs (TMPDIR, as /tmp is on many systems), moving
    a file the program made there into a granted folder copies it with copy2."""
    assert os.stat(tmpfs_temporary).st_dev != os.stat(tmp_path).st_dev
    (tmp_path / "out").mkdir()
    env = {"TMPDIR": str(tmpfs_temporary)}
    grants = ["--allow-read=out", "--allow-write=out"]
    move = MOVE_FROM_SCRATCH.format(move="shutil.move(made, 'out/report.csv')")
    proc = pynox(*grants, "-c", move, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == MOVE_METADATA_HINT
    python_run = python("-c", move, cwd=tmp_path, env=env)  # parity: python moves it
    assert python_run.stdout == b"a,b False\n", python_run.stderr

    (tmp_path / "out" / "report.csv").unlink()
    followed = MOVE_FROM_SCRATCH.format(
        move="shutil.copyfile(made, 'out/report.csv'); os.remove(made)"
    )
    proc = pynox(*grants, "-c", followed, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"a,b False\n"


TAR_METADATA_HINT = (
    "pynox: tarfile extracted the file but cannot give it the owner, mode and times the "
    "archive holds, which the sandbox never lets a program change, and there is nothing to "
    "grant; open the archive with tarfile's default errorlevel=1, which extracts the "
    "contents and passes over them"
)
EXTRACT = """\
import tarfile
with tarfile.open('tools.tar', {errorlevel}) as archive:
    archive.extractall('out', filter='data')
print(open('out/tools/run.sh').read(), end='')
"""


def test_a_tar_extracted_strictly_is_told_to_pass_over_modes_and_times(tmp_path: Path) -> None:
    """tarfile with errorlevel=2 raises ExtractError where it cannot give a file the mode
    and times the archive holds, which python can: the hint names the errorlevel that
    extracts the contents, and with it the program works."""
    script = tmp_path / "tools" / "run.sh"
    script.parent.mkdir()
    script.write_text("echo hi\n")
    script.chmod(0o755)
    with tarfile.open(tmp_path / "tools.tar", "w") as archive:
        archive.add(script.parent, arcname="tools")
    (tmp_path / "out").mkdir()
    strict = EXTRACT.format(errorlevel="errorlevel=2")
    assert python("-c", strict, cwd=tmp_path).stdout == b"echo hi\n"  # parity: python can
    shutil.rmtree(tmp_path / "out")
    (tmp_path / "out").mkdir()
    grants = ["--allow-read=.", "--allow-write=out"]
    proc = pynox(*grants, "-c", strict, cwd=tmp_path)
    assert proc.returncode == 1
    assert b"tarfile.ExtractError" in proc.stderr
    assert hint_line(proc.stderr) == TAR_METADATA_HINT

    shutil.rmtree(tmp_path / "out")
    (tmp_path / "out").mkdir()
    proc = pynox(*grants, "-c", EXTRACT.format(errorlevel="errorlevel=1"), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, b"echo hi\n"), proc.stderr


# --- a folder that looked empty ----------------------------------------------------------

UNLISTED_HINT = (
    "pynox: the program was refused listing {data}, which glob, pathlib's glob and os.walk "
    "pass over as if it were empty; grant it with --allow-read={data}"
)
# An agent's program: the data files it finds, joined. Under python it prints them; where
# listing data/ is refused, glob finds none and pandas has nothing to join.
PANDAS_JOIN = (
    "import glob\n"
    "import pandas as pd\n"
    "frames = [pd.read_csv(path) for path in sorted(glob.glob('data/*.csv'))]\n"
    "print(pd.concat(frames)['amount'].sum())"
)
FIRST_FILE = {
    "glob": "import glob; print(open(sorted(glob.glob('data/*.csv'))[0]).read())",
    "pathlib": (
        "import pathlib; print(next(iter(sorted(pathlib.Path('data').glob('*.csv')))).read_text())"
    ),
    "walk": (
        "import os\n"
        "found = [os.path.join(top, name) for top, _, names in os.walk('data') for name in names]\n"
        "print(open(found[0]).read())"
    ),
}


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory with data/ in it, and a folder for the script, which is read."""
    work, scripts = tmp_path / "work", tmp_path / "scripts"
    (work / "data").mkdir(parents=True)
    scripts.mkdir()
    (work / "data" / "sales.csv").write_text("region,amount\nnorth,70\nsouth,80\n")
    return work, scripts


def _follow_script(work: Path, script: Path, grants: list[str]) -> tuple[bytes, list[str]]:
    proc, hints = follow(lambda flags: pynox(*flags, str(script), cwd=work, timeout=120), grants)
    return proc.stdout, hints


@pytest.mark.parametrize("name", sorted(FIRST_FILE))
def test_a_folder_refused_listing_is_hinted_after_a_later_failure(
    tmp_path: Path, name: str
) -> None:
    """glob, pathlib's glob and os.walk find nothing in a folder they may not list and say
    nothing: the program fails later (here an IndexError or a StopIteration), and the hint
    names the folder. Granting it makes the program work."""
    work, scripts = _project(tmp_path)
    script = scripts / "first.py"
    script.write_text(FIRST_FILE[name])
    out, hints = _follow_script(work, script, [])
    assert out == python(str(script), cwd=work).stdout
    assert hints == [UNLISTED_HINT.format(data=work / "data")]


def test_a_pandas_join_of_a_folder_refused_listing_gets_the_hint(tmp_path: Path) -> None:
    if not os.path.isdir(os.path.join(PACKAGES, "pandas")):
        pytest.skip("pandas is not in $PYNOX_TEST_PACKAGES")
    work, scripts = _project(tmp_path)
    script = scripts / "join.py"
    script.write_text(PANDAS_JOIN)
    out, hints = _follow_script(work, script, [f"--package-dir={PACKAGES}"])
    assert out == b"150\n"
    assert hints == [UNLISTED_HINT.format(data=work / "data")]


def test_no_listing_hint_for_what_imports_list(tmp_path: Path) -> None:
    """Imports and importlib.metadata list every path entry, the working directory of -c
    among them, which no run reads unless granted, and pass over what they may not list,
    as under python: that is no refusal of the program's to hint at."""
    code = "import json, importlib.metadata as m; list(m.distributions()); 1/0"
    _no_hint(pynox("-c", code, cwd=tmp_path))


def test_a_module_installed_elsewhere_keeps_its_hint_after_a_refused_listing(
    tmp_path: Path,
) -> None:
    """A failed import is hinted at by where its module is installed: a folder refused
    listing before it is not what to grant."""
    work, _ = _project(tmp_path)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "helpers.py").write_text("ready = True\n")
    code = "import glob; glob.glob('data/*.csv'); import helpers"
    proc = pynox("-c", code, cwd=work, env={"PYTHONPATH": str(modules)})
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == (
        f"pynox: the module is installed in {modules}; import from there with "
        f"--package-dir={modules}"
    )


def test_no_listing_hint_for_a_folder_python_may_not_list_either(tmp_path: Path) -> None:
    """A granted folder whose own mode refuses listing: the program finds nothing there,
    as python run by a user other than root does (root's program runs without the
    capabilities that pass over modes), and no grant would change that."""
    work, _ = _project(tmp_path)
    (work / "data").chmod(0o300)
    try:
        code = "import glob; glob.glob('data/*.csv')[0]"
        _no_hint(pynox("--allow-read=data", "-c", code, cwd=work))
    finally:
        (work / "data").chmod(0o700)


def test_a_folder_listed_refused_is_named_as_listed_after_a_change_of_directory(
    tmp_path: Path,
) -> None:
    """A relative path names another folder once the program changes directory: the hint
    names the folder the program was refused, not the one of that name where it went."""
    work, _ = _project(tmp_path)
    (tmp_path / "data").mkdir()
    code = "import glob, os; found = glob.glob('data/*.csv'); os.chdir('..'); found[0]"
    proc = pynox("-c", code, cwd=work)
    assert proc.returncode == 1
    assert hint_line(proc.stderr) == UNLISTED_HINT.format(data=work / "data")
