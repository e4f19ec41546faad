"""A write hint never names a grant that pynox refuses for what its environment names.

pynox refuses a write grant over what a later run loads or reads before its sandbox
exists, and some of that only the environment it started with names: the folders of
PATH up to the pynox command, LD_LIBRARY_PATH's and GCONV_PATH's folders, what OpenSSL's
variables name, PYTHONPATH's under python -m pynox, the pynox.toml PYNOX_CONFIG or
--config names, the cache under HOME or XDG_CACHE_HOME. The program's hint is made once
that environment is emptied: each case here follows the hint, in every interface, and the
run then works.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.commands import PYNOX, PYTHON, pynox, python, run
from support.hints import hint_line, hinted_flags

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

WRITE = "import sys; open(sys.argv[1], 'w').write('x'); print('ok')"
SETUP_FAILURE = 125


def _world(tmp_path: Path, case: str) -> tuple[Path, Path, dict[str, str], list[str]]:
    """The working directory, the folder the program writes in, the environment pynox
    starts with and its options, for a folder that environment names."""
    cwd, folder = tmp_path / "project", tmp_path / "named"
    cwd.mkdir()
    folder.mkdir()
    env: dict[str, str] = {}
    options: list[str] = []
    if case == "PATH":
        (folder / "pynox").symlink_to(PYNOX)
        env["PATH"] = f"{folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    elif case in ("LD_LIBRARY_PATH", "GCONV_PATH", "PYTHONPATH", "OPENSSL_MODULES"):
        env[case] = str(folder)
    elif case == "OPENSSL_CONF":
        env[case] = str(folder / "openssl.cnf")
    elif case == "HOME":
        env["HOME"] = str(folder)
    elif case == "XDG_CACHE_HOME":
        env["XDG_CACHE_HOME"] = str(folder / "cache")
    elif case == "PYNOX_CONFIG":
        (folder / "pynox.toml").write_text("[permissions]\n")
        env["PYNOX_CONFIG"] = str(folder / "pynox.toml")
    elif case == "--config":
        (folder / "pynox.toml").write_text("[permissions]\n")
        options.append(f"--config={folder / 'pynox.toml'}")
    return cwd, folder, env, options


def _command(case: str) -> list[str]:
    """PYTHONPATH reaches pynox's own sys.path only under python -m pynox: the launcher's
    interpreter runs isolated."""
    return [PYTHON, "-m", "pynox"] if case == "PYTHONPATH" else [PYNOX]


CASES = [
    "PATH",
    "LD_LIBRARY_PATH",
    "GCONV_PATH",
    "PYTHONPATH",
    "OPENSSL_CONF",
    "OPENSSL_MODULES",
    "HOME",
    "XDG_CACHE_HOME",
    "PYNOX_CONFIG",
    "--config",
]
# What no grant of the folder itself or of one inside it may reach: the hint names none.
NOTHING_INSIDE = {"LD_LIBRARY_PATH", "GCONV_PATH", "PYTHONPATH", "OPENSSL_MODULES"}


@pytest.mark.parametrize("case", CASES)
def test_the_write_hint_names_what_pynox_grants(tmp_path: Path, case: str) -> None:
    cwd, folder, env, options = _world(tmp_path, case)
    command = _command(case)
    written = str(folder / "x.txt")
    # pynox refuses a grant of the folder itself: the hint must not name it.
    refused = run([*command, *options, f"--allow-write={folder}", "-c", "pass"], cwd, env)
    assert refused.returncode == SETUP_FAILURE, refused.stderr.decode()
    first = run([*command, *options, "-c", WRITE, written], cwd, env)
    assert first.returncode == 1 and b"PermissionError" in first.stderr, first.stderr
    hint = hint_line(first.stderr)
    if case in NOTHING_INSIDE:
        assert hint.startswith(f"pynox: {folder} cannot be granted for writing: what is written")
        assert " --allow-" not in hint
        return
    # A folder inside it: made, granted as the hint says, and written.
    flags = hinted_flags(first.stderr)
    inside = folder / "out"
    assert flags == [f"--allow-write={inside}"], hint
    inside.mkdir()
    done = run([*command, *options, *flags, "-c", WRITE, str(inside / "x.txt")], cwd, env)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"ok\n" and (inside / "x.txt").read_text() == "x"


@pytest.mark.parametrize("case", ["PATH", "LD_LIBRARY_PATH", "HOME"])
def test_the_json_hint_is_the_same(tmp_path: Path, case: str) -> None:
    """The launcher writes a --json result's hint from the kind the program's process
    gave, which is the one its stderr line has."""
    cwd, folder, env, options = _world(tmp_path, case)
    written = str(folder / "x.txt")
    plain = hint_line(run([PYNOX, *options, "-c", WRITE, written], cwd, env).stderr)
    result = json.loads(run([PYNOX, *options, "--json", "-c", WRITE, written], cwd, env).stdout)
    assert result["error"]["hint"] == plain[len("pynox: ") :]


POOL_RUN = """\
import json, os, sys
import pynox
folder = sys.argv[1]
def code(where):
    return f"open({where + '/x.txt'!r}, 'w').write('x'); print('ok')"
with pynox.Pool() as pool:
    print(json.dumps(pool.run(code(folder)).error["hint"]))
    print(json.dumps(pool.run("pass", allow_write=[folder]).error["message"]))
    inside = os.path.join(folder, "out")
    os.mkdir(inside)
    print(json.dumps(pool.run(code(inside), allow_write=[inside]).stdout))
"""


@pytest.mark.parametrize("case", ["PATH", "LD_LIBRARY_PATH", "OPENSSL_MODULES", "HOME"])
def test_the_pool_hint_names_what_the_pool_grants(tmp_path: Path, case: str) -> None:
    """A pool started in that environment refuses the same grants, and its runs' hints
    name none of them, but the folder inside that the pool grants."""
    cwd, folder, env, _ = _world(tmp_path, case)
    script = cwd / "client.py"
    script.write_text(POOL_RUN)
    proc = python(str(script), str(folder), cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    hint, refusal, written = map(json.loads, proc.stdout.decode().splitlines()[-3:])
    assert refusal.startswith(f"cannot grant writing {folder}: "), refusal
    assert hint.startswith(f"{folder} cannot be granted for writing"), hint
    if case in NOTHING_INSIDE:  # the folder inside is refused too
        assert "allow_write" not in hint and written == ""
    else:
        assert f"granted with allow_write=[{str(folder / 'out')!r}]" in hint
        assert written == "ok\n" and (folder / "out" / "x.txt").read_text() == "x"


def test_a_folder_elsewhere_is_still_hinted_as_itself(tmp_path: Path) -> None:
    """What the environment names stays out of the hints of other folders."""
    cwd, folder, env, _ = _world(tmp_path, "LD_LIBRARY_PATH")
    other = tmp_path / "other"
    other.mkdir()
    proc = run([PYNOX, "-c", WRITE, str(other / "x.txt")], cwd, env)
    assert hinted_flags(proc.stderr) == [f"--allow-write={other}"]
    assert pynox(f"--allow-write={other}", "-c", WRITE, str(other / "x.txt"), cwd=cwd).stdout == (
        b"ok\n"
    )


@pytest.mark.parametrize("variable", ["PATH", "LD_LIBRARY_PATH"])
def test_a_relative_folder_is_taken_from_where_pynox_ran(tmp_path: Path, variable: str) -> None:
    """A relative folder of the environment is refused from the directory pynox ran in:
    the program's hint says so even after it changed directory."""
    cwd = tmp_path / "project"
    folder = cwd / "bin"
    folder.mkdir(parents=True)
    if variable == "PATH":
        (folder / "pynox").symlink_to(PYNOX)
        env = {"PATH": f"bin:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    else:
        env = {variable: "bin"}
    refused = run([PYNOX, f"--allow-write={folder}", "-c", "pass"], cwd, env)
    assert refused.returncode == SETUP_FAILURE, refused.stderr.decode()
    code = f"import os; os.chdir({str(tmp_path)!r}); {WRITE}"
    first = run([PYNOX, "-c", code, str(folder / "x.txt")], cwd, env)
    assert first.returncode == 1 and b"PermissionError" in first.stderr, first.stderr
    hint = hint_line(first.stderr)
    assert hint.startswith(f"pynox: {folder} cannot be granted for writing"), hint
    assert f"--allow-write={folder} " not in hint + " "


def _writable_loader_folders() -> list[str]:
    """The folders /etc/ld.so.conf lists that exist and this user may write in: a write
    there gets a hint that could name a grant (in another, the user's permissions refuse
    it first)."""
    from pynox.policy import system_paths

    _, folders = system_paths.loader_config()
    real = dict.fromkeys(os.path.realpath(folder) for folder in folders)  # as hints name them
    return [folder for folder in real if os.access(folder, os.W_OK | os.X_OK)]


def test_a_write_hint_names_nothing_in_a_folder_ld_so_conf_lists(tmp_path: Path) -> None:
    """pynox refuses a write grant in what /etc/ld.so.conf lists (what a later ldconfig
    indexes for every process); the hint, made in the sandbox, knows those folders too
    and names none of them, nor a folder inside one, as following it would be refused."""
    folders = _writable_loader_folders()
    if not folders:
        pytest.skip("this user may write in no folder /etc/ld.so.conf lists")
    for folder in folders:
        refused = run([PYNOX, f"--allow-write={folder}", "-c", "pass"], tmp_path, {})
        assert refused.returncode == SETUP_FAILURE, refused.stderr.decode()
        probe = os.path.join(folder, f"pynox-probe-{os.getpid()}.txt")  # refused: never made
        proc = run([PYNOX, "-c", WRITE, probe], tmp_path, {})
        hint = hint_line(proc.stderr)
        assert f"--allow-write={folder}" not in hint, hint
        assert hint.startswith(f"pynox: {folder} cannot be granted for writing"), hint


def test_the_cache_under_the_home_etc_passwd_lists_is_known_though_home_differs(
    tmp_path: Path,
) -> None:
    """A later run with HOME unset trusts the cache under the home /etc/passwd lists, so
    pynox refuses a write grant over it whatever HOME says; the hint, made in a sandbox
    that may not read /etc/passwd, names a folder inside the .cache folder instead, and
    following it works."""
    import pwd

    cache = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache"
    if not os.access(cache, os.W_OK | os.X_OK):
        pytest.skip(f"this user has no {cache} to write in")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    refused = run([PYNOX, f"--allow-write={cache}", "-c", "pass"], tmp_path, env)
    assert refused.returncode == SETUP_FAILURE, refused.stderr.decode()
    name = f"pynox-probe-{os.getpid()}.txt"
    first = run([PYNOX, "-c", WRITE, str(cache / name)], tmp_path, env)
    inside = cache / "out"
    assert hinted_flags(first.stderr) == [f"--allow-write={inside}"], hint_line(first.stderr)
    made = not inside.exists()
    inside.mkdir(exist_ok=True)
    try:
        done = run(
            [PYNOX, f"--allow-write={inside}", "-c", WRITE, str(inside / name)], tmp_path, env
        )
        assert done.returncode == 0 and done.stdout == b"ok\n", done.stderr.decode()
    finally:
        (inside / name).unlink(missing_ok=True)
        if made:
            inside.rmdir()
