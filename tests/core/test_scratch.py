"""Every run's scratch directory: private, writable, empty at the start, gone at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import PYNOX, pynox

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
    assert not os.path.lexists(result["policy"]["scratch"])  # removed before pynox exits


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


def test_max_file_size_caps_files_in_the_scratch_directory(tmp_path: Path) -> None:
    code = "import tempfile; f = tempfile.TemporaryFile(); f.write(b'x' * 4096); f.flush()"
    proc = pynox("--max-file-size=1k", "-c", code, cwd=tmp_path)
    assert proc.returncode == 1
    assert b"File too large" in proc.stderr and b"--max-file-size" in proc.stderr


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


def test_the_launchers_helper_holds_nothing_but_its_pipe(tmp_path: Path) -> None:
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
        assert len(os.listdir(f"/proc/{helper}/fd")) == 1
        assert _has_pipe_of(helper, interpreters[0])
    finally:
        run.kill()
        run.wait()
        assert run.stdout is not None
        run.stdout.close()


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
