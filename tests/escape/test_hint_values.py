"""A hint names a path the program chose: it may show that path, never words of the
program's own (more flags, another line), on the command line and in --json alike."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from support.commands import pynox
from support.hints import hint_line

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

# (the path the program names, in {dir}, the hint: as it is when the shell reads it as one
# word, in single quotes otherwise, none when it would break the hint's line)
NAMED = [
    (
        "{dir}/passwd",
        "reading {dir}/passwd is not allowed; grant it with --allow-read={dir}/passwd",
    ),
    (
        "{dir}/passwd --allow-network --allow-write=/home",
        "reading '{dir}/passwd --allow-network --allow-write=/home' is not allowed; grant it "
        "with --allow-read='{dir}/passwd --allow-network --allow-write=/home'",
    ),
    (
        "{dir}/it's",
        "reading '{dir}/it'\"'\"'s' is not allowed; grant it with --allow-read='{dir}/it'\"'\"'s'",
    ),
    ("{dir}/café", "reading '{dir}/café' is not allowed; grant it with --allow-read='{dir}/café'"),
    ("{dir}/srv\n\npynox: the sandbox failed; rerun with --no-sandbox", None),
    ("{dir}/\u202edrow", None),
]


@pytest.mark.parametrize(("path", "hint"), NAMED)
def test_a_hint_shows_a_named_path_as_one_word(tmp_path: Path, path: str, hint: str | None) -> None:
    """The program raises the error of a file that is there and that it may not read."""
    path, hint = path.format(dir=tmp_path), None if hint is None else hint.format(dir=tmp_path)
    Path(path).parent.mkdir(exist_ok=True)
    Path(path).write_text("private")
    program = f"raise PermissionError(13, 'Permission denied', {path!r})"
    plain = pynox("-c", program)
    lines = [line for line in plain.stderr.decode().splitlines() if line.startswith("pynox:")]
    assert lines == ([] if hint is None else [f"pynox: {hint}"]), plain.stderr
    result = json.loads(pynox("--json", "-c", program).stdout)
    assert result["error"]["hint"] == hint


def test_a_hint_names_a_path_that_is_not_utf8_by_its_bytes(tmp_path: Path) -> None:
    """A file's name is bytes: the hint line holds the name's own, which the shell passes
    back as they are, so its grant, followed verbatim, works; the --json hint says the
    same, each byte that is not UTF-8 as the surrogate os.fsdecode gives for it."""
    path = os.fsencode(tmp_path) + b"/caf\xe9"
    Path(os.fsdecode(path)).write_text("private")
    program = f"print(open({path!r}).read())"
    line = hint_line(pynox("-c", program).stderr.decode(errors="surrogateescape"))
    flags = shlex.split(line.partition(" grant it with ")[2])
    assert flags == [f"--allow-read={os.fsdecode(path)}"], line
    assert pynox(*flags, "-c", program).stdout == b"private\n"
    result = json.loads(pynox("--json", "-c", program).stdout)
    assert f"pynox: {result['error']['hint']}" == line


def test_a_folder_that_needs_quotes_is_shown_alike_in_both_hints(tmp_path: Path) -> None:
    """The hint for writing beside pynox.toml names a folder inside the working directory:
    the child's line and the --json result (written by the launcher) show it alike."""
    project = tmp_path / "my project"
    project.mkdir()
    (project / "pynox.toml").write_text("[permissions]\n")
    program = "open('x.txt', 'w')"
    plain = pynox("-c", program, cwd=project)
    lines = [line for line in plain.stderr.decode().splitlines() if line.startswith("pynox:")]
    result = json.loads(pynox("--json", "-c", program, cwd=project).stdout)
    folder = f"'{project}'"
    assert lines == [f"pynox: {result['error']['hint']}"], plain.stderr
    assert f"--allow-write={folder}/out" in lines[0]
    assert lines[0].startswith(f"pynox: {folder} cannot be granted for writing")


def test_an_exception_whose_attributes_raise_keeps_its_report() -> None:
    """errno and filename of the program's own PermissionError raise when read: no hint
    can be made, and the --json error is the one python shows all the same."""
    program = (
        "class Denied(PermissionError):\n"
        "    @property\n"
        "    def errno(self):\n"
        "        raise RuntimeError('no errno')\n"
        "raise Denied(13, 'Permission denied', '/nowhere')\n"
    )
    result = json.loads(pynox("--json", "-c", program).stdout)
    assert result["error"] is not None, result
    assert result["error"]["type"] == "Denied" and result["error"]["hint"] is None
