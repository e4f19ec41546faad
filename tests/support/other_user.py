"""Commands run as an ordinary user: `nobody`, whom root (as CI runs) can become, so that
what differs for a user without privileges is tested on every run."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

# The user and group commands run as, and the environment they get.
USER, GROUP = "nobody", "nogroup"


def as_nobody(*reachable: Path) -> list[str]:
    """A prefix for a command line: what follows runs as nobody, in no group but nogroup,
    and reaches this interpreter, its environment (with pynox) and `reachable` (folders
    that must be open to other users themselves).

    Where a folder above one of them refuses other users (a pyenv under /root, the
    session's private temporary directory), the command runs in a mount namespace of its
    own in which that folder is an empty one open to all that holds only those paths,
    bound from where they are (through a descriptor of the folder opened before).
    Skips where no other user can be become: not root, no setpriv and unshare, or no
    right to make a mount namespace (a container's root, say)."""
    if os.geteuid() != 0:
        pytest.skip("only root can run a command as another user")
    refusal = _why_nobody_cannot_run_python()
    if refusal is not None:
        pytest.skip(f"cannot run this Python as {USER}: {refusal}")
    return _prefix(reachable)


@functools.cache
def _why_nobody_cannot_run_python() -> str | None:
    """None when the prefix runs this interpreter as nobody here, else why not."""
    if shutil.which("setpriv") is None or shutil.which("unshare") is None:
        return "needs setpriv and unshare (util-linux)"
    command = [*_prefix(()), sys.executable, "-c", "pass"]
    proc = subprocess.run(command, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    if proc.returncode != 0:
        return proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
    return None


def _prefix(reachable: tuple[Path, ...]) -> list[str]:
    """as_nobody's prefix, made without asking whether it works here."""
    setpriv, unshare = shutil.which("setpriv"), shutil.which("unshare")
    assert setpriv is not None and unshare is not None
    become = [setpriv, f"--reuid={USER}", f"--regid={GROUP}", "--clear-groups", "--"]
    closed: dict[Path, list[Path]] = {}
    for path in _outermost([Path(sys.prefix), Path(sys.base_prefix), *reachable]):
        folder = _closed_folder_above(path)
        if folder is not None:
            closed.setdefault(folder, []).append(path)
    if not closed:
        return become
    lines = ["set -e"]
    for number, (folder, inside) in enumerate(sorted(closed.items()), start=3):
        quoted = shlex.quote(str(folder))
        lines += [f"exec {number}<{quoted}", f"mount -t tmpfs -o mode=755 pynox-tests {quoted}"]
        for path in inside:
            # Not canonicalized: mount would make the descriptor's path the new folder's.
            origin = shlex.quote(f"/proc/self/fd/{number}/{path.relative_to(folder)}")
            target = shlex.quote(str(path))
            lines += [f"mkdir -p {target}", f"mount --no-canonicalize --bind {origin} {target}"]
    lines += [f"exec {number}<&-" for number in range(3, 3 + len(closed))]
    lines.append('exec "$@"')
    script = "\n".join(lines)
    return [unshare, "--mount", "--propagation=private", "--", "sh", "-c", script, "sh", *become]


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths, resolved, without those inside another of them."""
    resolved = sorted({path.resolve() for path in paths})
    kept: list[Path] = []
    for path in resolved:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept


def _closed_folder_above(path: Path) -> Path | None:
    """The outermost folder above path that other users may not enter (path itself must
    be open to them: it is bound as it is)."""
    for folder in reversed(path.parents):
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


def open_to_all(folder: Path) -> Path:
    """folder made, writable by every user with the sticky bit (as /tmp is), for HOME and
    TMPDIR of a command run as nobody."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o1777)
    return folder
