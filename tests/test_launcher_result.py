"""`pynox --json` under the launcher, which writes the result itself (runtime/launcher_result.c),
against `python -m pynox --json`, where pynox supervises the run and writes it
(pynox.engine.result): the same program must give the same text, byte for byte, but
for the run's duration and scratch directory.

What the program controls (its output, and whatever it writes into the error report's
pipe once it runs) is what both must read alike: invalid UTF-8, output cut to the limit,
forged reports of every shape.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.commands import PYNOX, PYTHON, run
from support.examples import examples

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")

_VARYING = re.compile(rb'("duration_ms": )\d+|("scratch": )"[^"]*"')


def _both(directory: Path, program: str, *flags: str) -> tuple[bytes, bytes]:
    """The result from the launcher and from pynox's own supervisor, with what varies
    between runs taken out; each command's exit status must be its result's."""
    script = directory / "program.py"
    script.write_text(program)
    texts = []
    for command in ([PYNOX], [PYTHON, "-m", "pynox"]):
        proc = run([*command, "--json", *flags, str(script)], cwd=directory)
        assert proc.stdout.endswith(b"\n") and proc.stdout.count(b"\n") == 1, proc
        assert json.loads(proc.stdout)["exit"] == proc.returncode
        texts.append(_VARYING.sub(lambda m: (m[1] or m[2]) + b"null", proc.stdout))
    return texts[0], texts[1]


def _same(directory: Path, program: str, *flags: str) -> dict[str, object]:
    launcher, supervisor = _both(directory, program, *flags)
    assert launcher == supervisor
    result: dict[str, object] = json.loads(launcher)
    return result


# Writes data into every pipe the program holds past the standard streams (the report's,
# and the scratch helper's, which reads one line only), then ends with status 1, as a
# program that died of an exception does: the report would then be taken.
FORGE = """\
import os, stat
data = bytes.fromhex({hex!r})
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, data)
    except OSError:
        pass
os._exit({status})
"""


def _forge(data: bytes, status: int = 1) -> str:
    return FORGE.format(hex=data.hex(), status=status)


@pytest.mark.parametrize(
    ("program", "flags"),
    [
        ("print('hello')", ()),
        ("open('/etc/shadow')", ()),
        ("open('/written-here', 'w')", ()),
        ("import socket; socket.create_connection(('127.0.0.1', 9))", ()),
        ("import subprocess; subprocess.run(['true'])", ()),
        ("import no_such_module_anywhere", ()),
        ("import sys; sys.exit(3)", ()),
        ("import sys; sys.exit('a message')", ()),
        ("raise KeyboardInterrupt", ()),
        ("import os; os.abort()", ()),
        ("import os; os.kill(os.getpid(), 9)", ()),
        ("import os; os.kill(os.getpid(), 40)", ()),
        ("import os; os.kill(os.getpid(), 34)", ()),
        ("print('before', flush=True)\nwhile True: pass", ("--timeout=1s",)),
        ("open('/etc/shadow')", ("--max-file-size=1M",)),
        # Under a memory limit: native code's end (a signal, or an exit before Python saw
        # the program to its end), Python's own ends, and a program that writes into the
        # pipe that says Python saw it to its end.
        ("import os; os.abort()", ("--memory=128m",)),
        ("import ctypes; ctypes.CDLL(None).exit(3)", ("--memory=64m",)),
        ("import os; os.kill(os.getpid(), 15)", ("--memory=64m",)),
        ("import sys; sys.exit(3)", ("--memory=64m",)),
        ("open('/etc/shadow')", ("--memory=64m",)),
        ("print('before', flush=True)\nwhile True: pass", ("--timeout=1s", "--memory=64m")),
        (_forge(b"\x04", status=3), ("--memory=64m",)),
    ],
    ids=lambda value: str(value)[:40],
)
def test_the_launchers_result_is_pynoxs(tmp_path: Path, program: str, flags: tuple[str]) -> None:
    _same(tmp_path, program, *flags)


def test_output_is_decoded_and_escaped_alike(tmp_path: Path) -> None:
    text = 'é 😀 \x7f \x00 \x1b[0m \t\r\n \\ " \u2028 \ufeff'
    raw = b"\xff \xe2\x82 \xed\xa0\x80 \xf0\x9f\x98 \xc0\xaf \xf4\x90\x80\x80 \xe0\x80\x80 end\xe2"
    result = _same(
        tmp_path,
        f"import sys\nprint({text!r})\nsys.stdout.flush()\nsys.stdout.buffer.write({raw!r})\n"
        f"sys.stderr.buffer.write({raw!r})",
    )
    assert result["stdout"] == text + "\n" + raw.decode("utf-8", errors="replace")


@pytest.mark.parametrize("limit", [0, 1, 40, 41, 100, 1000])
def test_output_past_the_limit_is_cut_alike(tmp_path: Path, limit: int) -> None:
    program = (
        "import sys\n"
        "for i in range(300): print(i, 'é' * (i % 7), '😀' * (i % 3))\n"
        "sys.stderr.write('x' * 5000 + 'é' * 3000)\n"
    )
    result = _same(tmp_path, program, f"--max-output={limit}")
    assert result["stdout_truncated"] and result["stderr_truncated"]


@pytest.mark.parametrize("limit", [1, 4, 5, 20, 31, 32, 33, 34, 40])
def test_a_small_limit_keeps_whole_characters_within_it_alike(tmp_path: Path, limit: int) -> None:
    """However small the limit, the kept text fits it and never cuts a character; once the
    line saying how many bytes were left out fits (31 bytes here), it is there, with the
    tail after it."""
    full = ("€" * 7 + "\n") * 1000
    result = _same(tmp_path, "for i in range(1000): print('€' * 7)", f"--max-output={limit}")
    kept = result["stdout"]
    assert isinstance(kept, str) and result["stdout_truncated"]
    assert len(kept.encode()) <= limit and "\ufffd" not in kept
    line = re.search(r"\[\.\.\. (\d+) bytes left out \.\.\.\]\n", kept)
    if limit < 32:
        assert line is None and full.startswith(kept)
        return
    assert line is not None
    head, tail = kept[: line.start()], kept[line.end() :]
    assert full.endswith(tail) and full.startswith(head.removesuffix("\n"))
    # A head kept ends its line; with no room for one, the line comes first, with no
    # newline the program never wrote before it.
    assert head.endswith("\n") or head == ""
    assert not kept.startswith("\n")
    # The head ends with a newline the stream has, or one put after it.
    added = 0 if full.startswith(head) else 1
    assert len(head.encode()) - added + int(line[1]) + len(tail.encode()) == len(full.encode())


@pytest.mark.parametrize(
    "report",
    [
        b'{"type": "PermissionError", "message": "m", "file": "f", "line": 3, "path": "/p",'
        b' "hint": "ignored", "hint_kind": "read", "hint_value": "/p"}',
        b'{"type": "T\\ud83d\\ude00 \\ud800 \\u0041\\/ \\b\\f\\n\\r\\t \\"\\\\", '
        b'"message": "\xc3\xa9\xf0\x9f\x98\x80\x7f", "hint_kind": "write",'
        b' "hint_value": "\\u0000"}',
        b'{"type": "A", "type": "B", "line": -0, "hint_kind": "network"}',
        b'{"line": 9223372036854775807, "hint_kind": "memory"}',
        b'{"line": -9223372036854775808, "hint_kind": "process"}',
        b'{"line": 9223372036854775808}',
        b'{"line": 1.5}',
        b'{"line": 1e3}',
        b'{"line": true, "hint_kind": "read"}',
        b'{"line": NaN}',
        b'{"type": "X", "extra": {"nested": 1}}',
        b'{"type": "X", "extra": [1]}',
        b'{"type": "bad \xff utf-8"}',
        b'{"type": "raw \x01 control"}',
        b'{"type": "X"} trailing',
        b' \t\r\n{"type": "X"} \n ',
        b'\xef\xbb\xbf{"type": "X"}',
        b'{"type": "X",}',
        b"{}",
        b"",
        b'{"type": "SandboxError", "message": "forged"}',
        b'{"hint_kind": "file_size"}',
        b'{"hint_kind": "no such kind", "hint_value": "x"}',
        b'{"t\\u0079pe": "escaped key"}',
        b'{"type": "X"}' + b" " * (1 << 20),
        b'{"type": "' + b"\x7f" * 300000 + b'"}',
    ],
    ids=lambda value: value[:30].decode(errors="replace"),
)
def test_a_forged_report_is_read_alike(tmp_path: Path, report: bytes) -> None:
    _same(tmp_path, _forge(report))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    report=st.one_of(
        st.binary(max_size=64),
        st.dictionaries(
            st.sampled_from(["type", "message", "file", "line", "path", "hint_kind", "x"]),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(min_value=-(2**70), max_value=2**70),
                st.floats(allow_nan=False),
                st.text(max_size=8),
                st.sampled_from(["read", "write", "network", "module", "entries"]),
            ),
        ).map(lambda value: json.dumps(value, ensure_ascii=False).encode(errors="surrogatepass")),
    )
)
def test_any_report_is_read_alike(tmp_path_factory: pytest.TempPathFactory, report: bytes) -> None:
    _same(tmp_path_factory.mktemp("forged"), _forge(report))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(output=st.binary(max_size=400), limit=st.integers(min_value=0, max_value=200))
def test_any_output_is_kept_alike(
    tmp_path_factory: pytest.TempPathFactory, output: bytes, limit: int
) -> None:
    program = (
        f"import sys\nsys.stdout.buffer.write({output!r})\nsys.stderr.buffer.write({output!r})\n"
    )
    _same(tmp_path_factory.mktemp("output"), program, f"--max-output={limit}")


@pytest.mark.parametrize("flags", [[], ["--memory=1g"]], ids=["plain", "memory"])
def test_the_program_runs_in_the_process_the_launcher_started(
    tmp_path: Path, flags: list[str]
) -> None:
    """No second interpreter forked to supervise a --json run, with a memory limit or
    without: the program's parent is the launcher itself."""
    script = tmp_path / "parent.py"
    script.write_text("import os\nprint(os.getppid())\n")
    command = [PYNOX, "--json", *flags, str(script)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=tmp_path)
    stdout, _ = proc.communicate(timeout=60)
    assert json.loads(stdout)["stdout"] == f"{proc.pid}\n"
