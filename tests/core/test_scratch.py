"""Every run's scratch directory: private, writable, empty at the start, gone at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from support.commands import PYNOX, bound_by_file_modes, pynox, run

from pynox.engine import scratch
from pynox.engine.scratch import PREFIX, VARIABLES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# What each way of running a program does with its output and clock.
MODES = {"plain": [], "timeout": ["--timeout=30s"], "json": ["--json"]}

SHOW_SCRATCH = f"""
import json, os, tempfile
directory = tempfile.gettempdir()
fd, name = tempfile.mkstemp()
os.write(fd, b"kept"); os.close(fd)
with tempfile.NamedTemporaryFile("w+") as named:
    named.write("read back"); named.flush(); named.seek(0)
    text = named.read()
print(json.dumps({{"dir": directory, "env": {{k: os.environ[k] for k in {list(VARIABLES)!r}}},
                  "entries": os.listdir(directory), "text": text}}))
"""


def _stdout(proc: subprocess.CompletedProcess[bytes], mode: str) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    if mode == "json":
        return json.loads(proc.stdout)["stdout"]
    return proc.stdout.decode()


def _gone(path: str, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while os.path.lexists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("mode", MODES)
def test_tempfile_works_with_no_grant_and_the_directory_goes_away(
    tmp_path: Path, mode: str
) -> None:
    proc = pynox(*MODES[mode], "-c", SHOW_SCRATCH, cwd=tmp_path)
    shown = json.loads(_stdout(proc, mode))
    directory = shown["dir"]
    assert os.path.basename(directory).startswith(PREFIX)
    assert set(shown["env"].values()) == {directory}  # TMPDIR, TEMP, TMP and HOME alike
    assert len(shown["entries"]) == 1 and shown["text"] == "read back"
    assert _gone(directory)


def test_the_json_policy_shows_the_scratch_directory(tmp_path: Path) -> None:
    proc = pynox("--json", "-c", "import os; print(os.environ['TMPDIR'])", cwd=tmp_path)
    result = json.loads(proc.stdout)
    assert result["policy"]["scratch"] == result["stdout"].strip()
    # Removed by the launcher's helper as the run ends, beside the launcher writing the
    # result: nothing orders the two, so it may be there for a moment after pynox exits.
    assert _gone(result["policy"]["scratch"])


def test_sqlite_temporary_databases_work_with_no_grant(tmp_path: Path) -> None:
    # An empty name is a private on-disk database: SQLite creates it where TMPDIR says.
    code = (
        "import sqlite3; db = sqlite3.connect('')\n"
        "db.execute('create table t(x)'); db.executemany('insert into t values (?)', "
        "[(i,) for i in range(2000)])\n"
        "print(db.execute('select count(*) from t order by x desc').fetchone()[0])"
    )
    proc = pynox("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"2000\n"


def test_a_host_variable_passed_in_keeps_the_hosts_value(tmp_path: Path) -> None:
    proc = pynox(
        "--allow-env=HOME", "-c", "import os; print(os.environ['HOME'], os.environ['TMPDIR'])",
        cwd=tmp_path, env={"HOME": str(tmp_path)},
    )  # fmt: skip
    home, tmpdir = proc.stdout.decode().split()
    assert home == str(tmp_path)
    assert os.path.basename(tmpdir).startswith(PREFIX)


def test_each_run_has_its_own_and_cannot_read_anothers(tmp_path: Path) -> None:
    """A run that sleeps holds a secret in its scratch directory; another run cannot read it."""
    holder = subprocess.Popen(
        [PYNOX, "-c", "import os, sys, time; d = os.environ['TMPDIR']\n"
         "open(d + '/secret', 'w').write('s3cret'); print(d, flush=True); time.sleep(60)"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        other = holder.stdout.readline().decode().strip()
        assert os.path.exists(other + "/secret")
        code = f"import os; print(os.environ['TMPDIR'] != {other!r}); open({other!r} + '/secret')"
        proc = pynox("-c", code, cwd=tmp_path)
        assert proc.stdout == b"True\n"
        assert proc.returncode == 1 and b"PermissionError" in proc.stderr
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None and holder.stderr is not None
        holder.stdout.close()
        holder.stderr.close()


def test_a_killed_plain_run_still_loses_its_directory(tmp_path: Path) -> None:
    """The run is in pynox's own process, killed with no chance to clean up."""
    proc = subprocess.Popen(
        [PYNOX, "-c", "import os, time; d = os.environ['TMPDIR']\n"
         "os.mkdir(d + '/sub'); open(d + '/sub/f', 'w').write('x' * 1000)\n"
         "print(d, flush=True); time.sleep(60)"],
        cwd=tmp_path, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    directory = proc.stdout.readline().decode().strip()
    assert os.path.exists(directory + "/sub/f")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert _gone(directory)


def test_a_link_planted_in_the_directory_does_not_take_the_removal_outside(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("data")
    code = f"import os; os.symlink({str(victim)!r}, os.environ['TMPDIR'] + '/link')"
    for mode in MODES.values():
        proc = pynox(*mode, "-c", code, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
    time.sleep(0.5)
    assert (victim / "keep").read_text() == "data"


SHARED_TMPDIR = (
    "{what} is writable by every user and has no sticky bit: another user could swap a "
    "run's scratch directory there for one of their own; set TMPDIR to a directory only "
    "you can write, or run chmod +t {shared}"
)


@pytest.mark.parametrize("where", ["itself", "above"])
def test_a_tmpdir_every_user_may_write_without_the_sticky_bit_is_refused(
    tmp_path: Path, where: str
) -> None:
    """There another user could rename the run's directory away and put one of their own
    in its place (its HOME, then, and what the program writes); as the hint says, the
    sticky bit (which /tmp has) stops that."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    tmpdir = shared if where == "itself" else shared / "mine"
    tmpdir.mkdir(exist_ok=True)
    what = f"the temporary directory {tmpdir}"
    if where == "above":
        what = f"{shared}, which holds {what},"
    for mode in MODES.values():
        proc = pynox(*mode, "-c", "print('ran')", cwd=tmp_path, env={"TMPDIR": str(tmpdir)})
        assert proc.returncode == 125
        message = SHARED_TMPDIR.format(what=what, shared=shared)
        if mode == ["--json"]:
            result = json.loads(proc.stdout)
            assert (result["stdout"], result["error"]["message"]) == ("", message)
        else:
            assert (proc.stdout, proc.stderr.decode()) == (b"", f"pynox: {message}\n")
    assert _gone_but(shared, ["mine"] if where == "above" else [])
    shared.chmod(0o1777)
    proc = pynox("-c", "print('ran')", cwd=tmp_path, env={"TMPDIR": str(tmpdir)})
    assert (proc.returncode, proc.stdout) == (0, b"ran\n"), proc.stderr


def test_an_unwritable_tmpdir_says_to_set_tmpdir(tmp_path: Path) -> None:
    """No scratch directory can be made there: the command and the pool say so in one line
    that says what to do, with no traceback."""
    tmpdir = tmp_path / "read-only"
    tmpdir.mkdir()
    tmpdir.chmod(0o555)
    message = (
        f"pynox: cannot create the run's scratch directory in {tmpdir}: Permission denied; "
        "set TMPDIR to a writable directory\n"
    )
    env = {"TMPDIR": str(tmpdir)}
    for mode in MODES.values():
        proc = run([*bound_by_file_modes(), PYNOX, *mode, "-c", "print('ran')"], env=env)
        assert (proc.returncode, proc.stderr.decode()) == (125, message)
    pool = run([*bound_by_file_modes(), PYNOX, "pool"], env=env, input=b'{"id": 1, "code": "1"}\n')
    assert (pool.returncode, pool.stdout, pool.stderr.decode()) == (125, b"", message)


def _gone_but(directory: Path, kept: list[str], within: float = 10) -> bool:
    """Whether directory comes to hold nothing but `kept`: what the launcher's helper made
    there goes as the run ends."""
    deadline = time.monotonic() + within
    while sorted(os.listdir(directory)) != kept:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_max_file_size_caps_files_in_the_scratch_directory(tmp_path: Path) -> None:
    code = "import tempfile; f = tempfile.TemporaryFile(); f.write(b'x' * 4096); f.flush()"
    proc = pynox("--max-file-size=1k", "-c", code, cwd=tmp_path)
    assert proc.returncode == 1
    assert b"File too large" in proc.stderr and b"--max-file-size" in proc.stderr


# A program granted work/ moves what it holds into its scratch directory, whose removal
# would remove it for the program: a file it could have removed itself, and a folder whose
# read-only subfolder holds a file it could not.
MOVE_INTO_SCRATCH = """
import os
home = os.environ['HOME']
for name in ('file.txt', 'proj'):
    try:
        os.rename('work/' + name, os.path.join(home, name))
        print(name, 'moved in')
    except OSError as exc:
        print(name, exc.strerror)
os.mkdir(os.path.join(home, 'made'))
os.rename(os.path.join(home, 'made'), 'work/made')
print('made moved out')
"""
MOVED_INTO_SCRATCH = "file.txt moved in\nproj Invalid cross-device link\nmade moved out\n"


def _protected_tree(root: Path) -> Path:
    """work/ with a file and proj/release/v1.txt, release read-only."""
    release = root / "work" / "proj" / "release"
    release.mkdir(parents=True)
    (release / "v1.txt").write_text("v1")
    release.chmod(0o555)
    (root / "work" / "file.txt").write_text("mine")
    return release / "v1.txt"


@pytest.mark.parametrize("mode", list(MODES))
def test_no_folder_of_a_grant_can_be_moved_into_the_scratch_directory(
    tmp_path: Path, mode: str
) -> None:
    """Removing the scratch directory gives each folder in it its rights back: a folder
    moved in from a grant would lose what even the program could not remove. Moving a
    file in, and a folder out, still works."""
    protected = _protected_tree(tmp_path)
    try:
        grants = ["--allow-read=work", "--allow-write=work"]
        proc = pynox(*MODES[mode], *grants, "-c", MOVE_INTO_SCRATCH, cwd=tmp_path)
        assert _stdout(proc, mode) == MOVED_INTO_SCRATCH
        assert protected.read_text() == "v1"
        assert (tmp_path / "work" / "made").is_dir()
    finally:
        protected.parent.chmod(0o755)


def test_no_folder_of_a_grant_can_be_moved_into_a_pool_runs_scratch_directory(
    tmp_path: Path,
) -> None:
    from pynox import Pool

    protected = _protected_tree(tmp_path)
    work = str(tmp_path / "work")
    try:
        with Pool(workers=1) as pool:
            result = pool.run(
                MOVE_INTO_SCRATCH.replace("'work/", repr(work + "/")[:-1]),
                allow_read=[work],
                allow_write=[work],
            )
        assert result.stdout == MOVED_INTO_SCRATCH, result.stderr
        assert protected.read_text() == "v1"
    finally:
        protected.parent.chmod(0o755)


def test_pool_requests_and_sessions_get_their_own() -> None:
    from pynox import Pool

    show = "import os; open(os.environ['TMPDIR'] + '/f', 'w').write('x'); print(os.environ['HOME'])"
    with Pool(workers=1) as pool:
        first = pool.run(show).stdout.strip()
        second = pool.run(show).stdout.strip()
        assert first != second
        assert os.path.basename(first).startswith(PREFIX)
        assert _gone(first) and _gone(second)
        session = pool.session()
        home = session.run(show).stdout.strip()
        listed = "print(sorted(os.listdir(os.environ['HOME'])))"
        assert session.run(listed).stdout == "['f', 'out']\n"  # out/: files it returns
        assert os.path.exists(home)
        session.close()
        assert _gone(home)


def test_a_killed_pool_still_loses_its_runs_directories() -> None:
    """SIGKILL gives the pool no chance to clean up: its helper does it."""
    from pynox import Pool

    pool = Pool(workers=1)
    try:
        directory = pool.run("import os; print(os.environ['TMPDIR'])").stdout.strip()
        root = os.path.dirname(directory)
        assert os.path.basename(root).startswith(PREFIX)  # the pool's own, holding the runs'
        assert os.path.isdir(root)
        pid = pool.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert _gone(root)
    finally:
        pool.close()


def test_without_the_launcher_a_helper_of_pynoxs_own_removes_it(tmp_path: Path) -> None:
    """`python -m pynox` has no launcher to start the helper: pynox starts /bin/sh."""
    from support.commands import python

    proc = python("-m", "pynox", "-c", "import os; print(os.environ['TMPDIR'])", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    directory = proc.stdout.decode().strip()
    assert os.path.basename(directory).startswith(PREFIX)
    assert _gone(directory)


def test_the_shell_helper_waits_only_for_the_process_it_names(tmp_path: Path) -> None:
    """A run as short as `-c pass` can end before the helper's shell has started: the
    shell's parent is then init (or a subreaper), and the helper took that for the run's
    process and waited for it, for ever. Here the process it names has ended before it
    starts, and its parent (this test) lives on: the directory goes at once all the same."""
    directory = tmp_path / "pynox-run-000000000000"
    directory.mkdir()
    ended = subprocess.Popen(["true"])
    ended.wait()
    helper = subprocess.Popen(
        scratch.helper_arguments(str(directory), ended.pid),
        executable="/bin/sh",
        stdin=subprocess.DEVNULL,  # the end of the pipe, as when the run's process ended
    )
    try:
        assert _gone(str(directory)), "the helper waits for its own parent"
        assert helper.wait(10) == 0
    finally:
        helper.kill()
        helper.wait()


@pytest.mark.parametrize("launcher", [True, False], ids=["launcher", "python -m pynox"])
def test_folders_their_owner_cannot_list_or_enter_are_removed(
    tmp_path: Path, launcher: bool
) -> None:
    """A program may make them (chmod it may not): a removal that only walks down into
    folders leaves them, and what they hold, behind."""
    from support.commands import PYTHON, bound_by_file_modes

    code = (
        "import os; d = os.environ['TMPDIR']\n"
        "os.mkdir(f'{d}/hidden', 0o300); open(f'{d}/hidden/data', 'w').write('x')\n"
        "os.mkdir(f'{d}/hidden/deeper', 0o300); open(f'{d}/hidden/deeper/data', 'w').write('x')\n"
        "for mode in (0o600, 0o500, 0o100, 0):\n"
        "    os.mkdir(f'{d}/hidden/deeper/sealed{mode:o}', mode)\n"
        "print(d)"
    )
    command = [PYNOX] if launcher else [PYTHON, "-m", "pynox"]
    proc = run([*bound_by_file_modes(), *command, "-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _gone(proc.stdout.decode().strip())


def test_what_a_program_writes_to_the_helpers_pipe_is_ignored(tmp_path: Path) -> None:
    """Only the first line, which pynox writes before the program runs, names what to
    remove: a program that finds the pipe and names another directory removes nothing."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("data")
    code = (
        "import os, stat\n"
        "for fd in range(3, 1024):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        f"            os.write(fd, {str(victim)!r}.encode() + b'\\n')\n"
        "            print('wrote', fd)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    proc = pynox("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.startswith(b"wrote ")  # it found the pipe
    time.sleep(0.5)
    assert (victim / "keep").read_text() == "data"


def test_the_launchers_helper_holds_nothing_but_its_pipe_and_pidfd(tmp_path: Path) -> None:
    """No copy of the run's stdout, stderr or terminal, and a session of its own: a
    pipeline ends when the run does, and the terminal's signals do not reach it."""
    run = subprocess.Popen(
        [PYNOX, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
        cwd=tmp_path, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert run.stdout is not None and run.stdout.readline() == b"ready\n"
        # The run: the launcher, supervising; the interpreter and the helper, its children.
        launcher = os.path.realpath(PYNOX)
        children = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                    if _parent(pid) == run.pid]  # fmt: skip
        helpers = [pid for pid in children if os.readlink(f"/proc/{pid}/exe") == launcher]
        interpreters = [pid for pid in children if pid not in helpers]
        assert len(helpers) == 1 and len(interpreters) == 1, children
        (helper,) = helpers
        assert os.getsid(helper) == helper
        # The pipe, and a pidfd of the interpreter, whose end it waits for as well.
        held = sorted(
            os.readlink(f"/proc/{helper}/fd/{fd}") for fd in os.listdir(f"/proc/{helper}/fd")
        )
        assert len(held) == 2 and held[0] == "anon_inode:[pidfd]", held
        assert _has_pipe_of(helper, interpreters[0])
    finally:
        run.kill()
        run.wait()
        assert run.stdout is not None
        run.stdout.close()


@pytest.mark.parametrize("command", [["-c", "import time; time.sleep(30)"], ["pool"]])
def test_without_the_launcher_the_helper_holds_none_of_the_callers_descriptors(
    tmp_path: Path, command: list[str]
) -> None:
    """The /bin/sh helper of `python -m pynox` (a run, or a pool) outlives pynox by as long
    as the removal takes. Holding a pipe the caller passed down, it kept a caller that
    waits for that pipe's end (to see when pynox and all it started are done) waiting
    until the run's files were removed: seconds after pynox exited, for 20,000 folders."""
    from support.commands import PYTHON

    read_end, write_end = os.pipe()
    run = subprocess.Popen(
        [PYTHON, "-m", "pynox", *command],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(write_end,),
    )  # fmt: skip
    os.close(write_end)
    try:
        caller_pipe = os.readlink(f"/proc/self/fd/{read_end}")
        deadline = time.monotonic() + 20
        while not (helpers := _shell_children(run.pid)):
            assert time.monotonic() < deadline, "no helper started"
            time.sleep(0.05)
        (helper,) = helpers
        held = {
            fd: os.readlink(f"/proc/{helper}/fd/{fd}") for fd in os.listdir(f"/proc/{helper}/fd")
        }
        assert caller_pipe not in held.values(), held
        assert sorted(held) == ["0", "1", "2"], held
    finally:
        assert run.stdin is not None
        run.stdin.close()  # a pool ends at the end of its input, and removes what it made
        if command != ["pool"]:
            run.kill()
        run.wait(timeout=30)
        os.close(read_end)


@pytest.mark.parametrize("closefrom", [True, False], ids=["closefrom", "listed"])
def test_the_helper_is_spawned_without_inherited_descriptors(
    monkeypatch: pytest.MonkeyPatch, closefrom: bool
) -> None:
    """Where posix_spawn cannot close every descriptor from 3 on (before Python 3.13, or
    a C library without it), the ones listed in /proc/self/fd are closed one by one."""
    import posix

    if not closefrom:
        monkeypatch.delattr(posix, "POSIX_SPAWN_CLOSEFROM", raising=False)
    elif not hasattr(posix, "POSIX_SPAWN_CLOSEFROM"):
        pytest.skip("this Python's posix_spawn cannot close a range of descriptors")
    read_end, write_end = os.pipe()
    inherited = os.dup(write_end)
    os.set_inheritable(inherited, True)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, write_end, 1), *scratch._inherited_closed()]
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", "ls /proc/$$/fd"], {}, file_actions=actions)
        os.close(write_end)
        os.close(inherited)
        listed = b""
        while chunk := os.read(read_end, 4096):
            listed += chunk
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        os.close(read_end)
    assert sorted(listed.split()) == [b"0", b"1", b"2"]


def _shell_children(pid: int) -> list[int]:
    """The processes that pid started and that run /bin/sh: pynox's helper."""
    children = [child for child in map(int, filter(str.isdigit, os.listdir("/proc")))
                if _parent(child) == pid]  # fmt: skip
    found = []
    for child in children:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child}/cmdline").read_bytes().startswith(b"sh\0-c\0"):
                found.append(child)
    return found


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _pipes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("pipe:"):
                    found.add(target)
    except OSError:
        pass
    return found


def _has_pipe_of(pid: int, run: int) -> bool:
    return bool(_pipes(pid) & _pipes(run))


def test_the_launchers_helper_makes_the_directory_off_the_runs_path(tmp_path: Path) -> None:
    """The mkdir is the helper's, made while the interpreter starts; pynox only takes it."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (make conformance-deps installs it)")
    base = tmp_path / "tmp"
    base.mkdir()
    trace = tmp_path / "trace"
    code = "import os; print(os.getpid(), os.environ['TMPDIR'])"
    proc = run(
        [strace, "-f", "-qq", "-e", "trace=mkdir,mkdirat", "-o", str(trace), PYNOX, "-c", code],
        cwd=tmp_path, env={"TMPDIR": str(base)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    interpreter, directory = proc.stdout.decode().split()
    assert os.path.dirname(directory) == str(base)
    made = [line for line in trace.read_text().splitlines() if f'"{directory}"' in line]
    assert len(made) == 1 and made[0].endswith("= 0"), made
    assert made[0].split()[0] != interpreter, made  # not pynox's own mkdir
    assert _gone(directory)


@pytest.mark.parametrize("args", [["--no-such-option", "-c", "pass"], ["missing.py"]])
def test_a_directory_the_run_never_took_is_removed(tmp_path: Path, args: list[str]) -> None:
    """The helper makes a directory before pynox reads its command line; a run that ends
    before it takes it (a usage error, a script that is not there) leaves none behind."""
    base = tmp_path / "tmp"
    base.mkdir()
    proc = pynox(*args, cwd=tmp_path, env={"TMPDIR": str(base)})
    assert proc.returncode == 2, proc.stderr.decode()
    deadline = time.monotonic() + 10
    while list(base.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(base.iterdir()) == []


class _FakeHelper:
    """The launcher's helper as pynox sees it: its two pipes, named in the environment."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
        self.path_read, path_write = os.pipe()
        self.made_read, self.made_write = os.pipe()
        monkeypatch.setenv("TMPDIR", str(base))
        monkeypatch.setenv(
            scratch.LAUNCHER_HELPER_VARIABLE, f"{path_write},{self.made_read}:{os.getpid()}"
        )
        monkeypatch.setattr(scratch, "_helper_pipes_taken", False)
        monkeypatch.setattr(scratch, "_helper_pipes", None)
        self.path_write = path_write

    def says(self, line: bytes) -> str:
        """What scratch.create() makes of the helper's line; the pipe is closed after."""
        os.write(self.made_write, line)
        os.close(self.made_write)
        try:
            return scratch.create()
        finally:
            with pytest.raises(OSError):
                os.fstat(self.made_read)  # read once, then closed
            os.close(self.path_read)
            os.close(self.path_write)


def _adopted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepare: str) -> bool:
    base = tmp_path / "tmp"
    base.mkdir()
    name = PREFIX + "0123456789ab"
    target = base / name
    if prepare == "directory":
        target.mkdir(mode=0o700)
    elif prepare == "open directory":
        target.mkdir()
        target.chmod(0o755)
    elif prepare == "link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        target.symlink_to(tmp_path / "elsewhere")
    elif prepare == "file":
        target.write_text("")
    helper = _FakeHelper(monkeypatch, base)
    path = helper.says(name.encode() + b"\n")
    assert os.path.dirname(path) == str(base) and os.path.isdir(path)
    return path == str(target)


def test_pynox_takes_the_directory_its_helper_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _adopted(tmp_path, monkeypatch, "directory")


@pytest.mark.parametrize("prepare", ["open directory", "link", "file", "nothing"])
def test_pynox_makes_its_own_unless_the_helpers_is_a_private_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepare: str
) -> None:
    assert not _adopted(tmp_path, monkeypatch, prepare)


@pytest.mark.parametrize(
    ("line", "made"),
    [
        (b"", []),  # the helper could not make one
        (b"pynox-run-0123456789ab", ["tmp/pynox-run-0123456789ab"]),  # no end of line
        (b"pynox-run-0123456789ab\nx", ["tmp/pynox-run-0123456789ab"]),
        (b"pynox-run-0123456789AB\n", ["tmp/pynox-run-0123456789AB"]),
        (b"pynox-run-0123456789a\n", ["tmp/pynox-run-0123456789a"]),
        (b"pynox-run-0123456789abc\n", ["tmp/pynox-run-0123456789abc"]),
        (b"pynox-run-../../outsid\n", ["tmp/pynox-run-..", "tmp/outsid"]),
        (b"pynox-run-\xff123456789a\n", []),
    ],
)
def test_a_malformed_name_from_the_helper_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: bytes, made: list[str]
) -> None:
    """Whatever the line names, even a private directory that is there, is not taken
    unless it is PREFIX and 12 hexadecimal digits, on a line of its own."""
    base = tmp_path / "tmp"
    base.mkdir()
    for directory in made:
        (tmp_path / directory).mkdir(mode=0o700)
    before = {path.name for path in base.iterdir()}
    path = _FakeHelper(monkeypatch, base).says(line)
    assert os.path.dirname(path) == str(base)
    assert os.path.basename(path) not in before
    assert os.path.isdir(path)


# Folders nested deeper than Python's recursion limit and than the 1,024 descriptors a
# process may hold by default. Not much deeper: each level costs more than the last.
DEPTH = 1100
NEST = f"""
import os
fd = os.open(os.environ["TMPDIR"], os.O_RDONLY)
for level in range({DEPTH}):
    os.mkdir("d", dir_fd=fd)
    open("f", "w", opener=lambda name, flags: os.open(name, flags, dir_fd=fd)).close()
    inner = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = inner
print(os.environ["TMPDIR"])
"""


def test_removal_takes_apart_a_tree_of_any_depth_and_follows_no_link(tmp_path: Path) -> None:
    from pynox.engine import scratch_removal

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("data")
    top = tmp_path / "scratch"
    top.mkdir()
    for taken in range(3):  # the names folders are moved up to, taken already
        (top / f"{scratch_removal._MOVED}{taken}").mkdir()
        (top / f"{scratch_removal._MOVED}{taken}" / "file").write_text("x")
    fd = os.open(top, os.O_RDONLY)
    for level in range(DEPTH):
        os.mkdir("d", dir_fd=fd)
        if level % 100 == 0:
            os.symlink(outside, "link", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.symlink(outside, "bottom", dir_fd=fd)
    os.close(fd)
    scratch_removal.remove(str(top))
    assert sorted(os.listdir(tmp_path)) == ["outside"]
    assert (outside / "keep").read_text() == "data"


def test_removal_never_holds_a_folders_whole_listing(tmp_path: Path) -> None:
    """A program may leave a million names (hard links cost no inode): listed whole
    before any was removed, they took the pool 149 MB. Each is now removed as it is
    listed, at the top and below it."""
    from pynox.engine import scratch_removal

    top = tmp_path / "scratch"
    (top / "below").mkdir(parents=True)
    (top / "file").write_text("x")
    for number in range(10000):  # at the top level and in a folder: both are listed
        os.link(top / "file", top / f"link-{number}")
        os.link(top / "file", top / "below" / f"link-{number}")
    tracemalloc.start()
    try:
        scratch_removal.remove(str(top))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not top.exists()
    assert peak < 1 << 18, f"{peak} bytes to remove a folder of 20000 names"


@pytest.mark.parametrize("mode", [["--json"], ["--timeout=60s"]], ids=["json", "timeout"])
def test_a_run_that_nests_folders_deeply_gets_its_own_result(
    tmp_path: Path, mode: list[str]
) -> None:
    """A supervised run removes the directory itself (python -m pynox: no launcher)."""
    from support.commands import python

    proc = python("-m", "pynox", *mode, "-c", NEST, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    directory = json.loads(proc.stdout)["stdout"] if "--json" in mode else proc.stdout.decode()
    assert _gone(directory.strip())


def test_a_pool_removes_deeply_nested_folders_and_keeps_serving() -> None:
    from pynox import Pool

    with Pool(workers=1) as pool:
        first = pool.run(NEST)
        assert first.exit == 0, first.text
        session = pool.session()
        home = session.run(NEST)
        assert home.exit == 0, home.text
        ended = session.run("raise SystemExit(0)")
        assert ended.exit == 0
        session.close()  # the pool removes an ended session's directory as it closes it
        assert _gone(first.stdout.strip()) and _gone(home.stdout.strip())
        later = [pool.run("import os; print(os.environ['TMPDIR'])") for _ in range(3)]
        assert [result.exit for result in later] == [0, 0, 0]
        assert all(_gone(result.stdout.strip()) for result in later)
