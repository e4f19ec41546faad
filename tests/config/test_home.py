"""`~` in pynox.toml and in flags when HOME is not set: the home /etc/passwd lists, found
without loading the C library's name-service modules into what becomes the program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import PYNOX

from pynox.policy.user_paths import expand_home, home_in_passwd_file

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# What the program finds of its own user: in the sandbox /etc/passwd is not readable, so
# nothing, unless a name-service module loaded before the sandbox answers it.
LOOKUP = """
import os, pwd
try:
    print(pwd.getpwuid(os.getuid()).pw_name)
except KeyError:
    print("not found")
"""


def _run_without_home(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    env["TMPDIR"] = os.environ["TMPDIR"]
    return subprocess.run([PYNOX, *args], cwd=cwd, env=env, capture_output=True, timeout=60)


@pytest.mark.skipif(not home_in_passwd_file(), reason="/etc/passwd lists no home for this user")
def test_a_home_grant_without_home_changes_nothing_the_program_finds(tmp_path: Path) -> None:
    plain = _run_without_home(tmp_path, "-c", LOOKUP)
    assert plain.stdout == b"not found\n", plain.stderr
    (tmp_path / "pynox.toml").write_text('[permissions]\nallow_read = ["~/"]\n')
    configured = _run_without_home(tmp_path, "-c", LOOKUP)
    assert configured.stdout == b"not found\n", configured.stderr
    (tmp_path / "pynox.toml").unlink()
    flagged = _run_without_home(tmp_path, "--allow-read=~", "-c", LOOKUP)
    assert flagged.stdout == b"not found\n", flagged.stderr


def test_without_home_the_tilde_is_the_home_in_etc_passwd() -> None:
    home = home_in_passwd_file()
    if not home:
        pytest.skip("/etc/passwd lists no home for this user")
    assert expand_home("~/notes", {}) == home.rstrip("/") + "/notes"
    assert expand_home("~", {"HOME": "/elsewhere/"}) == "/elsewhere"
    assert expand_home("~no-such-user-here/x", {}) == "~no-such-user-here/x"
