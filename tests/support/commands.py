"""The installed `pynox` command, the interpreter it belongs to, and a way to run them.

The suite runs against the package installed in the current environment (nox
builds and installs it), exactly as a user would call it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PYTHON = sys.executable
PYNOX = str(Path(sys.executable).with_name("pynox"))


def run(
    command: list[str],
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    """Runs a command with captured output and a clean, predictable environment."""
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": os.environ["HOME"],
        "TMPDIR": os.environ["TMPDIR"],
    }
    base.update(env or {})
    return subprocess.run(
        command,
        cwd=cwd,
        env=base,
        input=input,
        capture_output=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def pynox(*args: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return run([PYNOX, *args], **kwargs)  # type: ignore[arg-type]


def python(*args: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return run([PYTHON, *args], **kwargs)  # type: ignore[arg-type]


# Runs the rest of its command line with the signals named in its first argument ignored,
# as a process that ignores them starts its children (exec keeps an ignored signal so).
_IGNORING = """\
import os, signal, sys
for name in sys.argv[1].split(","):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
os.execv(sys.argv[2], sys.argv[2:])
"""


def ignoring(*names: str) -> list[str]:
    """A prefix for a command line: what follows it starts with these signals ignored."""
    return [PYTHON, "-c", _IGNORING, ",".join(names)]


# Runs the rest of its command line with the resource limit its first two arguments give.
_LIMITING = """\
import os, resource, sys
resource.setrlimit(getattr(resource, sys.argv[1]), (int(sys.argv[2]),) * 2)
os.execv(sys.argv[3], sys.argv[3:])
"""


# Runs the rest of its command line with the soft limit its first two arguments give, the
# hard one as it was (as `ulimit -S` sets it).
_SOFT_LIMITING = """\
import os, resource, sys
which = getattr(resource, sys.argv[1])
resource.setrlimit(which, (int(sys.argv[2]), resource.getrlimit(which)[1]))
os.execv(sys.argv[3], sys.argv[3:])
"""


def soft_limiting(name: str, limit: int) -> list[str]:
    """A prefix for a command line: what follows it starts with the soft limit `name` (of
    resource's RLIMIT_ names) at `limit`, which it may raise up to its hard limit."""
    return [PYTHON, "-c", _SOFT_LIMITING, name, str(limit)]


def limiting_open_files(limit: int) -> list[str]:
    """A prefix for a command line: what follows it may hold at most `limit` descriptors."""
    return [PYTHON, "-c", _LIMITING, "RLIMIT_NOFILE", str(limit)]


def limiting_memory(limit: int) -> list[str]:
    """A prefix for a command line: what follows may hold at most `limit` bytes of data
    (RLIMIT_DATA, as ulimit -d sets it)."""
    return [PYTHON, "-c", _LIMITING, "RLIMIT_DATA", str(limit)]


def limiting_address_space(limit: int) -> list[str]:
    """A prefix for a command line: what follows may map at most `limit` bytes
    (RLIMIT_AS, as ulimit -v sets it)."""
    return [PYTHON, "-c", _LIMITING, "RLIMIT_AS", str(limit)]


def limiting_file_size(limit: int) -> list[str]:
    """A prefix for a command line: what follows it may write files of at most `limit`
    bytes (a write past it fails with EFBIG, as on a full disk with ENOSPC)."""
    return [PYTHON, "-c", _LIMITING, "RLIMIT_FSIZE", str(limit)]


def bound_by_file_modes() -> list[str]:
    """A prefix for a command line: as root, what follows runs without the capabilities
    that let root pass over file modes, so that it meets them as any other user does;
    empty for any other user."""
    return _without_capabilities("dac_override", "dac_read_search")


def bound_by_descriptors_in_flight() -> list[str]:
    """A prefix for a command line: as root, what follows runs without the capabilities
    that exempt it from the kernel's bound on descriptors in flight on Unix sockets (no
    more than the limit on open files, ETOOMANYREFS past it), so that it meets that bound
    as any other user does; empty for any other user."""
    return _without_capabilities("sys_resource", "sys_admin")


def _without_capabilities(*names: str) -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        import pytest

        pytest.skip(f"needs setpriv (util-linux) to drop {', '.join(names)}")
    return [setpriv, "--bounding-set=" + ",".join(f"-{name}" for name in names)]
