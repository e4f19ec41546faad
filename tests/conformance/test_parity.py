"""pynox runs what the bundle's own python runs: same output, same exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import Install, write

PROGRAMS = {
    "hello": 'print("Hello from Pynox!")\n',
    "exit_status": "import sys\nprint('before')\nsys.exit(3)\n",
    "exception": "def f():\n    raise ValueError('boom')\nf()\n",
    "unicode": "print('h\\u00e9llo \\u2603 \\U0001f40d')\n",
    "stdlib": "import json, re, decimal, sqlite3, hashlib, zlib, ssl, ctypes\n"
    "print(json.dumps({'k': [1, 2]}), decimal.Decimal('1.1') + 1, zlib.crc32(b'x'))\n"
    "print(hashlib.sha256(b'pynox').hexdigest()[:12], sqlite3.sqlite_version_info >= (3,))\n",
    "threads": "import threading\nout = []\n"
    "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
    "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))\n",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_script_matches_the_bundled_python(install: Install, tmp_path: Path, name: str) -> None:
    script = write(tmp_path / f"{name}.py", PROGRAMS[name])
    want = install.run_python(str(script), "a b", "-x", cwd=tmp_path)
    got = install.parity(str(script), "a b", "-x", cwd=tmp_path)
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout)
    assert got.stderr.splitlines()[-1:] == want.stderr.splitlines()[-1:]


def test_version_names_the_bundled_interpreter(install: Install) -> None:
    want = install.run_python("-c", "import platform; print(platform.python_version())")
    got = install.run_pynox("--version")
    assert got.returncode == 0
    assert got.stdout.startswith("pynox ") and want.stdout.strip() in got.stdout


def test_code_argv_and_stdin(install: Install, tmp_path: Path) -> None:
    code = "import sys; print(sys.argv)"
    assert install.parity("-c", code, "x", cwd=tmp_path).stdout == "['-c', 'x']\n"
    piped = install.parity("-", "a1", input="import sys\nprint(sys.argv)\n", cwd=tmp_path)
    assert piped.stdout == "['-', 'a1']\n"


def test_module_mode(install: Install, tmp_path: Path) -> None:
    write(tmp_path / "tool.py", "import sys\nprint('tool', sys.argv[1:])\n")
    done = install.parity("-m", "tool", "a", "b", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "tool ['a', 'b']\n"), done.stderr


def test_missing_script_status_matches(install: Install, tmp_path: Path) -> None:
    want = install.run_python(str(tmp_path / "missing.py"))
    got = install.parity(str(tmp_path / "missing.py"))
    assert got.returncode == want.returncode == 2


def test_no_sandbox_hands_the_command_line_to_cpython(install: Install, tmp_path: Path) -> None:
    script = write(tmp_path / "a.py", "import sys\nprint(sys.flags.optimize, __debug__)\n")
    done = install.run_pynox("--no-sandbox", "-O", str(script))
    assert (done.returncode, done.stdout) == (0, "1 False\n")


def test_runs_from_a_link_on_path(install: Install, tmp_path: Path) -> None:
    link = tmp_path / "bin" / "pynox"
    link.parent.mkdir()
    link.symlink_to(install.pynox)
    flags = [] if install.expect_sandbox else ["--no-sandbox"]
    done = install.run_pynox(*flags, "-c", "print('via link')", env={"PATH": str(link.parent)})
    assert done.stdout == "via link\n", done.stderr
