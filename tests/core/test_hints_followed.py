"""Hints are right when following them works: each denial here is followed by its hint's
grants, and the same program then succeeds.

Writes never imply reads, and many writers read back what they write: "w+b" (Pillow,
so matplotlib's PNGs), SQLite, zipfile's append mode. The hint then names the write tree
for reading, never a grant the run already has, and never a path that does not exist.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import follow, follow_code, hint_line, hinted_flags

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

READ_BACK = "open('out/r.bin', 'w+b').write(b'data'); print(open('out/r.bin', 'rb').read())"
SQLITE = (
    "import sqlite3\n"
    "db = sqlite3.connect('out/app.db')\n"
    "db.execute('create table if not exists t(x)'); db.execute('insert into t values (1)')\n"
    "db.commit(); print(db.execute('select count(*) from t').fetchone()[0])"
)
ZIP_APPEND = (
    "import zipfile\n"
    "with zipfile.ZipFile('out/a.zip', 'a') as z: z.writestr('x.txt', 'hello')\n"
    "print(zipfile.ZipFile('out/a.zip').read('x.txt'))"
)
READ = "print(open('data/in.txt').read())"
LIST = "import os; print(sorted(os.listdir('data')))"
CREATE = "open('made/new.txt', 'w').write('x'); print('ok')"
NESTED_CREATE = "import os; os.makedirs('made/a/b'); print('ok')"
# Without the network no name resolves, not even localhost: the resolver's files are closed.
BIG_WRITE = "f = open('out/big.bin', 'wb'); f.write(b'x' * 1500); f.close(); print('ok')"
RESOLVE = "import socket; print(bool(socket.getaddrinfo('localhost', 80)))"


def _world(tmp_path: Path) -> Path:
    for name in ("out", "data", "made"):
        (tmp_path / name).mkdir()
    (tmp_path / "data" / "in.txt").write_text("input")
    return tmp_path


@pytest.mark.parametrize(
    "code, grants, expected",
    [
        (READ_BACK, ["--allow-write=out"], ["--allow-read={out}"]),
        (SQLITE, ["--allow-write=out"], ["--allow-read={out}"]),
        (ZIP_APPEND, ["--allow-write=out"], ["--allow-read={out}"]),
        (SQLITE, [], ["--allow-read={out} --allow-write={out}"]),
        (READ_BACK, [], ["--allow-read={out} --allow-write={out}"]),
        (READ, [], ["--allow-read={data}/in.txt"]),
        (LIST, [], ["--allow-read={data}"]),
        (CREATE, [], ["--allow-write={made}"]),
        (NESTED_CREATE, [], ["--allow-write={made}"]),
        (RESOLVE, [], ["--allow-network"]),
        (BIG_WRITE, ["--allow-write=out", "--max-file-size=1k"], ["--max-file-size=2048"]),
    ],
    ids=[
        "w+b-in-write-tree", "sqlite-in-write-tree", "zip-append-in-write-tree",
        "sqlite-no-grant", "w+b-no-grant", "read", "list", "create", "makedirs", "resolve",
        "file-size",
    ],
)  # fmt: skip
def test_following_the_hint_works(
    tmp_path: Path, code: str, grants: list[str], expected: list[str]
) -> None:
    cwd = _world(tmp_path)
    names = {name: str(cwd / name) for name in ("out", "data", "made")}
    _, hints = follow_code(cwd, code, grants)
    wanted = [text.format(**names) for text in expected]
    assert len(hints) == len(wanted), hints
    for hint, grant in zip(hints, wanted, strict=True):
        assert hint.endswith(grant), hint


def test_a_link_out_of_the_write_tree_is_hinted_as_where_it_leads(tmp_path: Path) -> None:
    """A link in the write tree leads outside it: granting the tree again would not help,
    and the file that would be written is the link's target, so that is what is named."""
    cwd = _world(tmp_path)
    (cwd / "out" / "escape").symlink_to(cwd / "data" / "in.txt")
    proc = pynox("--allow-write=out", "-c", "open('out/escape', 'w').write('x')", cwd=cwd)
    assert proc.returncode == 1 and b"PermissionError" in proc.stderr
    assert (cwd / "data" / "in.txt").read_text() == "input"
    assert hinted_flags(proc.stderr) == [f"--allow-write={cwd / 'data' / 'in.txt'}"]


def test_the_api_hint_is_in_keyword_spelling_and_following_it_works(tmp_path: Path) -> None:
    import pynox as api

    cwd = _world(tmp_path)
    code = READ_BACK.replace("out/", str(cwd / "out") + "/")
    first = api.run(code, allow_write=[str(cwd / "out")])
    assert first.exit == 1
    assert first.error is not None and first.error["hint"] is not None
    assert first.error["hint"].endswith(f"allow_read=[{str(cwd / 'out')!r}]")
    second = api.run(code, allow_write=[str(cwd / "out")], allow_read=[str(cwd / "out")])
    assert second.exit == 0, second.text
    assert second.stdout == "b'data'\n"


@pytest.mark.parametrize("name", ["new\nline", "tab\there", "\u202edrow", "caf\udce9"])
def test_the_api_hint_names_a_path_that_is_not_printable_as_python_does(
    tmp_path: Path, name: str
) -> None:
    """A shell word cannot hold a line break on one line, so the command line gives no
    hint; an API hint spells grants in Python, whose repr escapes it, and a name that is
    not UTF-8 too, which would leave surrogates in the text a model reads, where no model
    API can encode them. Following the hint works."""
    import pynox as api

    path = tmp_path / name
    path.write_text("data")
    code = f"print(open({str(path)!r}).read())"
    first = api.run(code)
    assert first.error is not None
    assert first.error["hint"] == (
        f"reading {str(path)!r} is not allowed; grant it with allow_read=[{str(path)!r}]"
    )
    assert first.stderr.splitlines()[-1] == f"pynox: {first.error['hint']}"
    first.text.encode()
    second = api.run(code, allow_read=[str(path)])
    assert second.stdout == "data\n", second.text


QUERY = "import sqlite3\nprint(sqlite3.connect('out/app.db').execute('select x from t').fetchall())"
INSERT = (
    "import sqlite3\n"
    "db = sqlite3.connect('out/app.db'); db.execute('insert into t values (2)'); db.commit()\n"
    "print(db.execute('select x from t').fetchall())"
)


def _database(cwd: Path, wal: bool) -> sqlite3.Connection:
    """out/app.db with one row, made by plain python; the connection is left open."""
    db = sqlite3.connect(cwd / "out" / "app.db")
    if wal:
        db.execute("pragma journal_mode=wal")
    db.execute("create table t(x)")
    db.execute("insert into t values (1)")
    db.commit()
    return db


def test_querying_a_wal_database_names_its_folder_both_ways(tmp_path: Path) -> None:
    """Readers of a WAL database write its -shm and -wal files beside it: granting the file
    alone leaves SQLite read-only, and the query fails. The file's header tells (once the
    file is readable), and the folder is named for reading and writing."""
    cwd = _world(tmp_path)
    _database(cwd, wal=True).close()  # a clean close leaves no -wal file to see
    out = cwd / "out"
    assert follow_code(cwd, QUERY, [])[1] == [
        f"pynox: reading {out}/app.db is not allowed; grant it with --allow-read={out}/app.db",
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}",
    ]


def test_a_wal_database_another_program_holds_open_names_its_folder_at_once(
    tmp_path: Path,
) -> None:
    cwd = _world(tmp_path)
    held = _database(cwd, wal=True)  # its -wal and -shm files are beside it meanwhile
    try:
        out = cwd / "out"
        assert follow_code(cwd, QUERY, [])[1] == [
            f"pynox: the program reads back what it writes in {out}; grant both with "
            f"--allow-read={out} --allow-write={out}"
        ]
    finally:
        held.close()


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_changing_a_database_granted_for_reading_names_its_folder(
    tmp_path: Path, wal: bool
) -> None:
    """Granted the file for reading, SQLite opens the database read-only, and a change
    fails as 'attempt to write a readonly database': its journal or log goes beside it,
    so the folder is what to grant, whichever of the two ways it lacks."""
    cwd = _world(tmp_path)
    _database(cwd, wal).close()
    out = str(cwd / "out")
    assert follow_code(cwd, INSERT, [f"--allow-read={out}/app.db"])[1] == [
        f"pynox: the program reads back what it writes in {out}; grant both with "
        f"--allow-read={out} --allow-write={out}"
    ]
    assert follow_code(cwd, INSERT, ["--allow-read=out"])[1] == [
        f"pynox: writing {out} is not allowed; grant it with --allow-write={out}"
    ]
    with sqlite3.connect(cwd / "out" / "app.db") as db:
        assert db.execute("select x from t").fetchall() == [(1,), (2,), (2,)]


def _follow_into_a_folder(cwd: Path, code: str, written: str) -> tuple[str, str]:
    """Runs code, which writes `written` where no write grant may reach; takes the folder
    the hint names instead, makes it, has the program write there, and runs it again
    with the hint's grants. Returns the hint and the output of the run that followed it."""
    first = pynox("-c", code, cwd=cwd)
    assert first.returncode == 1 and b"PermissionError" in first.stderr, first.stderr
    hint = hint_line(first.stderr)
    flags = hinted_flags(first.stderr)
    folder = flags[-1].partition("=")[2]
    assert all(flag.partition("=")[2] == folder for flag in flags), hint
    Path(folder).mkdir()
    moved = code.replace(written, f"{folder}/{os.path.basename(written)}")
    done = pynox(*flags, "-c", moved, cwd=cwd)
    assert done.returncode == 0, done.stderr.decode()
    return hint, done.stdout.decode()


CANNOT = "cannot be granted for writing: it holds where pynox reads its configuration " \
    "(pynox.toml), so the program could grant itself more next time; write into a new " \
    "folder inside it instead, such as {out}, made before the run and granted with {grants}, " \
    "or into the run's scratch directory ($TMPDIR){scratch_out}"  # fmt: skip
# A pool run's scratch directory goes when the run ends: the hint names what comes back.
POOL_SCRATCH_OUT = ", whose out/ folder comes back with the result"


@pytest.mark.parametrize("config", [True, False], ids=["pynox-toml", "no-pynox-toml"])
def test_writing_in_the_working_directory_names_a_folder_inside_it(
    tmp_path: Path, config: bool
) -> None:
    """The working directory holds its pynox.toml, whether or not one exists yet: pynox
    refuses to grant writing it, so the hint names a folder inside it that it grants."""
    cwd = _world(tmp_path)
    (cwd / "out").rmdir()
    if config:
        (cwd / "pynox.toml").write_text("[permissions]\n")
    assert pynox(f"--allow-write={cwd}", "-c", "pass", cwd=cwd).returncode == 125
    out = f"{cwd}/out"
    hint, output = _follow_into_a_folder(cwd, "open('x.txt', 'w').write('x'); print('ok')", "x.txt")
    assert hint == f"pynox: {cwd} " + CANNOT.format(
        out=out, grants=f"--allow-write={out}", scratch_out=""
    )
    assert output == "ok\n" and (cwd / "out" / "x.txt").read_text() == "x"
    (cwd / "out" / "x.txt").unlink()
    (cwd / "out").rmdir()  # the launcher writes --json's hint from the same text
    result = json.loads(pynox("--json", "-c", "open('x.txt', 'w')", cwd=cwd).stdout)
    assert result["error"]["hint"] == hint[len("pynox: ") :]


def test_a_file_read_back_in_the_working_directory_names_a_folder_inside_it_both_ways(
    tmp_path: Path,
) -> None:
    cwd = _world(tmp_path)
    (cwd / "out").rmdir()
    code = "open('r.bin', 'w+b').write(b'data'); print(open('r.bin', 'rb').read())"
    hint, output = _follow_into_a_folder(cwd, code, "r.bin")
    out = f"{cwd}/out"
    assert hint == (
        f"pynox: the program reads back what it writes in {cwd}, which "
        + CANNOT.format(out=out, grants=f"--allow-read={out} --allow-write={out}", scratch_out="")
    )
    assert output == "b'data'\n"


def test_writing_in_a_folder_that_holds_the_working_directory_names_a_folder_inside_it(
    tmp_path: Path,
) -> None:
    """Writing /tmp/x from a project under /tmp: granting /tmp would cover the project's
    pynox.toml."""
    project = tmp_path / "project"
    project.mkdir()
    written = str(tmp_path / "x.txt")
    hint, output = _follow_into_a_folder(project, f"open({written!r}, 'w'); print('ok')", written)
    out = f"{tmp_path}/out"
    grants = f"--allow-write={out}"
    assert hint == f"pynox: {tmp_path} " + CANNOT.format(out=out, grants=grants, scratch_out="")
    assert output == "ok\n" and (tmp_path / "out" / "x.txt").exists()


TRUSTED_WRITE = (
    "pynox: {path} cannot be granted for writing: what is written there reaches past the "
    "sandbox (pynox's configuration, its installation or the interpreter's, a folder later "
    "runs load code from before their sandbox exists, a system file every run reads, the "
    "kernel's settings, a disk's device or the kernel's memory); write somewhere else "
    "instead, such as the run's scratch directory ($TMPDIR)"
)


def test_writing_what_later_runs_trust_names_no_grant(tmp_path: Path) -> None:
    cwd = _world(tmp_path)
    (cwd / "pynox.toml").write_text("[permissions]\n")
    proc = pynox("-c", "open('pynox.toml', 'w')", cwd=cwd)
    assert hint_line(proc.stderr) == TRUSTED_WRITE.format(path=f"{cwd}/pynox.toml")


def test_writing_the_kernels_settings_names_no_grant(tmp_path: Path) -> None:
    setting = "/proc/sys/kernel/core_pattern"
    proc = pynox("-c", f"open({setting!r}, 'w')", cwd=_world(tmp_path))
    assert hint_line(proc.stderr) == TRUSTED_WRITE.format(path=setting)
    # As the hint says: the grant is refused.
    refused = pynox(f"--allow-write={setting}", "-c", "pass", cwd=tmp_path)
    assert refused.returncode == 125 and b"kernel's settings" in refused.stderr


def _machine_devices() -> list[str]:
    """A block device of this machine, and the kernel's log or memory device, those that
    exist here."""
    blocks = sorted(e.path for e in os.scandir("/dev") if stat.S_ISBLK(e.stat().st_mode))
    memory = [path for path in ("/dev/kmsg", "/dev/mem") if os.path.exists(path)]
    return blocks[:1] + memory[:1]


@pytest.mark.parametrize("device", _machine_devices())
def test_writing_a_disk_or_the_kernels_memory_names_no_grant(tmp_path: Path, device: str) -> None:
    """As root, a write grant of a disk's block device or of /dev/mem is the whole machine:
    the grant is refused, and the hint after a refused write does not name it."""
    proc = pynox("-c", f"open({device!r}, 'wb')", cwd=_world(tmp_path))
    assert hint_line(proc.stderr) == TRUSTED_WRITE.format(path=device)
    refused = pynox(f"--allow-write={device}", "-c", "pass", cwd=tmp_path)
    assert refused.returncode == 125, refused.stderr
    assert refused.stderr.startswith(f"pynox: cannot grant writing {device}: it is a ".encode())
    # A device that holds nothing of the machine's stays grantable.
    kept = pynox("--allow-write=/dev/full", "-c", "open('/dev/full', 'wb')", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr


@pytest.mark.parametrize(
    ("kind", "number", "what"),
    [
        (stat.S_IFBLK, os.makedev(7, 0), "a block device"),  # a loop device
        (stat.S_IFCHR, os.makedev(13, 64), "a device of the kernel's memory"),  # an input event
    ],
)
def test_a_folder_of_dev_holding_a_machine_device_is_not_granted_for_writing(
    kind: int, number: int, what: str
) -> None:
    folder = tempfile.mkdtemp(dir="/dev/shm")
    try:
        try:
            os.mknod(f"{folder}/device", kind | 0o600, number)
        except OSError as exc:
            pytest.skip(f"no device node can be made here: {exc}")
        refused = pynox(f"--allow-write={folder}", "-c", "pass")
        assert refused.returncode == 125, refused.stderr
        assert f"it holds {folder}/device, {what}".encode() in refused.stderr
    finally:
        shutil.rmtree(folder)


def test_the_api_hint_for_the_working_directory_names_a_folder_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pynox as api

    cwd = _world(tmp_path)
    (cwd / "out").rmdir()
    monkeypatch.chdir(cwd)
    with api.Pool(workers=1) as pool:
        first = pool.run("open('x.txt', 'w').write('x')")
        assert first.error is not None and first.error["hint"] is not None
        out = f"{cwd}/out"
        assert first.error["hint"] == f"{cwd} " + CANNOT.format(
            out=out, grants=f"allow_write=[{out!r}]", scratch_out=POOL_SCRATCH_OUT
        )
        (cwd / "out").mkdir()
        second = pool.run("open('out/x.txt', 'w').write('x')", allow_write=[out])
        assert second.ok, second.text


GETUSER = "import getpass; print(getpass.getuser() == {user!r})"
GETPWUID = "import os, pwd; print(pwd.getpwuid(os.getuid()).pw_name == {user!r})"


@pytest.mark.parametrize("code", [GETUSER, GETPWUID], ids=["getpass", "pwd"])
def test_the_user_name_is_hinted_as_etc_passwd(tmp_path: Path, code: str) -> None:
    """Without LOGNAME or USER in its environment (the sandbox's is empty), getpass.getuser()
    looks the user up in /etc/passwd, which is not readable: OSError "No username set in
    the environment" (a KeyError before Python 3.13). The hint names /etc/passwd, and
    granting it works."""
    import pwd

    user = pwd.getpwuid(os.getuid()).pw_name
    program = code.format(user=user)
    proc, hints = follow(lambda flags: pynox(*flags, "-c", program, cwd=tmp_path), [])
    assert proc.stdout == b"True\n"
    assert hints == [
        "pynox: the program looked up the user's name (getpass.getuser(), pwd.getpwuid()) in "
        "/etc/passwd, since the environment holds none, and reading /etc/passwd is not "
        "allowed; grant it with --allow-read=/etc/passwd"
    ]


def test_the_user_name_hint_in_the_api() -> None:
    import pwd

    import pynox as api

    program = GETUSER.format(user=pwd.getpwuid(os.getuid()).pw_name)
    first = api.run(program)
    assert first.exit == 1 and first.error is not None
    assert first.error["hint"] is not None
    assert first.error["hint"].endswith("grant it with allow_read=['/etc/passwd']")
    second = api.run(program, allow_read=["/etc/passwd"])
    assert second.exit == 0, second.text
    assert second.stdout == "True\n"


def test_no_user_name_hint_for_another_uid_or_once_granted(tmp_path: Path) -> None:
    """Another uid may be in no file at all, and a granted /etc/passwd that lacks the
    user is no denial: no hint either way."""
    for flags, code in (
        ((), "import pwd; pwd.getpwuid(4242424)"),
        (("--allow-read=/etc/passwd",), "import pwd; pwd.getpwuid(4242424)"),
    ):
        proc = pynox(*flags, "-c", code, cwd=tmp_path)
        assert proc.returncode == 1
        assert proc.stderr.decode().splitlines()[-1].startswith("KeyError"), proc.stderr


def test_the_api_hint_to_grant_both_is_python_that_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API hint's two grants are keyword arguments apart by a comma: pasted into the
    call, they make the run succeed."""
    import pynox as api

    cwd = _world(tmp_path)
    held = _database(cwd, wal=True)
    monkeypatch.chdir(cwd)
    try:
        with api.Pool(workers=1) as pool:
            first = pool.run(QUERY)
            assert first.error is not None and first.error["hint"] is not None
            hint = first.error["hint"]
            grants = hint.partition("grant both with ")[2]
            assert (
                grants == f"allow_read=[{str(cwd / 'out')!r}], allow_write=[{str(cwd / 'out')!r}]"
            )
            followed = pool.run(QUERY, **eval(f"dict({grants})"))  # noqa: S307 - our own hint
            assert followed.ok and followed.stdout == "[(1,)]\n", followed.text
    finally:
        held.close()


def test_the_api_hint_to_write_into_the_scratch_out_folder_brings_the_file_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool run's scratch directory goes when it ends: the hint names its out/ folder,
    whose files come back with the result."""
    import pynox as api

    cwd = _world(tmp_path)
    (cwd / "out").rmdir()
    monkeypatch.chdir(cwd)
    with api.Pool(workers=1) as pool:
        first = pool.run("open('x.txt', 'w').write('x')")
        assert first.error is not None
        assert first.error["hint"].endswith(POOL_SCRATCH_OUT)
        followed = pool.run(
            "import os\nos.makedirs(os.path.expanduser('~/out'), exist_ok=True)\n"
            "open(os.path.expanduser('~/out/x.txt'), 'w').write('x')"
        )
        assert followed.ok, followed.text
        assert followed.files == {"x.txt": b"x"}
