"""The file system: one probe of many attempts under the World's grants, in every mode,
then what a file-system watch could reveal and what C code reading the cwd is told."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.commands import PYNOX, pynox
from support.probes import (
    PRELUDE,
    PROBE_MODES,
    World,
    listings,
    make_world,
    outcomes,
    run_grants_probe,
    snapshot,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")


FS_PROBE = """
import os, shutil
j = os.path.join
attempt("read-etc-passwd", lambda: open("/etc/passwd").read())
attempt("read-etc-shadow", lambda: open("/etc/shadow").read())
attempt("read-home-secret", lambda: open(W["secret"]).read())
attempt("list-home", os.listdir, W["home"])
attempt("read-via-symlink-in-script-dir", lambda: open(j(W["app"], "link-to-secret")).read())
attempt("list-via-symlink-in-script-dir", os.listdir, j(W["app"], "link-to-home"))
attempt("read-via-dotdot", lambda: open(j(W["app"], "..", "home", ".secret-token")).read())
attempt("read-via-chdir", lambda: (os.chdir(W["home"]), open(".secret-token").read()))
os.chdir(W["app"])
attempt("read-via-dirfd", lambda: os.read(os.open(".secret-token", os.O_RDONLY,
        dir_fd=os.open(W["home"], os.O_PATH)), 100))
attempt("hardlink-into-script-dir", os.link, W["secret"], j(W["app"], "hardlink"))
attempt("hardlink-secret-into-rw", os.link, W["secret"], j(W["rw"], "hardlink"))
attempt("hardlink-ro-file-into-rw", os.link, W["ro_file"], j(W["rw"], "ro-link"))
attempt("create-outside", lambda: open(j(W["outside"], "created.txt"), "x").write("x"))
attempt("create-in-script-dir", lambda: open(j(W["app"], "created.txt"), "w").write("x"))
attempt("truncate-outside", os.truncate, W["victim"], 0)
attempt("open-trunc-outside", lambda: open(W["victim"], "w"))
attempt("os-open-trunc-outside", os.open, W["victim"], os.O_WRONLY | os.O_TRUNC)
attempt("append-outside", lambda: open(W["victim"], "a").write("appended"))
attempt("readwrite-outside", lambda: open(W["victim"], "r+").write("over"))
attempt("unlink-outside", os.unlink, W["victim"])
attempt("rename-outside-away", os.rename, W["victim"], j(W["outside"], "renamed.txt"))
attempt("rename-outside-into-rw", os.rename, W["victim"], j(W["rw"], "stolen.txt"))
attempt("rename-ro-into-rw", os.rename, W["ro_file"], j(W["rw"], "stolen-ro.txt"))
attempt("mkdir-outside", os.mkdir, j(W["outside"], "newdir"))
attempt("rmdir-ro", os.rmdir, W["ro"])
attempt("symlink-outside", os.symlink, "/etc/passwd", j(W["outside"], "symlink"))
attempt("symlink-in-script-dir", os.symlink, W["secret"], j(W["app"], "new-symlink"))
attempt("mkfifo-outside", os.mkfifo, j(W["outside"], "fifo"))
attempt("write-new-in-ro", lambda: open(j(W["ro"], "new.txt"), "w").write("x"))
attempt("append-ro-file", lambda: open(W["ro_file"], "a").write("x"))
attempt("truncate-ro-file", os.truncate, W["ro_file"], 0)
attempt("unlink-ro-file", os.unlink, W["ro_file"])
attempt("read-ro-file", lambda: open(W["ro_file"]).read())
attempt("read-wo-file", lambda: open(W["wo_file"]).read())
attempt("list-wo", os.listdir, W["wo"])
attempt("write-wo", lambda: open(j(W["wo"], "written.txt"), "w").write("written by the probe"))
attempt("read-back-wo", lambda: open(j(W["wo"], "written.txt")).read())
attempt("overwrite-wo-file", lambda: open(W["wo_file"], "w").write("replaced"))
attempt("symlink-in-rw-to-secret", os.symlink, W["secret"], j(W["rw"], "to-secret"))
attempt("read-via-own-symlink", lambda: open(j(W["rw"], "to-secret")).read())
attempt("write-via-hardlink-attempt", lambda: open(j(W["rw"], "ro-link"), "a").write("x"))
attempt("mknod-char-device-in-rw", os.mknod, j(W["rw"], "null"), 0o20666, os.makedev(1, 3))
for target, label in ((W["ro_file"], "ro-file"), (__file__, "script")):
    attempt(f"chmod-{label}", os.chmod, target, 0o777)
    attempt(f"chown-{label}", os.chown, target, 65534, 65534)
    attempt(f"utime-{label}", os.utime, target, (0, 0))
    attempt(f"utime-now-{label}", os.utime, target)
    attempt(f"setxattr-{label}", os.setxattr, target, "user.pynox", b"1")
    attempt(f"removexattr-{label}", os.removexattr, target, "user.pynox")
attempt("chmod-wo-file", os.chmod, W["wo_file"], 0o777)
import fcntl, struct
def through_descriptor(path, mode, change):
    fd = os.open(path, mode)
    try:
        return change(fd)
    finally:
        os.close(fd)
for target, mode, label in ((W["ro_file"], os.O_RDONLY, "ro-file"),
                            (__file__, os.O_RDONLY, "script"),
                            (W["wo_file"], os.O_WRONLY, "wo-file")):
    attempt(f"futimens-{label}", through_descriptor, target, mode,
            lambda fd: os.utime(fd, (0, 0)))
    attempt(f"futimens-now-{label}", through_descriptor, target, mode, os.utime)
# A lease makes whoever opens the file for writing, outside too, wait for the program.
attempt("lease-ro-file", through_descriptor, W["ro_file"], os.O_RDONLY,
        lambda fd: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK))
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_NOATIME_FL = 0x80086601, 0x40086602, 0x80
FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR, FS_XFLAG_NOATIME = 0x801C581F, 0x401C5820, 0x40
def set_attribute(path, mode, get, put, flag):
    # What chattr does: read the file's flags, set them again with one more.
    fd = os.open(path, mode)
    try:
        current = fcntl.ioctl(fd, get, bytes(28 if get == FS_IOC_FSGETXATTR else 8))
        flags = int.from_bytes(current[:4], "little") | flag
        fcntl.ioctl(fd, put, flags.to_bytes(4, "little") + current[4:])
    finally:
        os.close(fd)
for target, mode, label in ((W["ro_file"], os.O_RDONLY, "ro-file"),
                            (__file__, os.O_RDONLY, "script"),
                            (W["wo_file"], os.O_WRONLY, "wo-file")):
    attempt(f"chattr-{label}", set_attribute, target, mode, FS_IOC_GETFLAGS, FS_IOC_SETFLAGS,
            FS_NOATIME_FL)
    attempt(f"fsxattr-{label}", set_attribute, target, mode, FS_IOC_FSGETXATTR,
            FS_IOC_FSSETXATTR, FS_XFLAG_NOATIME)
attempt("shutil-copy-metadata", shutil.copystat, W["ro_file"], W["wo_file"])
attempt("read-proc-self-mem", lambda: open("/proc/self/mem", "rb").read(1))
attempt("read-proc-1-environ", lambda: open("/proc/1/environ", "rb").read())
attempt("read-proc-self-environ", lambda: open("/proc/self/environ", "rb").read())
attempt("read-parent-cmdline", lambda: open(f"/proc/{os.getppid()}/cmdline", "rb").read())
attempt("open-dev-tty", lambda: open("/dev/tty", "rb"))
def host_devices():
    opened = []
    for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/vda", "/dev/sda",
                "/dev/nvme0n1", "/dev/kvm", "/dev/console", "/dev/tty0", "/dev/ptmx",
                "/dev/full", "/dev/fuse", "/dev/loop-control", "/dev/userfaultfd",
                "/dev/vsock", "/dev/net/tun", "/dev/hwrng"):
        for flags in (os.O_RDONLY, os.O_WRONLY):
            try:
                os.close(os.open(dev, flags | os.O_NONBLOCK | os.O_NOCTTY))
            except FileNotFoundError:
                break
            except OSError:
                continue
            opened.append((dev, flags))
    return opened
attempt("open-host-devices", host_devices)
attempt("write-tmp", lambda: open(f"/tmp/pynox-escape-{W['tag']}", "w"))
attempt("write-dev-shm", lambda: open(f"/dev/shm/pynox-escape-{W['tag']}", "w"))
print("done: ok")
"""

DENIED = "PermissionError EACCES"
NOT_PERMITTED = "PermissionError EPERM"
CROSS_DEVICE = "OSError EXDEV"  # Landlock's answer to a link that would gain rights

# (attempt, expected outcome)
FS_EXPECTED: list[tuple[str, str]] = [
    ("read-etc-passwd", DENIED),
    ("read-etc-shadow", DENIED),
    ("read-home-secret", DENIED),
    ("list-home", DENIED),
    ("read-via-symlink-in-script-dir", DENIED),
    ("list-via-symlink-in-script-dir", DENIED),
    ("read-via-dotdot", DENIED),
    ("read-via-chdir", DENIED),
    ("read-via-dirfd", DENIED),
    ("hardlink-into-script-dir", DENIED),
    ("hardlink-secret-into-rw", CROSS_DEVICE),
    ("hardlink-ro-file-into-rw", CROSS_DEVICE),
    ("create-outside", DENIED),
    ("create-in-script-dir", DENIED),
    ("truncate-outside", DENIED),
    ("open-trunc-outside", DENIED),
    ("os-open-trunc-outside", DENIED),
    ("append-outside", DENIED),
    ("readwrite-outside", DENIED),
    ("unlink-outside", DENIED),
    ("rename-outside-away", DENIED),
    ("rename-outside-into-rw", DENIED),
    ("rename-ro-into-rw", DENIED),
    ("mkdir-outside", DENIED),
    ("rmdir-ro", DENIED),
    ("symlink-outside", DENIED),
    ("symlink-in-script-dir", DENIED),
    ("mkfifo-outside", DENIED),
    ("write-new-in-ro", DENIED),
    ("append-ro-file", DENIED),
    ("truncate-ro-file", DENIED),
    ("unlink-ro-file", DENIED),
    ("read-ro-file", "ok 'read-only contents\\n'"),
    ("read-wo-file", DENIED),
    ("list-wo", DENIED),
    ("write-wo", "ok 20"),
    ("read-back-wo", DENIED),
    ("overwrite-wo-file", "ok 8"),
    ("symlink-in-rw-to-secret", "ok None"),
    ("read-via-own-symlink", DENIED),
    ("write-via-hardlink-attempt", "ok 1"),  # a new file: the link was never made
    ("mknod-char-device-in-rw", DENIED),
    ("chmod-ro-file", NOT_PERMITTED),
    ("chown-ro-file", NOT_PERMITTED),
    ("utime-ro-file", NOT_PERMITTED),
    ("utime-now-ro-file", NOT_PERMITTED),
    ("setxattr-ro-file", NOT_PERMITTED),
    ("removexattr-ro-file", NOT_PERMITTED),
    ("chmod-script", NOT_PERMITTED),
    ("chown-script", NOT_PERMITTED),
    ("utime-script", NOT_PERMITTED),
    ("utime-now-script", NOT_PERMITTED),
    ("setxattr-script", NOT_PERMITTED),
    ("removexattr-script", NOT_PERMITTED),
    ("chmod-wo-file", NOT_PERMITTED),
    # Times through a descriptor need only ownership, even one opened for reading.
    ("futimens-ro-file", NOT_PERMITTED),
    ("futimens-now-ro-file", NOT_PERMITTED),
    ("futimens-script", NOT_PERMITTED),
    ("futimens-now-script", NOT_PERMITTED),
    ("futimens-wo-file", NOT_PERMITTED),
    ("futimens-now-wo-file", NOT_PERMITTED),
    ("lease-ro-file", NOT_PERMITTED),
    # File attributes (chattr) need only a descriptor of a file the user owns.
    ("chattr-ro-file", NOT_PERMITTED),
    ("fsxattr-ro-file", NOT_PERMITTED),
    ("chattr-script", NOT_PERMITTED),
    ("fsxattr-script", NOT_PERMITTED),
    ("chattr-wo-file", NOT_PERMITTED),
    ("fsxattr-wo-file", NOT_PERMITTED),
    ("shutil-copy-metadata", NOT_PERMITTED),
    ("read-proc-self-mem", DENIED),
    ("read-proc-1-environ", DENIED),
    ("read-proc-self-environ", DENIED),
    ("read-parent-cmdline", DENIED),
    ("open-dev-tty", DENIED),
    ("open-host-devices", "ok []"),
    ("write-tmp", DENIED),
    ("write-dev-shm", DENIED),
]


@dataclass
class FsRun:
    world: World
    proc: subprocess.CompletedProcess[bytes]
    lines: dict[str, str]
    before: dict[str, tuple[int, int, int, bytes]]
    listing: dict[str, list[str]]


@pytest.fixture(scope="module", params=PROBE_MODES)
def fs_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FsRun:
    w = make_world(tmp_path_factory.mktemp("fs"))
    (w.app / "link-to-secret").symlink_to(w.secret)
    (w.app / "link-to-home").symlink_to(w.home)
    w.app.joinpath("probe.py").write_text(PRELUDE + FS_PROBE)
    before = {p.name: snapshot(p) for p in (w.secret, w.victim, w.ro_file, w.app / "probe.py")}
    listing = listings(w)
    proc = run_grants_probe(request.param, w, w.app / "probe.py")
    return FsRun(w, proc, outcomes(proc), before, listing)


def test_fs_probe_ran_to_the_end(fs_run: FsRun) -> None:
    assert fs_run.proc.returncode == 0, fs_run.proc.stderr.decode(errors="replace")
    assert fs_run.lines.get("done") == "ok"
    assert set(fs_run.lines) == {name for name, _ in FS_EXPECTED} | {"done"}


@pytest.mark.parametrize(("attempt", "expected"), FS_EXPECTED, ids=[a for a, _ in FS_EXPECTED])
def test_fs_attempt(fs_run: FsRun, attempt: str, expected: str) -> None:
    assert fs_run.lines.get(attempt) == expected


def test_fs_nothing_outside_changed(fs_run: FsRun) -> None:
    w = fs_run.world
    for path in (w.secret, w.victim, w.ro_file, w.app / "probe.py"):
        assert snapshot(path) == fs_run.before[path.name], path
    assert listings(w) == fs_run.listing
    leftovers = [f"/tmp/pynox-escape-{w.tag}", f"/dev/shm/pynox-escape-{w.tag}"]
    created = [path for path in leftovers if os.path.lexists(path)]
    for path in created:
        os.unlink(path)
    assert created == []


def test_fs_writes_in_granted_dirs_landed(fs_run: FsRun) -> None:
    w = fs_run.world
    assert (w.wo / "written.txt").read_text() == "written by the probe"
    assert w.wo_file.read_text() == "replaced"
    assert sorted(os.listdir(w.rw)) == ["ro-link", "to-secret"]
    # ro-link is a new, ordinary file: no hard link to the read-only file exists.
    assert (w.rw / "ro-link").read_text() == "x"
    assert w.ro_file.stat().st_nlink == 1
    assert w.secret.stat().st_nlink == 1
    assert stat.S_IMODE(w.wo_file.stat().st_mode) != 0o777


XATTR = "user.pynox.origin"
XATTR_VALUE = b"https://example.com/download?token=secret"
XATTR_PROBE = f"""
attempt("getxattr-secret", os.getxattr, W["secret"], "{XATTR}")
attempt("listxattr-secret", os.listxattr, W["secret"])
attempt("listxattr-home", os.listxattr, W["home"])
# An O_PATH descriptor opens without Landlock's read right, but serves no attribute.
attempt("getxattr-secret-by-o-path", os.getxattr, os.open(W["secret"], os.O_PATH), "{XATTR}")
attempt("getxattr-ro-file-by-path", os.getxattr, W["ro_file"], "{XATTR}")
attempt("getxattr-ro-file-by-descriptor", os.getxattr, os.open(W["ro_file"], os.O_RDONLY),
        "{XATTR}")
print("done: ok")
"""


@pytest.mark.parametrize("mode", PROBE_MODES)
def test_extended_attributes_are_read_only_through_an_open_file(mode: str, tmp_path: Path) -> None:
    """Landlock does not govern reading extended attributes by path: they would tell
    what any program stored on any file (where a download came from, say)."""
    w = make_world(tmp_path)
    for path in (w.secret, w.ro_file):
        try:
            os.setxattr(path, XATTR, XATTR_VALUE)
        except OSError as exc:
            pytest.skip(f"the tests' file system keeps no user extended attributes: {exc}")
    w.app.joinpath("probe.py").write_text(PRELUDE + XATTR_PROBE)
    proc = run_grants_probe(mode, w, w.app / "probe.py")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert outcomes(proc) == {
        "getxattr-secret": NOT_PERMITTED,
        "listxattr-secret": NOT_PERMITTED,
        "listxattr-home": NOT_PERMITTED,
        "getxattr-secret-by-o-path": "OSError EBADF",
        "getxattr-ro-file-by-path": NOT_PERMITTED,
        "getxattr-ro-file-by-descriptor": f"ok {XATTR_VALUE!r}",
        "done": "ok",
    }


def test_reading_the_cwd_with_c_code_is_denied(world: World) -> None:
    (world.app / "local.txt").write_text("in the working directory")
    code = "open('local.txt').read()"
    proc = pynox("-c", code, cwd=world.app)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[-2:] == [
        "PermissionError: [Errno 13] Permission denied: 'local.txt'",
        f"pynox: reading {world.app}/local.txt is not allowed; grant it with "
        f"--allow-read={world.app}/local.txt",
    ]


def test_inotify_reveals_nothing_outside_the_grants(world: World) -> None:
    """Watching a directory that may not be listed would reveal its entries' names."""
    done = threading.Event()

    def churn() -> None:
        for i in range(40):
            if done.is_set():
                return
            name = world.home / f"created-by-the-user-{i}"
            name.write_text("x")
            name.read_text()
            time.sleep(0.05)

    script = world.app / "probe.py"
    script.write_text(
        PRELUDE
        + textwrap.dedent("""
        import select, struct
        fd = LIBC.inotify_init1(0)
        wd = LIBC.inotify_add_watch(fd, W["home"].encode(), 0xFFF)
        print(f"watch: {'errno ' + _errname(ctypes.get_errno()) if wd < 0 else 'ok'}", flush=True)
        names = []
        if wd >= 0:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if poller.poll(3000):
                data = os.read(fd, 65536)
                while data:
                    _, _, _, size = struct.unpack_from("iIII", data)
                    names.append(data[16:16 + size].rstrip(b"\\0").decode())
                    data = data[16 + size:]
        print("names:", json.dumps(sorted(set(names))))
    """)
    )
    thread = threading.Thread(target=churn)
    thread.start()
    try:
        proc = pynox(str(script), json.dumps(world.paths()), cwd=world.app)
    finally:
        done.set()
        thread.join()
    assert proc.returncode == 0, proc.stderr
    lines = outcomes(proc)
    assert lines["names"] == "[]", f"the sandbox saw names in {world.home}: {lines['names']}"
    assert lines["watch"] in ("errno EACCES", "errno EPERM")


def test_a_module_run_in_the_root_does_not_make_every_file_readable(tmp_path: Path) -> None:
    """-m makes the working directory readable, as a script makes its own: run in /, as a
    container starts by default, that was every file of the machine, granted by no one."""
    data = tmp_path / "data.json"
    data.write_text('{"secret": 1}')
    # base64's command line opens the file it is given, as every CPython's does alike.
    proc = pynox("--json", "-m", "base64", str(data), cwd="/")
    result = json.loads(proc.stdout)
    assert result["policy"]["implicit_read"] == []
    assert result["exit"] == 1 and result["error"]["type"] == "PermissionError", result
    assert result["stdout"] == ""


def test_a_script_beside_scratch_directories_cannot_read_another_runs(tmp_path: Path) -> None:
    """Agents often write their scripts to /tmp, where runs make their scratch
    directories: the script's directory, readable by default, held the HOME of every run
    going on, what it wrote there included."""
    base = tmp_path / "tmp"
    base.mkdir(mode=0o700)
    env = {**os.environ, "TMPDIR": str(base)}
    signals = tmp_path / "signals"
    signals.mkdir()
    written = signals / "written"
    other = subprocess.Popen(
        [PYNOX, f"--allow-write={signals}", "-c", WRITES_IN_HOME_THEN_WAITS, str(written)],
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not written.exists():
            assert other.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        script = base / "agent.py"
        script.write_text(READS_OTHER_RUNS)
        proc = pynox("--json", str(script), env=env)
    finally:
        written.unlink(missing_ok=True)
        other.wait(timeout=60)
    result = json.loads(proc.stdout)
    assert result["policy"]["implicit_read"] == []
    assert "private notes" not in result["stdout"], result["stdout"]
    assert result["error"]["type"] == "PermissionError", result


WRITES_IN_HOME_THEN_WAITS = """
import os, sys, time
open(os.path.join(os.environ["HOME"], "notes.txt"), "w").write("private notes")
signal = sys.argv[1]
open(signal, "w").close()
while os.path.exists(signal):
    time.sleep(0.01)
"""

READS_OTHER_RUNS = """
import os
base = os.path.dirname(os.path.abspath(__file__))
for name in os.listdir(base):
    notes = os.path.join(base, name, "notes.txt")
    if os.path.exists(notes):
        print(open(notes).read())
"""


@pytest.mark.parametrize(
    "cwd, module, where",
    [("/", "tmp", "in /"), ("/tmp", "", "in a folder where runs keep their scratch")],
)
def test_a_module_in_a_folder_left_out_gets_a_hint_that_moves_the_program(
    tmp_path: Path, cwd: str, module: str, where: str
) -> None:
    """python imports from / or /tmp for a program run there, which are never read by
    default; the hint for a module it finds there moves the program, never grants the
    folder (every file, or other runs' scratch directories). /tmp stands for such a module
    in /: a folder is a namespace package."""
    if not module:
        made = Path(cwd) / f"pynox_hint_{tmp_path.name}.py"
        made.write_text("")
        module = made.stem
    try:
        proc = pynox("-c", f"import {module}", cwd=cwd)
    finally:
        if cwd == "/tmp":
            made.unlink()
    assert proc.returncode == 1
    hint = proc.stderr.decode().splitlines()[-1]
    assert hint.startswith(f"pynox: the module is {cwd.rstrip('/')}/"), hint
    assert where in hint and "folder of their own" in hint, hint
    assert hint.endswith(
        "(with -c or standard input, run there and grant it with --allow-read=FOLDER)"
    ), hint
    assert f"--allow-read={cwd}" not in hint, hint
    # Followed: the program and its module moved into a folder of their own.
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "helper.py").write_text("NAME = 'helper'\n")
    (folder / "main.py").write_text("import helper\nprint(helper.NAME)\n")
    followed = [
        pynox(f"--allow-read={folder}", "-c", "import helper; print(helper.NAME)", cwd=folder),
        pynox("main.py", cwd=folder),
    ]
    for done in followed:
        assert (done.returncode, done.stdout) == (0, b"helper\n"), done.stderr
