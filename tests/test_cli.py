"""The `pynox` command: flags, defaults, --json, hints, usage errors, doctor."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import PYNOX, PYTHON, pynox, python, run
from support.pool_client import descendants, wait_gone

from pynox.cli.doctor import _landlock_reason
from pynox.engine.scratch import VARIABLES as SCRATCH_VARIABLES

PYTHON_VERSION = ".".join(str(part) for part in sys.version_info[:3])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def result_of(proc: subprocess.CompletedProcess[bytes]) -> dict:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


# --- --version, --help, usage -------------------------------------------------------


def test_version_names_pynox_and_the_interpreter() -> None:
    for flag in ("--version", "-V"):
        proc = pynox(flag)
        expected = f"pynox 0.1.0 (CPython {PYTHON_VERSION})\n"
        assert proc.returncode == 0
        assert proc.stdout.decode() == expected


def test_version_with_more_says_to_give_it_alone() -> None:
    """-V is pynox's --version, not an interpreter option the sandbox lacks: following
    --no-sandbox would print Python's version alone."""
    for argv in (["--version", "app.py"], ["-V", "app.py"], ["--json", "-V"]):
        proc = pynox(*argv)
        assert proc.returncode == 2, argv
        flag = "-V" if "-V" in argv else "--version"
        assert proc.stderr.decode().splitlines()[0] == (
            f"pynox: {flag} must be given alone, as in: pynox {flag}"
        ), argv


def test_help_and_version_among_python_options_say_to_give_them_alone() -> None:
    """python's -h, -? and -V are pynox's own help and version, not interpreter options
    the sandbox lacks: following --no-sandbox would print python's help instead."""
    for argv in (["-B", "-h"], ["-B?"], ["-B", "--help"], ["-u", "--version"], ["-BV"]):
        proc = pynox(*argv, "app.py")
        flag = argv[-1] if argv[-1].startswith("--") else "-" + argv[-1][-1]
        assert proc.returncode == 2, argv
        assert proc.stderr.decode() == f"pynox: {flag} must be given alone, as in: pynox {flag}\n"
    for flag in ("-h", "-?"):
        proc = pynox(flag)
        assert proc.returncode == 0 and proc.stdout.startswith(b"usage: pynox "), flag


def test_help_shows_the_commands_as_the_commands_page_does() -> None:
    """Every form of the command, as docs/commands.md lists them (a long one may wrap)."""
    usage = pynox("--help").stdout.decode().split("\n\n")[0]
    shown = re.sub(r"\n {10,}", " ", usage.removeprefix("usage: ")).splitlines()
    page = (Path(__file__).parents[1] / "docs" / "commands.md").read_text()
    documented = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.strip() for line in shown] == documented


def test_help_lists_every_flag() -> None:
    proc = pynox("--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    for flag in (
        "--allow-read",
        "--allow-write",
        "--package-dir",
        "--allow-env",
        "--allow-network",
        "--timeout",
        "--memory",
        "--max-output",
        "--max-file-size",
        "--config",
        "--profile",
        "--json",
        "--no-sandbox",
    ):
        assert flag in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["--allow-reed=x", "a.py"],
            "pynox does not take --allow-reed; did you mean --allow-read?",
        ),
        (
            ["--zzz", "a.py"],
            "pynox does not take --zzz; run pynox --help to see the flags it takes",
        ),
        (["-allow-read=x", "a.py"], "pynox does not take -allow-read; did you mean --allow-read?"),
        (["pool", "--worker=1"], "pynox pool does not take --worker; did you mean --workers?"),
        (["pool", "--zzz"], "pynox pool does not take --zzz; it takes --config"),
        # Every command refuses a flag in the same words.
        (["mcp", "--wrkers=2"], "pynox mcp does not take --wrkers; did you mean --workers?"),
        (["doctor", "--jsn"], "pynox doctor does not take --jsn; did you mean --json?"),
        # Digits that str.isdigit() takes and int() does not: still a usage error.
        (["pool", "--workers=²"], "--workers=² is not a whole number of at least 1; give one"),
        (["pool", "--workers=0"], "--workers=0 is not a whole number of at least 1; give one"),
        (["pool", "--workers=٣"], "--workers=٣ is not a whole number of at least 1"),
        # Past int()'s 4300 digits: a sentence, not int()'s own error.
        (["pool", f"--workers={'9' * 5000}"], "is more than any machine can run; give a number"),
        (["--timeout=abc", "-c", "pass"], "--timeout=abc is not a duration"),
        # Enforced in whole milliseconds, a shorter limit would be reported as none (0 ms).
        (["--json", "--timeout=0.4ms", "-c", "pass"], "--timeout=0.4ms is below the 1ms minimum"),
        (["--memory=1m", "-c", "pass"], "below the 32m minimum"),
        (["--max-output=1g", "-c", "pass"], "--max-output"),
        (["-O", "a.py"], "-O needs --no-sandbox"),
        # The hint keeps the option as given: -OO is not -O.
        (["-OO", "a.py"], "-O needs --no-sandbox (pynox --no-sandbox -OO ...)"),
        (["-BX", "dev", "a.py"], "-X needs --no-sandbox (pynox --no-sandbox -BX ...)"),
        (["-X", "dev", "a.py"], "-X needs --no-sandbox"),
        (["-Werror", "a.py"], "-W needs --no-sandbox"),  # -W's value, not a flag's typo
        (["-Xperf", "a.py"], "-X needs --no-sandbox"),
        (["-We", "a.py"], "-W needs --no-sandbox"),
        # python takes no -z (nor -J, kept for Jython): --no-sandbox would not help.
        (["-Bz", "a.py"], "unknown option -z: python has no such option either"),
        (["-J", "a.py"], "unknown option -J: python has no such option either"),
        *([(["-P", "a.py"], "-P: python")] if sys.version_info < (3, 11) else []),
        (["--json=1", "a.py"], "--json takes no value"),
        (["--allow-read"], "--allow-read needs a value"),
        (["--allow-read=/x", "--no-sandbox", "a.py"], "--no-sandbox must come first"),
        (["--no-sandbox=1", "a.py"], "--no-sandbox takes no value; write it alone"),
        (["-c"], "-c needs code"),
        (["-B", "--timeout"], "--timeout needs a value, as in --timeout=VALUE, before Python's"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(args: list[str], fragment: str) -> None:
    proc = pynox(*args)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("pynox: "), stderr
    assert fragment in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "--foo", "a.py"],
        ["--foo", "--json", "a.py"],
        ["--timeout", "1s", "--json", "-O", "a.py"],
        ["--json", "-c"],
        ["--json", "--version"],
    ],
    ids=" ".join,
)
def test_a_command_line_refused_under_json_still_gets_its_json_result(args: list[str]) -> None:
    """Automation that asked for JSON reads the refusal from stdout, as it does a bad value."""
    proc = pynox(*args)
    assert proc.returncode == 2
    line = proc.stderr.decode()
    assert line.count("\n") == 1 and line.startswith("pynox: "), line
    result = json.loads(proc.stdout)
    assert result["exit"] == 2
    assert result["error"]["type"] == "UsageError"
    assert f"pynox: {result['error']['message']}\n" == line


@pytest.mark.parametrize(
    "flag", [["--allow-write=out"], ["--allow-write", "out"], ["--json"]], ids=" ".join
)
def test_a_flag_after_python_options_is_shown_where_it_goes(
    tmp_path: Path, flag: list[str]
) -> None:
    """pynox's flags come before Python's options; the refusal gives the command that works."""
    (tmp_path / "out").mkdir()
    write(tmp_path / "a.py", "open('out/made.txt', 'w').write('made')\nprint('ran')\n")
    proc = pynox("-B", *flag, "a.py", "arg one", cwd=tmp_path)
    assert proc.returncode == 2
    prefix = f"pynox: {flag[0].partition('=')[0]} is one of pynox's flags, which go before "
    stderr = proc.stderr.decode()
    assert stderr.startswith(prefix + "Python's options: pynox "), stderr
    fixed = shlex.split(stderr.removeprefix(prefix + "Python's options: ").strip())
    assert fixed == ["pynox", *flag, "-B", "a.py", "arg one"]
    proc = run([PYNOX, *fixed[1:]], cwd=tmp_path)
    if "--json" in flag:
        assert json.loads(proc.stdout)["error"]["type"] == "PermissionError"
    else:
        assert (proc.returncode, proc.stdout) == (0, b"ran\n"), proc.stderr
        assert (tmp_path / "out" / "made.txt").read_text() == "made"


@pytest.mark.parametrize("args", [[], ["--allow-read=."], ["-u"], ["--"]])
def test_no_program_on_a_terminal_is_a_usage_error(args: list[str]) -> None:
    """python would start its interactive interpreter; pynox has none, and says so."""
    controller, terminal = os.openpty()
    try:
        proc = subprocess.run([PYNOX, *args], stdin=terminal, capture_output=True, timeout=30)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        "pynox: give a program to run: a script, -c CODE, -m MODULE, or pipe it into "
        "standard input (pynox --help lists the flags; pynox --no-sandbox starts the "
        "interactive interpreter)\n"
    )


@pytest.mark.parametrize(
    ("typo", "fixed"),
    [
        ("--allow-reed", "--allow-read"),
        ("-allow-read", "--allow-read"),
        ("--allow_read", "--allow-read"),
    ],
)
def test_the_suggested_flag_works(tmp_path: Path, typo: str, fixed: str) -> None:
    data = write(tmp_path / "data" / "note.txt", "granted")
    script = write(tmp_path / "app" / "a.py", f"print(open({str(data)!r}).read())\n")
    proc = pynox(f"{typo}={data.parent}", str(script))
    assert proc.returncode == 2
    assert proc.stderr.decode().endswith(f"did you mean {fixed}?\n"), proc.stderr
    proc = pynox(f"{fixed}={data.parent}", str(script))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"granted\n"


def test_the_suggested_pool_flag_works() -> None:
    proc = pynox("pool", "--worker=1")
    assert (
        proc.stderr.decode()
        == "pynox: pynox pool does not take --worker; did you mean --workers?\n"
    )
    request = b'{"id": 1, "code": "print(6 * 7)"}\n'
    proc = pynox("pool", "--workers=1", input=request)
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert replies[0]["event"] == "ready" and replies[0]["workers"] == 1
    assert replies[1]["id"] == 1 and replies[1]["stdout"] == "42\n"


def test_missing_script_matches_pythons_status(tmp_path: Path) -> None:
    proc = pynox("nope.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode() == (
        f"pynox: can't open file '{tmp_path / 'nope.py'}': [Errno 2] No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["nope.py"], 2),
        (["--allow-reed=x", "-c", "pass"], 2),
        (["-O", "-c", "pass"], 2),
        (["--allow-env=LD_PRELOAD", "-c", "pass"], 125),
    ],
    ids=["missing-script", "unknown-flag", "interpreter-option", "refused-policy"],
)
def test_a_refusal_with_stderr_closed_keeps_its_status(
    args: list[str], status: int, tmp_path: Path
) -> None:
    """python started with standard error closed says nothing and keeps its status
    (python nope.py 2>&- ends with 2): so does pynox, without a line to print."""
    closed = ["sh", "-c", 'exec "$@" 2>&-', "sh"]
    assert run([*closed, PYTHON, "nope.py"], cwd=tmp_path).returncode == 2
    proc = run([*closed, PYNOX, *args], cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (status, b"")


def test_accepted_interpreter_options(tmp_path: Path) -> None:
    script = write(tmp_path / "a.py", "import sys\nprint(sys.path[0] if sys.path else None)\n")
    assert pynox("-B", "-q", "-s", "-E", str(script)).stdout.decode() == f"{tmp_path}\n"
    # -I keeps the script's directory off sys.path, as python -I does.
    isolated = pynox("-I", str(script)).stdout.decode()
    assert isolated != f"{tmp_path}\n"
    assert isolated == run([PYTHON, "-I", str(script)]).stdout.decode()


SHOW_SAFE_PATH = "import sys; print(sys.path[0] if sys.path else None, sys.flags.safe_path)\n"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python takes -P from 3.11 on")
@pytest.mark.parametrize(
    ("options", "safe_path"),
    [(["-P"], ""), (["-BP"], ""), ([], "1"), ([], "0"), ([], ""), (["-E"], "1"), (["-I"], "")],
    ids=["P", "BP", "variable", "variable-0", "neither", "variable-under-E", "I"],
)
@pytest.mark.parametrize("kind", ["script", "code", "module", "stdin"])
def test_safe_path_keeps_the_programs_directory_off_sys_path_like_python(
    tmp_path: Path, kind: str, options: list[str], safe_path: str
) -> None:
    """-P and PYTHONSAFEPATH (set to anything but "", even "0"), which a host may add to
    keep a program from importing what lies beside it: sys.path[0] and sys.flags as
    python gives them, for every kind of program."""
    (tmp_path / "show.py").write_text(SHOW_SAFE_PATH)
    program = {
        "script": [str(tmp_path / "show.py")],
        "code": ["-c", SHOW_SAFE_PATH],
        "module": ["-m", "show"],
        "stdin": ["-"],
    }[kind]
    env = {"PYTHONSAFEPATH": safe_path}
    stdin = SHOW_SAFE_PATH.encode()
    expected = python(*options, *program, cwd=tmp_path, env=env, input=stdin)
    got = pynox(*options, *program, cwd=tmp_path, env=env, input=stdin)
    # Off sys.path, the working directory's module is not found, by python either.
    assert expected.returncode == (1 if kind == "module" and expected.stdout == b"" else 0)
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout), got.stderr


def test_unbuffered_option_interleaves_like_python(tmp_path: Path) -> None:
    script = write(
        tmp_path / "a.py",
        "import sys\nprint('out1')\nprint('err1', file=sys.stderr)\nprint('out2')\n",
    )
    merged = subprocess.run(
        [PYNOX, "-u", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    assert merged.stdout == b"out1\nerr1\nout2\n"


# --- no-sandbox -----------------------------------------------------------------------


def test_no_sandbox_hands_the_command_line_to_cpython(tmp_path: Path) -> None:
    script = write(tmp_path / "a.py", "import sys\nprint(sys.flags.optimize, __debug__)\n")
    proc = pynox("--no-sandbox", "-O", str(script))
    assert proc.returncode == 0
    assert proc.stdout.decode() == "1 False\n"
    secret = write(tmp_path / "secret.txt", "open")
    proc = pynox("--no-sandbox", "-c", f"print(open({str(secret)!r}).read())")
    assert proc.stdout.decode() == "open\n"


# --- grants -------------------------------------------------------------------------


def test_script_directory_is_readable_and_nothing_else(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project / "data.txt", "inside")
    write(tmp_path / "outside.txt", "outside")
    script = write(
        project / "a.py", "print(open('data.txt').read())\nprint(open('../outside.txt').read())\n"
    )
    proc = pynox(str(script), cwd=project)
    assert proc.stdout.decode() == "inside\n"
    assert proc.returncode == 1
    assert "PermissionError" in proc.stderr.decode()
    assert (
        f"pynox: reading {tmp_path / 'outside.txt'} is not allowed; "
        f"grant it with --allow-read={tmp_path / 'outside.txt'}\n"
    ) in proc.stderr.decode()


def test_allow_read_and_allow_write_are_separate(tmp_path: Path) -> None:
    data = write(tmp_path / "data" / "in.txt", "42").parent
    out = tmp_path / "out"
    out.mkdir()
    script = write(
        tmp_path / "job" / "job.py",
        f"n = int(open('{data}/in.txt').read())\nopen('{out}/result.txt', 'w').write(str(n + 1))\n",
    )
    proc = pynox(f"--allow-read={data}", f"--allow-write={out}", str(script))
    assert proc.returncode == 0, proc.stderr
    assert (out / "result.txt").read_text() == "43"
    # Writing never implies reading.
    proc = pynox(f"--allow-write={out}", "-c", f"print(open('{out}/result.txt').read())")
    assert proc.returncode == 1
    assert proc.stderr.decode().endswith(f"--allow-read={out}\n")
    # Reading never implies writing.
    proc = pynox(f"--allow-read={data}", "-c", f"open('{data}/new.txt', 'w')")
    assert proc.returncode == 1
    assert f"--allow-write={data}" in proc.stderr.decode()
    assert not (data / "new.txt").exists()


def test_a_path_granted_for_reading_and_for_writing_gets_both(tmp_path: Path) -> None:
    """The same directory, and the same file, in --allow-read and in --allow-write: the
    sandbox opens each once for one rule with both rights, which must grant both."""
    folder = tmp_path / "both"
    note = write(folder / "note.txt", "a")
    single = write(tmp_path / "single.txt", "b")
    code = (
        "import os\n"
        f"print(open({str(note)!r}).read(), sorted(os.listdir({str(folder)!r})))\n"
        f"open({str(folder / 'new.txt')!r}, 'w').write('c')\n"
        f"os.remove({str(note)!r})\n"
        f"with open({str(single)!r}, 'r+') as file:\n"
        "    print(file.read())\n"
        "    file.write('!')\n"
    )
    grants = [f"--allow-{kind}={path}" for path in (folder, single) for kind in ("read", "write")]
    proc = pynox(*grants, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "a ['note.txt']\nb\n"
    assert (folder / "new.txt").read_text() == "c"
    assert not note.exists()
    assert single.read_text() == "b!"


def test_relative_grants_resolve_against_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "data" / "x.txt", "rel")
    proc = pynox(
        "--json", "--allow-read=data", "-c", "print(open('data/x.txt').read())", cwd=tmp_path
    )
    result = result_of(proc)
    assert result["stdout"] == "rel\n"
    assert result["policy"]["allow_read"] == [str(tmp_path / "data")]


def test_a_grant_flag_reads_a_leading_tilde_as_the_home_directory(tmp_path: Path) -> None:
    """The shell leaves `~` alone after `--allow-read=`; pynox.toml reads it as home."""
    home = tmp_path / "home"
    write(home / "data" / "x.txt", "at home")
    proc = pynox(
        "--json",
        "--allow-read=~/data",
        "-c",
        f"print(open({str(home / 'data' / 'x.txt')!r}).read())",
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    result = result_of(proc)
    assert result["stdout"] == "at home\n", result
    assert result["policy"]["allow_read"] == [str(home / "data")]


def test_grant_of_a_missing_path_is_refused(tmp_path: Path) -> None:
    proc = pynox("--allow-read=missing", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    assert proc.stderr.decode() == (
        f"pynox: cannot grant reading {tmp_path / 'missing'}: it does not exist; "
        "create it first or correct the path\n"
    )


@pytest.mark.parametrize(
    ("grant", "reason"),
    [("file.txt/x", "Not a directory"), ("loop", "Too many levels of symbolic links")],
)
def test_grant_of_an_unreachable_path_says_what_to_do(
    tmp_path: Path, grant: str, reason: str
) -> None:
    write(tmp_path / "file.txt", "x")
    (tmp_path / "loop").symlink_to("loop")
    proc = pynox(f"--allow-read={grant}", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    assert proc.stderr.decode() == (
        f"pynox: cannot grant reading {tmp_path / grant}: pynox cannot reach it ({reason}); "
        "correct the path, or let this user reach it\n"
    )


def test_code_gets_no_implicit_read(tmp_path: Path) -> None:
    write(tmp_path / "x.txt", "x")
    proc = pynox("-c", "open('x.txt').read()", cwd=tmp_path)
    assert proc.returncode == 1
    assert "PermissionError" in proc.stderr.decode()


def test_module_mode_reads_the_working_directory(tmp_path: Path) -> None:
    write(tmp_path / "tool.py", "import sys\nprint('tool', sys.argv[1:])\n")
    proc = pynox("-m", "tool", "a", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "tool ['a', 'b']\n"


def test_package_dir_imports_without_pth_execution(tmp_path: Path) -> None:
    packages = tmp_path / "site"
    write(packages / "greeting" / "__init__.py", "WORD = 'hello'\n")
    write(packages / "evil.pth", "import os; os.environ['PTH_RAN'] = '1'\n")
    code = "import os, greeting\nprint(greeting.WORD, os.environ.get('PTH_RAN'))"
    assert pynox("-c", code).returncode == 1
    proc = pynox(f"--package-dir={packages}", "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "hello None\n"


def test_environment_is_empty_unless_allowed() -> None:
    env = {"SECRET_TOKEN": "s3", "API_KEY": "k1", "LANG": "C.UTF-8", "TZ": "UTC"}
    code = (
        "import os\nfor name in " + repr(SCRATCH_VARIABLES) + ": del os.environ[name]\n"
        "print(sorted(os.environ.items()))"
    )
    # Locale and time zone pass through so text and local time behave as under python.
    locale = "('LANG', 'C.UTF-8'), ('TZ', 'UTC')"
    assert pynox("-c", code, env=env).stdout.decode() == f"[{locale}]\n"
    proc = pynox("--allow-env=API_KEY", "-c", code, env=env)
    assert proc.stdout.decode() == f"[('API_KEY', 'k1'), {locale}]\n"


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "GCONV_PATH"])
def test_loader_variables_are_refused(name: str) -> None:
    proc = pynox(f"--allow-env={name}", "-c", "pass", env={name: "/tmp/x"})
    assert proc.returncode == 125
    assert f"{name} steers the dynamic loader" in proc.stderr.decode()


@pytest.mark.parametrize("name", ["A=B", "API-KEY", "1ABC", "A B"])
def test_an_allow_env_that_names_no_variable_is_a_usage_error(name: str) -> None:
    """As pynox.toml already refused it: A=B is no variable's name, and nothing was passed."""
    proc = pynox(f"--allow-env={name}", "-c", "pass")
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.decode() == (
        f"pynox: --allow-env={name} is not an environment variable name; use letters, digits "
        "and _, not starting with a digit\n"
    )


def test_network_is_off_until_allowed() -> None:
    code = "import socket\ns = socket.socket()\nprint('made')"
    denied = pynox("-c", code)
    assert denied.returncode == 1
    assert "pynox: the network is off; grant it with --allow-network\n" in denied.stderr.decode()
    allowed = pynox("--allow-network", "-c", code)
    assert allowed.returncode == 0 and allowed.stdout == b"made\n"


def test_subprocesses_are_never_allowed() -> None:
    proc = pynox("-c", "import subprocess\nsubprocess.run(['true'])")
    assert proc.returncode == 1
    assert "pynox: processes (subprocess" in proc.stderr.decode()


# --- limits -------------------------------------------------------------------------


def test_timeout_stops_the_program_with_124() -> None:
    started = time.monotonic()
    proc = pynox("--timeout=500ms", "-c", "while True: pass")
    assert time.monotonic() - started < 10
    assert proc.returncode == 124
    assert proc.stderr.decode() == (
        "pynox: the program ran past its 500ms time limit and was stopped; make it faster "
        "or raise the limit with --timeout=1s\n"
    )


def test_the_timeout_hint_names_a_limit_that_lets_the_program_finish() -> None:
    """A limit too short for the interpreter to start: doubling it would still be too short.
    (The program sleeps past the limit: one that only prints can end before a busy
    machine's supervisor gets to its deadline, and then ran whole.)"""
    program = "import time\ntime.sleep(0.2)\nprint('done')"
    proc = pynox("--timeout=1ms", "-c", program)
    assert proc.returncode == 124
    named = re.search(r"raise the limit with (--timeout=\S+)\n", proc.stderr.decode())
    assert named is not None, proc.stderr
    assert named.group(1) == "--timeout=1s"
    followed = pynox(named.group(1), "-c", program)
    assert (followed.returncode, followed.stdout) == (0, b"done\n")


def test_output_before_the_timeout_is_kept_under_pythonunbuffered() -> None:
    """A host that sets PYTHONUNBUFFERED to see output as it comes sees it before the kill."""
    code = "print('progress'); import time; time.sleep(30)"
    proc = pynox("--timeout=500ms", "-c", code, env={"PYTHONUNBUFFERED": "1"})
    assert (proc.returncode, proc.stdout) == (124, b"progress\n")
    # Without it, output to a pipe is block-buffered, as python's is: lost with the process.
    proc = pynox("--timeout=500ms", "-c", code)
    assert (proc.returncode, proc.stdout) == (124, b"")


def test_memory_limit_gives_memoryerror_and_hint() -> None:
    proc = pynox("--memory=64m", "-c", "x = bytearray(256 * 1024 * 1024)")
    assert proc.returncode == 1
    stderr = proc.stderr.decode()
    assert "MemoryError" in stderr
    assert stderr.endswith(
        "pynox: the program used up its 64m memory limit; allocate less or raise the limit "
        "with --memory=128m\n"
    )


@pytest.mark.parametrize("command", [[PYNOX], [PYTHON, "-m", "pynox"]], ids=["launcher", "python"])
@pytest.mark.parametrize(
    "code", ["import os; os._exit(3)", "import posix; posix._exit(3)", "import os; os._exit(0)"]
)
def test_os_exit_under_a_memory_limit_gets_no_hint(
    command: list[str], code: str, tmp_path: Path
) -> None:
    """os._exit is the program ending itself, as under python: its status and nothing
    more, not the line for native code that exits when an allocation fails."""
    status = 0 if code.endswith("(0)") else 3
    code = f"print('kept', flush=True); {code}"
    proc = run([*command, "--memory=64m", "-c", code], cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (status, b"kept\n", b"")
    result = result_of(run([*command, "--memory=64m", "--json", "-c", code], cwd=tmp_path))
    assert (result["exit"], result["stdout"], result["error"]) == (status, "kept\n", None)


@pytest.mark.parametrize(
    "mode", [[], ["--timeout=30s"], ["--json"]], ids=["plain", "timeout", "json"]
)
def test_a_grant_of_proc_self_names_the_program_not_the_supervisor(mode: list[str]) -> None:
    """The hint's --allow-read=/proc/self/... works whether or not a supervisor forks."""
    code = "print(open('/proc/self/status').read().splitlines()[0])"
    denied = pynox(*mode, "-c", code)
    assert denied.returncode == 1
    hint = "--allow-read=/proc/self/status"
    if mode == ["--json"]:
        assert hint in result_of(denied)["error"]["hint"]
    else:
        assert hint in denied.stderr.decode()
    proc = pynox(*mode, "--allow-read=/proc/self/status", "-c", code)
    assert proc.returncode == 0, proc.stderr
    stdout = result_of(proc)["stdout"] if mode == ["--json"] else proc.stdout.decode()
    assert stdout.startswith("Name:\tpython")


def test_max_file_size(tmp_path: Path) -> None:
    code = f"open('{tmp_path}/big', 'wb').write(b'x' * (2 << 20))"
    proc = pynox(f"--allow-write={tmp_path}", "--max-file-size=1m", "-c", code)
    assert proc.returncode == 1
    assert "File too large" in proc.stderr.decode()
    assert "--max-file-size=2m" in proc.stderr.decode()
    assert (tmp_path / "big").stat().st_size <= 1 << 20


# --- --json -------------------------------------------------------------------------


def test_json_result_has_every_field(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    script = write(tmp_path / "job.py", "import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    proc = pynox("--json", f"--allow-read={data}", "--timeout=5s", "--memory=512m", str(script))
    assert proc.returncode == 0
    result = result_of(proc)
    assert set(result) == {
        "exit",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "error",
        "duration_ms",
        "runtime",
        "policy",
    }
    assert result["exit"] == 0 and result["error"] is None
    assert (result["stdout"], result["stderr"]) == ("out\n", "err\n")
    assert result["stdout_truncated"] is False and result["stderr_truncated"] is False
    assert isinstance(result["duration_ms"], int)
    assert result["runtime"] == {
        "name": "pynox",
        "python": PYTHON_VERSION,
        "output": "captured",
    }
    policy = result["policy"]
    assert policy["allow_read"] == [str(data)]
    assert policy["implicit_read"] == [str(tmp_path)]
    assert policy["network"] == "deny" and policy["subprocesses"] == "deny"
    assert policy["host_unix_sockets"] == "deny"
    assert policy["timeout_ms"] == 5000 and policy["memory_bytes"] == 512 << 20
    assert policy["backend"] == "landlock+seccomp"


def test_json_error_object_for_a_denial(tmp_path: Path) -> None:
    script = write(tmp_path / "probe.py", "x = 1\nopen('/etc/hostname').read()\n")
    result = result_of(pynox("--json", str(script)))
    assert result["exit"] == 1
    assert result["error"] == {
        "type": "PermissionError",
        "message": "[Errno 13] Permission denied: '/etc/hostname'",
        "file": str(script),
        "line": 2,
        "path": "/etc/hostname",
        "hint": "reading /etc/hostname is not allowed; grant it with --allow-read=/etc/hostname",
    }
    assert result["stderr"].endswith("pynox: " + result["error"]["hint"] + "\n")


def test_json_keeps_names_that_are_not_utf8_and_replaces_such_output(tmp_path: Path) -> None:
    """docs/commands.md: output is text, each byte that is not UTF-8 U+FFFD; a path keeps
    its name as os.fsdecode spells it, which os.fsencode turns back into the name."""
    folder = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(folder)
    script = folder + b"/probe.py"
    Path(os.fsdecode(script)).write_text("import sys\nsys.stdout.buffer.write(b'\\xff!')")
    result = result_of(pynox("--json", os.fsdecode(script)))
    assert result["stdout"] == "\ufffd!"
    assert [os.fsencode(path) for path in result["policy"]["implicit_read"]] == [folder]


def test_json_stdin_is_dev_null() -> None:
    result = result_of(pynox("--json", "-c", "import sys\nprint(repr(sys.stdin.read()))"))
    assert result["stdout"] == "''\n"


def test_json_truncates_output_at_max_output() -> None:
    proc = pynox("--json", "--max-output=100", "-c", "print('x' * 1000)")
    result = result_of(proc)
    # Its head and its tail, half the room each, around the line saying what was left out.
    assert result["stdout"] == "x" * 34 + "\n[... 932 bytes left out ...]\n" + "x" * 34 + "\n"
    assert result["stdout_truncated"] is True and result["stderr_truncated"] is False


def test_json_timeout_and_signal() -> None:
    result = result_of(pynox("--json", "--timeout=300ms", "-c", "while True: pass"))
    assert result["exit"] == 124 and result["error"]["type"] == "Timeout"
    result = result_of(pynox("--json", "-c", "import os, signal\nos.kill(os.getpid(), 11)"))
    assert result["exit"] == 128 + signal.SIGSEGV
    assert result["error"]["type"] == "Signal" and "SIGSEGV" in result["error"]["message"]


def test_json_exit_status_and_systemexit() -> None:
    proc = pynox("--json", "-c", "raise SystemExit(7)")
    assert proc.returncode == 7
    result = result_of(proc)
    assert result["exit"] == 7 and result["error"] is None


# --- signals and status -------------------------------------------------------------


def test_signal_death_is_passed_on() -> None:
    proc = pynox("-c", "import os\nos.kill(os.getpid(), 9)")
    assert proc.returncode == -signal.SIGKILL


def test_sigint_reaches_the_program(tmp_path: Path) -> None:
    # Short sleeps, not one long one: CPython notices a signal that lands after its last
    # check and before the sleep's system call only once that call returns (python itself
    # then sleeps on, as seen under load), so a long sleep would make this test flaky.
    script = write(
        tmp_path / "wait.py",
        "import time\ntry:\n    print('ready', flush=True)\n"
        "    for _ in range(600):\n        time.sleep(0.05)\n"
        "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise\n",
    )
    child = subprocess.Popen(
        [PYNOX, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=20)
    assert out == b"interrupted\n"
    assert b"KeyboardInterrupt" in err
    assert child.returncode == -signal.SIGINT


def test_ctrl_c_during_pynox_s_start_up_shows_none_of_pynox(tmp_path: Path) -> None:
    """A Ctrl-C while pynox loads its own modules (simulated: loading them raises
    KeyboardInterrupt) ends the run by SIGINT, as python ends on one, with no traceback
    of pynox's start-up: it says nothing the user could act on."""
    start = (
        "from pynox import _boot\n"
        "def interrupted():\n"
        "    raise KeyboardInterrupt\n"
        "_boot._load_image = interrupted\n"
        "_boot.main()\n"
    )
    proc = run([PYTHON, "-c", start, "-c", "print('never')"], cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (-signal.SIGINT, b"", b"")


def test_ctrl_c_before_the_program_runs_ends_pynox_by_sigint(tmp_path: Path) -> None:
    """A Ctrl-C while pynox reads its command line, configuration or a program on standard
    input (simulated: that raises KeyboardInterrupt) ends the run by SIGINT, as python
    ends on one: a shell running pynox in a loop stops, where an exit status of 130 would
    let it go on to the next command."""
    start = (
        "from pynox._boot import main\n"
        "from pynox.cli import main as command\n"
        "def interrupted(argv):\n"
        "    raise KeyboardInterrupt\n"
        "command.dispatch = interrupted\n"
        "main()\n"
    )
    proc = run([PYTHON, "-c", start, "-c", "print('never')"], cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (-signal.SIGINT, b"", b"")


def test_killing_the_supervisor_kills_the_program(tmp_path: Path) -> None:
    marker = tmp_path / "alive"
    marker.mkdir()
    script = write(
        tmp_path / "a.py",
        "import time\nprint('ready', flush=True)\ntime.sleep(2)\n"
        f"open('{marker}/late', 'w').write('x')\n",
    )
    child = subprocess.Popen(
        [PYNOX, f"--allow-write={marker}", str(script)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    # The program's process: the interpreter pynox started, not the scratch helper (a copy
    # of the launcher with its command line).
    (program,) = [
        pid
        for pid in descendants(child.pid)
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != PYNOX.encode()
    ]
    child.kill()
    child.wait()
    # Killed with pynox, it is gone at once; spared, it would write "late" 2 s on, then end.
    wait_gone([program], 30)
    assert not (marker / "late").exists()


# --- doctor -------------------------------------------------------------------------


def test_doctor_reports_the_kernel() -> None:
    proc = pynox("doctor", "--json")
    report = json.loads(proc.stdout)
    for key in (
        "python",
        "architecture",
        "platform_tag",
        "landlock_abi",
        "seccomp",
        "pidfd",
        "sandbox_supported",
        "sandbox_unavailable_reasons",
    ):
        assert key in report
    assert report["sandbox_supported"] is (proc.returncode == 0)
    assert report["sandbox_supported"] == (report["sandbox_unavailable_reasons"] == [])
    text = pynox("doctor").stdout.decode()
    assert re.search(r"^landlock_abi: \d+$", text, re.M)
    assert "sandbox_supported:" in text


def test_doctor_says_no_where_runs_cannot_make_their_scratch_directory(tmp_path: Path) -> None:
    """Every run makes one in TMPDIR first: a host where it cannot would fail every run,
    so the doctor must not answer yes (deploy.md: its exit status is the answer)."""
    (tmp_path / "here").mkdir()
    fine = pynox("doctor", "--json", env={"TMPDIR": str(tmp_path / "here")})
    assert json.loads(fine.stdout)["scratch_directories"] == str(tmp_path / "here")
    denied = pynox("doctor", "--json", env={"TMPDIR": "/proc"})
    report = json.loads(denied.stdout)
    assert denied.returncode == 1 and report["sandbox_supported"] is False
    assert any(
        reason.startswith("runs cannot make their scratch directory in /proc")
        for reason in report["sandbox_unavailable_reasons"]
    ), report
    run = pynox("-c", "print(1)", env={"TMPDIR": "/proc"})
    assert run.returncode == 125  # what the doctor foretold
    # Following the reason's advice: a TMPDIR this user may write to.
    followed = pynox("doctor", "--json", env={"TMPDIR": str(tmp_path / "here")})
    assert followed.returncode == 0 and json.loads(followed.stdout)["sandbox_supported"]
    ran = pynox("-c", "print(1)", env={"TMPDIR": str(tmp_path / "here")})
    assert (ran.returncode, ran.stdout) == (0, b"1\n")


def test_doctor_says_no_where_every_user_may_swap_a_run_s_directory(tmp_path: Path) -> None:
    """A TMPDIR every user may write without the sticky bit refuses every run: the doctor
    says so, and its advice (chmod +t) makes both answer yes."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = {"TMPDIR": str(shared)}
    report = json.loads(pynox("doctor", "--json", env=env).stdout)
    assert report["sandbox_supported"] is False
    reasons = report["sandbox_unavailable_reasons"]
    assert any(f"or run chmod +t {shared}" in reason for reason in reasons), reasons
    assert pynox("-c", "print(1)", env=env).returncode == 125  # what the doctor foretold
    shared.chmod(0o1777)
    assert json.loads(pynox("doctor", "--json", env=env).stdout)["sandbox_supported"] is True
    assert pynox("-c", "print(1)", env=env).stdout == b"1\n"


# What both the doctor and a refused run say to do when capabilities cannot be dropped.
CAPABILITIES_ADVICE = (
    "start pynox with no capabilities (no ambient or file capabilities), or with CAP_SETPCAP too"
)


def test_doctor_says_no_where_pynox_holds_capabilities_it_cannot_drop() -> None:
    """A process that holds capabilities but not CAP_SETPCAP (root in a container that
    leaves it out, a service given ambient capabilities) cannot drop them all, so every
    run is refused: the doctor says so first, and a run says what to do."""
    if os.geteuid() != 0:
        pytest.skip("only root can start pynox with capabilities but without CAP_SETPCAP")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv (util-linux) to leave CAP_SETPCAP out")
    without_setpcap = [setpriv, "--bounding-set=-setpcap"]
    doctor = run([*without_setpcap, PYNOX, "doctor", "--json"])
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1 and report["sandbox_supported"] is False
    reasons = report["sandbox_unavailable_reasons"]
    assert any(reason.endswith(CAPABILITIES_ADVICE) for reason in reasons), reasons
    refused = run([*without_setpcap, PYNOX, "-c", "print(1)"])
    assert (refused.returncode, refused.stdout) == (125, b"")
    assert refused.stderr.decode() == (
        "pynox: cannot apply the sandbox: the process holds capabilities but not CAP_SETPCAP, "
        f"which dropping them all takes; {CAPABILITIES_ADVICE}\n"
    )
    assert json.loads(pynox("doctor", "--json").stdout)["sandbox_supported"] is True


def test_doctor_with_stdout_closed_answers_by_its_status() -> None:
    closed = run(["sh", "-c", f'exec "{PYNOX}" doctor >&-'])
    assert (closed.returncode, closed.stderr) == (0, b"")


@pytest.mark.parametrize(
    ("errno_value", "fix"),
    [
        (errno.ENOSYS, "natively or in a container that allows landlock_create_ruleset"),
        (errno.EPERM, "run in a container that allows landlock_create_ruleset"),
        (errno.EOPNOTSUPP, "add landlock to lsm="),
    ],
)
def test_doctor_says_what_to_do_when_landlock_is_refused(errno_value: int, fix: str) -> None:
    """A container's seccomp profile refuses Landlock with ENOSYS or EPERM on a kernel
    that has it (deploy.md); the reason must point there, not only at the kernel."""
    reason = _landlock_reason(-errno_value)
    assert reason is not None and fix in reason


def test_doctor_rejects_unknown_arguments() -> None:
    proc = pynox("doctor", "--verbose")
    assert proc.returncode == 2
    assert (
        proc.stderr.decode()
        == "pynox: pynox doctor does not take --verbose; it takes only --json\n"
    )


def test_doctor_help_prints_its_usage() -> None:
    proc = pynox("doctor", "--help")
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout.decode().startswith("usage: pynox doctor [--json]\n")


def test_pool_help_prints_its_usage() -> None:
    proc = pynox("pool", "--help")
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout.decode().startswith("usage: pynox pool [--config FILE] [--workers N]")


def test_stdin_program() -> None:
    proc = run([PYNOX, "-", "a1"], input=b"import sys\nprint(sys.argv)\n")
    assert proc.stdout == b"['-', 'a1']\n"


def test_piped_program_gets_the_grants(tmp_path: Path) -> None:
    """With no program named, the piped one runs under the flags given."""
    data = write(tmp_path / "data.txt", "granted")
    program = f"print(open({str(data)!r}).read())\n".encode()
    denied = run([PYNOX], input=program, cwd=tmp_path)
    assert denied.returncode == 1 and b"PermissionError" in denied.stderr
    assert b'File "<stdin>", line 1' in denied.stderr
    allowed = run([PYNOX, f"--allow-read={tmp_path}"], input=program)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == b"granted\n"
    result = result_of(run([PYNOX, "--json", "-q"], input=b"import sys\nprint(sys.argv)\n"))
    assert result["exit"] == 0 and result["stdout"] == "['']\n"


@pytest.mark.parametrize("args", [[], ["-"]])
def test_program_from_a_file_on_stdin_like_python(tmp_path: Path, args: list[str]) -> None:
    """A file as stdin: python honours its coding declaration and leaves stdin at its end."""
    source = "# -*- coding: latin-1 -*-\nimport sys\nprint('caf\xe9', repr(sys.stdin.read()))\n"
    program = tmp_path / "prog.py"
    program.write_bytes(source.encode("latin-1"))
    outcomes = []
    for command in ([PYTHON, *args], [PYNOX, *args]):
        with program.open("rb") as stdin:
            proc = subprocess.run(command, stdin=stdin, capture_output=True, timeout=30)
        outcomes.append((proc.returncode, proc.stdout, proc.stderr))
    assert outcomes[0] == (0, "café ''\n".encode(), b"")
    assert outcomes[1] == outcomes[0]


@pytest.mark.parametrize("declared", ["latin-1", "ascii"])
def test_piped_program_with_a_coding_declaration_stops_as_under_python(declared: str) -> None:
    """python cannot seek back in a pipe to read on in a declared encoding other than
    UTF-8, and stops before running anything; so does pynox, though it has the program."""
    source = f"# -*- coding: {declared} -*-\nprint('ran')\n".encode()
    ref = run([PYTHON], input=source)
    assert ref.returncode == 1 and b"encoding problem" in ref.stderr
    got = run([PYNOX], input=source)
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)


@pytest.mark.parametrize("args", [[], ["-"], ["-u"]])
def test_closed_stdin_runs_an_empty_program_like_python(args: list[str]) -> None:
    closed = ["sh", "-c", 'exec "$@" <&-', "sh"]
    ref = run([*closed, PYTHON, *args])
    got = run([*closed, PYNOX, *args])
    assert (ref.returncode, ref.stdout, ref.stderr) == (0, b"", b"")
    assert (got.returncode, got.stdout, got.stderr) == (0, b"", b"")


def test_launcher_passes_arguments_through_unchanged(tmp_path: Path) -> None:
    script = write(tmp_path / "a.py", "import sys\nprint(sys.argv[1:])\n")
    args = ["--json", "-c", "x y", "--allow-read=/", ""]
    proc = pynox(str(script), *args)
    assert proc.stdout.decode() == repr(args) + "\n"


def test_pynox_runs_from_a_symlink_on_path(tmp_path: Path) -> None:
    link = tmp_path / "bin" / "pynox"
    link.parent.mkdir()
    os.symlink(PYNOX, link)
    proc = run([str(link), "-c", "print('via link')"])
    assert proc.stdout == b"via link\n"


def test_json_refusal_is_a_result_too(tmp_path: Path) -> None:
    proc = pynox("--json", "--allow-read=missing", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 125
    result = result_of(proc)
    assert result["exit"] == 125 and result["stdout"] == "" and result["policy"] is None
    assert result["error"]["type"] == "PolicyError"
    assert result["error"]["message"].startswith(f"cannot grant reading {tmp_path / 'missing'}")
    assert proc.stderr.decode().startswith("pynox: cannot grant reading")


# --- parsing, in process -------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "target", "args"),
    [([], "", []), (["-u", "--"], "", []), (["-"], "-", []), (["--json", "-", "a"], "-", ["a"])],
)
def test_stdin_is_the_program_when_none_is_named(
    argv: list[str], target: str, args: list[str]
) -> None:
    from pynox.cli.arguments import parse

    inv = parse(argv, stdin_is_terminal=lambda: False)
    assert (inv.kind, inv.target, inv.args) == ("stdin", target, args)


@pytest.mark.unit
def test_no_program_and_a_terminal_is_refused_in_process() -> None:
    from pynox.cli.arguments import parse
    from pynox.errors import UsageError

    with pytest.raises(UsageError, match="give a program to run"):
        parse(["--allow-read=."], stdin_is_terminal=lambda: True)
    with pytest.raises(UsageError, match="give a program to run"):
        parse(["-", "arg"], stdin_is_terminal=lambda: True)  # python would start its REPL
    assert parse(["-", "arg"], stdin_is_terminal=lambda: False).kind == "stdin"
    # A named program never asks about the terminal.
    assert parse(["a.py"], stdin_is_terminal=lambda: 1 / 0).kind == "script"  # type: ignore[arg-type,return-value]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("--allow-net", "--allow-network"),
        ("--timout=5s", "--timeout"),
        ("--package-dirs=x", "--package-dir"),
        ("--jsn", "--json"),
        ("--profle=ci", "--profile"),
    ],
)
def test_mistyped_flags_get_the_closest_one(typo: str, suggestion: str) -> None:
    from pynox.cli.arguments import parse
    from pynox.errors import UsageError

    with pytest.raises(UsageError) as caught:
        parse([typo, "a.py"], stdin_is_terminal=lambda: False)
    name = typo.partition("=")[0]
    assert caught.value.message == f"pynox does not take {name}; did you mean {suggestion}?"


@pytest.mark.parametrize(
    "command", [[PYNOX], [sys.executable, "-m", "pynox"]], ids=["launcher", "python -m"]
)
@pytest.mark.parametrize("closed", ["2>&-", "<&-", "<&- 2>&-"])
def test_json_captures_what_the_caller_closed(
    tmp_path: Path, command: list[str], closed: str
) -> None:
    """Under --json the program's stderr is captured and its stdin is /dev/null, whatever
    the caller left closed: a traceback is never lost."""
    code = "import sys; print(repr(sys.stdin.read())); print('said', file=sys.stderr); 1/0"
    proc = subprocess.run(
        ["sh", "-c", f'exec "$@" {closed}', "sh", *command, "--json", "-c", code],
        cwd=tmp_path, capture_output=True, timeout=60,
    )  # fmt: skip
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["exit"]) == (1, 1)
    assert result["stdout"] == "''\n"
    assert result["stderr"].startswith("said\nTraceback (most recent call last):\n")
    assert result["stderr"].endswith("ZeroDivisionError: division by zero\n")


@pytest.mark.parametrize(
    "command", [[PYNOX], [sys.executable, "-m", "pynox"]], ids=["launcher", "python -m"]
)
@pytest.mark.parametrize("stdout", [">&-", ">/dev/full"], ids=["closed", "full"])
def test_a_json_result_that_cannot_be_written_ends_with_status_1(
    tmp_path: Path, command: list[str], stdout: str
) -> None:
    """The program's own status when it failed; 1 for one that succeeded. Never an internal
    error: where the result was to go is the caller's to fix."""
    for code, status in (("print(1)", 1), ("raise SystemExit(3)", 3)):
        proc = subprocess.run(
            ["sh", "-c", f'exec "$@" {stdout}', "sh", *command, "--json", "-c", code],
            cwd=tmp_path, capture_output=True, timeout=60,
        )  # fmt: skip
        assert (proc.returncode, proc.stderr) == (status, b""), proc.stderr


@pytest.mark.parametrize(
    ("command", "env"),
    [
        ([PYNOX], {"PYTHONINSPECT": "1"}),
        ([sys.executable, "-m", "pynox"], {"PYTHONINSPECT": "1"}),
        ([sys.executable, "-i", "-m", "pynox"], {}),
    ],
    ids=["launcher", "python -m", "python -i -m"],
)
def test_inspect_mode_ends_a_run_with_the_programs_status(
    tmp_path: Path, command: list[str], env: dict[str, str]
) -> None:
    """Under PYTHONINSPECT (or -i), with no terminal to inspect from, `python app.py` ends
    with the program's status; pynox, which has no interactive interpreter, does too,
    rather than showing the SystemExit that ends its process as an error of its own."""
    environ = {**os.environ, **env}
    for code, status in (("print('ran')", 0), ("print('ran'); raise SystemExit(3)", 3)):
        proc = subprocess.run(
            [*command, "-c", code], cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
            capture_output=True, timeout=60,
        )  # fmt: skip
        assert (proc.returncode, proc.stdout, proc.stderr) == (status, b"ran\n", b"")
        proc = subprocess.run(
            [*command, "--json", "-c", code], cwd=tmp_path, env=environ,
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
        result = json.loads(proc.stdout)
        assert (result["exit"], result["stderr"]) == (status, "")


# What a program finds its standard streams to be, and changes its stdout's encoding as
# many scripts do first thing; under python into a pipe, what --json gives it.
SEEKS_AND_RECONFIGURES = """\
import sys
print(sys.stdin.seekable(), sys.stdout.seekable(), sys.stderr.seekable())
sys.stdout.reconfigure(encoding="utf-8", errors="replace")
print(sys.stdout.tell() if sys.stdout.seekable() else "no tell")
"""


@pytest.mark.parametrize(
    "command", [[PYNOX], [sys.executable, "-m", "pynox"]], ids=["launcher", "python -m"]
)
def test_json_gives_the_program_streams_of_its_pipes_whatever_the_callers_were(
    tmp_path: Path, command: list[str]
) -> None:
    """A caller that writes the result to a file: the program's stdout and stderr are still
    pipes, which cannot seek, and its stdin the null device, which can. A stream made for
    the caller's file would take a pipe for one, and reconfigure() would fail on it."""
    result_file, log = tmp_path / "result.json", tmp_path / "log"
    with result_file.open("wb") as out, log.open("wb") as err:
        proc = subprocess.run(
            [*command, "--json", "-c", SEEKS_AND_RECONFIGURES],
            cwd=tmp_path, stdin=subprocess.PIPE, stdout=out, stderr=err, timeout=60,
        )  # fmt: skip
    result = json.loads(result_file.read_bytes())
    assert (proc.returncode, result["stderr"], log.read_bytes()) == (0, "", b"")
    assert result["stdout"] == "True False False\nno tell\n"
