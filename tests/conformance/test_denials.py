"""The sandbox's denials, each with its one-line hint naming the grant."""

from __future__ import annotations

import time
from pathlib import Path

from .support import Install, hint, write


def test_read_outside_the_grants_is_denied_with_a_hint(sandboxed: Install, tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project / "data.txt", "inside")
    outside = write(tmp_path / "outside.txt", "outside")
    script = write(
        project / "a.py", "print(open('data.txt').read())\nprint(open('../outside.txt').read())\n"
    )
    done = sandboxed.run_pynox(str(script), cwd=project)
    assert (done.returncode, done.stdout) == (1, "inside\n")
    assert "PermissionError" in done.stderr
    assert done.stderr.endswith(hint(outside))


def test_the_readme_probe(sandboxed: Install, tmp_path: Path) -> None:
    probe = write(tmp_path / "probe.py", 'print(open("/etc/hostname").read())\n')
    done = sandboxed.run_pynox(str(probe))
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):\n")
    assert done.stderr.endswith(hint("/etc/hostname"))
    allowed = sandboxed.run_pynox("--allow-read=/etc/hostname", str(probe))
    assert allowed.returncode == 0, allowed.stderr


def test_reads_and_writes_are_separate(sandboxed: Install, tmp_path: Path) -> None:
    data = write(tmp_path / "data" / "in.txt", "42").parent
    out = tmp_path / "out"
    out.mkdir()
    code = f"n = int(open('{data}/in.txt').read())\nopen('{out}/r.txt', 'w').write(str(n + 1))"
    done = sandboxed.run_pynox(f"--allow-read={data}", f"--allow-write={out}", "-c", code)
    assert done.returncode == 0, done.stderr
    assert (out / "r.txt").read_text() == "43"
    no_read = sandboxed.run_pynox(f"--allow-write={out}", "-c", f"open('{out}/r.txt').read()")
    # Written files are read back from their write tree: the hint names the tree.
    assert no_read.returncode == 1 and no_read.stderr.endswith(f"--allow-read={out}\n")
    no_write = sandboxed.run_pynox(f"--allow-read={data}", "-c", f"open('{data}/n.txt', 'w')")
    assert no_write.returncode == 1 and f"--allow-write={data}" in no_write.stderr
    assert not (data / "n.txt").exists()


def test_code_gets_no_implicit_read(sandboxed: Install, tmp_path: Path) -> None:
    write(tmp_path / "x.txt", "x")
    done = sandboxed.run_pynox("-c", "open('x.txt').read()", cwd=tmp_path)
    assert done.returncode == 1 and "PermissionError" in done.stderr


def test_environment_is_empty_unless_allowed(sandboxed: Install) -> None:
    env = {"SECRET_TOKEN": "s3", "API_KEY": "k1", "LANG": "C.UTF-8", "TZ": "UTC"}
    # The run's scratch directory is named by TMPDIR, TEMP, TMP and HOME: set aside here.
    code = (
        "import os\nfor name in ('TMPDIR', 'TEMP', 'TMP', 'HOME'): del os.environ[name]\n"
        "print(sorted(os.environ.items()))"
    )
    locale = "('LANG', 'C.UTF-8'), ('TZ', 'UTC')"
    assert sandboxed.run_pynox("-c", code, env=env).stdout == f"[{locale}]\n"
    allowed = sandboxed.run_pynox("--allow-env=API_KEY", "-c", code, env=env)
    assert allowed.stdout == f"[('API_KEY', 'k1'), {locale}]\n"


def test_network_is_off_until_allowed(sandboxed: Install) -> None:
    code = "import socket\ns = socket.socket()\nprint('made')"
    denied = sandboxed.run_pynox("-c", code)
    assert denied.returncode == 1
    assert "pynox: the network is off; grant it with --allow-network\n" in denied.stderr
    allowed = sandboxed.run_pynox("--allow-network", "-c", code)
    assert (allowed.returncode, allowed.stdout) == (0, "made\n")


def test_subprocesses_are_never_allowed(sandboxed: Install) -> None:
    done = sandboxed.run_pynox("-c", "import subprocess\nsubprocess.run(['true'])")
    assert done.returncode == 1 and "pynox: processes (subprocess" in done.stderr


def test_ctypes_is_confined_too(sandboxed: Install) -> None:
    code = (
        "import ctypes, ctypes.util\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.open(b'/etc/hostname', 0)\nprint(fd, ctypes.get_errno())"
    )
    done = sandboxed.run_pynox("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "-1 13\n"


def test_timeout_stops_the_program_with_124(sandboxed: Install) -> None:
    started = time.monotonic()
    done = sandboxed.run_pynox("--timeout=500ms", "-c", "while True: pass")
    assert time.monotonic() - started < 30
    assert done.returncode == 124
    assert done.stderr == (
        "pynox: the program ran past its 500ms time limit and was stopped; make it faster "
        "or raise the limit with --timeout=1s\n"
    )


def test_memory_limit_gives_memoryerror_and_hint(sandboxed: Install) -> None:
    done = sandboxed.run_pynox("--memory=64m", "-c", "x = bytearray(256 * 1024 * 1024)")
    assert done.returncode == 1 and "MemoryError" in done.stderr
    assert done.stderr.endswith(
        "pynox: the program used up its 64m memory limit; allocate less or raise the limit "
        "with --memory=128m\n"
    )


def test_grant_of_a_missing_path_is_refused(sandboxed: Install, tmp_path: Path) -> None:
    done = sandboxed.run_pynox("--allow-read=missing", "-c", "pass", cwd=tmp_path)
    assert done.returncode == 125
    assert done.stderr == (
        f"pynox: cannot grant reading {tmp_path / 'missing'}: it does not exist; "
        "create it first or correct the path\n"
    )
