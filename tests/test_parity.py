"""Parity with CPython: `pynox PROGRAM` must behave exactly like `python PROGRAM`.

Every `*.py` file at the top of tests/parity/ whose name does not start with `_`
is one case (the `_*.py` modules, helperpkg/, app_dir/ and the data files are
what the cases import, run or read). Each case runs under `python` and under
`pynox` from the same working directory, a fresh copy of the corpus, so the
implicit read grant of the script's directory covers the data files; stdout,
stderr and the exit status must be equal byte for byte.

The tables below give a case's arguments, standard input, interpreter options,
whether stderr is merged into stdout (to see how each stream is buffered), and
the exit status CPython gives, so that a case fails also when both runs go
wrong the same way. Command lines that are not a single corpus file (-c, -m,
-, a directory, a zip application, interpreter options) are in INVOCATIONS.
"""

from __future__ import annotations

import fcntl
import json
import os
import py_compile
import re
import shutil
import signal
import stat
import subprocess
import termios
import time
import zipapp
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.commands import PYNOX, PYTHON, ignoring, limiting_open_files, pynox, python, run
from support.paths import TESTS

from pynox.limits import DEFAULT_MAX_OUTPUT

CORPUS = TESTS / "parity"

# A plain `pynox FILE` runs the program in the pynox process itself; with a
# timeout (or --json, tested below) pynox forks a supervised child. Both must
# behave like python.
MODES = {"in-process": [], "supervised": ["--timeout=60s"]}


@dataclass(frozen=True)
class Case:
    args: list[str] = field(default_factory=list)  # after the program
    options: list[str] = field(default_factory=list)  # interpreter options, before it
    stdin: bytes | None = None
    status: int = 0  # CPython's exit status (negative: killed by that signal)
    merge: bool = False  # stderr into stdout: the interleaving must match too
    # stdout into `head -n 1`, which exits early: the program meets a broken
    # pipe; the wrapper prints the program's exit status on stdout.
    pipe_to_head: bool = False
    # Replace the program name before "No module named x" or "can't open file":
    # python names its own executable (python or python3, as started), pynox
    # may name itself; the rest of the line must be equal.
    normalize_executable: bool = False
    env: dict[str, str] = field(default_factory=dict)  # added to the clean environment


# Corpus files that need more than `python FILE`; every other case ends with status 0.
CASES: dict[str, Case] = {
    "argv_args.py": Case(args=["one", "two words", "", "--flag", "-x", "ünï", "a=b", "-"]),
    "input_stdin.py": Case(stdin="Ada\n36\nremaining line 1\nline 2 é\n".encode()),
    "stdio_properties.py": Case(stdin=b"stdin data\n"),
    "site_builtins.py": Case(stdin=b"q\n"),
    "stderr_interleave.py": Case(merge=True),
    "large_output.py": Case(merge=False),
    "exc_zerodiv.py": Case(status=1),
    "exc_after_buffered_output.py": Case(status=1, merge=True),
    "exc_memory_error.py": Case(status=1),  # no limit was set: no pynox line
    "exc_import_system_broken.py": Case(status=1),
    "exc_nested_sibling.py": Case(status=1),
    "exc_chain_from.py": Case(status=1),
    "exc_chain_implicit.py": Case(status=1),
    "exc_suppressed_context.py": Case(status=1),
    "exc_group.py": Case(status=1),
    "exc_with_temporary_file.py": Case(status=1),
    "exc_finalizer_in_failed_frame.py": Case(status=1),
    "exc_notes.py": Case(status=1),
    "exc_last_traceback_at_exit.py": Case(status=1),
    "exc_hostile_traceback.py": Case(status=1),
    "exc_hostile_attributes.py": Case(status=1),
    "exc_hostile_module_name.py": Case(status=1),
    "excepthook_override.py": Case(status=1),
    "excepthook_fails.py": Case(status=1),
    "excepthook_missing.py": Case(status=1),
    "excepthook_none.py": Case(status=1),
    "excepthook_exits.py": Case(status=5),
    "source_not_utf8.py": Case(status=1),
    "source_unknown_encoding.py": Case(status=1),
    "source_undecodable.py": Case(status=1),
    "syntax_error_main.py": Case(status=1),
    "syntax_error_import.py": Case(status=1),
    "recursion_error.py": Case(status=1),
    "exit_code_3.py": Case(status=3),
    "exit_message.py": Case(status=1),
    "exit_systemexit_true.py": Case(status=1),
    "exit_builtin.py": Case(status=7),
    "exit_in_atexit.py": Case(status=2),
    "keyboard_interrupt.py": Case(status=-signal.SIGINT),
    "os_exit_unflushed.py": Case(status=4),
    "main_guard.py": Case(args=["--verbose", "file.txt"]),
}

_CODE = (
    "import sys\n"
    "print(sys.argv, __name__, '__file__' in globals(), type(__loader__).__name__)\n"
    "print(sys.path[0] == '', [k for k in globals() if k != 'sys'])\n"
)

# A program on standard input: python reads all of it first, so the program
# finds stdin at its end (input() raises EOFError) wherever it came from.
_STDIN_PROGRAM = b"""\
import sys
print(sys.argv, __name__, __file__, __cached__, sys.path[0] == '', list(globals()))
print(repr(sys.stdin.read()))
try:
    input('more? ')
except EOFError as exc:
    print('EOFError', repr(exc))
print('leftover line, never read as input')
"""

_FLAGS_CODE = (CORPUS / "interpreter_flags.py").read_text()

# Command lines other than a single corpus file, run in the corpus copy.
INVOCATIONS: dict[str, Case] = {
    "c-code-with-args": Case(options=["-c", _CODE], args=["a", "-b", "--c", ""]),
    "c-code-raises": Case(options=["-c", "def f():\n    return 1 / 0\nf()\n"], status=1),
    "c-code-sys-exit": Case(options=["-c", "import sys; sys.exit('bye')"], status=1),
    # python -c and -m print the traceback, or SystemExit's message, before the output
    # they buffered; a script prints it after.
    "c-code-raises-after-output": Case(
        options=["-c", "print('buffered'); 1 / 0"], status=1, merge=True
    ),
    "c-code-sys-exit-after-output": Case(
        options=["-c", "import sys; print('buffered'); sys.exit('bye')"], status=1, merge=True
    ),
    "m-module-sys-exit-after-output": Case(options=["-m", "exit_message"], status=1, merge=True),
    "exit-message-after-output": Case(options=["exit_message.py"], status=1, merge=True),
    # license() pages its text and asks for Return: at EOF it raises from site's own code,
    # and the traceback is python's, with no frame of pynox's stand-in for it.
    "c-code-license-at-eof": Case(options=["-c", "license()"], status=1),
    # The compiler's warnings show no line of -c code (it is kept for tracebacks once it
    # compiled); a warning while it runs shows its line.
    "c-code-syntax-warnings": Case(
        options=["-c", "x = '\\d'\nassert (x, 'm')\nimport warnings; warnings.warn('w')"]
    ),
    "c-code-credits": Case(options=["-c", "credits(); print(repr(copyright)[:40])"]),
    # Bytes that are not UTF-8 (0xe9, passed as the surrogate that stands for it): python
    # runs none of it, even in a comment.
    "c-code-bytes-not-utf8": Case(options=["-c", "print('before')\n#caf\udce9"], status=1),
    "c-code-bytes-not-utf8-in-a-string": Case(options=["-c", "print('caf\udce9')"], status=1),
    "m-corpus-module": Case(options=["-m", "main_guard"], args=["x", "--y"]),
    "m-c-recursion-depth": Case(options=["-m", "c_recursion_depth"]),
    "m-corpus-module-raises": Case(options=["-m", "exc_nested_sibling"], status=1),
    "m-package-main": Case(options=["-m", "helperpkg"], args=["pkg-arg"]),
    "m-stdlib-json-tool": Case(
        options=["-m", "json.tool"],
        args=["--sort-keys"],
        stdin=b'{"b": [1, 2, {"c": null}], "a": "\\u00e9", "n": 1e3}',
    ),
    "m-stdlib-json-tool-bad-input": Case(options=["-m", "json.tool"], stdin=b"{not json", status=1),
    # runpy's traceback shows the import system's frames, pynox's compiler among them.
    "m-module-syntax-error": Case(options=["-m", "_broken_syntax"], status=1),
    # compile() refuses a null byte: its frame shows once, as python's.
    "m-module-null-byte": Case(options=["-m", "_null_byte_module"], status=1),
    "m-missing-module": Case(
        options=["-m", "no_such_module_for_parity"], status=1, normalize_executable=True
    ),
    "m-missing-submodule": Case(
        options=["-m", "helperpkg.no_such_submodule"], status=1, normalize_executable=True
    ),
    "stdin-program": Case(
        options=["-"],
        args=["arg1"],
        stdin=b"import sys\nprint(sys.argv, __name__)\n\n1 / 0\n",
        status=1,
    ),
    # No program at all and stdin not a terminal: python runs stdin, argv [""].
    "stdin-no-program": Case(stdin=_STDIN_PROGRAM),
    "stdin-no-program-options": Case(options=["-B", "-u", "-q"], stdin=_STDIN_PROGRAM),
    "stdin-no-program-isolated": Case(options=["-I"], stdin=_STDIN_PROGRAM),
    "stdin-after-double-dash": Case(options=["--"], stdin=_STDIN_PROGRAM),
    "stdin-dash-consumed": Case(options=["-"], args=["a", "-b"], stdin=_STDIN_PROGRAM),
    "stdin-no-program-raises": Case(stdin=b"def f():\n    return {}['k']\nf()\n", status=1),
    "stdin-no-program-raises-after-output": Case(
        stdin=b"print('buffered')\nraise KeyboardInterrupt\n", status=-signal.SIGINT, merge=True
    ),
    "m-module-raises-after-output": Case(
        options=["-m", "exc_after_buffered_output"], status=1, merge=True
    ),
    "stdin-no-program-sys-exit-3": Case(stdin=b"import sys\nprint('bye')\nsys.exit(3)\n", status=3),
    "stdin-no-program-input-eof": Case(
        stdin=b"print('before')\nname = input('name? ')\n", status=1
    ),
    "stdin-no-program-syntax-error": Case(stdin=b"print('never')\nx = (1,\n", status=1),
    "stdin-no-program-empty": Case(stdin=b""),
    "stdin-no-program-dev-null": Case(),  # stdin is /dev/null: an empty program
    "directory-application": Case(options=["app_dir"], args=["x"]),
    "zip-application": Case(options=["app.pyz"], args=["y"]),
    # zipimport finds an archive by its end: a #! line (zipapp -p) or a launcher before it,
    # and a comment after it, do not hide it; a script that only holds its signature runs.
    "zip-application-with-interpreter-line": Case(options=["app_interpreter.pyz"], args=["y"]),
    "zip-application-after-binary-and-before-comment": Case(options=["app_launcher.bin"]),
    "zip-application-empty": Case(options=["empty.zip"], status=1, normalize_executable=True),
    "script-holding-a-zip-signature": Case(options=["zip_signature.py"]),
    # sys.flags and sys.orig_argv show the options given, as python's do.
    "options-in-flags": Case(options=["-Bq", "-s", "interpreter_flags.py"], args=["-I", "x"]),
    "options-in-flags-isolated": Case(options=["-I", "-E", "interpreter_flags.py"]),
    "options-in-flags-no-site": Case(options=["-S", "--", "interpreter_flags.py"]),
    "options-in-flags-c-code": Case(options=["-q", "-c", _FLAGS_CODE], args=["-B"]),
    "options-in-flags-m-module": Case(options=["-B", "-m", "interpreter_flags"], args=["a"]),
    "options-in-flags-from-variable": Case(
        options=["interpreter_flags.py"], env={"PYTHONDONTWRITEBYTECODE": "1"}
    ),
    "B-option": Case(options=["-B", "import_sibling.py"]),
    # Neither writes bytecode: pynox compiles the module, coding declaration and all.
    "B-option-coding-declaration": Case(options=["-B", "import_latin1_module.py"]),
    "u-option-interleaving": Case(options=["-u", "stderr_interleave.py"], merge=True),
    "u-option-stdio": Case(options=["-u", "stdio_properties.py"]),
    "Bu-grouped-options": Case(options=["-Bu", "argv_args.py"], args=["-u", "x"]),
    "I-option": Case(options=["-I", "sys_path0.py"]),
    "E-s-q-options": Case(options=["-E", "-s", "-q", "module_globals.py"]),
    "S-option-no-exit-builtin": Case(options=["-S", "exit_builtin.py"], status=1),
    "broken-pipe-to-head": Case(options=["large_output.py"], pipe_to_head=True),
    "compiled-script": Case(options=["compiled.pyc"], args=["x"]),
    "compiled-script-by-magic-number": Case(options=["raises.bin"], status=1),
    "compiled-script-bad-magic-number": Case(options=["not_bytecode.pyc"], status=1),
    "missing-script": Case(options=["no_such_script.py"], status=2, normalize_executable=True),
    # python makes the path absolute without normalizing it: __file__, sys.path[0] of a
    # directory, tracebacks and the error for a missing file keep "./", ".." and "//".
    "script-path-as-given": Case(options=["./app_dir/..//module_globals.py"]),
    "script-path-as-given-raises": Case(options=["./exc_zerodiv.py"], status=1),
    "directory-path-as-given": Case(options=["./app_dir/"], args=["x"]),
    # "" and "." name the working directory, which python shows without a "/" or "/.".
    "empty-script-name": Case(options=[""], status=1, normalize_executable=True),
    "dot-script-name": Case(options=["."], status=1, normalize_executable=True),
    "missing-script-path-as-given": Case(
        options=["./app_dir/../no_such_script.py"], status=2, normalize_executable=True
    ),
    # The variables python reads as -u and -B count as those options, unless -E or -I.
    "PYTHONUNBUFFERED-stdio": Case(
        options=["stdio_properties.py"], stdin=b"x\n", env={"PYTHONUNBUFFERED": "1"}
    ),
    "PYTHONUNBUFFERED-interleaving": Case(
        options=["stderr_interleave.py"], merge=True, env={"PYTHONUNBUFFERED": "yes"}
    ),
    "PYTHONUNBUFFERED-output-kept-by-os-exit": Case(
        options=["os_exit_unflushed.py"], status=4, env={"PYTHONUNBUFFERED": "1"}
    ),
    "PYTHONUNBUFFERED-ignored-with-E": Case(
        options=["-E", "stdio_properties.py"], stdin=b"x\n", env={"PYTHONUNBUFFERED": "1"}
    ),
    "PYTHONUNBUFFERED-ignored-with-I": Case(
        options=["-I", "stderr_interleave.py"], merge=True, env={"PYTHONUNBUFFERED": "1"}
    ),
}


def corpus_files() -> list[str]:
    return sorted(p.name for p in CORPUS.glob("*.py") if not p.name.startswith("_"))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A fresh copy of the corpus; both interpreters run in it."""
    target = tmp_path / "parity"
    shutil.copytree(CORPUS, target, ignore=shutil.ignore_patterns("__pycache__", ".ruff_cache"))
    with zipfile.ZipFile(target / "app.pyz", "w") as archive:
        archive.write(target / "app_dir" / "__main__.py", "__main__.py")
    zipapp.create_archive(
        target / "app_dir", target / "app_interpreter.pyz", interpreter="/usr/bin/env python3"
    )
    with zipfile.ZipFile(target / "launched.zip", "w") as archive:
        archive.write(target / "app_dir" / "__main__.py", "__main__.py")
        archive.comment = b"built by a launcher"
    launcher = b"\x7fELF\x02\x01\x01" + bytes(200)
    (target / "app_launcher.bin").write_bytes(launcher + (target / "launched.zip").read_bytes())
    zipfile.ZipFile(target / "empty.zip", "w").close()
    (target / "zip_signature.py").write_bytes(
        b"print('run as source')\n# PK\x05\x06" + b"\x01" * 18 + b"\n"
    )
    # Bytecode, which python runs as it is, known by its name or by its magic number.
    for source, compiled in (
        ("module_globals.py", "compiled.pyc"),
        ("exc_zerodiv.py", "raises.bin"),
    ):
        py_compile.compile(str(target / source), cfile=str(target / compiled), doraise=True)
    (target / "not_bytecode.pyc").write_text("print('python reads a .pyc file as bytecode')\n")
    return target


def _run_both(command: list[str], case: Case, cwd: Path, mode: str):
    flags = MODES[mode]
    if case.pipe_to_head:
        wrap = ["bash", "-c", '"$@" | head -n 1; echo "status=${PIPESTATUS[0]}"', "bash"]
        ref = run([*wrap, PYTHON, *command], cwd=cwd, input=case.stdin, env=case.env)
        got = run([*wrap, PYNOX, *flags, *command], cwd=cwd, input=case.stdin, env=case.env)
    elif case.merge:
        # The shell execs the interpreter, so its status (or signal) is kept.
        merged = ["sh", "-c", 'exec "$@" 2>&1', "sh"]
        ref = run([*merged, PYTHON, *command], cwd=cwd, input=case.stdin, env=case.env)
        got = run([*merged, PYNOX, *flags, *command], cwd=cwd, input=case.stdin, env=case.env)
    else:
        ref = python(*command, cwd=cwd, input=case.stdin, env=case.env)
        got = pynox(*flags, *command, cwd=cwd, input=case.stdin, env=case.env)
    return ref, got


_EXECUTABLE = re.compile(rb"^(/\S*/python[0-9.]*|pynox): ", re.MULTILINE)


def _assert_same(ref, got, case: Case) -> None:
    ref_err, got_err = ref.stderr, got.stderr
    if case.normalize_executable:
        assert _EXECUTABLE.search(ref_err) and _EXECUTABLE.search(got_err), (ref_err, got_err)
        ref_err = _EXECUTABLE.sub(b"PYTHON: ", ref_err)
        got_err = _EXECUTABLE.sub(b"PYTHON: ", got_err)
    assert ref.returncode == case.status, (
        f"CPython itself ended with {ref.returncode}, the table says {case.status}:\n"
        + ref.stderr.decode(errors="replace")
    )
    assert got.stdout == ref.stdout
    assert got_err == ref_err
    assert got.returncode == ref.returncode


@pytest.mark.parametrize(
    ("stderr", "statuses"), [("2>/dev/full", (120, 120)), ("2>&-", (2, 1))], ids=["full", "closed"]
)
@pytest.mark.parametrize("mode", list(MODES))
def test_python_s_own_refusals_where_stderr_takes_nothing(
    tmp_path: Path, mode: str, stderr: str, statuses: tuple[int, int]
) -> None:
    """python refuses a missing script and -c code that is not text with a message on
    stderr; when flushing it fails at exit, its status is 120. A closed stderr (None in
    sys) fails nothing: its usual status, without a message."""
    wrapped = ["sh", "-c", f'exec "$@" {stderr}', "sh"]
    commands = (["no_such_script.py"], ["-c", "print('caf\udce9')"])
    for command, status in zip(commands, statuses, strict=True):
        ref = run([*wrapped, PYTHON, *command], cwd=tmp_path)
        got = run([*wrapped, PYNOX, *MODES[mode], *command], cwd=tmp_path)
        assert ref.returncode == status, ref.stderr
        assert (got.returncode, got.stdout, got.stderr) == (status, b"", b"")


# Values of PYTHONUNBUFFERED and PYTHONDONTWRITEBYTECODE as python reads them: empty, or an
# integer (as C's strtol reads one: blanks, a sign, digits, nothing after) that is 0, is
# unset; anything else is set.
OPTION_VARIABLE_VALUES = ["", "0", "00", " +0", "-0", "0 ", "1", "-1", "yes", " ", "0x0", "9" * 20]


@pytest.mark.parametrize("value", OPTION_VARIABLE_VALUES, ids=repr)
def test_variables_read_as_options(value: str, tmp_path: Path) -> None:
    code = "import sys; print(sys.stdout.write_through, sys.dont_write_bytecode)"
    env = {"PYTHONUNBUFFERED": value, "PYTHONDONTWRITEBYTECODE": value}
    ref = python("-c", code, cwd=tmp_path, env=env)
    got = pynox("-c", code, cwd=tmp_path, env=env)
    assert ref.returncode == 0, ref.stderr
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)


IMPORTS_FROM_LIB = (
    "import sys\nsys.path.insert(0, 'lib')\nimport mod\nprint(mod.VALUE, sys.dont_write_bytecode)\n"
)


@pytest.mark.parametrize(
    ("options", "env", "writes"),
    [
        ([], {}, True),
        (["-B"], {}, False),
        ([], {"PYTHONDONTWRITEBYTECODE": "1"}, False),
        (["-E"], {"PYTHONDONTWRITEBYTECODE": "1"}, True),
    ],
    ids=["default", "-B", "PYTHONDONTWRITEBYTECODE", "PYTHONDONTWRITEBYTECODE-with-E"],
)
@pytest.mark.parametrize("mode", list(MODES))
def test_bytecode_written_as_python_writes_it(
    mode: str, options: list[str], env: dict[str, str], writes: bool, tmp_path: Path
) -> None:
    """A module imported from a directory the program may write leaves a .pyc file there
    exactly when python would leave one."""
    seen = []
    for runner in ("python", "pynox"):
        root = tmp_path / runner
        (root / "lib").mkdir(parents=True)
        (root / "lib" / "mod.py").write_text("VALUE = 42\n")
        (root / "app.py").write_text(IMPORTS_FROM_LIB)
        if runner == "python":
            done = python(*options, "app.py", cwd=root, env=env)
        else:
            done = pynox(*MODES[mode], "--allow-write=lib", *options, "app.py", cwd=root, env=env)
        assert done.returncode == 0, done.stderr
        seen.append((done.stdout, any((root / "lib").rglob("*.pyc"))))
    assert seen[0] == (f"42 {not writes}\n".encode(), writes)
    assert seen[1] == seen[0]


@pytest.mark.parametrize("name", corpus_files())
@pytest.mark.parametrize("mode", list(MODES))
def test_corpus_program(mode: str, name: str, corpus: Path) -> None:
    case = CASES.get(name, Case())
    ref, got = _run_both([*case.options, name, *case.args], case, corpus, mode)
    _assert_same(ref, got, case)


@pytest.mark.parametrize("label", list(INVOCATIONS))
@pytest.mark.parametrize("mode", list(MODES))
def test_invocation(mode: str, label: str, corpus: Path) -> None:
    case = INVOCATIONS[label]
    ref, got = _run_both([*case.options, *case.args], case, corpus, mode)
    _assert_same(ref, got, case)


@pytest.mark.parametrize("name", corpus_files())
def test_corpus_program_json(name: str, corpus: Path) -> None:
    """`pynox --json` reports python's exit status and stdout (stdin is empty there)."""
    case = CASES.get(name, Case())
    command = [*case.options, name, *case.args]
    ref = python(*command, cwd=corpus)  # stdin: /dev/null, as --json gives the program
    got = pynox("--json", *command, cwd=corpus)
    result = json.loads(got.stdout)
    expected_exit = 128 - ref.returncode if ref.returncode < 0 else ref.returncode
    assert result["exit"] == expected_exit
    assert got.returncode == expected_exit
    stdout = ref.stdout.decode("utf-8", errors="replace")
    limit = DEFAULT_MAX_OUTPUT
    if len(ref.stdout) > limit:
        assert result["stdout_truncated"] is True
        # Its head and its tail, around one line that says how many bytes were left out.
        head, marker, tail = result["stdout"].partition(" bytes left out ...]\n")
        head, _, _ = head.rpartition("[... ")
        assert marker and stdout.startswith(head) and stdout.endswith(tail)
        assert limit - 200 <= len(result["stdout"].encode()) <= limit
    else:
        assert result["stdout_truncated"] is False
        assert result["stdout"] == stdout
    if len(ref.stderr) <= limit:
        assert result["stderr"] == ref.stderr.decode("utf-8", errors="replace")
    if ref.returncode < 0:
        assert result["error"]["type"] in ("KeyboardInterrupt", "Signal")
    elif ref.returncode == 0:
        assert result["error"] is None


SIGNALLED = """\
import atexit, sys, time
atexit.register(print, "atexit runs")
try:
    print("ready", flush=True)
    time.sleep(30)
finally:
    print("finally runs", flush=True)
"""


def _interrupted(command: list[str], cwd: Path, signum: int) -> tuple[int, bytes, bytes]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(0.3)  # into time.sleep(), so the traceback names that line
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, b"ready\n" + out, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", list(MODES))
def test_signal_from_outside(tmp_path: Path, signum: int, mode: str) -> None:
    """Ctrl-C (SIGINT) or a kill (SIGTERM) sent to the command, as a shell or a job runner does."""
    script = tmp_path / "waits.py"
    script.write_text(SIGNALLED)
    ref = _interrupted([PYTHON, "waits.py"], tmp_path, signum)
    got = _interrupted([PYNOX, *MODES[mode], "waits.py"], tmp_path, signum)
    assert ref[0] == -signum
    assert got == ref


# pynox's command lines, by who supervises the run: the launcher or pynox's interpreter.
WITH_SUPERVISORS = {
    "in-process": [PYNOX],
    "supervised": [PYNOX, "--timeout=60s"],
    "json": [PYNOX, "--json"],
    # Without the launcher, pynox's own interpreter runs or supervises the run.
    "python-in-process": [PYTHON, "-m", "pynox"],
    "python-supervised": [PYTHON, "-m", "pynox", "--timeout=60s"],
    "python-json": [PYTHON, "-m", "pynox", "--json"],
}


# Prints how the program finds each signal pynox's supervisor forwards.
SHOWS_HANDLERS = """\
import signal
for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"):
    print(name, repr(signal.getsignal(getattr(signal, name))))
"""


@pytest.mark.parametrize("mode", list(WITH_SUPERVISORS))
def test_signals_ignored_by_the_caller_stay_ignored(tmp_path: Path, mode: str) -> None:
    """Started with SIGINT and SIGHUP ignored, as a shell starts a job in the background and
    nohup starts a command, python leaves both ignored, and the program under pynox finds
    them so too; the signals no one ignored keep python's handling."""
    (tmp_path / "handlers.py").write_text(SHOWS_HANDLERS)
    shell_ignoring = ["/bin/sh", "-c", 'trap "" INT HUP; exec "$@"', "sh"]
    ref = run([*shell_ignoring, PYTHON, "handlers.py"], cwd=tmp_path)
    pynox_command = WITH_SUPERVISORS[mode]
    got = run([*shell_ignoring, *pynox_command, "handlers.py"], cwd=tmp_path)
    assert ref.returncode == got.returncode == 0, got.stderr
    assert ref.stdout.decode().splitlines() == [
        "SIGINT <Handlers.SIG_IGN: 1>",
        "SIGTERM <Handlers.SIG_DFL: 0>",
        "SIGHUP <Handlers.SIG_IGN: 1>",
        "SIGQUIT <Handlers.SIG_DFL: 0>",
    ]
    json_result = mode.endswith("json")
    stdout = json.loads(got.stdout)["stdout"] if json_result else got.stdout.decode()
    assert stdout == ref.stdout.decode()
    # Ignored, Ctrl-C and a hang-up sent to the command from outside change nothing.
    waits = 'import time\nprint("ready", flush=True)\ntime.sleep(0.5)\nprint("done")\n'
    (tmp_path / "waits.py").write_text(waits)
    for signum in (signal.SIGINT, signal.SIGHUP):
        command = [*shell_ignoring, *pynox_command, "waits.py"]
        proc = subprocess.Popen(command, cwd=tmp_path, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert proc.stdout is not None
            if not json_result:
                assert proc.stdout.readline() == b"ready\n"
            else:
                time.sleep(0.2)  # its result, with "ready", comes at its end
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 0, err
        if json_result:
            assert json.loads(out)["stdout"] == "ready\ndone\n"
        else:
            assert out == b"done\n"


def _assert_ran_as_under_python(
    mode: str,
    got: subprocess.CompletedProcess[bytes],
    ref: subprocess.CompletedProcess[bytes],
    status: int,
) -> None:
    """pynox's command line `mode` (WITH_SUPERVISORS) ended with status and printed what
    python printed (ref): in its result, with --json."""
    assert got.returncode == status, got.stderr
    if mode.endswith("json"):
        result = json.loads(got.stdout)
        assert (result["exit"], result["stdout"]) == (status, ref.stdout.decode())
    else:
        assert (got.stdout, got.stderr) == (ref.stdout, ref.stderr)


@pytest.mark.parametrize("mode", list(WITH_SUPERVISORS))
def test_a_caller_ignoring_sigchld_gets_the_exit_status(tmp_path: Path, mode: str) -> None:
    """Started with SIGCHLD ignored, as some callers do to be rid of their children without
    waiting for them, the kernel would reap pynox's child the moment it ended, and its
    status would be lost: pynox must still end as python does. The program finds SIGCHLD
    ignored, as under python."""
    code = "import signal\nprint(repr(signal.getsignal(signal.SIGCHLD)))\nraise SystemExit(3)\n"
    (tmp_path / "exits.py").write_text(code)
    ref = run([*ignoring("SIGCHLD"), PYTHON, "exits.py"], cwd=tmp_path)
    got = run([*ignoring("SIGCHLD"), *WITH_SUPERVISORS[mode], "exits.py"], cwd=tmp_path)
    assert (ref.returncode, ref.stdout) == (3, b"<Handlers.SIG_IGN: 1>\n")
    _assert_ran_as_under_python(mode, got, ref, 3)


# Opens three files, and prints the descriptor each got.
OPENS_FILES = """\
files = [open(__file__) for _ in range(3)]
print([file.fileno() for file in files])
"""


@pytest.mark.parametrize("limit", [16, 64, 1024])
@pytest.mark.parametrize("mode", list(WITH_SUPERVISORS))
def test_a_caller_s_limit_on_open_files(tmp_path: Path, mode: str, limit: int) -> None:
    """Under a limit on open files lower than where pynox keeps its own descriptors, a
    program runs as under python, and its files get the descriptors python gives them."""
    (tmp_path / "opens.py").write_text(OPENS_FILES)
    ref = run([*limiting_open_files(limit), PYTHON, "opens.py"], cwd=tmp_path)
    got = run([*limiting_open_files(limit), *WITH_SUPERVISORS[mode], "opens.py"], cwd=tmp_path)
    assert (ref.returncode, ref.stdout) == (0, b"[3, 4, 5]\n")
    _assert_ran_as_under_python(mode, got, ref, 0)


# What a program run from a removed working directory sees of it: what python gives it.
IN_A_REMOVED_DIRECTORY = """\
import os, sys
try:
    print(os.getcwd())
except FileNotFoundError as error:
    print("no working directory:", error)
print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
"""


@pytest.mark.parametrize("mode", list(WITH_SUPERVISORS))
def test_a_program_runs_from_a_working_directory_that_was_removed(
    tmp_path: Path, mode: str
) -> None:
    """A shell whose directory was removed still starts programs there; python runs them."""
    (tmp_path / "prog.py").write_text(IN_A_REMOVED_DIRECTORY)
    gone = tmp_path / "gone"
    script = str(tmp_path / "prog.py")
    in_gone = ["sh", "-c", f'mkdir {gone} && cd {gone} && rmdir {gone} && exec "$@"', "sh"]
    ref = run([*in_gone, PYTHON, script], cwd=tmp_path)
    got = run([*in_gone, *WITH_SUPERVISORS[mode], script], cwd=tmp_path)
    assert ref.returncode == 0 and ref.stdout.startswith(b"no working directory: "), ref
    _assert_ran_as_under_python(mode, got, ref, 0)
    for code in (["-c", "print(6 * 7)"], ["-m", "this"]):  # a module from the library
        ref = run([*in_gone, PYTHON, *code], cwd=tmp_path)
        got = run([*in_gone, *WITH_SUPERVISORS[mode], *code], cwd=tmp_path)
        assert ref.returncode == 0, ref
        _assert_ran_as_under_python(mode, got, ref, 0)


@pytest.mark.parametrize("mode", list(WITH_SUPERVISORS))
def test_a_script_in_proc_is_read_as_python_reads_it(tmp_path: Path, mode: str) -> None:
    """A file of /proc cannot be seeked to its end, where a zip archive's end record would
    be: python reads it as source (a SyntaxError here), and so must pynox."""
    ref = run([PYTHON, "/proc/version"], cwd=tmp_path)
    got = run([*WITH_SUPERVISORS[mode], "/proc/version"], cwd=tmp_path)
    assert ref.returncode == 1 and b"SyntaxError" in ref.stderr, ref
    if mode.endswith("json"):
        result = json.loads(got.stdout)
        assert (result["exit"], result["stderr"]) == (1, ref.stderr.decode())
    else:
        _assert_ran_as_under_python(mode, got, ref, 1)


# Signals a program may catch, each sent to the command's own process id by another
# process, as a job runner or `kill PID` does. SIGPIPE, SIGWINCH and SIGCHLD do nothing to
# python unless it has a handler; the stops would stop it, the rest would end it.
CAUGHT_SIGNALS = [
    "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGHUP", "SIGPIPE", "SIGWINCH", "SIGURG", "SIGCONT",
    "SIGCHLD", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPROF", "SIGVTALRM", "SIGRTMIN", "SIGQUIT",
    "SIGTERM", "SIGINT",
]  # fmt: skip

# Handles the signals named after the progress file's path, one at a time: it writes
# each one's name there (and on stdout) once its handler ran.
CATCHES = """\
import signal, sys, time
progress, names = sys.argv[1], sys.argv[2:]
got = []
def note(line):
    print(line, flush=True)
    with open(progress, "a") as file:
        file.write(line + "\\n")
for name in names:
    signal.signal(getattr(signal, name), lambda signum, frame: got.append(signum))
note("ready")
for name in names:
    deadline = time.monotonic() + 20
    while getattr(signal, name) not in got and time.monotonic() < deadline:
        time.sleep(0.005)
    times = got.count(getattr(signal, name))
    note(name if times == 1 else f"{name} x{times}")
"""


def _last_line(path: Path) -> str:
    lines = path.read_text().splitlines() if path.exists() else []
    return lines[-1] if lines else ""


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"waited 20 s for {what}"
        time.sleep(0.005)


def _driven_like_python(
    tmp_path: Path,
    mode: str,
    script: str,
    args: list[str],
    drive: Callable[[subprocess.Popen[bytes], Path], None],
    new_session: bool = False,
) -> str:
    """Runs script (in tmp_path, with a progress file's path and args) under python, then
    under pynox in mode, each in a process group of its own as a shell's job is (with
    new_session, in a session of its own, with no terminal, as a job runner starts it),
    while drive(process, progress file) acts on it; both must end with status 0, no stderr
    and the same stdout (for --json, in the result), which is returned."""
    outputs = []
    flags = ["--json"] if mode == "json" else MODES[mode]
    for command, progress in _python_then_pynox(tmp_path, flags):
        proc = subprocess.Popen(
            [*command, script, str(progress), *args],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # In this session: in one of its own, the group would be orphaned, and the
            # kernel would drop the stops sent to it.
            preexec_fn=os.setsid if new_session else os.setpgrp,  # noqa: PLW1509 - one call, before exec
        )
        try:
            drive(proc, progress)
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
            proc.wait()
        outputs.append(_clean_output(proc, out, err, command))
    assert outputs[1] == outputs[0]
    return outputs[0]


def _python_then_pynox(tmp_path: Path, flags: list[str]) -> Iterator[tuple[list[str], Path]]:
    """The command to run a script with, python's then pynox's (with flags, and granted
    the folder of the progress file), each with its own progress file's path."""
    for runner in ("python", "pynox"):
        progress = tmp_path / runner / "progress.txt"
        progress.parent.mkdir()
        command = [PYTHON]
        if runner == "pynox":
            command = [PYNOX, *flags, f"--allow-write={progress.parent}"]
        yield command, progress


def _clean_output(proc: subprocess.Popen[bytes], out: bytes, err: bytes, command: list[str]) -> str:
    """What the program printed, which must have ended with status 0 and no stderr (for
    pynox --json, in the result)."""
    assert (proc.returncode, err.decode(errors="replace")) == (0, "")
    if command[0] == PYNOX and "--json" in command:
        result = json.loads(out)
        assert (result["exit"], result["error"]) == (0, None)
        out = result["stdout"].encode()
    return out.decode()


@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_signals_the_program_catches(tmp_path: Path, mode: str) -> None:
    """Every signal a process sends pynox reaches the program once, as it reaches python;
    none ends or stops the command, and --json still writes its result."""

    def send_each(proc: subprocess.Popen[bytes], progress: Path) -> None:
        # Each signal once the program has handled the one before.
        for expected, send in zip(["ready", *CAUGHT_SIGNALS], [*CAUGHT_SIGNALS, None], strict=True):
            _wait_for(lambda line=expected: _last_line(progress).startswith(line), expected)
            if send is not None:
                os.kill(proc.pid, getattr(signal, send))

    (tmp_path / "catches.py").write_text(CATCHES)
    output = _driven_like_python(tmp_path, mode, "catches.py", CAUGHT_SIGNALS, send_each)
    assert output == "".join(f"{line}\n" for line in ["ready", *CAUGHT_SIGNALS])


# Signals its own process group, as a program that ends the workers it started does.
SIGNALS_ITS_GROUP = """\
import os, signal
caught = []
signal.signal(signal.SIGUSR1, lambda number, frame: caught.append(number))
os.kill(0, signal.SIGUSR1)
print("caught", [signal.Signals(number).name for number in caught])
"""


@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_a_program_signals_its_own_process_group(tmp_path: Path, mode: str) -> None:
    """os.kill(0, sig) reaches the program as it reaches python, where the command, with
    no terminal, gave the program a process group of its own: one that holds only the
    program's processes, not the launcher's nor those of whoever started pynox."""
    (tmp_path / "signals_its_group.py").write_text(SIGNALS_ITS_GROUP)
    output = _driven_like_python(
        tmp_path, mode, "signals_its_group.py", [], lambda proc, progress: None, new_session=True
    )
    assert output == "caught ['SIGUSR1']\n"


# Blocks SIGRTMIN, notes "ready", waits for it, then counts every copy that came: a
# real-time signal queues each copy, where another would merge with one still pending.
COUNTS_COPIES = """\
import signal, sys, time
def note(line):
    print(line, flush=True)
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
note("ready")
signal.sigwaitinfo({signal.SIGRTMIN})
time.sleep(0.5)  # a copy passed on would be here by now
copies = 1
while signal.sigtimedwait({signal.SIGRTMIN}, 0) is not None:
    copies += 1
note(f"SIGRTMIN x{copies}")
"""


@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_a_signal_sent_to_the_process_group_reaches_the_program_once(
    tmp_path: Path, mode: str
) -> None:
    """A signal sent to the command's whole process group (a job runner that signals the
    tree it started, `kill -TERM -- -PGID`) reaches the program once, as it reaches
    python: not once from the sender and once more passed on by pynox's launcher, which
    would raise a second KeyboardInterrupt in the middle of the program's cleanup."""

    def send_to_group(proc: subprocess.Popen[bytes], progress: Path) -> None:
        _wait_for(lambda: _last_line(progress) == "ready", "the program to start")
        os.killpg(proc.pid, signal.SIGRTMIN)

    (tmp_path / "counts.py").write_text(COUNTS_COPIES)
    output = _driven_like_python(tmp_path, mode, "counts.py", [], send_to_group, new_session=True)
    assert output == "ready\nSIGRTMIN x1\n"


# Notes "ready", then cleans up after a KeyboardInterrupt: slowly, so that a second one
# would interrupt it.
CLEANS_UP = """\
import sys, time
def note(line):
    print(line, flush=True)
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")
try:  # before "ready": Ctrl-C comes once the test reads it
    note("ready")
    time.sleep(20)
except KeyboardInterrupt:
    time.sleep(0.5)
    note("cleaned up")
"""


def _on_its_own_terminal() -> None:
    """Run in the child before exec: a session whose controlling terminal is stdin, and no
    signal blocked, as a shell starts a command (a mask is kept across exec, and one left
    by the test process would keep Ctrl-C from python and pynox alike)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _typed_on_a_terminal(tmp_path: Path, script: str, flags: list[str], typed: bytes) -> list[str]:
    """The output of script (in tmp_path, with a progress file's path) under python, then
    under pynox with flags, each on a terminal of its own on which `typed` is typed once
    the program noted "ready"; both must end with status 0 and no stderr (for --json, in
    the result)."""
    outputs = []
    for command, progress in _python_then_pynox(tmp_path, flags):
        controller, terminal = os.openpty()
        try:
            proc = subprocess.Popen(
                [*command, script, str(progress)],
                cwd=tmp_path,
                stdin=terminal,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_on_its_own_terminal,  # noqa: PLW1509 - two calls, before exec
            )
            try:
                _wait_for(lambda file=progress: _last_line(file) == "ready", "the program to start")
                os.write(controller, typed)
                try:
                    out, err = proc.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    raise AssertionError(_terminal_state(proc.pid, controller)) from None
            finally:
                proc.kill()
                proc.wait()
        finally:
            os.close(controller)
            os.close(terminal)
        outputs.append(_clean_output(proc, out, err, command))
    return outputs


def _terminal_state(session: int, controller: int) -> str:
    """What typing on the terminal of session (its leader's pid) reached, for a run that
    did not end: the terminal's foreground group, and each process of the session with
    its group, state and signal masks (blocked, pending, ignored, caught)."""
    lines = [
        f"no end 20 s after typing; the terminal's foreground group: {os.tcgetpgrp(controller)}"
    ]
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.getsid(int(entry.name)) != session:
                continue
            status = dict(
                line.split(":\t", 1)
                for line in (entry / "status").read_text().splitlines()
                if ":\t" in line
            )
            fields = ("State", "SigBlk", "SigPnd", "ShdPnd", "SigIgn", "SigCgt")
            shown = " ".join(f"{name}={status.get(name, '?').strip()}" for name in fields)
            lines.append(f"pid {entry.name} group {os.getpgid(int(entry.name))} {shown}")
        except OSError:
            continue  # gone meanwhile
    return "\n".join(lines)


@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_ctrl_c_on_a_terminal_reaches_the_program_once(tmp_path: Path, mode: str) -> None:
    """Ctrl-C typed on the terminal pynox runs on interrupts the program once, as it
    interrupts python, also with --json, whose program has no terminal of its own."""
    (tmp_path / "cleans.py").write_text(CLEANS_UP)
    flags = ["--json"] if mode == "json" else MODES[mode]
    outputs = _typed_on_a_terminal(tmp_path, "cleans.py", flags, b"\x03")
    assert outputs[0] == outputs[1] == "ready\ncleaned up\n"


# Notes "ready", then reads a line from the terminal (a password prompt's way) and
# notes it, or notes the KeyboardInterrupt that came instead, once cleaned up.
READS_THE_TERMINAL = """\
import sys, time
def note(line):
    print(line, flush=True)
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")
with open("/dev/tty") as terminal:
    try:  # before "ready": what is typed comes once the test reads it
        note("ready")
        note("read " + terminal.readline().strip())
    except KeyboardInterrupt:
        time.sleep(0.5)
        note("cleaned up")
"""


@pytest.mark.parametrize("typed", [b"secret\n", b"\x03"], ids=["a-line", "ctrl-c"])
def test_a_captured_run_granted_the_terminal_reads_it_as_python_does(
    tmp_path: Path, typed: bytes
) -> None:
    """A --json run granted the terminal (--allow-read=/dev/tty) stays its foreground job:
    it reads what is typed as python does, where a job in the background would be stopped
    (SIGTTIN) and the command never end; and Ctrl-C interrupts it once."""
    (tmp_path / "reads.py").write_text(READS_THE_TERMINAL)
    flags = ["--json", "--allow-read=/dev/tty"]
    outputs = _typed_on_a_terminal(tmp_path, "reads.py", flags, typed)
    expected = "read secret" if typed == b"secret\n" else "cleaned up"
    assert outputs[0] == outputs[1] == f"ready\n{expected}\n"


def test_a_captured_run_granted_the_terminal_by_another_name_reads_it(tmp_path: Path) -> None:
    """A device node of /dev/tty's number opens the controlling terminal under any name
    (as /dev/console and /dev/tty0 open the console's): a --json run granted one was
    taken for a run without the terminal, put in the background, and stopped (SIGTTIN)
    as it read the line typed, where python reads it."""
    alias = tmp_path / "terminal"
    try:
        os.mknod(alias, stat.S_IFCHR | 0o666, os.makedev(5, 0))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    (tmp_path / "reads.py").write_text(READS_THE_TERMINAL.replace('"/dev/tty"', repr(str(alias))))
    flags = ["--json", f"--allow-read={alias}"]
    outputs = _typed_on_a_terminal(tmp_path, "reads.py", flags, b"secret\n")
    assert outputs[0] == outputs[1] == "ready\nread secret\n"


# Notes "ready", sleeps a second, notes "done", each line in the progress file too.
PAUSES = """\
import sys, time
def note(line):
    print(line, flush=True)
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")
note("ready")
time.sleep(1)
note("done")
"""


# Notes "ready", waits for the line "go" in the progress file (polling it), notes "done",
# each line in the progress file too: stopped, it would note nothing however long after the
# go; running, within a moment of it.
WAITS_FOR_GO = """\
import sys, time
def note(line):
    print(line, flush=True)
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")
def noted():
    with open(sys.argv[1]) as file:
        return file.read().split()
note("ready")
while "go" not in noted():
    time.sleep(0.01)
note("done")
"""


def _state(pid: int) -> str:
    """The process's state letter in /proc: T when stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.parametrize("group", [False, True], ids=["to-its-pid", "to-its-group"])
@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_a_stop_stops_the_program_and_the_command(tmp_path: Path, mode: str, group: bool) -> None:
    """SIGTSTP sent to pynox's pid or process group (as Ctrl-Z and a shell's
    `kill -TSTP %1` send it) stops the program and pynox, as it stops python (a shell then
    sees the job stopped); SIGCONT continues both."""
    send = os.killpg if group else os.kill

    def stop_and_continue(proc: subprocess.Popen[bytes], progress: Path) -> None:
        _wait_for(lambda: _last_line(progress) == "ready", "the program to start")
        send(proc.pid, signal.SIGTSTP)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        # The program's process: python itself, or the interpreter pynox started (not
        # the scratch helper, a copy of the launcher with its command line).
        (program,) = [
            int(pid)
            for pid in [str(proc.pid), *children]
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != PYNOX.encode()
        ]
        _wait_for(lambda: _state(proc.pid) == _state(program) == "T", "both to stop")
        with progress.open("a") as file:
            file.write("go\n")
        # Ample for a running program to note "done" (it looks every 10 ms): stopped, it
        # notes nothing.
        time.sleep(0.5)
        assert _last_line(progress) == "go"
        assert _state(proc.pid) == _state(program) == "T"
        send(proc.pid, signal.SIGCONT)

    (tmp_path / "waits.py").write_text(WAITS_FOR_GO)
    assert _driven_like_python(tmp_path, mode, "waits.py", [], stop_and_continue) == (
        "ready\ndone\n"
    )


@pytest.mark.parametrize("group", [False, True], ids=["to-its-pid", "to-its-group"])
@pytest.mark.parametrize("mode", [*MODES, "json"])
def test_a_stop_the_kernel_drops_for_python_stops_nothing(
    tmp_path: Path, mode: str, group: bool
) -> None:
    """Started in a session of its own (a job runner's setsid()), the command's process
    group is orphaned, and the kernel drops the SIGTSTP sent to it: python runs on. So
    does the program under pynox, though its process group of its own is not orphaned
    and would stop by the copy pynox passes on: the command left running, nothing would
    ever continue it."""
    send = os.killpg if group else os.kill

    def send_a_stop(proc: subprocess.Popen[bytes], progress: Path) -> None:
        _wait_for(lambda: _last_line(progress) == "ready", "the program to start")
        send(proc.pid, signal.SIGTSTP)

    (tmp_path / "pauses.py").write_text(PAUSES)
    output = _driven_like_python(tmp_path, mode, "pauses.py", [], send_a_stop, new_session=True)
    assert output == "ready\ndone\n"


@pytest.mark.unit
def test_corpus_is_complete() -> None:
    files = corpus_files()
    assert len(files) >= 30
    assert set(CASES) <= set(files), "a CASES entry names no corpus file"
    for helper in ("_helper.py", "_broken_syntax.py", "data.txt", "data.csv"):
        assert (CORPUS / helper).is_file()
    assert (CORPUS / "helperpkg" / "__main__.py").is_file()
    assert (CORPUS / "app_dir" / "__main__.py").is_file()
    # The Latin-1 case must really be Latin-1, or it tests nothing.
    raw = (CORPUS / "latin1_encoding.py").read_bytes()
    assert b"latin-1" in raw.splitlines()[0] and b"\xe9" in raw
    assert (CORPUS / "shebang.py").read_bytes().startswith(b"#!")
