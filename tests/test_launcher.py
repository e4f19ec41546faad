"""The `pynox` launcher: a static executable that finds its interpreter and execs it.

Most tests copy the installed launcher into a folder of their own, next to a
stand-in interpreter (a shell script that prints what it was given), to see
exactly the command line and environment the launcher hands on.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.bundles import PROJECT
from support.commands import PYNOX, limiting_open_files, run
from support.other_user import as_nobody

PYTHON_VERSION = ".".join(str(part) for part in sys.version_info[:3])
MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"
HOOK = "PYNOX_JSON_FAST_PATH"
BOOT = "import gc;gc.disable();del gc;__import__('pynox._boot')._boot.main()"

# Prints its argv ($0 first), its pid and the hook variable, each ending in a NUL byte.
FAKE_PYTHON = r"""#!/bin/sh
printf '%s\0' "$0" "$@"
printf 'pid=%s\0hook=%s\0' "$$" "${PYNOX_JSON_FAST_PATH-unset}"
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """tmp_path as the launcher sees it: with no symlink in it."""
    return tmp_path.resolve()


def launcher_copy(folder: Path, python: str | None = FAKE_PYTHON, bundle: bool = False) -> Path:
    """folder/bin/pynox, with python3 beside it (or in ../python/bin for a bundle)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copyfile(PYNOX, bin_dir / "pynox")
    (bin_dir / "pynox").chmod(0o755)
    if python is not None:
        python_dir = folder / "python" / "bin" if bundle else bin_dir
        python_dir.mkdir(parents=True, exist_ok=True)
        (python_dir / "python3").write_text(python)
        (python_dir / "python3").chmod(0o755)
    return bin_dir / "pynox"


def handed_on(done: subprocess.CompletedProcess[bytes]) -> tuple[list[str], str, str]:
    """(argv, pid, hook variable) as the stand-in interpreter printed them."""
    assert done.returncode == 0, done.stderr
    fields = done.stdout.decode().split("\0")[:-1]
    pid, hook = fields[-2], fields[-1]
    assert pid.startswith("pid=") and hook.startswith("hook="), fields
    return fields[:-2], pid[4:], hook[5:]


def one_line_failure(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 125, done
    assert done.stdout == b""
    text = done.stderr.decode()
    assert text.count("\n") == 1 and text.endswith(" reinstall pynox\n"), text
    return text


# --- the executable -------------------------------------------------------------------


def program_headers(path: str) -> tuple[int, int, list[int]]:
    """(e_type, e_machine, the type of each program header) of a 64-bit ELF file."""
    data = Path(path).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "a 64-bit LSB ELF file"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    (e_phoff,) = struct.unpack_from("<Q", data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    kinds = [struct.unpack_from("<I", data, e_phoff + i * e_phentsize)[0] for i in range(e_phnum)]
    return e_type, e_machine, kinds


def test_launcher_is_a_static_executable() -> None:
    e_type, e_machine, kinds = program_headers(PYNOX)
    machine = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}[platform.machine().lower()]
    assert e_machine == machine
    assert e_type == 2, "ET_EXEC: no loader relocates it"
    assert 3 not in kinds, "PT_INTERP: it would need a dynamic loader"
    assert 2 not in kinds, "PT_DYNAMIC: it would need shared libraries"


def test_bundler_accepts_the_static_launcher_for_either_c_library() -> None:
    from bundler import checks, elf
    from bundler.config import load_matrix
    from bundler.emulation import run_launcher
    from bundler.host import host_arch

    info = elf.read(Path(PYNOX))
    assert info is not None and info.libc == "static" and info.needed == []
    matrix = load_matrix(PROJECT / "dist-config")
    for libc in ("gnu", "musl"):
        target = matrix.target(f"{host_arch()}-linux-{libc}")
        report = checks.check_binary(Path(PYNOX), target, target.glibc)
        assert report.libc == "static" and report.glibc_max is None
        # A static launcher runs here whatever C library its target has.
        assert run_launcher(Path(PYNOX), target).startswith("launcher runs natively: pynox 0.1.0")


# --- where it finds the interpreter ----------------------------------------------------


def test_runs_by_name_through_a_symlink_on_path(folder: Path) -> None:
    links = folder / "links"
    links.mkdir()
    (links / "other").symlink_to(PYNOX)
    (links / "pynox").symlink_to("other")  # a chain of links, the last one relative
    env = {"PATH": f"{links}:/usr/bin:/bin"}
    proc = run(["pynox", "-c", "print('via PATH')"], env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"via PATH\n", b"")
    proc = run(["pynox", "-V"], env=env)
    assert proc.stdout.decode() == f"pynox 0.1.0 (CPython {PYTHON_VERSION})\n"


def test_a_bundle_finds_its_python_and_passes_arguments_unchanged(folder: Path) -> None:
    launcher = launcher_copy(folder, bundle=True)
    args = ["script.py", "", "a b", "--json", "-S", "--", "é"]
    argv, _, hook = handed_on(run([str(launcher), *args]))
    assert argv == [str(folder / "python" / "bin" / "python3"), "-I", "-c", BOOT, *args]
    assert hook == "unset"


def test_the_start_file_is_passed_by_its_real_path(folder: Path) -> None:
    launcher = launcher_copy(folder / "env")
    real = folder / "real-lib"
    site = real / f"python{MINOR}" / "site-packages"
    (site / "pynox").mkdir(parents=True)
    (site / "pynox" / "_start.py").write_text("")
    (folder / "env" / "lib").symlink_to(real)
    argv, _, _ = handed_on(run([str(launcher), "script.py"]))
    python = str(folder / "env" / "bin" / "python3")
    resolved = os.path.realpath(site)
    start = os.path.join(resolved, "pynox", "_start.py")
    assert argv == [python, "-I", "-S", start, "script.py"]


def test_the_helpers_directory_goes_when_the_interpreter_never_took_it(folder: Path) -> None:
    """The stand-in interpreter ends at once, often before the scratch helper has named
    the directory it made: the helper must still remove it (not die of SIGPIPE)."""
    launcher = launcher_copy(folder)
    tmp = folder / "tmp"
    tmp.mkdir()
    for _ in range(20):
        handed_on(run([str(launcher), "script.py"], env={"TMPDIR": str(tmp)}))
    deadline = time.monotonic() + 10
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp.iterdir()) == []


# Nests directories in the scratch directory deeper than any path reaches, every 100th
# holding a file and a link to a directory outside (argv[1]), then ends.
NESTS = """\
import os, sys
fd = os.open(os.environ["TMPDIR"], os.O_RDONLY)
for level in range(2200):
    if level % 100 == 0:
        os.symlink(sys.argv[1], "outside", dir_fd=fd)
        os.close(os.open("file", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.mkdir("d", dir_fd=fd)
    inner = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = inner
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")
@pytest.mark.parametrize("limit", [None, 16], ids=["any-descriptors", "16-descriptors"])
def test_a_scratch_directory_nested_past_any_path_goes_after_the_run(
    folder: Path, limit: int | None
) -> None:
    """However deep the program nests directories in its scratch directory, the launcher's
    helper removes it all once the run ends, with few descriptors to spare too, and
    takes nothing the links in it point to."""
    tmp = folder / "tmp"
    tmp.mkdir()
    outside = folder / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    prefix = limiting_open_files(limit) if limit is not None else []
    done = run([*prefix, PYNOX, "-c", NESTS, str(outside)], env={"TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 60
    while list(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp.iterdir()) == []
    assert (outside / "keep").read_text() == "kept"


def test_a_missing_interpreter_is_one_line_and_125(folder: Path) -> None:
    launcher = launcher_copy(folder, python=None)
    for args in (["script.py"], ["--version"], ["--no-sandbox"]):
        assert one_line_failure(run([str(launcher), *args])) == (
            f"pynox: cannot find its Python interpreter next to {folder / 'bin'}: "
            "No such file or directory; link to pynox where it is installed rather than copy "
            "it, or reinstall pynox\n"
        )


def test_an_interpreter_this_user_cannot_reach_is_named_for_what_it_is(folder: Path) -> None:
    """A virtual environment made from a Python under another user's home: its python3 is
    there, behind a folder this user may not enter, and reinstalling would not help."""
    launcher = launcher_copy(folder, python=None)
    private = folder / "private"
    private.mkdir(mode=0o700)
    (private / "python3").write_text(FAKE_PYTHON)
    (private / "python3").chmod(0o755)
    (folder / "bin" / "python3").symlink_to(private / "python3")
    folder.chmod(0o755)
    done = run([*as_nobody(folder), str(launcher), "-c", "pass"])
    assert (done.returncode, done.stdout) == (125, b"")
    assert done.stderr.decode() == (
        f"pynox: cannot reach its Python interpreter {folder / 'bin' / 'python3'}: Permission "
        "denied; run pynox as a user who may, or install it with a Python this user can run\n"
    )
    # Following the hint: run by a user who may reach it (this one), it starts.
    argv, _, _ = handed_on(run([str(launcher), "-c", "pass"]))
    assert argv[0] == str(folder / "bin" / "python3")


def test_an_interpreter_that_cannot_run_names_the_error(folder: Path) -> None:
    launcher = launcher_copy(folder)
    python = folder / "bin" / "python3"
    python.chmod(0o644)
    if os.access(python, os.X_OK):
        pytest.skip("running as a user that may execute anything")
    assert one_line_failure(run([str(launcher), "x.py"])) == (
        f"pynox: cannot start the interpreter {python}: Permission denied; reinstall pynox\n"
    )
    python.write_bytes(b"\x7fELF garbage")
    python.chmod(0o755)
    assert one_line_failure(run([str(launcher), "x.py"])) == (
        f"pynox: cannot start the interpreter {python}: Exec format error; reinstall pynox\n"
    )


def test_a_command_line_that_fits_python_but_not_what_pynox_adds_is_one_line(
    tmp_path: Path,
) -> None:
    """Within a few bytes of the kernel's limit on arguments, python starts where pynox
    cannot add its own: that is the command line's length, not a broken install."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    bulk = ["y" * 100_000] * 20  # near the usual 2 MiB; each below the 128 KiB per string

    def started(command: list[str], filler: int) -> subprocess.CompletedProcess[bytes] | None:
        try:
            return subprocess.run(
                [*command, "-c", "pass", "x" * filler, *bulk],
                env=env, cwd=tmp_path, capture_output=True, timeout=60,
            )  # fmt: skip
        except OSError:  # E2BIG: it did not start at all
            return None

    # pynox's own path is no longer than python's and "-I": whatever python starts with
    # reaches the launcher too.
    assert len(PYNOX) <= len(sys.executable) + len(" -I")
    low, high = 0, 131_000
    if started([sys.executable, "-I"], low) is None or started([sys.executable, "-I"], high):
        pytest.skip("this machine's limit on arguments is not near 2 MiB")
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if started([sys.executable, "-I"], middle) else (low, middle)
    refused = started([PYNOX], low)
    assert refused is not None and (refused.returncode, refused.stdout) == (125, b"")
    assert refused.stderr == (
        b"pynox: the command line and environment are too long to start the interpreter with"
        b" the few arguments pynox adds; pass less (a file of arguments, say)\n"
    )


def test_a_path_too_long_for_the_launcher_is_one_line(tmp_path: Path) -> None:
    # Made and reached through descriptors: the whole path is longer than PATH_MAX.
    name = "d" * 100
    top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    deep = os.dup(top)
    try:
        for _ in range(45):
            os.mkdir(name, dir_fd=deep)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep)
            os.close(deep)
            deep = inner
        out = os.open("pynox", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=deep)
        with os.fdopen(out, "wb") as file:
            file.write(Path(PYNOX).read_bytes())
        done = subprocess.run(
            [f"/proc/self/fd/{deep}/pynox", "--version"], capture_output=True, pass_fds=[deep]
        )
        assert one_line_failure(done) == (
            "pynox: cannot find its own location through /proc/self/exe: "
            "File name too long; reinstall pynox\n"
        )
    finally:
        os.close(deep)
        os.close(top)
        shutil.rmtree(tmp_path / name)


# --- --version ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, PYTHON_VERSION),  # no pyvenv.cfg: the version the launcher was built for
        ("home = /usr/bin\nversion = 3.11.7\n", "3.11.7"),
        ("version_info = 3.10.13.final.0\nversion = 3.9.1\n", "3.10.13"),
        ("  version\t=  3.12.0rc1", "3.12.0"),
        ("version = 3.11\nVERSION = 1.2.3\nversion = 3.12.4\n", "3.12.4"),
        ("home = /usr/bin\n", PYTHON_VERSION),
    ],
)
def test_version_reads_pyvenv_cfg(folder: Path, config: str | None, expected: str) -> None:
    launcher = launcher_copy(folder)
    if config is not None:
        (folder / "pyvenv.cfg").write_text(config)
    for flag in ("--version", "-V"):
        proc = run([str(launcher), flag])
        assert (proc.returncode, proc.stderr) == (0, b"")
        assert proc.stdout.decode() == f"pynox 0.1.0 (CPython {expected})\n"


def test_version_that_cannot_be_written_exits_1() -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run([PYNOX, "--version"], stdout=full, stderr=subprocess.PIPE)
    assert (done.returncode, done.stderr) == (1, b"")


# --- --no-sandbox and json.dump's fast path --------------------------------------------


def test_no_sandbox_names_its_process_for_the_json_hook(folder: Path) -> None:
    launcher = launcher_copy(folder)
    python = str(folder / "bin" / "python3")
    command = [str(launcher), "--no-sandbox", "-O", "x.py", "-S"]
    argv, _, hook = handed_on(run(command))
    assert argv == [python, "-O", "x.py", "-S"]
    assert hook == "unset", "as a wheel installs pynox: no .pth would take it away"
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = folder / "lib" / minor / "site-packages"
    site.mkdir(parents=True)
    (site / "pynox-json.pth").write_text("")  # as a bundle installs it
    argv, pid, hook = handed_on(run(command))
    assert argv == [python, "-O", "x.py", "-S"]
    assert hook == pid, "the variable names the process the interpreter runs in"
    for skips_site in (["-S", "x.py"], ["-bS", "x.py"], ["-W", "error", "-IS"]):
        argv, _, hook = handed_on(run([str(launcher), "--no-sandbox", *skips_site]))
        assert argv == [python, *skips_site] and hook == "unset", "no .pth would take it away"


def test_no_sandbox_keeps_an_existing_hook_variable(folder: Path) -> None:
    launcher = launcher_copy(folder)
    _, pid, hook = handed_on(run([str(launcher), "--no-sandbox", "x.py"], env={HOOK: "1"}))
    assert hook == "1" != pid
    # The real interpreter: a variable of another process is left alone for the program.
    code = f"import os; print(os.environ.get({HOOK!r}))"
    proc = run([PYNOX, "--no-sandbox", "-c", code], env={HOOK: "kept"})
    assert proc.stdout == b"kept\n"
    proc = run([PYNOX, "--no-sandbox", "-c", code])
    assert proc.stdout == b"None\n", "the launcher sets none where no .pth takes it away"


# --- cross builds -------------------------------------------------------------------------


@pytest.mark.slow
def test_cross_built_aarch64_musl_launcher_runs(tmp_path: Path) -> None:
    if importlib.util.find_spec("ziglang") is None or shutil.which("cmake") is None:
        pytest.skip("needs ziglang (pip install ziglang) and cmake")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bundler",
            "build-runtime",
            "--target",
            "aarch64-linux-musl",
            "--compiler",
            "zig",
            "--no-runtime",
            "--run",
            "--build-dir",
            str(tmp_path / "build"),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert "pynox: aarch64, static" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    if last.startswith("launcher not run"):
        pytest.skip(last)
    assert last.startswith("launcher runs") and "pynox 0.1.0 (CPython" in last, done.stdout


def test_without_proc_mounted_the_launcher_says_to_mount_it(tmp_path: Path) -> None:
    """In a chroot or a mount namespace without /proc, the launcher cannot find itself,
    and python -m pynox cannot clear the environment: both said to reinstall pynox, or
    nothing, where what is missing is /proc."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    without_proc = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    without_proc += ['umount -l /proc && exec "$@"', "sh"]
    probe = subprocess.run([*without_proc, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot unmount /proc here: {probe.stderr.decode().strip()}")
    expected = {
        PYNOX: "cannot find its own location through /proc/self/exe: No such file or directory",
        sys.executable: "cannot clear the environment: cannot read /proc/self/stat: No such"
        " file or directory",
    }
    for command, error in expected.items():
        start = [command] if command == PYNOX else [command, "-m", "pynox"]
        proc = run([*without_proc, *start, "-c", "print('ran')"], cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
        assert proc.stderr.decode() == (f"pynox: {error}; mount proc at /proc, which pynox needs\n")
