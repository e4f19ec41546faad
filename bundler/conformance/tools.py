"""Host tools a cell needs, installed with apt-get where this machine allows it."""

from __future__ import annotations

import os
import shutil

from bundler import commands
from bundler.conformance.errors import Missing

_updated = False


def ensure(command: str, package: str) -> str:
    """The path of COMMAND, after `apt-get install PACKAGE` if it is missing and we are root."""
    global _updated
    found = _which(command)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Missing(f"{command} is not installed (install the {package} package)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _updated:
        commands.run(["apt-get", "update", "-qq"], env=env, check=False, timeout=900)
        _updated = True
    done = commands.run(
        ["apt-get", "install", "-y", "-qq", package], env=env, capture=True, check=False,
        timeout=1800,
    )  # fmt: skip
    found = _which(command)
    if done.returncode != 0 or not found:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise Missing(f"{command} is missing and `apt-get install {package}` failed: {tail}")
    return found


def _which(command: str) -> str | None:
    """COMMAND on PATH, or in the sbin folders a user's PATH may leave out."""
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")
